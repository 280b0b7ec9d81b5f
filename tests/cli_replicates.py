#!/usr/bin/env python3
"""End to end: `ponder compare` over three independently trained CI models (train.seed 0, 1, 2), with every number
of its statistics over models recomputed here from the per-model, per-window numbers in each model's results.json
by an independent implementation (numpy/scipy): per-model paired differences, their mean, the t-test over models,
Holm, the minimum detectable effect, the FLOP ratios, the oracle's headroom per model, and the hierarchical
bootstrap interval (by its own resampling, so only approximately). Also: checkpoints that are not independent
replicates are refused, single-checkpoint analyses refuse several, and a rerun reuses finished models.
Usage: cli_replicates.py PONDER"""
import json
import math
import os
import sys
import tempfile

import numpy as np
from scipy import stats
from cli_util import check, finish, runner

ponder = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
config = os.path.join(root, "configs", "ci.yaml")



run = runner(ponder)


def windows(m):
    return np.array([w for s in m["seeds"] for w in s["window_bpb"]], dtype=float)


def total(m):
    return np.mean([s["total_flops_per_token"] for s in m["seeds"]])


def holm(p):
    order = np.argsort(p)
    out, running = np.empty(len(p)), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def hierarchical_ci(groups, reps=20000, seed=1):
    rng = np.random.default_rng(seed)
    vals = np.empty(reps)
    for r in range(reps):
        picks = rng.integers(0, len(groups), len(groups))
        vals[r] = np.mean([np.mean(rng.choice(groups[g], len(groups[g]))) for g in picks])
    return np.quantile(vals, [0.025, 0.975])


def frontier_diffs(res, name):
    """The method's per-window bpb minus the uniform Pareto curve interpolated at its total FLOPs."""
    uni = sorted([m for m in res["methods"] if m["kind"] == "uniform"], key=total)
    curve = []
    for m in uni:
        if not curve or np.mean([s["bpb"] for s in m["seeds"]]) < np.mean([s["bpb"] for s in curve[-1]["seeds"]]):
            curve.append(m)
    m = {x["name"]: x for x in res["methods"]}[name]
    f = total(m)
    xs = [total(c) for c in curve]
    if f <= xs[0]:
        ref = windows(curve[0])
    elif f >= xs[-1]:
        ref = windows(curve[-1])
    else:
        i = next(i for i in range(len(xs)) if xs[i] >= f)
        w = (f - xs[i - 1]) / (xs[i] - xs[i - 1])
        ref = (1 - w) * windows(curve[i - 1]) + w * windows(curve[i])
    return windows(m) - ref


def headroom_diffs(res):
    by = {m["name"]: m for m in res["methods"]}
    budget = by["uniform-2"]["seeds"][0]["total_flops_per_token"]
    uniform = [m for m in res["methods"] if m["kind"] == "uniform" and
               m["seeds"][0]["total_flops_per_token"] <= budget * (1 + 1e-9)]
    base = min(uniform, key=lambda m: m["seeds"][0]["bpb"])
    fits = [p for p in res["oracle"]["frontier"] if p["total_flops_per_token"] <= budget * (1 + 1e-9)]
    point = min(fits, key=lambda p: p["bpb"])
    return np.array(base["seeds"][0]["window_bpb"]) - np.array(point["window_bpb"])


