#!/usr/bin/env python3
"""End to end: `ponder quick` runs the positive control first (configs/ci_planted.yaml: configs/planted.yaml at CI size,
data/planted.h) and states
its verdict at the top of its report; the control passes in this build, and its verdict is recomputed here from
the per-stream numbers in the control's results.json. Usage: cli_control.py PONDER"""
import difflib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from cli_util import check, finish

ponder = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))



def check_verdict(pc, results):
    """Recompute the control's verdict from its results.json (experiments/study/control.h)."""
    by = {m["name"]: m for m in results["methods"]}
    budget = by["uniform-2"]["seeds"][0]["total_flops_per_token"]
    uniform = [m for m in results["methods"] if m["kind"] == "uniform" and
               m["seeds"][0]["total_flops_per_token"] <= budget * (1 + 1e-9)]
    base = min(uniform, key=lambda m: m["seeds"][0]["bpb"])
    check(pc["baseline"] == base["name"], "the baseline is the best uniform within uniform-2's FLOPs: " + base["name"])
    fits = [p for p in results["oracle"]["frontier"] if p["total_flops_per_token"] <= budget * (1 + 1e-9)]
    point = min(fits, key=lambda p: p["bpb"])
    h = pc["oracle_headroom"]
    check(h["mu"] == point["mu"] and h["total_flops_per_token"] <= budget * (1 + 1e-9),
          "the headroom is taken at the best frontier point within the budget (mu %g)" % point["mu"])
    check(math.isclose(h["bpb"], base["seeds"][0]["bpb"] - point["bpb"], rel_tol=1e-9),
          "headroom = baseline bpb - frontier bpb: %+.4f" % h["bpb"])
    diffs = [b - o for b, o in zip(base["seeds"][0]["window_bpb"], point["window_bpb"])]
    check(h["n_paired"] == len(diffs) == len(results["streams"]), "paired over every scored stream (%d)" % len(diffs))
    check(h["ci95"][0] <= statistics.mean(diffs) <= h["ci95"][1], "the CI holds the mean paired difference")
    check(pc["headroom"] == h["bpb"] and pc["ci"] == h["ci95"], "the short fields headroom and ci repeat them")
    check(pc["min_headroom"] == 0.01 and h["ci95"][0] > pc["min_headroom"],
          "the headroom's 95%% CI lies above the pass mark of 0.01 bits/byte: [%+.4f, %+.4f]" % tuple(h["ci95"]))
    k = pc["oracle_mean_k"]
    check(k["text_units"] > k["noise_units"] and k["n_text"] > 0 and k["n_noise"] > 0,
          "the oracle spends more steps on text units (%.2f) than on noise units (%.2f)" % (k["text_units"],
                                                                                          k["noise_units"]))
    check(pc["passed"] is True and pc["failed"] == [], "the control passed: " + "; ".join(pc["failed"]))
    for m in pc["methods"]:
        a = [w for s in by[m["method"]]["seeds"] for w in s["window_bpb"]]
        b = [w for s in base["seeds"] for w in s["window_bpb"]]
        check(math.isclose(m["delta_bpb"], statistics.mean(x - y for x, y in zip(a, b)), rel_tol=1e-9, abs_tol=1e-12),
              m["method"] + ": paired delta vs the baseline recomputed")
        check(math.isclose(m["headroom_recovered"], -m["delta_bpb"] / h["bpb"], rel_tol=1e-9),
              m["method"] + ": share of the headroom recovered recomputed")


def config_lines(name):
    path = os.path.join(root, "configs", name)
    return [l for l in open(path).read().splitlines() if l.strip() and not l.lstrip().startswith("#")]


# configs/ci_planted.yaml is planted.yaml at CI size: it may differ in the training length, the seeds and the methods
# alone, so a change to the control that CI checks is a change to the control the main job runs.
changed = [l[2:].split(":")[0].strip() for l in difflib.ndiff(config_lines("planted.yaml"), config_lines("ci_planted.yaml"))
           if l[:1] in "+-"]
check(sorted(set(changed)) == ["methods", "seeds", "steps"],
      "ci_planted.yaml differs from planted.yaml only in steps, seeds and methods: %s" % sorted(set(changed)))

with tempfile.TemporaryDirectory() as out:
    run = subprocess.run([ponder, "quick", "--config", os.path.join(root, "configs", "ci.yaml"), "--out", out,
                          "--control", os.path.join(root, "configs", "ci_planted.yaml")],
                         capture_output=True, text=True, timeout=1500)
    check(run.returncode == 0, "ponder quick with the control exits 0: " + run.stderr[-2000:])
    control_dir = os.path.join(out, "control")
    results = json.load(open(os.path.join(control_dir, "results.json")))
    pc = results["positive_control"]
    check(results["data"] == "planted", "the control ran on the planted corpus")
    check(results["scored_fraction"] == 1.0, "the control scores the whole test split")
    check_verdict(pc, results)
    control_report = open(os.path.join(control_dir, "report.md")).read()
    check("**Passed in this build**" in control_report and "%+.4f" % pc["oracle_headroom"]["bpb"] in control_report,
          "the control's report states the verdict and the headroom")
    quick = json.load(open(os.path.join(out, "results.json")))
    check(quick["positive_control"]["ran"] is True and quick["positive_control"]["passed"] == pc["passed"],
          "quick's results.json carries the control's verdict")
    report = open(os.path.join(out, "report.md")).read()
    head = report[:report.find("## Is the question live here?")]
    check("## Positive control" in head and "**Passed in this build**" in head,
          "quick's report states the control's verdict before the comparison")
    # A finished control made by this clean build from the same config is reused, not rerun.
    if "dirty" not in results["commit"] and results["commit"] != "unknown":
        again = subprocess.run([ponder, "control", "--config", os.path.join(root, "configs", "ci_planted.yaml"),
                                "--out", control_dir], capture_output=True, text=True, timeout=600)
        check(again.returncode == 0 and "(reused:" in again.stderr, "a second `ponder control` reuses the verdict")
    else:
        print("skip reuse check: the build is not a clean commit (%s)" % results["commit"])

finish()
