#!/usr/bin/env python3
"""Are two builds' outputs the same? Runs `ponder quick`, `compare`, `adapt` and `ablate` on the CI config with one
thread (about 4 minutes on one core) and keeps each job's results.json and report.md with what may differ between two
runs of one build masked: wall-clock times, the commit, the version and the command line. Run it with one build,
then with the other, then compare the two folders:

    scripts/check_outputs_identical.py run ./build/experiments/ponder /tmp/before
    (rebuild)
    scripts/check_outputs_identical.py run ./build/experiments/ponder /tmp/after
    scripts/check_outputs_identical.py compare /tmp/before /tmp/after

`compare` prints one line per file and exits 1 naming the first line or key that differs. A refactoring that must
not change results (docs/engine.md, "Layout") is checked this way."""
import json
import os
import re
import subprocess
import sys

# JSON keys that hold times or name the build and the command line: two runs of one build differ in these alone.
DROP = {"seconds", "seconds_per_token", "train_seconds", "wall_seconds", "command", "commit", "version",
        "binary_sha256", "checkpoint", "checkpoints", "attention_checkpoint"}
# Markdown: "(12 s)", "trained in 3 s", a seconds/token cell; the commit and the version on the provenance line; the
# run's own folder wherever a path is printed.
TIME = re.compile(r"\b\d[\d.,]*(?:e[+-]?\d+)?\s*(?:s|seconds|ms)\b")
COMMIT = re.compile(r"commit [0-9a-f]{7,40}(?:-dirty)?|`ponder` [0-9][\w.+-]*")

JOBS = [
    ("quick", ["quick", "--config", "ci", "--control", "none", "--set", "train.seeds=2"]),
    ("compare", ["compare", "--checkpoint", "{quick}/checkpoint.ckpt", "--seeds", "2", "--windows", "3"]),
    ("adapt", ["adapt", "--checkpoint", "{quick}/checkpoint.ckpt", "--set", "adapt.chunk=64", "--set",
               "adapt.calib_len=256", "--set", "compare.calib_windows=2", "--set", "compare.frontier_mus=[0, 1]",
               "--set", "compare.oracle_bisect=0"]),
    ("ablate", ["ablate", "--checkpoint", "{quick}/checkpoint.ckpt", "--groups", "gamma,unit", "--iterations", "3",
                "--seeds", "2", "--windows", "3"]),
]


def masked_json(x):
    if isinstance(x, dict):
        return {k: masked_json(v) for k, v in x.items() if k not in DROP}
    if isinstance(x, list):
        return [masked_json(v) for v in x]
    return x


def masked_md(text, out):
    lines = []
    for line in text.replace(out, "<out>").splitlines():
        line = COMMIT.sub("<build>", TIME.sub("<time>", line))
        lines.append(line)
    return lines


def masked_table_column(lines, header):
    """Replaces the cells of every table column named `header` (a time per token) by <time>."""
    out, col = [], None
    for line in lines:
        cells = line.split("|")
        if line.startswith("|") and header in [c.strip() for c in cells]:
            col = [c.strip() for c in cells].index(header)
        elif not line.startswith("|"):
            col = None
        elif col is not None and col < len(cells) and not set(cells[col].strip()) <= set("-:"):
            cells[col] = " <time> "
            line = "|".join(cells)
        out.append(line)
    return out


def run(ponder, folder):
    os.makedirs(folder, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    quick = os.path.join(folder, "quick")
    kept = {}
    for name, args in JOBS:
        out = os.path.join(folder, name)
        cmd = [ponder, "--threads", "1", *[a.format(quick=quick) for a in args], "--out", out]
        print("check_outputs_identical: " + " ".join(cmd[1:]), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit("check_outputs_identical: %s failed (exit %d): %s" % (name, r.returncode, r.stderr[-800:]))
        for f in ("results.json", "report.md"):
            text = open(os.path.join(out, f), encoding="utf-8").read()
            if f.endswith(".json"):
                kept[name + "/" + f] = masked_json(json.loads(text.replace(out, "<out>").replace(folder, "<folder>")))
            else:
                md = masked_md(text.replace(folder, "<folder>"), out)
                kept[name + "/" + f] = masked_table_column(md, "seconds/token")
    with open(os.path.join(folder, "masked.json"), "w", encoding="utf-8") as fh:
        json.dump(kept, fh, indent=1, ensure_ascii=False)
    print("check_outputs_identical: %d files kept in %s" % (len(kept), os.path.join(folder, "masked.json")))


def first_difference(x, y, path=""):
    if isinstance(x, dict) and isinstance(y, dict):
        if x.keys() != y.keys():
            return "%s: keys %s" % (path, sorted(set(x) ^ set(y)))
        return next((d for k in x for d in [first_difference(x[k], y[k], path + "/" + k)] if d), "")
    if isinstance(x, list) and isinstance(y, list):
        for i, (u, v) in enumerate(zip(x, y)):
            d = first_difference(u, v, "%s/%d" % (path, i))
            if d:
                return d
        return "" if len(x) == len(y) else "%s: %d against %d entries" % (path, len(x), len(y))
    return "" if x == y else "%s: %r against %r" % (path, x, y)


def compare(a, b):
    x = json.load(open(os.path.join(a, "masked.json"), encoding="utf-8"))
    y = json.load(open(os.path.join(b, "masked.json"), encoding="utf-8"))
    bad = 0
    for name in sorted(set(x) | set(y)):
        d = first_difference(x.get(name), y.get(name), name)
        print(("differs  " + d[:300]) if d else ("same     " + name))
        bad += bool(d)
    print("check_outputs_identical: %d of %d files differ" % (bad, len(set(x) | set(y))))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "run":
        run(os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
