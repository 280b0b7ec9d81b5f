#!/usr/bin/env python3
"""Where along a stream a carried state drifts: loss by position of uniform-K carried through whole held-out
streams, for several model sets of scripts/reset_runs.sh (one results folder each, three models), side by side.

Each pass of `ponder eval --streams --position-docs 0` (what reset_runs.sh runs) bins every prediction it reads,
adaptation files included, by its position in its stream (powers of two). This merges the bins from 1,024 on into
wider ones and prints, per folder, the mean loss (nats) over the three models in each: rows are model sets, columns
positions, so a state that holds up to the length it was trained to carry and drifts beyond shows as a row that
stays flat and then rises.

    python3 scripts/drift_table.py [--k K] results/reset_pystdlib results/reset_pystdlib_carry16 ...
"""
import argparse
import json
import os

EDGES = [1, 1024, 4096, 16384, 65536, 262144, 1 << 40]  # bins [EDGES[i], EDGES[i+1])


def label(lo, hi):
    def short(n):
        return f"{n // 1024}k" if n >= 1024 else str(n)
    return f"{short(lo)}+" if hi >= 1 << 40 else f"{short(lo)}–{short(hi)}"


def binned(path):
    """(tokens, loss sum) per merged bin of one pass's loss by position."""
    with open(path) as f:
        j = json.load(f)
    if j.get("loss_by_position_source", "").find("position in its stream") < 0:
        raise SystemExit(f"drift_table.py: {path} was not read along the streams (--position-docs 0)")
    out = [[0, 0.0] for _ in EDGES[:-1]]
    for b in j["loss_by_position"]:
        for i in range(len(EDGES) - 1):
            if EDGES[i] <= b["lo"] < EDGES[i + 1]:
                out[i][0] += b["tokens"]
                out[i][1] += b["tokens"] * b["mean_loss"]
    return out, j.get("commit", "?")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=1, help="the uniform-K pass to read (default 1)")
    ap.add_argument("--models", type=int, default=3, help="models per folder, model-0 .. model-(N-1) (default 3)")
    ap.add_argument("folders", nargs="+")
    a = ap.parse_args()
    head = ["model set"] + [label(EDGES[i], EDGES[i + 1]) for i in range(len(EDGES) - 1)]
    rows, commits = [], set()
    for folder in a.folders:
        means = [[] for _ in EDGES[:-1]]
        for m in range(a.models):
            bins, commit = binned(os.path.join(folder, f"model-{m}-u{a.k}-carry.json"))
            commits.add(commit)
            for i, (n, s) in enumerate(bins):
                if n:
                    means[i].append(s / n)
        cells = [f"{sum(v) / len(v):.3f}" if len(v) == a.models else "–" for v in means]
        rows.append([os.path.basename(folder.rstrip("/"))] + cells)
    print(f"Loss (nats) of uniform-{a.k} carried, by position in the stream (every prediction read, adaptation files "
          f"included), mean over {a.models} models; produced by scripts/drift_table.py from passes at commit(s) "
          f"{', '.join(sorted(commits))}.\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
