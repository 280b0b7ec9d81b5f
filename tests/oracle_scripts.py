#!/usr/bin/env python3
"""The analysis scripts of the oracle's units (scripts/oracle_agreement.py, oracle_features.py, oracle_transfer.py,
oracle_imitate.py) on inputs whose answers are known by hand: kappa, the block-shuffled control, Spearman's rho, each
causal feature of a small segment (including that no feature reads the unit it describes), the transfer table, and
the imitation's fit and schedules.
Usage: oracle_scripts.py SOURCE_ROOT"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import check, finish  # noqa: E402
import oracle_agreement  # noqa: E402
import oracle_features  # noqa: E402

# kappa: identical labels 1; labels independent of each other by construction 0; always-opposite binary labels -1.
a = [1, 1, 2, 2]
check(oracle_agreement.kappa(a, a) == 1.0, "kappa of a sequence with itself is 1")
check(abs(oracle_agreement.kappa([1, 1, 2, 2], [1, 2, 1, 2])) < 1e-12, "kappa is 0 when agreement is at chance")
check(abs(oracle_agreement.kappa([1, 2, 1, 2], [2, 1, 2, 1]) + 1) < 1e-12, "kappa is -1 for opposite labels")
# The block shuffle permutes within blocks only: each block keeps its multiset of labels.
seq = list(range(10))
shuffled = oracle_agreement.block_shuffled(list(seq), 4, random.Random(1))
check(sorted(shuffled[:4]) == [0, 1, 2, 3] and sorted(shuffled[4:8]) == [4, 5, 6, 7] and sorted(shuffled[8:]) == [8, 9],
      "block_shuffled keeps each block's labels in that block: " + str(shuffled))

# Spearman: monotone 1, reversed -1, ties ranked by their average, NaN and null dropped.
sp = oracle_features.spearman
check(abs(sp([1, 2, 3, 4], [10, 20, 30, 400]) - 1) < 1e-12, "spearman of a monotone pair is 1")
check(abs(sp([1, 2, 3, 4], [4, 3, 2, 1]) + 1) < 1e-12, "spearman of a reversed pair is -1")
check(abs(sp([1, None, 2, float("nan"), 3], [3, 0, 2, 9, 1]) + 1) < 1e-12, "spearman drops null and NaN pairs")
check(oracle_features.ranks([5, 1, 5, 3]) == [3.5, 1.0, 3.5, 2.0], "tied values share their average rank")

# eta: K set by the group is 1; the same mean in every group is 0; groups of fewer than 20 units are pooled.
groups = ["a"] * 20 + ["b"] * 20
check(abs(oracle_features.eta(groups, [1.0] * 20 + [4.0] * 20) - 1) < 1e-12, "eta is 1 when the group sets K")
check(abs(oracle_features.eta(groups, [1.0, 4.0] * 20)) < 1e-12, "eta is 0 when every group has the same mean")
check(abs(oracle_features.eta(["a", "b"] * 5, [1.0, 4.0] * 5)) < 1e-12,
      "groups of fewer than 20 units are pooled (one group: eta 0)")

# least_squares recovers an exact linear relation; held_out_rho is 1 when K is a monotone function of an input
# on both halves, and near 0 for K unrelated to every input.
coef = oracle_features.least_squares([[0.0], [1.0], [2.0], [3.0]], [1.0, 3.0, 5.0, 7.0], ridge=0.0)
check(abs(coef[0] - 2) < 1e-9 and abs(coef[1] - 1) < 1e-9, "least_squares fits y = 2x + 1: " + str(coef))
xs = [[float(i % 7), float(i % 3)] for i in range(200)]
half = [i % 2 for i in range(200)]
check(abs(oracle_features.held_out_rho(xs, [3 * x[0] - x[1] for x in xs], half) - 1) < 1e-9,
      "held_out_rho is 1 for K linear in the inputs")
noise = random.Random(3)
rho0 = oracle_features.held_out_rho(xs, [noise.random() for _ in xs], half)
check(abs(rho0) < 0.25, "held_out_rho is near 0 for K unrelated to the inputs: %.3f" % rho0)

# longest_match: the last L bytes occur earlier (overlap allowed), powers of two up to 64.
check(oracle_features.longest_match(b"abcdxabcd") == 4, "abcd repeats: match 4")
check(oracle_features.longest_match(b"abcdxyz") == 0, "nothing repeats: match 0")
check(oracle_features.longest_match(b"a" * 100) == 64, "a long run caps at 64")

# A segment of units of 4 tokens: "x\n  ab\n  ab\n  ab" — the feature of unit u reads tokens[0 .. 4u] only.
text = b"x\n  ab\n  ab\n  abxxxx"
seg = {"tokens": list(text), "unit_tokens": 4, "first_scored": 9}
rows = oracle_features.segment_features(seg)
check(len(rows) == (len(text) - 1 + 3) // 4, "one row per unit of the padded predictions: %d" % len(rows))
check([r["position"] for r in rows] == list(range(len(rows))), "position counts units")
check([r["scored"] for r in rows] == [0, 0, 1, 1, 1], "scored from the unit whose first target is first_scored: " +
      str([r["scored"] for r in rows]))
check(rows[2]["first_token"] == ord(" ") and rows[2]["indent"] == 2,
      "unit 2 starts at 'x\\n  ab\\n  ': indent 2 (read to its first token)")
check(rows[1]["indent"] == 0, "unit 1 starts inside a line's text ('  a'): indent 0")
check(rows[1]["line_start"] == 0 and rows[2]["line_start"] == 0, "line_start only at or right after a newline")
check(rows[0]["prev_copy"] != rows[0]["prev_copy"], "the first unit has no previous unit: prev_copy NaN")
# Changing what follows a unit's first token leaves its causal features alone; own_copy reads the unit and moves.
changed = dict(seg, tokens=list(text[:9] + b"QQQQQQQQQQQ"))
rows2 = oracle_features.segment_features(changed)
causal = ["position", "scored", "indent", "line_start", "match", "prev_copy"]
check(all(rows2[2][f] == rows[2][f] for f in causal), "unit 2's causal features read tokens[0 .. 8] only")
check(rows2[2]["own_copy"] != rows[2]["own_copy"], "own_copy reads the unit itself (a diagnostic, not a feature)")

# The hidden-state fit (numpy): ridge with its penalty chosen within the fitted half ranks K that is linear in one
# of 50 columns (the rest noise) almost perfectly on the other half, and finds nothing in K unrelated to them, or in K
# shuffled within its segments; hidden_matrix reads the rows `ponder oracle --hidden-k` writes and refuses a file
# whose size disagrees with oracle.json.
import numpy as np  # noqa: E402
import tempfile  # noqa: E402

gen = np.random.default_rng(5)
x = gen.normal(size=(400, 50))
segment = np.arange(400) // 20  # 20 segments of 20 units
signal = 2.0 * x[:, 3] + 0.1 * gen.normal(size=400)
check(oracle_features.held_out_ridge_rho(x, signal, segment) > 0.95, "ridge ranks K linear in one column of 50")
unrelated = gen.normal(size=400)
check(abs(oracle_features.held_out_ridge_rho(x, unrelated, segment)) < 0.15, "ridge finds nothing in unrelated K")
shuffled = oracle_features.shuffled_within(signal, segment, random.Random(2))
check(all(sorted(shuffled[segment == s]) == sorted(signal[segment == s]) for s in range(20)),
      "shuffled_within keeps each segment's values")
check(abs(oracle_features.held_out_ridge_rho(x, shuffled, segment)) < 0.15,
      "K shuffled within segments: the fit finds nothing")
with tempfile.TemporaryDirectory() as d:
    rows = np.arange(12, dtype="<f4").reshape(3, 4)
    rows.tofile(os.path.join(d, "hidden.f32"))
    meta = {"hidden": {"file": "hidden.f32", "units": 3, "dims": 4}}
    got = oracle_features.hidden_matrix(os.path.join(d, "oracle.json"), meta)
    check(got.shape == (3, 4) and got[2, 1] == 9.0, "hidden_matrix reads units x dims in row-major order")
    check(oracle_features.hidden_matrix(os.path.join(d, "oracle.json"), {}) is None, "no hidden entry: None")
    try:
        oracle_features.hidden_matrix(os.path.join(d, "oracle.json"), {"hidden": dict(meta["hidden"], units=4)})
        check(False, "a hidden.f32 shorter than oracle.json says is refused")
    except SystemExit as e:
        check("12 values where oracle.json says 4 x 4" in str(e), "the refusal names the sizes: " + str(e))
# scripts/oracle_transfer.py on hand-made results: per model its own oracle, the others' replays, their consensus and
# the shuffled null (two permutations, averaged), and the means over models with the share of the own oracle's gain
# recovered.
import contextlib  # noqa: E402
import io  # noqa: E402
import oracle_transfer  # noqa: E402


def method(name, kind, mean):
    return {"name": name, "kind": kind, "seeds": [{"mean_k": 2.0, "window_bpb": [3.0 + mean, 3.1 + mean]}],
            "frontier_delta": {"mean": mean, "ci": [mean - 1e-3, mean + 1e-3]}}


with tempfile.TemporaryDirectory() as d:
    for i, (own, others, cons, null) in enumerate([(-0.04, [-0.01, -0.03], -0.02, 0.01), (-0.02, [0.0, -0.02], -0.01, 0.03)]):
        os.makedirs(os.path.join(d, f"model-{i}"))
        ms = [method("uniform-1", "uniform", 0.0), method("oracle", "oracle", own)]
        ms += [method(f"replay:o{j}.json", "replay", v) for j, v in enumerate(others)]
        ms += [method("replay:o0.json+o1.json", "replay", cons)]
        ms += [method(f"replay-shuffled-{s}:o0.json+o1.json", "replay", null + dz) for s, dz in ((1, -0.01), (2, 0.01))]
        ms += [method(f"replay:o0.json+o1.json@{d}/model-{i}/order.json", "replay", null - 0.005)]
        two = f"{d}/model-{i}/two_level.json"
        ms += [method(f"replay:{two}", "replay", 0.004), method("random", "random", 0.01)]
        ms += [method(f"replay-shuffled-{s}:{two}", "replay", 0.01 + dz) for s, dz in ((1, -0.002), (2, 0.002))]
        with open(os.path.join(d, f"model-{i}", "results.json"), "w") as f:
            json.dump({"methods": ms}, f)
    sys.argv = ["oracle_transfer.py", d, "2"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        oracle_transfer.main()
    text = buf.getvalue()
    check("| 0 | -0.0400 [-0.0410, -0.0390] | -0.0300 to -0.0100 (mean -0.0200) | -0.0200" in text,
          "a model's row: own oracle, the others' range and mean, the consensus: " + text[:600])
    check("| +0.0100 [+0.0090, +0.0110] | -0.0300 [-0.0300, -0.0300] (-0.0400 to -0.0200) |" in text,
          "model 0: the shuffles' mean against the frontier, the placement over them and its range per permutation: " +
          text[:900])
    check("average 2 permutations" in text, "the table says how many permutations it averages")
    check("| 0 | +0.0040 [+0.0030, +0.0050] | +0.0100 [+0.0090, +0.0110] | -0.0060 [-0.0060, -0.0060] (-0.0080 to "
          "-0.0040) | +0.0100 [+0.0090, +0.0110] |" in text and "two-level imitation +0.0040 (below 0 on 0 of 2); "
          "placement -0.0060 (below 0 on 2 of 2); random +0.0100" in text,
          "the two-level imitation, its shuffles and random, apart from the consensus's replays: " + text[-900:])
    check("|---|---|---|---|---|---|---|---|\n| 0 |" in text, "eight columns with the imitation's two")
    check("| +0.0050 [+0.0040, +0.0060] | -0.0050 [-0.0050, -0.0050] (-0.0150 to +0.0050) |" in text,
          "model 0: the imitation against the frontier and against the shuffles: " + text[:1200])
    check("imitation − shuffled -0.0050 (below 0 on 2 of 2 models, 14 % of the oracles' placement)" in text,
          "the imitation's placement over models, as a share of the oracles': " + text[-500:])
    check("own oracle -0.0300; another model's oracle -0.0150 (recovering 50 %" in text and
          "the others' consensus -0.0150 (recovering 50 % of the own oracle's gain; below 0: a loss); shuffled within "
          "segments +0.0200; placement -0.0350 "
          "bits/byte at equal FLOPs (below 0 on 2 of 2 models)" in text,
          "the means over models: " + text[-400:])
# scripts/oracle_imitate.py: the others' mean K fitted on what a model reads before each unit; here each model's hidden
# state carries a column the others' K follow, so the held-out predictions rank them; order.json lines up.
import oracle_imitate  # noqa: E402
oracle_imitate.RELU = 128  # the fit's width does not change what is checked; 1,024 costs seconds here
with tempfile.TemporaryDirectory() as d:
    gen = np.random.default_rng(3)
    n_seg, per = 12, 20
    segs = [{"tokens": [int(t) for t in gen.integers(32, 127, size=16 * per + 1)], "unit_tokens": 16,
             "first_scored": 1} for _ in range(n_seg)]
    signal = gen.normal(size=n_seg * per)
    paths = []
    for m in range(3):
        os.makedirs(os.path.join(d, f"o{m}"))
        k = [int(v) for v in np.clip(np.round(1.5 + signal + 0.3 * gen.normal(size=signal.size)), 0, 4)]
        h = np.hstack([signal[:, None], gen.normal(size=(signal.size, 5))]).astype("<f4")
        h.tofile(os.path.join(d, f"o{m}", "hidden.f32"))
        paths.append(os.path.join(d, f"o{m}", "oracle.json"))
        with open(paths[-1], "w") as f:
            json.dump({"segments": segs, "per_unit": {"k": k},
                       "hidden": {"file": "hidden.f32", "units": signal.size, "dims": 6}}, f)
    sys.argv = ["oracle_imitate.py", os.path.join(d, "out")] + paths
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        oracle_imitate.main()
    rhos = [float(line.split("|")[2]) for line in buf.getvalue().splitlines() if line.startswith("| 0") or
            line.startswith("| 1") or line.startswith("| 2")]
    check(len(rhos) == 3 and min(rhos) > 0.6, "held-out predictions rank the others' mean K: " + buf.getvalue())
    order = json.load(open(os.path.join(d, "out", "model-1", "order.json")))
    check(order["segments"] == segs and len(order["per_unit"]["score"]) == n_seg * per,
          "order.json: the oracle's segments and one score per unit")
    two = json.load(open(os.path.join(d, "out", "model-1", "two_level.json")))["per_unit"]["k"]
    score = order["per_unit"]["score"]
    check(two.count(4) == round(n_seg * per / 3) and two.count(1) == n_seg * per - two.count(4) and
          min(s for s, k in zip(score, two) if k == 4) >= max(s for s, k in zip(score, two) if k == 1),
          "two_level.json: K = 4 on the third with the highest scores, 1 elsewhere")
    check(oracle_imitate.two_level([0.5, 2.0, 0.5, -1.0, 3.0, 0.5]) == [1, 4, 1, 1, 4, 1],
          "two_level: the top third of 6 units by score")
    check(oracle_imitate.two_level([0.5, 2.0, 0.5, -1.0, 3.0, 0.5], oracle_imitate.parse_levels("0,1,0.5")) ==
          [1, 1, 0, 0, 1, 0], "two_level --levels 0,1,0.5: K 1 on the top half (ties by unit order), else 0")
    for bad in ("1,4", "1,x,0.3", "1,4,1.5"):
        try:
            oracle_imitate.parse_levels(bad)
            check(False, "--levels %s is refused" % bad)
        except SystemExit as e:
            check("--levels " + bad in str(e), "--levels %s is refused by name: %s" % (bad, e))
    with open(paths[2]) as f:
        j = json.load(f)
    h = np.fromfile(os.path.join(d, "o2", "hidden.f32"), dtype="<f4")
    h[6 * 7 + 2] = np.nan
    h.tofile(os.path.join(d, "o2", "hidden.f32"))
    try:
        oracle_imitate.main()
        check(False, "a NaN in hidden.f32 is refused")
    except SystemExit as e:
        check("o2/oracle.json: hidden.f32 holds a value that is not finite (unit 7)" in str(e), "... naming it: " + str(e))
    j["segments"] = segs[:-1]
    with open(paths[2], "w") as f:
        json.dump(j, f)
    try:
        oracle_imitate.main()
        check(False, "oracle.json files on other segments are refused")
    except SystemExit as e:
        check("not a streams-mode oracle.json on the segments of" in str(e), "the refusal names the file: " + str(e))
finish()
