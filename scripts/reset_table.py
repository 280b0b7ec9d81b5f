#!/usr/bin/env python3
"""The table of scripts/reset_runs.sh: carried against reset at every file, per model, from its results folder.

    python3 scripts/reset_table.py results/reset_pystdlib 1 4
"""
import json
import os
import sys


def load(folder, seed, k, how):
    """how: carry, reset, bounded-carry or bounded-reset."""
    path = os.path.join(folder, f"model-{seed}-u{k}-{how}.json")
    with open(path) as f:
        return json.load(f)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: reset_table.py RESULTS_FOLDER K [K ...]")
    folder, ks = sys.argv[1], [int(k) for k in sys.argv[2:]]
    first = load(folder, 0, ks[0], "carry")  # model 0 is always read first
    reset = load(folder, 0, ks[0], "reset")
    print(f"# Carried against reset at every file: {os.path.basename(folder)}\n")
    print(f"Every scored token of the test split: {first['streams']} streams, {reset['documents_read_alone']} "
          f"evaluation files, {first['scored_tokens']:,} scored tokens ({first['read_tokens']:,} read carried, "
          f"{reset['read_tokens']:,} reset). Bits/byte over every scored token; produced by scripts/reset_runs.sh "
          f"at commit {first.get('commit', '?')}. Bounded: segments of 1,024 scored tokens, each read after at most the "
          f"1,024 before it, files or not (carried), or from its file's start within that (reset).\n")
    head = ["model (train.seed)", "uniform-0"]
    for k in ks:
        head += [f"uniform-{k} carried", f"uniform-{k} reset"]
    head += [f"carried − reset, uniform-{ks[0]}", "streams worse carried", "uniform-1 bounded carried",
             "bounded reset"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    # every model read so far (reset_runs.sh SEEDS): the ones whose uniform-0 pass is there
    seeds = sorted(int(f[len("model-"):-len("-u0-reset.json")]) for f in os.listdir(folder)
                   if f.startswith("model-") and f.endswith("-u0-reset.json"))
    for seed in seeds:
        row = [str(seed), f"{load(folder, seed, 0, 'reset')['bpb']:.4f}"]
        for k in ks:
            row += [f"{load(folder, seed, k, how)['bpb']:.4f}" for how in ("carry", "reset")]
        c, r = load(folder, seed, ks[0], "carry"), load(folder, seed, ks[0], "reset")
        assert c["scored_tokens"] == r["scored_tokens"], "carried and reset passes must score the same tokens"
        worse = sum(a > b for a, b in zip(c["stream_bpb"], r["stream_bpb"]))
        row += [f"{c['bpb'] - r['bpb']:+.4f}", f"{worse} of {len(c['stream_bpb'])}"]
        bc, br = load(folder, seed, 1, "bounded-carry"), load(folder, seed, 1, "bounded-reset")
        assert bc["scored_tokens"] == c["scored_tokens"] == br["scored_tokens"], "bounded reads score the same tokens"
        row += [f"{bc['bpb']:.4f}", f"{br['bpb']:.4f}"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
