#!/usr/bin/env python3
"""The table of scripts/oracle_transfer.sh: on each model, the distance to its uniform frontier (bits/byte at the
method's own FLOPs; negative = better than uniform at equal compute) of its own oracle, of every other model's oracle
choices replayed on it, and of their consensus; then, over the models, how much of the own oracle's gain the others'
choices recover.

    python3 scripts/oracle_transfer.py OUT N_MODELS
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    out, n = sys.argv[1], int(sys.argv[2])
    rows, own, single, consensus = [], [], [], []
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
        singles = [m for m in reps if "+" not in m["name"]]
        cons = [m for m in reps if "+" in m["name"]]
        s = [delta(m)[0] for m in singles]
        single.append(s)
        c = delta(cons[0]) if cons else None
        if c:
            consensus.append(c[0])
        rows.append((i, o, s, c))
    print("Δ bits/byte against each model's uniform frontier at the method's own FLOPs (95 % interval over streams)\n")
    print("| model | own oracle | each other model's oracle replayed | their consensus replayed |\n|---|---|---|---|")
    for i, o, s, c in rows:
        cs = f"{c[0]:+.4f} [{c[1][0]:+.4f}, {c[1][1]:+.4f}]" if c else "—"
        print(f"| {i} | {o[0]:+.4f} [{o[1][0]:+.4f}, {o[1][1]:+.4f}] | {min(s):+.4f} to {max(s):+.4f} "
              f"(mean {sum(s) / len(s):+.4f}) | {cs} |")
    mean_own = sum(own) / n
    mean_single = sum(sum(s) / len(s) for s in single) / n
    print(f"\nOver the {n} models: own oracle {mean_own:+.4f}; another model's oracle {mean_single:+.4f} "
          f"(recovering {100 * mean_single / mean_own:.0f} % of the own oracle's gain; below 0: a loss)", end="")
    if consensus:
        mean_cons = sum(consensus) / len(consensus)
        print(f"; the others' consensus {mean_cons:+.4f} (recovering {100 * mean_cons / mean_own:.0f} %)", end="")
    print()


if __name__ == "__main__":
    main()
