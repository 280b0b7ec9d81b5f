#!/usr/bin/env python3
"""Tables of scripts/carry_runs.sh: DIR/<model>-u<K>.json (ponder eval --streams --json) side by side.

    python3 scripts/carry_table.py results/sotu_carry      (writes DIR/table.md and prints it)

Bits/byte over every scored token, the mean over streams, loss by position, and per model pair the per-stream
difference with a bootstrap 95 % interval over streams (10,000 resamples, fixed seed) and how many streams it wins.
"""
import glob
import json
import os
import random
import re
import sys


def load(d):
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "*-u*.json"))):
        m = re.match(r"(.+)-u(\d+)\.json$", os.path.basename(path))
        if m:
            runs[(m.group(1), int(m.group(2)))] = json.load(open(path))
    return runs


def bootstrap(deltas, reps=10000, seed=0):
    rng = random.Random(seed)
    n = len(deltas)
    means = sorted(sum(deltas[rng.randrange(n)] for _ in range(n)) / n for _ in range(reps))
    return means[int(0.025 * reps)], means[int(0.975 * reps) - 1]


def main(d):
    runs = load(d)
    if not runs:
        sys.exit("carry_table.py: no <model>-u<K>.json in " + d)
    models = sorted({m for m, _ in runs}, key=lambda m: ["base", "fresh", "carry"].index(m) if m in ("base", "fresh", "carry") else 9)
    ks = sorted({k for _, k in runs})
    any_run = next(iter(runs.values()))
    out = ["# Carried-state training against a fresh-state control: the whole held-out split read as streams", "",
           "%d streams, %d scored tokens (%.1f %% of the split); commit %s, %s, %d thread(s)." % (
               any_run["streams"], any_run["scored_tokens"], 100 * any_run["scored_tokens"] / any_run["split_tokens"],
               any_run["commit"], any_run["machine"], any_run["threads"]), "",
           "| model | " + " | ".join("uniform-%d bits/byte (mean over streams)" % k for k in ks) + " |",
           "|---|" + "---|" * len(ks)]
    for m in models:
        cells = []
        for k in ks:
            r = runs.get((m, k))
            cells.append("%.4f (%.4f)" % (r["bpb"], r["bpb_mean_over_streams"]) if r else "—")
        out.append("| %s | %s |" % (m, " | ".join(cells)))
    out += ["", "Per-stream difference (bits/byte, first minus second; negative: the first is better), mean over "
            "streams with a bootstrap 95 % interval, and the streams the first wins:", ""]
    for k in ks:
        for a, b in (("carry", "fresh"), ("carry", "base"), ("fresh", "base")):
            if (a, k) in runs and (b, k) in runs:
                x, y = runs[(a, k)]["stream_bpb"], runs[(b, k)]["stream_bpb"]
                deltas = [p - q for p, q in zip(x, y)]
                lo, hi = bootstrap(deltas)
                wins = sum(v < 0 for v in deltas)
                out.append("- uniform-%d, %s − %s: %+.4f [%+.4f, %+.4f], %d of %d streams" % (
                    k, a, b, sum(deltas) / len(deltas), lo, hi, wins, len(deltas)))
    out += ["", "Loss by position (nats; %s):" % any_run["loss_by_position_source"], "",
            "| positions | " + " | ".join("%s u%d" % (m, k) for m in models for k in ks if (m, k) in runs) + " |",
            "|---|" + "---|" * sum((m, k) in runs for m in models for k in ks)]
    bins = any_run["loss_by_position"]
    for i, b in enumerate(bins):
        if b["lo"] < 16:
            continue
        cells = ["%.3f" % runs[(m, k)]["loss_by_position"][i]["mean_loss"] for m in models for k in ks if (m, k) in runs]
        out.append("| %d–%d | %s |" % (b["lo"], b["hi"] - 1, " | ".join(cells)))
    text = "\n".join(out) + "\n"
    open(os.path.join(d, "table.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    main(sys.argv[1])
