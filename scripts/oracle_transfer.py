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
    """The frontier distance averaged over several runs of one kind (the shuffles), with the mean of their intervals
    (results.json keeps each run's interval, not its per-stream distances, so this is not the mean's own interval)."""
    means = [m["frontier_delta"]["mean"] for m in ms]
    lo = sum(m["frontier_delta"]["ci"][0] for m in ms) / len(ms)
    hi = sum(m["frontier_delta"]["ci"][1] for m in ms) / len(ms)
    return sum(means) / len(means), (lo, hi), float("nan")


def delta(m):
    d = m["frontier_delta"]
    return d["mean"], d["ci"], m["seeds"][0]["mean_k"] if "mean_k" in m["seeds"][0] else float("nan")


def model_row(j):
    """One model's numbers: own oracle, the others' single replays, their consensus, its shuffles (mean) and the
    placement contrast, and (when run) the consensus placed by an imitation's order (replay:…@order.json) with its
    contrast against the shuffles."""
    every = [m for m in j["methods"] if m["kind"] == "replay"]
    reps = [m for m in every if "two_level.json" not in m["name"]]
    two = [m for m in every if "two_level.json" in m["name"]]
    two_nulls = [m for m in two if is_null(m)]
    two = [m for m in two if m not in two_nulls]
    nulls = [m for m in reps if is_null(m)]
    imit = [m for m in reps if "@" in m["name"] and m not in nulls]
    singles = [m for m in reps if "+" not in m["name"] and m not in nulls and m not in imit]
    cons = [m for m in reps if "+" in m["name"] and m not in nulls and m not in imit]
    by = {m["name"]: m for m in j["methods"]}
    return {"own": delta(by["oracle"]), "single": [delta(m)[0] for m in singles],
            "cons": delta(cons[0]) if cons else None, "null": mean_delta(nulls) if nulls else None,
            "placement": placement(cons[0], nulls) if cons and nulls else None, "shuffles": len(nulls),
            "imit": delta(imit[0]) if imit else None,
            "imit_placement": placement(imit[0], nulls) if imit and nulls else None,
            "two": delta(two[0]) if two else None, "two_null": mean_delta(two_nulls) if two_nulls else None,
            "two_placement": placement(two[0], two_nulls) if two and two_nulls else None,
            "random": delta(by["random"]) if "random" in by else None,
            "two_note": note_of(two[0]["name"][len("replay:"):]) if two else ""}


def note_of(path):
    """What a two_level.json says it is (its levels), or nothing when it cannot be read here."""
    try:
        with open(path) as f:
            return json.load(f).get("note", "")
    except (OSError, ValueError):
        return ""


def ci(x):
    return f"{x[0]:+.4f} [{x[1][0]:+.4f}, {x[1][1]:+.4f}]" if x else "—"


def spread(pl):
    return f" ({min(pl[2]):+.4f} to {max(pl[2]):+.4f})" if pl and len(pl[2]) > 1 else ""


def mean_of(rows, key):
    v = [r[key][0] for r in rows if r[key]]
    return (sum(v) / len(v), sum(1 for x in v if x < 0), len(v)) if v else None


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    out, n = sys.argv[1], int(sys.argv[2])
    rows = []
    for i in range(n):
        path = os.path.join(out, f"model-{i}", "results.json")
        try:
            with open(path) as f:
                rows.append(model_row(json.load(f)))
        except (OSError, ValueError) as e:
            sys.exit(f"oracle_transfer.py: {path}: {e}")
    shuffles, imitated = max(r["shuffles"] for r in rows), any(r["imit"] for r in rows)
    print("Δ bits/byte against each model's uniform frontier at the method's own FLOPs (95 % interval over streams)" +
          (f"; the shuffled column and the placement contrasts average {shuffles} permutations (the shuffled "
           "column's interval is the mean of theirs; the contrast's range over them in parentheses)"
           if shuffles > 1 else "") + "\n")
    head = ("| model | own oracle | each other model's oracle replayed | their consensus replayed | the consensus "
            "shuffled within segments | placement: consensus − shuffled (same FLOPs) |")
    if imitated:
        head += " the consensus placed by the imitation | imitation − shuffled (same FLOPs) |"
    print(head + "\n|" + "---|" * (head.count("|") - 1))
    for i, r in enumerate(rows):
        s = r["single"]
        line = (f"| {i} | {ci(r['own'])} | {min(s):+.4f} to {max(s):+.4f} (mean {sum(s) / len(s):+.4f}) | "
                f"{ci(r['cons'])} | {ci(r['null'])} | {ci(r['placement'])}{spread(r['placement'])} |")
        if imitated:
            line += f" {ci(r['imit'])} | {ci(r['imit_placement'])}{spread(r['imit_placement'])} |"
        print(line)
    print_means(rows, n)
    if any(r["two"] for r in rows):
        print_two_level(rows)


