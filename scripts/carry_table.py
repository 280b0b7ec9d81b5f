#!/usr/bin/env python3
"""Tables of scripts/carry_runs.sh: DIR/<model>-u<K>.json (ponder eval --streams --json) side by side.

Models: base, fresh[-sN] and carry[-sN] (the continuations), and scratch (configs/sotu_small_carry.yaml: the carried
state from the first step, at the base's token budget), each compared with the base and the carried continuation.

    python3 scripts/carry_table.py results/sotu_carry [results/sotu_small/results.json]
                                                          (writes DIR/table.md and prints it)

With a `ponder compare` results.json of the same split (scripts/small_runs.sh), the attention twin and the count
n-grams scored on the same tokens are given beside, and each model's per-stream difference to attention.

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


def reference_lines(ref, runs, models, ks):
    j = json.load(open(ref))
    att = j["regime"]["attention"]
    ngram = j["ngram_bpb"]
    best = min(ngram, key=lambda n: ngram[n])
    out = ["", "On the same tokens (%s): attention-only twin %.4f bits/byte, best count n-gram (%s-gram) %.4f." % (
        ref, att["bpb"], best, ngram[best]), ""]
    for k in ks:
        for m in models:
            if (m, k) in runs and len(runs[(m, k)]["stream_bpb"]) == len(att["stream_bpb"]):
                deltas = [p - q for p, q in zip(runs[(m, k)]["stream_bpb"], att["stream_bpb"])]
                lo, hi = bootstrap(deltas)
                out.append("- uniform-%d, %s − attention: %+.4f [%+.4f, %+.4f], %d of %d streams" % (
                    k, m, sum(deltas) / len(deltas), lo, hi, sum(v < 0 for v in deltas), len(deltas)))
    return out


def main(d, ref=None):
    runs = load(d)
    if not runs:
        sys.exit("carry_table.py: no <model>-u<K>.json in " + d)
    # base, then each continuation seed's fresh and carry (names "fresh", "carry", "fresh-s1", "carry-s1", …)
    def order(m):
        kind, _, seed = m.partition("-s")
        known = ["base", "fresh", "carry", "scratch"]
        return (int(seed or 0) if kind != "base" else -1, known.index(kind) if kind in known else 9, m)
    models = sorted({m for m, _ in runs}, key=order)
    suffixes = sorted({m.partition("carry")[2] for m in models if m.startswith("carry")})
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
        pairs = [p for sfx in suffixes for p in (("carry" + sfx, "fresh" + sfx), ("carry" + sfx, "base"), ("fresh" + sfx, "base"))]
        # a model trained with the carried state from its first step, at the base's token budget: against the base
        # (the same budget on fresh windows) and against the continuation
        pairs += [("scratch", "base"), ("scratch", "carry")]
        for a, b in pairs:
            if (a, k) in runs and (b, k) in runs:
                x, y = runs[(a, k)]["stream_bpb"], runs[(b, k)]["stream_bpb"]
                deltas = [p - q for p, q in zip(x, y)]
                lo, hi = bootstrap(deltas)
                wins = sum(v < 0 for v in deltas)
                out.append("- uniform-%d, %s − %s: %+.4f [%+.4f, %+.4f], %d of %d streams" % (
                    k, a, b, sum(deltas) / len(deltas), lo, hi, wins, len(deltas)))
    if ref:
        out += reference_lines(ref, runs, models, ks)
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
    if len(sys.argv) not in (2, 3) or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    main(*sys.argv[1:])
