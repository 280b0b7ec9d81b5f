#!/usr/bin/env python3
"""Do independently trained models' oracles pick the same K on the same unit of text?

The greedy oracle picks K per unit by reading the labels, so on any model it finds some headroom over the uniform
frontier: choosing the best of several noisy outcomes gains even where no K is better in expectation. If that
headroom came from the text (some units need more inner steps), the oracles of models trained on the same data with
other seeds would agree on which units those are, and a policy reading the text could learn them. If their choices
agree no more than chance, what the oracle finds is each model's own noise, and no policy can win it.

Reads the oracle.json of `ponder oracle` run on each model with the same data settings (per_unit.k, in reading order;
per_unit.first_token checks that the units line up) and prints, for every pair of models, Cohen's kappa of their K
per unit, and the same with one model's units shuffled within blocks of BLOCK consecutive units (default 32: 512
tokens), which keeps whatever K owes to where a unit lies (context or scored part, a segment's start or end) and
removes what it owes to the unit itself. kappa − shuffled is the agreement about individual units.

    python3 scripts/oracle_agreement.py [--block 32] [--shuffles 20] results/.../oracle_units/model-*/oracle.json
"""
import argparse
import itertools
import json
import random
import sys


def kappa(a, b):
    """Cohen's kappa of two equal-length label sequences: 1 = always agree, 0 = as often as their marginals predict."""
    n = len(a)
    labels = sorted(set(a) | set(b))
    agree = sum(x == y for x, y in zip(a, b)) / n
    chance = sum((a.count(v) / n) * (b.count(v) / n) for v in labels)
    return (agree - chance) / (1 - chance) if chance < 1 else float("nan")


def block_shuffled(seq, block, rng):
    out = []
    for i in range(0, len(seq), block):
        chunk = seq[i:i + block]
        rng.shuffle(chunk)
        out += chunk
    return out


def load(path):
    with open(path) as f:
        j = json.load(f)
    u = j["per_unit"]
    if "first_token" not in u:
        sys.exit(f"{path}: no per_unit.first_token (written by an older ponder oracle); rerun ponder oracle")
    return [int(k) for k in u["k"]], u["first_token"], j.get("scored", "?")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--block", type=int, default=32, help="units per block of the shuffled control")
    ap.add_argument("--shuffles", type=int, default=20, help="shuffled controls averaged per pair")
    ap.add_argument("oracles", nargs="+", help="oracle.json of each model")
    a = ap.parse_args()
    if len(a.oracles) < 2:
        sys.exit("oracle_agreement.py: give the oracle.json of at least two models")
    runs = [load(p) for p in a.oracles]
    for p, r in zip(a.oracles[1:], runs[1:]):
        if r[1] != runs[0][1]:
            sys.exit(f"oracle_agreement.py: {p} read other units than {a.oracles[0]} (first tokens differ); "
                     "run ponder oracle with the same data settings on every model")
    n = len(runs[0][0])
    print(f"{len(runs)} models, {n} units each ({runs[0][2]}); kappa of the oracle's K per unit, pair by pair\n")
    print(f"| pair | agree | kappa | kappa, one model shuffled in blocks of {a.block} units | kappa − shuffled |")
    print("|---|---|---|---|---|")
    rng = random.Random(0)
    excess = []
    for (i, x), (j, y) in itertools.combinations(enumerate(runs), 2):
        k = kappa(x[0], y[0])
        ks = sum(kappa(x[0], block_shuffled(list(y[0]), a.block, rng)) for _ in range(a.shuffles)) / a.shuffles
        agree = sum(p == q for p, q in zip(x[0], y[0])) / n
        excess.append(k - ks)
        print(f"| {i}–{j} | {agree:.3f} | {k:+.4f} | {ks:+.4f} | {k - ks:+.4f} |")
    mean = sum(excess) / len(excess)
    print(f"\nkappa − shuffled over the {len(excess)} pairs: mean {mean:+.4f}, "
          f"range {min(excess):+.4f} to {max(excess):+.4f}")
    for i, r in enumerate(runs):
        share = {k: r[0].count(k) / n for k in sorted(set(r[0]))}
        print(f"model {i}: K shares " + ", ".join(f"{k}: {v:.3f}" for k, v in share.items()))


if __name__ == "__main__":
    main()
