#!/usr/bin/env python3
"""One oracle.json from several (`ponder oracle` in streams mode on the same segments): on each unit the step option
nearest the files' mean K, ties to the smaller (what `replay:A+B+…` runs), optionally permuted within each segment
with a seed: the placement null of a replay, the same K spent on the same segment in random places.

    python3 scripts/oracle_consensus.py OUT.json [--shuffle SEED] IN.json [IN.json ...]

OUT.json keeps the first file's segments and everything `replay:` reads; `per_unit` holds only `k`.
"""
import json
import random
import sys


def nearest(mean, options):
    return min(sorted(options), key=lambda o: (abs(o - mean), o))


def units_per_segment(j):
    return [(len(s["tokens"]) - 1 + s["unit_tokens"] - 1) // s["unit_tokens"] for s in j["segments"]]


def consensus(runs):
    for j in runs[1:]:
        if j["segments"] != runs[0]["segments"]:
            sys.exit("oracle_consensus.py: the files were not read on the same segments")
    options = runs[0]["k_options"]
    ks = [j["per_unit"]["k"] for j in runs]
    return [nearest(sum(k[i] for k in ks) / len(ks), options) for i in range(len(ks[0]))]


def shuffled(k, sizes, seed):
    rng, out, at = random.Random(seed), [], 0
    for n in sizes:
        part = list(k[at:at + n])
        rng.shuffle(part)
        out += part
        at += n
    return out


def main():
    args = sys.argv[1:]
    if len(args) < 2 or args[0] in ("-h", "--help"):
        sys.exit(__doc__)
    out, seed = args.pop(0), None
    if args and args[0] == "--shuffle":
        seed = int(args[1])
        args = args[2:]
    runs = []
    for p in args:
        with open(p) as f:
            runs.append(json.load(f))
    k = consensus(runs)
    if seed is not None:
        k = shuffled(k, units_per_segment(runs[0]), seed)
    note = f"consensus of {len(runs)} oracle.json files" + (f", shuffled within segments (seed {seed})" if seed is not None else "")
    with open(out, "w") as f:
        json.dump({"note": note, "sources": args, "k_options": runs[0]["k_options"], "segments": runs[0]["segments"],
                   "per_unit": {"k": k}}, f)


if __name__ == "__main__":
    main()
