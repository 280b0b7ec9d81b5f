#!/usr/bin/env python3
"""End to end: `ponder oracle`, `overhead`, `convergence` and `ablate` on a checkpoint of the CI config, and
a `ponder compare` killed midway that resumes from its journal.

Trains configs/ci.yaml into a temporary folder, runs each analysis with tiny settings and checks that
it exits 0 and that its JSON holds the expected keys and numbers that agree with each other.
Usage: cli_analyses.py PONDER"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from cli_util import check, finish

ponder = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
config = os.path.join(root, "configs", "ci.yaml")



def ponder_run(*args):
    run = subprocess.run([ponder, *args], capture_output=True, text=True, timeout=600)
    check(run.returncode == 0, "ponder " + args[0] + " exits 0: " + run.stderr[-2000:])
    return run


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        check(False, path + " parses: " + str(e))
        return None


def same(x, y):
    """Two results.json values equal but for timings, which differ between runs."""
    drop = ("seconds", "seconds_per_token", "train_seconds", "command")
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(k in drop or same(x[k], y[k]) for k in x)
    if isinstance(x, list):
        return isinstance(y, list) and len(x) == len(y) and all(same(u, v) for u, v in zip(x, y))
    return x == y


def rho_ok(v):
    return v is None or (-1 - 1e-12 <= v <= 1 + 1e-12)


with tempfile.TemporaryDirectory() as tmp:
    ponder_run("train", "--config", config, "--out", tmp)
    ckpt = os.path.join(tmp, "checkpoint.ckpt")
    check(os.path.exists(ckpt), "checkpoint written")

    # ---- oracle
    out = os.path.join(tmp, "oracle")
    # no --config: the checkpoint's own; --set overrides one of its keys
    run = ponder_run("oracle", "--checkpoint", ckpt, "--seeds", "1", "--windows", "2", "--out", out,
                     "--set", "compare.step_options=[0,1]")
    check("upper bound" in run.stdout, "oracle output says it is an upper bound")
    check("(its config) with compare.step_options=[0,1]" in run.stderr,
          "without --config the checkpoint's own config is read, and --set is applied to it")
    j = load(os.path.join(out, "oracle.json"))
    if j:
        for key in ["commit", "k_options", "k_count", "k_share", "mean_k", "spearman", "frontier", "per_unit"]:
            check(key in j, "oracle.json has " + key)
        check(j["k_options"] == [0, 1], "the --set step options were used")
        check(math.isclose(sum(j["k_share"]), 1.0, abs_tol=1e-9), "oracle K shares sum to 1")
        check(sum(j["k_count"]) == j["units"] == len(j["per_unit"]["k"]), "oracle unit counts agree")
        mean_k = sum(k * c for k, c in zip(j["k_options"], j["k_count"])) / j["units"]
        check(math.isclose(j["mean_k"], mean_k, rel_tol=1e-9), "oracle mean K recomputed from the counts")
        for name in ["loss", "entropy", "ttt-loss", "gradnorm"]:
            c = j["spearman"].get(name, {})
            check(rho_ok(c.get("rho", 2)), "Spearman rho of " + name + " in [-1, 1] or null")
        check(len(j["frontier"]) > 0 and all("flops_per_token" in p for p in j["frontier"]), "oracle frontier")
        check(len(j["per_unit"]["first_token"]) == j["units"], "oracle.json lists each unit's first token")
        check("windows of" in j["scored"], "oracle.json says what was scored: " + j["scored"])
        # scripts/oracle_agreement.py: an oracle agrees with itself (kappa 1); a shorter read is refused as misaligned
        agreement = os.path.join(root, "scripts", "oracle_agreement.py")
        path = os.path.join(out, "oracle.json")
        same_run = subprocess.run([sys.executable, agreement, "--shuffles", "2", path, path], capture_output=True,
                                  text=True, timeout=120)
        check(same_run.returncode == 0 and "| 0–1 | 1.000 | +1.0000 |" in same_run.stdout,
              "oracle_agreement.py: an oracle agrees with itself: " + same_run.stdout[-600:] + same_run.stderr[-600:])
        short = dict(j, per_unit=dict(j["per_unit"], k=j["per_unit"]["k"][1:],
                                      first_token=j["per_unit"]["first_token"][1:]))
        short_path = os.path.join(tmp, "short_oracle.json")
        with open(short_path, "w") as f:
            json.dump(short, f)
        bad = subprocess.run([sys.executable, agreement, path, short_path], capture_output=True, text=True, timeout=120)
        check(bad.returncode != 0 and "read other units" in bad.stderr,
              "oracle_agreement.py refuses oracles read on other units: " + bad.stderr[-600:])

    # ---- the oracle in streams mode with two seeds (which read the same units: each counted once) and the hidden
    # states a policy could read, which scripts/oracle_features.py fits the oracle's K on
    out = os.path.join(tmp, "oracle_hidden")
    ponder_run("oracle", "--checkpoint", ckpt, "--seeds", "2", "--out", out, "--hidden-k", "1", "--set",
               "compare.streams=true", "--set", "streams.max_segments=2", "--set", "streams.max_adapt=64", "--set",
               "streams.max_scored=256", "--set", "compare.frontier_mus=[]", "--set", "compare.oracle_bisect=0")
    j = load(os.path.join(out, "oracle.json"))
    if j:
        units = sum((len(s["tokens"]) - 1 + s["unit_tokens"] - 1) // s["unit_tokens"] for s in j["segments"])
        check(len(j["per_unit"]["k"]) == units == j["units"] == sum(j["k_count"]),
              "two seeds in streams mode: each unit of the segments counted once (%d units, per_unit %d, k_count %d)"
              % (units, len(j["per_unit"]["k"]), sum(j["k_count"])))
        h = j.get("hidden", {})
        size = os.path.getsize(os.path.join(out, "hidden.f32")) if os.path.exists(os.path.join(out, "hidden.f32")) else -1
        check(h.get("units") == units and h.get("reference") == "uniform-1" and h.get("dims", 0) > 0 and
              size == 4 * units * h.get("dims", 0), "hidden.f32 holds units x dims float32 values: %s, %d bytes" % (h, size))
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        fit = subprocess.run([python, os.path.join(root, "scripts", "oracle_features.py"), os.path.join(out, "oracle.json")],
                             capture_output=True, text=True, timeout=600)
        check(fit.returncode == 0 and "| hidden state |" in fit.stdout and "read under uniform-1" in fit.stdout,
              "oracle_features.py fits the oracle's K on the hidden states: " + fit.stdout[-800:] + fit.stderr[-800:])
        # replay: the model's own oracle choices read back reproduce the oracle's bits/byte and inner FLOPs exactly; the
        # same file twice (the nearest step option to a mean of equal K is that K) too; other segments are refused
        oracle_json = os.path.join(out, "oracle.json")
        rep = os.path.join(tmp, "replay")
        streams = ["--set", "compare.streams=true", "--set", "streams.max_segments=2", "--set", "streams.max_adapt=64",
                   "--set", "streams.max_scored=256", "--set", "compare.frontier_mus=[]", "--set", "compare.oracle_bisect=0"]
        ponder_run("compare", "--checkpoint", ckpt, "--seeds", "1", "--out", rep, *streams, "--set", "compare.budget_k=1",
                   "--set", "compare.methods=[uniform-1,oracle,'replay:%s','replay:%s+%s']" % (oracle_json, oracle_json, oracle_json))
        res = load(os.path.join(rep, "results.json"))
        if res:
            by = {m["name"]: m for m in res["methods"]}
            o, r1, r2 = (by["oracle"]["seeds"][0], by["replay:" + oracle_json]["seeds"][0],
                         by["replay:%s+%s" % (oracle_json, oracle_json)]["seeds"][0])
            check(o["bpb"] == r1["bpb"] == r2["bpb"] and o["inner_flops_per_token"] == r1["inner_flops_per_token"],
                  "replaying the oracle's own choices reproduces it: bpb %.6f, %.6f, %.6f" % (o["bpb"], r1["bpb"], r2["bpb"]))
            check(by["replay:" + oracle_json]["kind"] == "replay" and "not a policy" in by["replay:" + oracle_json]["detail"],
                  "a replay says it is a diagnostic: " + by["replay:" + oracle_json]["detail"])
            check("frontier_delta" in by["oracle"] and "frontier_delta" in by["replay:" + oracle_json],
                  "results.json gives the oracle's and the replay's distance to the frontier")
            with open(os.path.join(rep, "report.md")) as f:
                md = f.read()
            check("No adaptive method was compared" in md and "Best adaptive method" not in md,
                  "a replay never stands for an adaptive method in the report's answer")
        other = subprocess.run([ponder, "compare", "--checkpoint", ckpt, "--seeds", "1", "--out", os.path.join(tmp, "rep2"),
                                *streams, "--set", "streams.max_scored=128",
                                "--set", "compare.methods=[uniform-1,'replay:%s']" % oracle_json],
                               capture_output=True, text=True, timeout=600)
        check(other.returncode != 0 and "made on other segments" in other.stderr,
              "a replay on other segments is refused: " + other.stderr[-400:])
        journal = os.path.join(tmp, "rep2", "journal.jsonl")
        cells = open(journal).read().count('"key"') if os.path.exists(journal) else 0
        check(cells == 0, "... before anything is run: %d records journaled (uniform-1's cell comes first)" % cells)
    no_streams = subprocess.run([ponder, "oracle", "--checkpoint", ckpt, "--seeds", "1", "--windows", "2", "--out", out,
                                 "--hidden-k", "1"], capture_output=True, text=True, timeout=600)
    check(no_streams.returncode != 0 and "--hidden-k reads the held-out streams" in no_streams.stderr,
          "--hidden-k without streams mode is refused by name: " + no_streams.stderr[-300:])

    # ---- a comparison too small for its paired tests is refused before any cell is computed
    out = os.path.join(tmp, "one_window")
    one = subprocess.run([ponder, "compare", "--checkpoint", ckpt, "--seeds", "1", "--windows", "1", "--out", out],
                         capture_output=True, text=True, timeout=600)
    check(one.returncode != 0 and "need at least 2 windows" in one.stderr and
          not os.path.exists(os.path.join(out, "journal.jsonl")),
          "compare --seeds 1 --windows 1 is refused up front, with no cell computed: " + one.stderr[-300:])

    # ---- streams cut into segments: the regime checks and the comparison read the same segments (the --set ones),
    # and the comparison pools each stream's segments, so its statistics still count a stream once
    out = os.path.join(tmp, "segments")
    ponder_run("compare", "--checkpoint", ckpt, "--seeds", "1", "--out", out, "--set", "compare.streams=true",
               "--set", "streams.max_segments=3", "--set", "streams.max_adapt=64", "--set", "streams.max_scored=256",
               "--set", "compare.methods=[uniform-1,uniform-2]")
    seg = load(os.path.join(out, "results.json"))
    if seg:
        docs, reg = len(seg["streams"]), seg["regime"]
        u1 = next(m for m in seg["methods"] if m["name"] == "uniform-1")["seeds"][0]
        ru1 = next(u for u in reg["uniform"] if u["schedule"] == "uniform-1")
        check(reg["streams"] > docs > 1 and reg["streams"] <= 3 * docs, "up to 3 segments per held-out stream (%d over %d)"
              % (reg["streams"], docs))
        check(len(u1["window_bpb"]) == docs and u1["scored_tokens"] == seg["eval_tokens"] > 3 * 256 * docs // 2,
              "one bits/byte per stream, every segment's scored tokens counted")
        # Both score the same segments in float32 but batch them differently, so their sums agree to float32
        # rounding (measured: 1e-9 relative), not bit for bit; a different set of segments moves bits/byte by far more.
        check(math.isclose(u1["bpb"], ru1["bpb"], rel_tol=1e-7) and
              math.isclose(seg["scored_fraction"], reg["scored_fraction"], rel_tol=1e-12),
              "compare and the regime checks score the same segments: uniform-1 %.6f vs %.6f" % (u1["bpb"], ru1["bpb"]))

    # ---- method names are parsed when the config is read: a bad one is refused before anything runs, by name
    for bad, says in [("every-2/0", "N must be >= 1"), ("fixed-1/2", "now every-K/N"), ("uniform-4294967296", "whole"),
                      ("learned-reinforce[gama=0]", "unknown override 'gama'"), ("bogus", "unknown method 'bogus'")]:
        out = os.path.join(tmp, "bad_method")
        run = subprocess.run([ponder, "compare", "--checkpoint", ckpt, "--seeds", "1", "--windows", "2", "--out", out,
                              "--set", "compare.methods=[uniform-1,'" + bad + "']"], capture_output=True, text=True,
                             timeout=600)
        check(run.returncode != 0 and "compare.methods" in run.stderr and says in run.stderr and
              not os.path.exists(os.path.join(out, "journal.jsonl")),
              "compare.methods with " + bad + " is refused up front: " + run.stderr[-300:])

    # ---- calibration on total FLOPs: a heuristic's own overhead comes out of its inner budget
    out = os.path.join(tmp, "calib_total")
    ponder_run("compare", "--checkpoint", ckpt, "--seeds", "1", "--windows", "2", "--out", out,
               "--set", "compare.calibrate_on=total", "--set", "compare.methods=[uniform-2,gradnorm]")
    j = load(os.path.join(out, "results.json"))
    if j:
        g = next(m for m in j["methods"] if m["name"] == "gradnorm")
        # "vs target X" when calibrated, "its target of X" when the overhead leaves less than K = low costs (carry
        # mode's two stages probe a unit at Before and at After where the low level is 0)
        target = float(re.search(r"(?:vs target|its target of) (-?[0-9.e+]+)", g["detail"]).group(1))
        overhead = g["seeds"][0]["overhead_flops_per_token"]
        check(overhead > 0 and math.isclose(target, j["budget_inner_flops_per_token"] - overhead, rel_tol=0.02),
              "calibrate_on: total targets uniform-2's inner FLOPs minus gradnorm's overhead (%.4g = %.4g - %.4g)" %
              (target, j["budget_inner_flops_per_token"], overhead))
        check(j["scored_windows"] == 2 and j["split_windows"] > 100 and
              math.isclose(j["scored_fraction"], 2 / j["split_windows"], rel_tol=1e-12),
              "sampled windows: results say what share of the split's windows was scored")

    # ---- a heuristic whose overhead leaves less than K = low costs cannot meet the budget: it says so and runs at K = low
    out = os.path.join(tmp, "calib_under")
    ponder_run("compare", "--checkpoint", ckpt, "--seeds", "1", "--windows", "2", "--out", out, "--set",
               "compare.low=2", "--set", "compare.methods=[uniform-2,gradnorm]")
    j = load(os.path.join(out, "results.json"))
    if j:
        g = next(m for m in j["methods"] if m["name"] == "gradnorm")
        check("cannot meet the budget" in g["detail"] and g["seeds"][0]["mean_k"] == 2 and
              g["seeds"][0]["total_flops_per_token"] > j["methods"][0]["seeds"][0]["total_flops_per_token"],
              "an unmeetable budget is stated, and the method is charged what it spends: " + g["detail"])
        check("is a uniform schedule plus the cost of its score" in open(os.path.join(out, "report.md")).read(),
              "the answer says the best method could not meet the budget, so it is no allocation")

    # ---- windows_per_seed 0 scores every window of the split (long windows and no oracle keep it small here)
    out = os.path.join(tmp, "all_windows")
    ponder_run("compare", "--checkpoint", ckpt, "--seeds", "1", "--out", out, "--set", "compare.windows_per_seed=0",
               "--set", "compare.seq_len=2048", "--set", "compare.frontier_mus=[]",
               "--set", "compare.methods=[uniform-1,uniform-2]")
    j = load(os.path.join(out, "results.json"))
    if j:
        check(j["scored_fraction"] == 1.0 and j["scored_windows"] == j["split_windows"] ==
              len(j["methods"][0]["seeds"][0]["window_bpb"]) > 1, "every window of the split scored, once each")

    # ---- overhead
    out = os.path.join(tmp, "overhead")
    run = ponder_run("overhead", "--checkpoint", ckpt, "--config", config, "--seeds", "1", "--windows", "2",
                     "--out", out)
    j = load(os.path.join(out, "overhead.json"))
    if j:
        for key in ["commit", "references", "methods"]:
            check(key in j, "overhead.json has " + key)
        by = {m["name"]: m for m in j["methods"]}
        for name in ["entropy", "loss", "ttt-loss", "gradnorm", j["references"]["high"], j["references"]["budget"]]:
            check(name in by, "overhead ran " + name)
        for m in j["methods"]:
            for ref, v in m["vs"].items():
                saved = by[ref]["inner_flops_per_token"] - m["inner_flops_per_token"]
                net = saved - m["overhead_flops_per_token"]
                check(math.isclose(v["saved_inner_flops_per_token"], saved, rel_tol=1e-9, abs_tol=1e-6) and
                      math.isclose(v["net_saving_flops_per_token"], net, rel_tol=1e-9, abs_tol=1e-6) and
                      math.isclose(v["net_saving_pct_of_base"], 100 * net / m["base_flops_per_token"], rel_tol=1e-9,
                                   abs_tol=1e-9), m["name"] + " vs " + ref + ": net = saved - overhead")
        check(all(by[n]["overhead_flops_per_token"] == 0 for n in by if n.startswith("uniform-")),
              "uniform schedules have no policy overhead")
        check(all(by[n]["overhead_flops_per_token"] > 0 for n in ["entropy", "loss", "ttt-loss", "gradnorm"]),
              "heuristics' overhead is counted")

    # ---- convergence
    out = os.path.join(tmp, "convergence")
    run = ponder_run("convergence", "--checkpoint", ckpt, "--units", "4", "--max-k", "16", "--out", out)
    j = load(os.path.join(out, "convergence.json"))
    if j:
        for key in ["commit", "units", "max_k", "tolerance", "step", "row_weights", "layers"]:
            check(key in j, "convergence.json has " + key)
        check(len(j["layers"]) == 2, "convergence covers both TTT layers of the CI model")
        for layer in j["layers"]:
            name = "layer %d" % layer["layer"]
            kb = layer["k_below_1pct"]
            check(layer["problems"] + layer["already_optimal"] == 4 * j["heads"], name + ": units x heads problems")
            check(len(kb["per_problem"]) == layer["problems"], name + ": one K per problem")
            check(all(k == -1 or 0 <= k <= 16 for k in kb["per_problem"]), name + ": K within max-k or -1")
            gap = layer["mean_gap"]["gap"]
            check(layer["mean_gap"]["k"] == [0, 1, 2, 4, 8, 16], name + ": gap curve at K = 0, 1, 2, 4, 8, 16")
            check(math.isclose(gap[0], 1.0, rel_tol=1e-9), name + ": gap(0) = 1")
            check(all(gap[i + 1] <= gap[i] + 1e-9 for i in range(len(gap) - 1)), name + ": mean gap never rises")
            check(all(g >= -1e-6 for g in gap), name + ": gap non-negative")

    # ---- ablate (two groups, few iterations: the plumbing, tables and statistics, not the learning)
    out = os.path.join(tmp, "ablate")
    run = ponder_run("ablate", "--checkpoint", ckpt, "--config", config, "--groups", "gamma,unit", "--iterations", "3",
                     "--seeds", "2", "--windows", "3", "--out", out)
    j = load(os.path.join(out, "ablation.json"))
    if j:
        check([g["group"] for g in j["groups"]] == ["gamma", "unit"], "ablation has the two requested groups")
        check(len(j["groups"][0]["cells"]) == 4, "gamma group has the four settings of docs/method.md §5.5")
        res = load(os.path.join(out, "results.json"))
        by = {m["name"]: m for m in res["methods"]} if res else {}
        base = by.get(j["baseline"])
        for g in j["groups"]:
            check(os.path.getsize(os.path.join(out, "ablation_%s.png" % g["group"])) > 0, g["group"] + " plot written")
            for c in g["cells"]:
                m = by.get(c["method"])
                check(m is not None and len(m.get("training_curve", [])) == 3, c["method"] + " trained 3 iterations")
                if m and base:
                    a = [w for s in m["seeds"] for w in s["window_bpb"]]
                    b = [w for s in base["seeds"] for w in s["window_bpb"]]
                    d = sum(x - y for x, y in zip(a, b)) / len(a)
                    check(math.isclose(c["delta_bpb"], d, rel_tol=1e-9, abs_tol=1e-12), c["label"] + ": delta recomputed")
                    check(c["delta_ci95"][0] <= c["delta_bpb"] + 1e-12 <= c["delta_ci95"][1] + 2e-12,
                          c["label"] + ": CI contains the point estimate")
        unit = j["groups"][1]["cells"]
        check(by[unit[1]["method"]]["unit_tokens"] == 4 * by[unit[0]["method"]]["unit_tokens"], "chunk = 4 mini-batches")
    check(os.path.exists(os.path.join(out, "ablation.md")) and "## Discount" in open(os.path.join(out, "ablation.md")).read(),
          "ablation.md has the gamma table")

    # ---- compare resumes from its journal after a kill, and gives the uninterrupted run's results
    resume_cfg = os.path.join(tmp, "resume.yaml")
    with open(config) as f:
        text = f.read()
    with open(resume_cfg, "w") as f:
        f.write(text.replace("compare:\n", "compare:\n  methods: [oracle, uniform-1, uniform-2, entropy, "
                             "learned-reinforce, learned-ppo-pid, pondernet]\n", 1))
    args = ["compare", "--checkpoint", ckpt, "--config", resume_cfg, "--seeds", "4", "--windows", "3"]
    whole, cut = os.path.join(tmp, "whole"), os.path.join(tmp, "cut")
    ponder_run(*args, "--out", whole)
    check(not os.path.exists(os.path.join(whole, "journal.jsonl")), "a finished comparison deletes its journal")
    w = load(os.path.join(whole, "results.json"))
    if w:  # the sweep [0, 0.1, 1] is bisected toward uniform-2's total FLOPs, and the headroom uses the closest point
        hr, sweep = w["oracle"]["headroom"], [0.0, 0.1, 1.0]
        pts = w["oracle"]["frontier"]
        fits = [p["total_flops_per_token"] for p in pts if p["total_flops_per_token"] <= hr["budget_total_flops_per_token"]]
        swept = [p["total_flops_per_token"] for p in pts if p["mu"] in sweep and p["total_flops_per_token"]
                 <= hr["budget_total_flops_per_token"]]
        check(sorted(p["mu"] for p in pts) == [p["mu"] for p in pts], "frontier points are sorted by mu")
        check(len(pts) > len(sweep) and all(pts[i]["mu"] in sweep or 0 < pts[i]["mu"] < 0.1 or 0.1 < pts[i]["mu"] < 1
                                            for i in range(len(pts))),
              "the oracle frontier has bisected points between the sweep's: " + str([p["mu"] for p in pts]))
        check(fits and max(fits) > max(swept) and 0 < hr["fraction_of_budget"] <= 1 + 1e-9,
              "the bisected points bring the oracle closer to the budget (%s of it)" % hr["fraction_of_budget"])
    journal = os.path.join(cut, "journal.jsonl")
    proc = subprocess.Popen([ponder, *args, "--out", cut], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # SIGKILL (no chance to clean up) once the header, the 7 methods' records and 6 method x seed cells are
    # durable: 28 cells (7 methods x 4 seeds) are then still to run.
    lines, target = 0, 1 + 7 + 6
    while proc.poll() is None:
        if os.path.exists(journal):
            with open(journal) as f:  # whole lines only: a record being written is not durable yet
                lines = sum(1 for line in f if line.endswith("\n"))
            if lines >= target:
                proc.kill()
                break
        time.sleep(0.002)
    proc.wait()
    check(lines >= target and proc.returncode != 0, "the comparison was killed midway (%d journal lines)" % lines)
    with open(journal, "a") as f:
        f.write('{"key": "run entropy seed 3", "rec')  # the torn line a kill during a write leaves
    other = os.path.join(tmp, "other")  # the same journal under another command line is started anew
    shutil.copytree(cut, other)
    run = ponder_run(*args[:-1], "2", "--out", other)
    check("resuming" not in run.stderr, "a different command line does not reuse a journal")
    run = ponder_run(*args, "--out", cut)
    reused = re.search(re.escape("resuming from " + journal) + r": (\d+) finished cells", run.stderr)
    check(reused is not None and target - 1 <= int(reused.group(1)) < 1 + 7 + 28,
          "the rerun says it resumes with the journaled cells: " + run.stderr[-300:])
    check(not os.path.exists(journal), "the resumed comparison deletes its journal when done")
    a, b = load(os.path.join(whole, "results.json")), load(os.path.join(cut, "results.json"))
    if a and b:
        for key in ["methods", "comparisons", "oracle", "policy_oracle_spearman", "success_criteria"]:
            check(same(a[key], b[key]), "resumed run equals the uninterrupted one: " + key)

    # ---- killed during the regime checks (after every cell): the rerun reuses the cells and the finished passes
    late = os.path.join(tmp, "late")
    journal = os.path.join(late, "journal.jsonl")
    proc = subprocess.Popen([ponder, *args, "--out", late], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def journaled(key):  # a whole line holding the record (a line still being written does not parse)
        for line in open(journal).read().split("\n")[:-1]:
            try:
                if json.loads(line).get("key") == key:
                    return True
            except ValueError:
                pass
        return False

    in_regime = False
    while proc.poll() is None and not in_regime:
        if os.path.exists(journal):
            in_regime = journaled("regime/uniform-0")
            if in_regime:
                proc.kill()
        time.sleep(0.002)
    proc.wait()
    check(in_regime and proc.returncode != 0, "the comparison was killed during the regime's passes")
    run = ponder_run(*args, "--out", late)
    check("regime: uniform-0 reused from " + journal in run.stderr,
          "the rerun reads the finished regime pass from the journal: " + run.stderr[-300:])
    check(not os.path.exists(journal), "the resumed comparison deletes its journal when done")
    a, c = load(os.path.join(whole, "results.json")), load(os.path.join(late, "results.json"))
    if a and c:
        for key in ["methods", "regime", "ngram_bpb", "loss_by_position", "carry_token_factor", "eval_tokens"]:
            check(same(a[key], c[key]), "a run resumed in the regime equals the uninterrupted one: " + key)

finish()
