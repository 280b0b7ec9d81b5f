#!/usr/bin/env python3
"""What in the text goes with the oracle's K? Features a policy could compute before deciding a unit, against the K
the greedy oracle picked there, on one or more models read on the same segments.

Reads the oracle.json of `ponder oracle` in streams mode (its `segments`: each segment's tokens, in the order of
per_unit, whose units are consecutive runs of `unit_tokens` predictions). A decision for unit u (predictions at
positions 16u .. 16u + 15 of its segment) is taken after unit u − 1 was scored, so it may read tokens[0 .. 16u]; each
feature below reads no further:

  position       u, the unit's index in its segment (context units first, then the scored ones)
  scored         1 for units of the scored part, 0 for the context read before it
  indent         spaces since the last newline, at the unit's start (0 in the middle of a line's text)
  line_start     1 when the unit's first token is a newline or follows one
  match          the longest L in 1, 2, 4, …, 64 such that the last L tokens read occur earlier in the segment:
                 whether the text about to be predicted may repeat something already read
  prev_copy      the share of unit u − 1's predictions whose 5 tokens (4 of context, the target) occurred earlier
                 in the segment: how copyable the text just read was
  prev_loss      the model's own loss on unit u − 1 (what the `loss` heuristic reads; per model)

and one that reads the unit itself, which no policy can (a diagnostic of where the oracle's choices come from):

  own_copy       prev_copy of unit u itself

and the unit's first token itself (known when the unit is decided: it was the last target of unit u − 1), as a
category: η, the correlation ratio of K with it (the square root of the share of K's variance between the tokens'
groups; tokens seen on fewer than 20 units pooled), beside η with the tokens shuffled over the units (what η gives
with no relation at all; it is biased above 0 by the number of groups).

Then all of them at once (the ones read before the unit, the first token's class, and the model's scores of the
previous unit: loss, entropy, ttt-loss, gradnorm): a least-squares fit of each model's K on half of the segments
(alternate ones), scored by Spearman's ρ of its predictions with K on the other half, both ways. What a policy with
these inputs could at best imitate of the oracle, whatever its learner.

With `ponder oracle --hidden-k K` (hidden.f32 beside each oracle.json: the model's residual stream over the previous
unit, read under uniform-K, so no oracle choice enters it), the same held-out fit on what the model itself computed
before each unit, with numpy (Debian's python3-numpy; scripts/setup.sh installs it): ridge fits whose penalty is chosen
within the fitted half (by segment, four folds), on the text-and-score inputs above, on the hidden state, on both
with the first token itself (one column per token seen on 20 units or more), on that through 1,024 random ReLU
features (a nonlinear probe), and, as the null, on both with each model's K shuffled within its segments.

For each feature, Spearman's ρ with each model's oracle K (the range over models) and with the models' mean K per
unit (the oracles' consensus; with one model, its own K).

    python3 scripts/oracle_features.py results/.../oracle_units/model-*/oracle.json
"""
import json
import os
import random
import sys

FEATURES = ["position", "scored", "indent", "line_start", "match", "prev_copy", "prev_loss", "own_copy"]


def ranks(x):
    order = sorted(range(len(x)), key=lambda i: x[i])
    r = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(x, y):
    def ok(v):
        return v is not None and v == v  # a NaN is null in JSON

    keep = [i for i in range(len(x)) if ok(x[i]) and ok(y[i])]
    rx, ry = ranks([x[i] for i in keep]), ranks([y[i] for i in keep])
    n = len(keep)
    mx, my = sum(rx) / n, sum(ry) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else float("nan")


def longest_match(read):
    """The longest L in 1, 2, 4, …, 64 whose last L tokens of `read` (bytes) occur earlier in it, else 0."""
    best = 0
    for L in (1, 2, 4, 8, 16, 32, 64):
        if L >= len(read) or read[:-1].find(read[-L:]) < 0:
            break
        best = L
    return best