with tempfile.TemporaryDirectory() as tmp:
    ckpts = []
    for seed in range(3):
        out = os.path.join(tmp, "m%d" % seed)
        run("train", "--config", config, "--seed", str(seed), "--out", out)
        ckpts.append(os.path.join(out, "checkpoint.ckpt"))
    args = ["compare"] + [a for c in ckpts for a in ("--checkpoint", c)] + ["--out", os.path.join(tmp, "cmp")]
    first = run(*(args + ["--jobs", "2"]))
    check("compare: 3 parts, 2 at a time" in first.stderr and
          all(os.path.getsize(os.path.join(tmp, "cmp", "logs", "model-%d.log" % i)) > 0 for i in (1, 2, 3)),
          "--jobs 2 compares two models at a time, each with its log in logs/")
    top = json.load(open(os.path.join(tmp, "cmp", "results.json")))
    rep = top["replicates"]
    models = [json.load(open(os.path.join(tmp, "cmp", "model-%d" % (i + 1), "results.json"))) for i in range(3)]
    check(top["models"] == 3 and rep["models"] == 3 and rep["checkpoints"] == ckpts, "three models, named")
    check(len({json.dumps(m["methods"][1]["seeds"][0]["window_bpb"]) for m in models}) == 3,
          "the three models give different numbers (they were trained independently)")
    n = 3
    p_values = []
    for row in rep["methods"]:
        per = []
        ratios = []
        for res in models:
            by = {m["name"]: m for m in res["methods"]}
            per.append(np.mean(windows(by[row["method"]]) - windows(by[rep["baseline"]])))
            ratios.append(total(by[row["method"]]) / total(by[rep["baseline"]]))
        name = row["method"]
        check(np.allclose(row["per_model"], per, rtol=1e-9, atol=1e-12), name + ": per-model paired Δ recomputed")
        check(math.isclose(row["delta_bpb"], np.mean(per), rel_tol=1e-9, abs_tol=1e-12), name + ": Δ = mean over models")
        check(math.isclose(row["flops_ratio"], np.mean(ratios), rel_tol=1e-9), name + ": FLOP ratio recomputed")
        kind = {m["name"]: m["kind"] for m in models[0]["methods"]}[name]
        if kind != "uniform":
            fr = [np.mean(frontier_diffs(res, name)) for res in models]
            check(np.allclose(row["frontier_delta"]["per_model"], fr, rtol=1e-9, atol=1e-12) and
                  math.isclose(row["frontier_delta"]["mean"], np.mean(fr), rel_tol=1e-9, abs_tol=1e-12),
                  name + ": distance to the uniform frontier per model recomputed (interpolated at its FLOPs)")
            for res in models:
                own = {m["name"]: m for m in res["methods"]}[name]["frontier_delta"]
                check(math.isclose(own["mean"], np.mean(frontier_diffs(res, name)), rel_tol=1e-9, abs_tol=1e-12) and
                      own["ci"][0] <= own["mean"] <= own["ci"][1], name + ": the model's own frontier_delta recomputed")
        else:
            check(row["frontier_delta"]["mean"] is None and row["frontier_delta"]["ci"] == [None, None],
                  name + ": a uniform schedule has no distance to the frontier (null, not [0, 0])")
        if np.std(per) > 0:
            p = stats.ttest_1samp(per, 0.0).pvalue
            check(math.isclose(row["p_t_over_models"], p, rel_tol=1e-6), name + ": t-test over models recomputed (scipy)")
            p_values.append((row, p))
            sd = np.std(per, ddof=1)
            mde = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / math.sqrt(n)
            check(math.isclose(row["mde_bpb"], mde, rel_tol=1e-6), name + ": minimum detectable effect recomputed")
        lo, hi = hierarchical_ci([windows({m["name"]: m for m in res["methods"]}[name]) -
                                  windows({m["name"]: m for m in res["methods"]}[rep["baseline"]]) for res in models])
        width = max(hi - lo, 1e-12)
        check(abs(row["ci"][0] - lo) <= 0.25 * width and abs(row["ci"][1] - hi) <= 0.25 * width,
              name + ": hierarchical bootstrap interval [%.5f, %.5f] close to numpy's [%.5f, %.5f]" %
              (row["ci"][0], row["ci"][1], lo, hi))
    # Holm within families: the policies, the uniform schedules, the replays (label-reading) apart.
    family = lambda r: 2 if r["method"].startswith("replay:") else 1 if r["method"].startswith("uniform-") else 0
    for f in sorted({family(r) for r, _ in p_values}):
        member = [(r, p) for r, p in p_values if family(r) == f]
        adj = holm(np.array([p for _, p in member]))
        check(all(math.isclose(r["p_holm"], a, rel_tol=1e-6) for (r, _), a in zip(member, adj)),
              "Holm within family %d recomputed (%d methods)" % (f, len(member)))
    h = rep["oracle_headroom"]
    per = [np.mean(headroom_diffs(res)) for res in models]
    check(np.allclose(h["per_model"], per, rtol=1e-9, atol=1e-12), "oracle headroom per model recomputed")
    check(top["oracle_headroom"]["mean"] == h["delta_bpb"] and top["oracle_headroom"]["ci"] == h["ci"],
          "top-level oracle_headroom repeats it")
    report = open(os.path.join(tmp, "cmp", "report.md")).read()
    check("## Over 3 independently trained models" in report and "**Only 3 models**" in report,
          "the report states the number of models and that 3 are too few for a reported result")
    check("Positive control" in report, "the report states the positive control's status")
    check(all(os.path.getsize(os.path.join(tmp, "cmp", f)) > 0 for f in ["forest.png", "pareto.png"]),
          "forest.png (over models) and pareto.png (model 1) drawn")

    again = run(*(args + ["--jobs", "1"]))
    check(again.stderr.count("; reused") == 3 and "parts" not in again.stderr,
          "a rerun (--jobs 1: in this process) reuses the three finished models")
    check(json.load(open(os.path.join(tmp, "cmp", "results.json")))["replicates"] == rep, "and gives the same numbers")

    same = run("compare", "--checkpoint", ckpts[0], "--checkpoint", ckpts[0], "--out", os.path.join(tmp, "x"), ok=False)
    check(same.returncode != 0 and "not independent replicates" in same.stderr, "the same model twice is refused")
    other = os.path.join(tmp, "lr")
    run("train", "--config", config, "--seed", "7", "--set", "train.lr=0.001", "--out", other)
    diff = run("compare", "--checkpoint", ckpts[0], "--checkpoint", os.path.join(other, "checkpoint.ckpt"),
               "--out", os.path.join(tmp, "y"), ok=False)
    check(diff.returncode != 0 and "not replicates of one experiment" in diff.stderr,
          "models trained from configs that differ beyond train.seed are refused")
    orc = run("oracle", "--checkpoint", ckpts[0], "--checkpoint", ckpts[1], ok=False)
    check(orc.returncode != 0 and "takes one checkpoint" in orc.stderr, "oracle refuses several checkpoints")

finish()