def print_means(rows, n):
    mean_own = sum(r["own"][0] for r in rows) / n
    mean_single = sum(sum(r["single"]) / len(r["single"]) for r in rows) / n

    def share(x):  # of the own oracle's gain; meaningless when the own oracle does not beat uniform
        return f" (recovering {100 * x / mean_own:.0f} % of the own oracle's gain; below 0: a loss)" if mean_own < 0 else ""

    print(f"\nOver the {n} models: own oracle {mean_own:+.4f}" +
          ("" if mean_own < 0 else " (no better than uniform here: no gain to recover)") +
          f"; another model's oracle {mean_single:+.4f}{share(mean_single)}", end="")
    cons, null = mean_of(rows, "cons"), mean_of(rows, "null")
    placed, imit, imit_placed = mean_of(rows, "placement"), mean_of(rows, "imit"), mean_of(rows, "imit_placement")
    if cons:
        print(f"; the others' consensus {cons[0]:+.4f}{share(cons[0])}", end="")
    if null:
        print(f"; shuffled within segments {null[0]:+.4f}", end="")
    if placed:
        print(f"; placement {placed[0]:+.4f} bits/byte at equal FLOPs (below 0 on {placed[1]} of {placed[2]} models)", end="")
    if imit:
        print(f"; the consensus placed by the imitation {imit[0]:+.4f}", end="")
    if imit_placed:
        print(f"; imitation − shuffled {imit_placed[0]:+.4f} (below 0 on {imit_placed[1]} of {imit_placed[2]} models" +
              (f", {100 * imit_placed[0] / placed[0]:.0f} % of the oracles' placement" if placed and placed[0] < 0 else "") +
              ")", end="")
    print()


def print_two_level(rows):
    """The imitation run as a policy would spend (scripts/oracle_imitate.py's two_level.json: K 4 on the top third of
    its predictions, else 1), its shuffles within segments and the calibrated random policy, against the frontier."""
    note = rows[0]["two_note"] or "two levels by the imitation's ranking"
    print(f"\nThe imitation as a two-level policy ({note}), against the same frontier\n")
    print("| model | two-level imitation | its K shuffled within segments | placement: imitation − shuffled | "
          "random (calibrated) |\n|---|---|---|---|---|")
    for i, r in enumerate(rows):
        print(f"| {i} | {ci(r['two'])} | {ci(r['two_null'])} | "
              f"{ci(r['two_placement'])}{spread(r['two_placement'])} | {ci(r['random'])} |")
    two, place, rnd = mean_of(rows, "two"), mean_of(rows, "two_placement"), mean_of(rows, "random")
    print(f"\nOver the {len(rows)} models: two-level imitation {two[0]:+.4f} (below 0 on {two[1]} of {two[2]})" +
          (f"; placement {place[0]:+.4f} (below 0 on {place[1]} of {place[2]})" if place else "") +
          (f"; random {rnd[0]:+.4f}" if rnd else ""))


if __name__ == "__main__":
    main()