def segment_features(seg):
    """Per unit of one segment: the causal features above (prev_loss filled in per model later)."""
    t, unit, first = seg["tokens"], seg["unit_tokens"], seg["first_scored"]
    data = bytes(x & 0xFF for x in t)
    n_pred = len(t) - 1
    units = (n_pred + unit - 1) // unit
    seen, copyable = set(), [0] * len(t)  # copyable[p]: the 5-gram ending at token p occurred earlier
    for p in range(4, len(t)):
        g = data[p - 4:p + 1]
        copyable[p] = 1 if g in seen else 0
        seen.add(g)
    rows = []
    for u in range(units):
        at = u * unit  # the unit's first input position; tokens[0 .. at] are read when it is decided
        read = data[:at + 1]
        nl = read.rfind(b"\n")
        tail = read[nl + 1:]
        indent = len(tail) if nl >= 0 and tail.strip(b" ") == b"" else 0
        prev = range(max(0, at - unit) + 1, at + 1)  # targets of unit u − 1's predictions
        own = range(at + 1, min(len(t), at + unit + 1))  # targets of unit u's own (not causal)
        rows.append({"position": u, "scored": 1 if at + 1 >= first else 0, "indent": indent,
                     "line_start": 1 if data[at] == 10 or (at > 0 and data[at - 1] == 10) else 0,
                     "match": longest_match(read),
                     "prev_copy": sum(copyable[p] for p in prev) / len(prev) if u > 0 else float("nan"),
                     "own_copy": sum(copyable[p] for p in own) / len(own),
                     "first_token": t[at]})
    return rows


def eta(groups, y):
    """Correlation ratio of y with categorical `groups` (groups of fewer than 20 units pooled into one)."""
    count = {}
    for g in groups:
        count[g] = count.get(g, 0) + 1
    g2 = [g if count[g] >= 20 else "other" for g in groups]
    mean = sum(y) / len(y)
    total = sum((v - mean) ** 2 for v in y)
    sums, ns = {}, {}
    for g, v in zip(g2, y):
        sums[g] = sums.get(g, 0) + v
        ns[g] = ns.get(g, 0) + 1
    between = sum(ns[g] * (sums[g] / ns[g] - mean) ** 2 for g in sums)
    return (between / total) ** 0.5 if total > 0 else float("nan")


def print_first_token(rows, ks, consensus):
    first = [r["first_token"] for r in rows]
    shuffled = list(first)
    random.Random(0).shuffle(shuffled)
    per = [eta(first, k) for k in ks]
    print(f"| first token (η) | {min(per):.3f} to {max(per):.3f} | {eta(first, consensus):.3f} | "
          f"shuffled: {eta(shuffled, consensus):.3f} |")


def solve(a, b):
    """x with a x = b (Gaussian elimination with partial pivoting; a is small and, with the ridge, regular)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            for k in range(c, n + 1):
                m[r][k] -= f * m[c][k]
    x = [0.0] * n
    for c in range(n - 1, -1, -1):
        x[c] = (m[c][n] - sum(m[c][k] * x[k] for k in range(c + 1, n))) / m[c][c]
    return x


def least_squares(xs, y, ridge=1e-3):
    """Coefficients (bias last) of a ridge-regularised linear fit of y on the rows xs."""
    rows = [x + [1.0] for x in xs]
    d = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) + (ridge if i == j else 0) for j in range(d)] for i in range(d)]
    b = [sum(r[i] * v for r, v in zip(rows, y)) for i in range(d)]
    return solve(a, b)


def design(rows, scores):
    """One row of inputs per unit: the causal features, the first token's class, the model's scores (NaN → 0 and an
    indicator), each standardised."""
    classes = [lambda c: c == 10, lambda c: c == 32, lambda c: chr(c).isalpha(), lambda c: chr(c).isdigit()]
    cols = [[float(r[f]) for r in rows] for f in ["position", "scored", "indent", "line_start", "match"]]
    cols.append([0.0 if r["prev_copy"] != r["prev_copy"] else r["prev_copy"] for r in rows])
    cols += [[1.0 if cl(r["first_token"] & 0xFF) else 0.0 for r in rows] for cl in classes]
    for v in scores:
        cols.append([0.0 if x is None or x != x else x for x in v])
        cols.append([1.0 if x is None or x != x else 0.0 for x in v])
    out = []
    for c in cols:
        mean = sum(c) / len(c)
        sd = (sum((v - mean) ** 2 for v in c) / len(c)) ** 0.5 or 1.0
        out.append([(v - mean) / sd for v in c])
    return [list(r) for r in zip(*out)]


def held_out_rho(x, y, half):
    """Spearman ρ of a fit's predictions with y on each half of the units, fitted on the other; their mean."""
    rhos = []
    for test in (0, 1):
        fit = least_squares([x[i] for i in range(len(y)) if half[i] != test], [y[i] for i in range(len(y)) if half[i] != test])
        idx = [i for i in range(len(y)) if half[i] == test]
        pred = [sum(c * v for c, v in zip(fit, x[i] + [1.0])) for i in idx]
        rhos.append(spearman(pred, [y[i] for i in idx]))
    return sum(rhos) / 2


