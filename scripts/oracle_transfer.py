#!/usr/bin/env python3
"""The table of scripts/oracle_transfer.sh: on each model, the distance to its uniform frontier (bits/byte at the
method's own FLOPs; negative = better than uniform at equal compute) of its own oracle, of every other model's oracle
choices replayed on it, of their consensus and of the consensus shuffled within segments (`replay-shuffled-S:`, the
mean over the permutations run); then, over the models, how much of the own oracle's gain the others' choices recover.

    python3 scripts/oracle_transfer.py OUT N_MODELS
"""
import json
import os
import random
import sys


def bootstrap_ci(d, reps=10000, seed=0):
    """95 % percentile interval of the mean of `d` over resamples of its entries."""
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(d) for _ in d) / len(d) for _ in range(reps))
    return means[int(0.025 * reps)], means[int(0.975 * reps) - 1]


def is_null(m):
    """A permutation of the consensus within segments: replay-shuffled-S: (or the file an older run wrote)."""
    return m["name"].startswith("replay-shuffled-") or m["name"].endswith("consensus_shuffled.json")


def placement(cons, nulls):
    """bits/byte of the consensus less the mean of its shuffles, per stream (they spend the same FLOPs: the same K
    on each segment), as (mean, (lo, hi)), and the mean over streams for each shuffle alone."""
    a = cons["seeds"][0]["window_bpb"]
    per = [[x - y for x, y in zip(a, z["seeds"][0]["window_bpb"])] for z in nulls]
    d = [sum(col) / len(col) for col in zip(*per)]
    return sum(d) / len(d), bootstrap_ci(d), [sum(p) / len(p) for p in per]


def mean_delta(ms):
    """The frontier distance averaged over several runs of one kind (the shuffles), interval of their mean."""
    means = [m["frontier_delta"]["mean"] for m in ms]
    lo = sum(m["frontier_delta"]["ci"][0] for m in ms) / len(ms)
    hi = sum(m["frontier_delta"]["ci"][1] for m in ms) / len(ms)
    return sum(means) / len(means), (lo, hi), float("nan")


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    out, n = sys.argv[1], int(sys.argv[2])
    rows, own, single, consensus, shuffled, placed, shuffles = [], [], [], [], [], [], 0
    for i in range(n):
        path = os.path.join(out, f"model-{i}", "results.json")
        try:
            with open(path) as f:
                j = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"oracle_transfer.py: {path}: {e}")
        by = {m["name"]: m for m in j["methods"]}

        def delta(m):
            d = m["frontier_delta"]
            return d["mean"], d["ci"], m["seeds"][0]["mean_k"] if "mean_k" in m["seeds"][0] else float("nan")

        o = delta(by["oracle"])
        own.append(o[0])
        reps = [m for m in j["methods"] if m["kind"] == "replay"]
        nulls = [m for m in reps if is_null(m)]
        singles = [m for m in reps if "+" not in m["name"] and m not in nulls]
        cons = [m for m in reps if "+" in m["name"] and m not in nulls]
        s = [delta(m)[0] for m in singles]
        single.append(s)
        c = delta(cons[0]) if cons else None
        z = mean_delta(nulls) if nulls else None
        pl = placement(cons[0], nulls) if cons and nulls else None
        shuffles = max(shuffles, len(nulls))
        if pl:
            placed.append(pl[0])
        if c:
            consensus.append(c[0])
        if z:
            shuffled.append(z[0])
        rows.append((i, o, s, c, z, pl))
    print("Δ bits/byte against each model's uniform frontier at the method's own FLOPs (95 % interval over streams)" +
          (f"; the shuffled column and the placement contrast average {shuffles} permutations (the placement's "
           "range over them in parentheses)" if shuffles > 1 else "") + "\n")
    print("| model | own oracle | each other model's oracle replayed | their consensus replayed | the consensus "
          "shuffled within segments | placement: consensus − shuffled (same FLOPs) |\n|---|---|---|---|---|---|")

    def ci(x):
        return f"{x[0]:+.4f} [{x[1][0]:+.4f}, {x[1][1]:+.4f}]" if x else "—"

    def spread(pl):
        return f" ({min(pl[2]):+.4f} to {max(pl[2]):+.4f})" if pl and len(pl[2]) > 1 else ""

    for i, o, s, c, z, pl in rows:
        print(f"| {i} | {ci(o)} | {min(s):+.4f} to {max(s):+.4f} (mean {sum(s) / len(s):+.4f}) | {ci(c)} | {ci(z)} | "
              f"{ci(pl)}{spread(pl)} |")
    mean_own = sum(own) / n
    mean_single = sum(sum(s) / len(s) for s in single) / n
    def share(x):  # of the own oracle's gain; meaningless when the own oracle does not beat uniform
        return f" (recovering {100 * x / mean_own:.0f} % of the own oracle's gain; below 0: a loss)" if mean_own < 0 else ""

    print(f"\nOver the {n} models: own oracle {mean_own:+.4f}" +
          ("" if mean_own < 0 else " (no better than uniform here: no gain to recover)") +
          f"; another model's oracle {mean_single:+.4f}{share(mean_single)}", end="")
    if consensus:
        mean_cons = sum(consensus) / len(consensus)
        print(f"; the others' consensus {mean_cons:+.4f}{share(mean_cons)}", end="")
    if shuffled:
        print(f"; shuffled within segments {sum(shuffled) / len(shuffled):+.4f}", end="")
    if placed:
        print(f"; placement {sum(placed) / len(placed):+.4f} bits/byte at equal FLOPs (below 0 on "
              f"{sum(1 for x in placed if x < 0)} of {len(placed)} models)", end="")
    print()


if __name__ == "__main__":
    main()
