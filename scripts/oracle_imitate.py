#!/usr/bin/env python3
"""What would a policy that imitates the oracles buy? For each model of a set, a ridge fit of the other models' mean
oracle K per unit on what the model could read before the unit — the text features of scripts/oracle_features.py,
the unit's first token and the model's hidden state over the previous unit (`ponder oracle --hidden-k`, read under a
uniform schedule, so no oracle choice enters it), through 1,024 random ReLU features — fitted on half of the
segments and predicting the other half, both ways (cross-fitting: no unit's prediction saw its own label). The
predictions are written as per-unit scores, OUT/model-<i>/order.json, for the comparison method
`replay:<the others' oracle.json, +-joined>@OUT/model-<i>/order.json`: the others' consensus K, placed within each
segment in the order of the predictions. It spends exactly the consensus's steps on each segment, as do the
consensus itself (the placement the oracles chose) and `replay-shuffled-S:` (random placement), so the three differ
only in where the steps go.

Beside it, OUT/model-<i>/two_level.json, the imitation as a policy of the comparison's kind would spend: K = 4 on the
third of the units with the highest predictions (one threshold over all of them) and K = 1 elsewhere, which spends
uniform-2's steps, as the calibrated heuristics do with their two levels. `replay:…/two_level.json` runs it and
`replay-shuffled-S:…/two_level.json` is its placement null (the same steps, in random places within each segment).

It is optimistic for a policy: the fits learn from labels of other segments of the same held-out streams (a policy
would learn on training streams), and the hidden state is read under a uniform schedule rather than the policy's own.

    python3 scripts/oracle_imitate.py OUT [--levels LOW,HIGH,SHARE] ORACLE_DIR/model-0/oracle.json ...

--levels sets the two-level policy (default 1,4,0.333: the comparisons' levels at uniform-2's steps).

Prints, per model, Spearman's ρ of the predictions with the others' mean K (the target) on the held-out halves.
"""
import json
import os
import sys
import time

import oracle_features as of

RELU = 1024  # random ReLU features the fit reads


def features(rows, hidden):
    """The inputs of a unit a policy could read before it (no per-unit scores: oracle.json holds them along the
    oracle's own trajectory), through random ReLU features."""
    import numpy as np
    first = [r["first_token"] for r in rows]
    common = sorted(t for t in set(first) if first.count(t) >= 20)
    onehot = np.array([[1.0 if f == t else 0.0 for t in common] for f in first]).reshape(len(rows), len(common))
    x = np.hstack([np.array(of.design(rows, [])), hidden, onehot])
    z = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1.0)
    return np.maximum(z @ np.random.default_rng(0).normal(size=(z.shape[1], RELU)) / np.sqrt(z.shape[1]), 0.0)


LEVELS = (1, 4, 1 / 3)  # low, high, share at high: the comparisons' two levels; a third at 4 spends uniform-2's steps


def two_level(pred, levels=LEVELS):
    """K = high on the share of units with the highest predictions (ties by unit order), low elsewhere."""
    low, high, share = levels
    order = sorted(range(len(pred)), key=lambda u: (-pred[u], u))
    k = [low] * len(pred)
    for u in order[:round(share * len(pred))]:
        k[u] = high
    return k


def parse_levels(text):
    """--levels LOW,HIGH,SHARE: whole step counts and a share in [0, 1]."""
    try:
        low, high, share = text.split(",")
        levels = (int(low), int(high), float(share))
    except ValueError:
        sys.exit(f"oracle_imitate.py: --levels {text}: expected LOW,HIGH,SHARE, e.g. 1,4,0.333")
    if levels[0] < 0 or levels[1] < 0 or not 0 <= levels[2] <= 1:
        sys.exit(f"oracle_imitate.py: --levels {text}: steps must be >= 0 and the share in [0, 1]")
    return levels


def cross_fit(x, y, segment):
    """Predictions of y for every unit from a fit on the other half of the segments (even / odd)."""
    import numpy as np
    pred = np.zeros(len(y))
    for test in (0, 1):
        tr, te = segment % 2 != test, segment % 2 == test
        pred[te] = of.ridge_predict(x[tr], y[tr], segment[tr] // 2, x[te])
    return pred


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[0] in ("-h", "--help"):
        sys.exit(__doc__)
    import numpy as np
    levels = LEVELS
    if len(args) > 1 and args[1] == "--levels":
        levels = parse_levels(args[2])
        args = args[:1] + args[3:]
    out, paths = args[0], args[1:]
    runs = []
    for p in paths:
        with open(p) as f:
            runs.append(json.load(f))
        if runs[-1].get("segments") != runs[0].get("segments") or "segments" not in runs[0]:
            sys.exit(f"oracle_imitate.py: {p}: not a streams-mode oracle.json on the segments of {paths[0]}")
    rows = [dict(r, segment=i) for i, seg in enumerate(runs[0]["segments"]) for r in of.segment_features(seg)]
    segment = np.array([r["segment"] for r in rows])
    ks = np.array([j["per_unit"]["k"] for j in runs], dtype=float)
    print("| model | ρ of the held-out predictions with the others' mean K |\n|---|---|")
    start = time.monotonic()
    for i, (p, j) in enumerate(zip(paths, runs)):
        hidden = of.hidden_matrix(p, j)
        if hidden is None:
            sys.exit(f"oracle_imitate.py: {p}: no hidden.f32 (run ponder oracle with --hidden-k)")
        if not np.isfinite(hidden).all():
            bad = int(np.argwhere(~np.isfinite(hidden))[0][0])
            sys.exit(f"oracle_imitate.py: {p}: hidden.f32 holds a value that is not finite (unit {bad})")
        done = time.monotonic() - start
        eta = f", ETA {done / i * (len(paths) - i):.0f} s" if i else ""
        print(f"oracle_imitate.py: model {i + 1} of {len(paths)}: fitting ({len(rows)} units; {done:.0f} s elapsed{eta})",
              file=sys.stderr, flush=True)
        target = np.delete(ks, i, axis=0).mean(0)
        pred = cross_fit(features(rows, hidden), target, segment)
        print(f"| {i} | {of.spearman(list(pred), list(target)):+.3f} |")
        os.makedirs(os.path.join(out, f"model-{i}"), exist_ok=True)
        with open(os.path.join(out, f"model-{i}", "order.json"), "w") as f:
            json.dump({"note": "cross-fitted predictions of the other models' mean oracle K (scripts/oracle_imitate.py)",
                       "sources": paths, "segments": j["segments"], "per_unit": {"score": [float(v) for v in pred]}}, f)
        with open(os.path.join(out, f"model-{i}", "two_level.json"), "w") as f:
            json.dump({"note": f"K = {levels[1]} on the {levels[2]:.3f} of units with the highest imitation "
                               f"predictions, else {levels[0]} (scripts/oracle_imitate.py)", "sources": paths,
                       "segments": j["segments"], "per_unit": {"k": two_level(pred, levels)}}, f)


if __name__ == "__main__":
    main()