def print_fit(rows, runs, ks):
    half = [r["segment"] % 2 for r in rows]
    per = []
    for j, k in zip(runs, ks):
        u = j["per_unit"]
        per.append(held_out_rho(design(rows, [u["loss"], u["entropy"], u["ttt_loss"], u["grad_norm"]]), k, half))
    print(f"\nEverything at once (linear fit on alternate segments, ρ on the others): ρ {min(per):+.3f} to "
          f"{max(per):+.3f} over the models (each fitted to its own K)")


def hidden_matrix(path, j):
    """The rows of hidden.f32 beside oracle.json `path` (ponder oracle --hidden-k) as a float64 array, or None."""
    h = j.get("hidden")
    if not h:
        return None
    import numpy as np
    f = os.path.join(os.path.dirname(os.path.abspath(path)), h["file"])
    x = np.fromfile(f, dtype="<f4")
    if x.size != h["units"] * h["dims"]:
        sys.exit(f"oracle_features.py: {f}: {x.size} values where oracle.json says {h['units']} x {h['dims']}")
    return x.reshape(h["units"], h["dims"]).astype(np.float64)


def ridge_predict(x_fit, y_fit, group_fit, x_test, penalties=(0.1, 1, 10, 100, 1e3, 1e4, 1e5)):
    """Predictions for x_test of a ridge fit on the rows x_fit (standardised on them), its penalty the one whose fits
    on three of four folds of `group_fit` rank the fourth best (Spearman ρ, mean over the folds)."""
    import numpy as np

    def fit(x, y, lam):
        mean, sd = x.mean(0), x.std(0)
        sd[sd == 0] = 1.0
        z = (x - mean) / sd
        coef = np.linalg.solve(z.T @ z + lam * np.eye(z.shape[1]), z.T @ (y - y.mean()))
        return lambda xt: ((xt - mean) / sd) @ coef + y.mean()

    fold = group_fit % 4
    best, best_rho = penalties[0], -2.0
    for lam in penalties:
        rhos = []
        for f in range(4):
            tr, te = fold != f, fold == f
            if tr.sum() < 2 or te.sum() < 2:
                continue
            rhos.append(spearman(list(fit(x_fit[tr], y_fit[tr], lam)(x_fit[te])), list(y_fit[te])))
        rho = sum(r for r in rhos if r == r) / max(1, sum(1 for r in rhos if r == r))
        if rho > best_rho:
            best, best_rho = lam, rho
    return fit(x_fit, y_fit, best)(x_test)


def held_out_ridge_rho(x, y, segment):
    """held_out_rho with ridge_predict: fitted on even segments and scored on odd ones, and the other way round."""
    import numpy as np
    rhos = []
    for test in (0, 1):
        tr, te = segment % 2 != test, segment % 2 == test
        pred = ridge_predict(x[tr], y[tr], segment[tr] // 2, x[te])
        rhos.append(spearman(list(pred), list(y[te])))
    return float(np.mean(rhos))


def shuffled_within(y, segment, rng):
    """y with its values permuted within each segment (keeps each segment's K distribution, breaks the link to x)."""
    out = y.copy()
    for s in set(segment.tolist()):
        idx = [i for i in range(len(y)) if segment[i] == s]
        vals = [y[i] for i in idx]
        rng.shuffle(vals)
        for i, v in zip(idx, vals):
            out[i] = v
    return out


def print_hidden_fit(paths, runs, rows, ks):
    """The held-out fits of each model's K on its hidden state (see the module's docstring)."""
    hidden = [hidden_matrix(p, j) for p, j in zip(paths, runs)]
    if not all(h is not None for h in hidden):
        return
    import numpy as np
    for p, h in zip(paths, hidden):
        if h.shape[0] != len(rows):
            sys.exit(f"oracle_features.py: {p}: {h.shape[0]} rows of hidden states for {len(rows)} units")
    segment = np.array([r["segment"] for r in rows])
    first = [r["first_token"] for r in rows]
    common = sorted(t for t in set(first) if first.count(t) >= 20)
    onehot = np.array([[1.0 if f == t else 0.0 for t in common] for f in first])
    sets = {"text and scores": [], "hidden state": [], "both, with the first token": [],
            "both, 1,024 random ReLU features": [], "both, K shuffled within segments (null)": []}
    for j, k, h in zip(runs, ks, hidden):
        u = j["per_unit"]
        text = np.array(design(rows, [u["loss"], u["entropy"], u["ttt_loss"], u["grad_norm"]]))
        y = np.array(k)
        both = np.hstack([text, h, onehot])
        z = (both - both.mean(0)) / np.where(both.std(0) > 0, both.std(0), 1.0)
        relu = np.maximum(z @ np.random.default_rng(0).normal(size=(z.shape[1], 1024)) / np.sqrt(z.shape[1]), 0.0)
        sets["text and scores"].append(held_out_ridge_rho(text, y, segment))
        sets["hidden state"].append(held_out_ridge_rho(h, y, segment))
        sets["both, with the first token"].append(held_out_ridge_rho(both, y, segment))
        sets["both, 1,024 random ReLU features"].append(held_out_ridge_rho(relu, y, segment))
        null = shuffled_within(y, segment, random.Random(1))
        sets["both, K shuffled within segments (null)"].append(held_out_ridge_rho(both, null, segment))
    ref = runs[0]["hidden"].get("reference", "?")
    print(f"\nHeld-out ridge fits of each model's oracle K (penalty chosen within the fitted half; ρ on the other half,"
          f" both ways); hidden state: {hidden[0].shape[1]} values a unit, read under {ref}; first token: "
          f"{len(common)} tokens seen on 20 units or more\n")
    print("| inputs | ρ per model (range) | mean over models |\n|---|---|---|")
    for name, per in sets.items():
        print(f"| {name} | {min(per):+.3f} to {max(per):+.3f} | {sum(per) / len(per):+.3f} |")


def main():
    paths = sys.argv[1:]
    if not paths or paths[0] in ("-h", "--help"):
        sys.exit(__doc__)
    runs = []
    for p in paths:
        with open(p) as f:
            j = json.load(f)
        if "segments" not in j:
            sys.exit(f"{p}: no segments (ponder oracle writes them in streams mode only, from this version on)")
        runs.append(j)
    rows = [dict(r, segment=i) for i, seg in enumerate(runs[0]["segments"]) for r in segment_features(seg)]
    for p, j in zip(paths, runs):
        u = j["per_unit"]
        if len(u["k"]) != len(rows) or any(r["first_token"] != f for r, f in zip(rows, u["first_token"])):
            sys.exit(f"oracle_features.py: {p}: its units do not line up with the segments of {paths[0]}")
    ks = [[float(k) for k in j["per_unit"]["k"]] for j in runs]
    consensus = [sum(k[i] for k in ks) / len(ks) for i in range(len(rows))]
    print(f"{len(runs)} model(s), {len(rows)} units ({runs[0].get('scored', '?')})\n")
    print("| feature | ρ with each model's oracle K (range) | ρ with the models' mean K | mean of the feature |")
    print("|---|---|---|---|")
    for name in FEATURES:
        if name == "prev_loss":
            losses = [[float("nan") if v is None else v for v in j["per_unit"]["loss"]] for j in runs]
            per = [spearman(x, k) for x, k in zip(losses, ks)]
            mean_loss = [sum(x[i] for x in losses) / len(runs) for i in range(len(rows))]
            cons = spearman(mean_loss, consensus)
            avg = sum(x for x in mean_loss if x == x) / sum(1 for x in mean_loss if x == x)
        else:
            x = [r[name] for r in rows]
            per = [spearman(x, k) for k in ks]
            cons = spearman(x, consensus)
            avg = sum(v for v in x if v == v) / sum(1 for v in x if v == v)
        print(f"| {name} | {min(per):+.3f} to {max(per):+.3f} | {cons:+.3f} | {avg:.3f} |")
    print_first_token(rows, ks, consensus)
    print_fit(rows, runs, ks)
    print_hidden_fit(paths, runs, rows, ks)


if __name__ == "__main__":
    main()
