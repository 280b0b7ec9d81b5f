#!/usr/bin/env python3
"""End to end: `ponder quick` on the CI config writes a report whose numbers come from the run.

Recomputes figures from the raw per-window arrays in results.json and checks that the report states
them, that every method ran every seed, and that the figures exist. Usage: cli_quick.py PONDER"""
import json
import math
import os
import subprocess
import sys
import tempfile
from cli_util import check, finish

ponder = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def windows_of(m):
    return [w for s in m["seeds"] for w in s["window_bpb"]]



QUICK = ["quick", "--config", os.path.join(root, "configs", "ci.yaml"), "--control", "none", "--set", "train.seeds=2"]


def quick(out, *extra, threads="2"):
    return subprocess.run([ponder, "--threads", threads, *QUICK, "--out", out, *extra], capture_output=True, text=True,
                          timeout=900)


def numbers(results):
    """What the methods measured, per model 1's seeds and over models: equal runs give equal numbers."""
    seeds = [[{k: v for k, v in s.items() if k != "seconds_per_token"} for s in m["seeds"]] for m in results["methods"]]
    return ([m["name"] for m in results["methods"]], seeds, results["replicates"]["methods"],
            results["carry_token_factor"], results["ngram_bpb"])


with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as serial:
    # The parts (each model's training and comparison, the attention baseline) run two at a time, one thread each.
    run = quick(out, "--jobs", "2")
    check(run.returncode == 0, "ponder quick exits 0: " + run.stderr[-2000:])
    check("quick: 5 parts, 2 at a time with 1 thread(s) each" in run.stderr and "ETA" in run.stderr,
          "quick says how it splits the work and gives an ETA")
    check(all(os.path.getsize(os.path.join(out, "logs", p + ".log")) > 0 for p in
              ["attention", "model-1-train", "model-1-compare", "model-2-train", "model-2-compare"]),
          "each part's output is in logs/<part>.log")
    # The same run one part after another in one process, on one thread: the same numbers, bit for bit. Under the
    # sanitizers (PONDER_SANITIZED=1, scripts/sanitize.sh) this second whole run is left to the release suite: what it
    # checks is determinism, and the first run has already taken every code path it would.
    if os.environ.get("PONDER_SANITIZED") == "1":
        print("skip the --jobs 1 rerun under the sanitizers (the release suite runs it)")
    else:
        one = quick(serial, "--jobs", "1", threads="1")
        check(one.returncode == 0 and "parts" not in one.stderr and not os.path.exists(os.path.join(serial, "logs")),
              "--jobs 1 runs the parts in this process: " + one.stderr[-1500:])
        check(numbers(json.load(open(os.path.join(out, "results.json")))) ==
              numbers(json.load(open(os.path.join(serial, "results.json")))),
              "two parts at a time on one thread each = one after another on one thread (every number, bit for bit)")
    # A rerun reuses every finished part: no training, no comparison, the same numbers.
    stamps = [os.path.getmtime(os.path.join(out, d, "checkpoint.ckpt")) for d in ["", "model-2", "attention"]]
    first = json.load(open(os.path.join(out, "results.json")))
    again = quick(out, "--jobs", "2")
    check(again.returncode == 0 and again.stderr.count("is finished; reused") >= 2 and
          stamps == [os.path.getmtime(os.path.join(out, d, "checkpoint.ckpt")) for d in ["", "model-2", "attention"]],
          "a rerun reuses the trained models and the finished comparisons: " + again.stderr[-1500:])
    check(numbers(json.load(open(os.path.join(out, "results.json")))) == numbers(first), "the rerun reports the same numbers")
    check(json.load(open(os.path.join(out, "results.json")))["training"]["reused_checkpoint"] is True and
          first["training"]["reused_checkpoint"] is False, "results say whether the checkpoint was reused")
    for f in ["report.md", "results.json", "pareto.png", "forest.png", "k_hist.png", "tokens.html", "checkpoint.ckpt",
              "model-2/pareto.png", "training.png"]:
        check(os.path.getsize(os.path.join(out, f)) > 0 if os.path.exists(os.path.join(out, f)) else False,
              f + " written")
    results = json.load(open(os.path.join(out, "results.json")))
    report = open(os.path.join(out, "report.md")).read()
    check(results["commit"] != "" and len(results["data_sha256"]) == 64, "results say what produced them")
    check(results.get("command", "").startswith("ponder --threads 2 quick --config "), "results record the command line")
    # cli_control.py runs the control itself; here it is skipped, and both files must say so
    check(results["positive_control"] == {"ran": False} and list(results)[0] == "positive_control",
          "results.json says first that the positive control was not run")
    check(report.startswith("# ponder quick\n\n") and "**Positive control: not run** (--control none)" in report[:400],
          "report.md says at the top that the positive control was not run")
    check(not os.path.exists(os.path.join(out, "journal.jsonl")), "the finished comparison deleted its journal")
    tokens = open(os.path.join(out, "tokens.html"), encoding="utf-8").read()
    check(tokens.count("<h2><code>") == 2 and "<code>oracle</code>" in tokens and " bits'" in tokens,
          "tokens.html shows the oracle beside the best method, with bits per character on hover")
    names = [m["name"] for m in results["methods"]]
    for want in ["oracle", "uniform-0", "uniform-1", "uniform-2", "uniform-4", "uniform-8", "random", "entropy",
                 "loss", "ttt-loss", "gradnorm", "learned-reinforce"]:
        check(want in names, "method " + want + " ran")
    for m in results["methods"]:
        seeds = m["seeds"]
        check(len(seeds) == 2 and all(len(s["window_bpb"]) == 3 for s in seeds), m["name"] + ": 2 seeds x 3 windows")
        # the seed's bpb is the mean of its windows (equal lengths); the reported mean is the mean of seeds
        for s in seeds:
            check(math.isclose(s["bpb"], sum(s["window_bpb"]) / 3, rel_tol=1e-9), m["name"] + " seed bpb = window mean")
        mean = sum(s["bpb"] for s in seeds) / len(seeds)
        check(math.isclose(m["bpb"]["mean"], mean, rel_tol=1e-9), m["name"] + " bpb mean recomputed")
        check("| %s | %.4f [" % (m["name"], m["bpb"]["mean"]) in report, m["name"] + " bpb stated in report.md")
        k = [s["mean_k"] for s in seeds]
        if m["name"].startswith("uniform-"):
            check(all(x == int(m["name"][8:]) for x in k), m["name"] + " spends exactly its K")
    by = {m["name"]: m for m in results["methods"]}
    for c in results["comparisons"]:
        a = [w for s in by[c["method"]]["seeds"] for w in s["window_bpb"]]
        b = [w for s in by[c["baseline"]]["seeds"] for w in s["window_bpb"]]
        d = sum(x - y for x, y in zip(a, b)) / len(a)
        check(math.isclose(c["delta_bpb"], d, rel_tol=1e-9, abs_tol=1e-12), c["method"] + " delta recomputed")
        diffs = [x - y for x, y in zip(a, b)]
        paired = sum(1.0 if x < 0 else 0.5 if x == 0 else 0.0 for x in diffs) / len(diffs)
        check(math.isclose(c["p_improvement"], paired, rel_tol=1e-12), c["method"] + " paired P(improvement) recomputed")
        check(c["wilcoxon_n"] == sum(1 for x in diffs if x != 0), c["method"] + " Wilcoxon n counts the non-zero differences")
    # train.seeds: 2 -> a second model (train.seed 1) compared on its own in model-2/, and the statistics over both
    second = json.load(open(os.path.join(out, "model-2", "results.json")))
    check(results["models"] == 2 and results["replicates"]["checkpoints"][1].endswith("model-2/checkpoint.ckpt"),
          "results.json: two models, the second in model-2/")
    check("seed: 1" in second["config"], "the second model was trained with train.seed 1")
    by2 = {m["name"]: m for m in second["methods"]}
    for row in results["replicates"]["methods"]:
        mine = [sum(a - b for a, b in zip(windows_of(r[row["method"]]), windows_of(r["uniform-2"]))) /
                len(windows_of(r["uniform-2"])) for r in (by, by2)]
        check(all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(row["per_model"], mine)),
              row["method"] + ": per-model paired differences over both models recomputed")
    check("## Over 2 independently trained models" in report and "**Only 2 models**" in report,
          "report.md states the number of models and that 2 are too few")
    # the policies said to lie below the uniform frontier are exactly the policy rows whose interval lies under 0
    below = [r["method"] for r in results["replicates"]["methods"] if r["frontier_delta"]["ci"][1] is not None and
             r["frontier_delta"]["ci"][1] < 0 and not r["method"].startswith("replay")]
    check(results["replicates"]["policies_below_frontier"] == below and
          "**Against the uniform frontier over models**: " in report and
          (("no policy of the" in report) == (not below)),
          "over models, the policies below the uniform frontier are named from their intervals: %s" % below)
    check("## Success criteria" in report and
          all(m in report for m in ["Quality within", "Oracle-K / difficulty", "Policy / oracle"]) and
          report.count("**met**") + report.count("**not met**") + report.count("**not testable here**") >= 3,
          "report states the success criteria: met, not met or not testable")
    crit = results["success_criteria"]
    check(all(crit[k] in (True, False, "not testable") for k in
              ["quality_near_uniform4_at_fewer_flops", "oracle_difficulty_correlation", "policy_oracle_spearman"]),
          "results.json holds each criterion's verdict")
    deg = results["degenerate"]
    check(isinstance(deg["value"], bool) and (len(deg["reason"]) > 0) == deg["value"],
          "results.json says whether the comparison is degenerate, with the reasons")
    check(("**Degenerate by construction**" in report) == deg["value"], "report states it at the top of the comparison")
    learned = by["learned-reinforce"]
    curve = learned.get("training_curve", [])
    check(len(curve) == 8 and all(math.isfinite(it["loss"]) and math.isfinite(it["entropy"]) for it in curve),
          "learned-reinforce trained 8 logged iterations (learn.reinforce_iterations)")
    check(all(s["overhead_flops_per_token"] > 0 for s in learned["seeds"]), "the learned policy's overhead is counted")
    check("## Learned policies" in report and "`learned-reinforce`: REINFORCE" in report,
          "report describes the learned policy and its training")
    # The regime checks on whole held-out streams (experiments/model/regime.h).
    check(results["corpus"]["name"] == "moby_dick" and len(results["corpus"]["sha256"]) == 64, "results name the corpus")
    check(len(results["carry_token_factor"]) == 2 and all(f >= 0 for f in results["carry_token_factor"]),
          "one carry factor per TTT layer")
    check(sorted(results["ngram_bpb"]) == ["1", "2", "3", "4"] and
          all(0 < v < 9 for v in results["ngram_bpb"].values()), "n-gram bits/byte for n = 1..4")
    bins = results["loss_by_position"]
    check(sum(b["tokens"] for b in bins) >= results["eval_tokens"] > 0, "position bins hold every prediction read")
    check(all(b["hi"] == 2 * b["lo"] for b in bins) and bins[0]["lo"] == 1, "bins are [1,2), [2,4), ...")
    for sched in results["regime"]["uniform"]:
        name = sched["schedule"]
        # ci.yaml scores whole test chapters (no adaptation part), so the bins hold exactly the scored tokens
        total = sum(b["mean_loss"][name] * b["tokens"] for b in bins if b["tokens"] > 0)
        check(math.isclose(total / results["eval_tokens"] / math.log(2), sched["bpb"], rel_tol=1e-9),
              name + ": stream bits/byte recomputed from the position bins")
        check("| TTT %s | %.4f |" % (name, sched["bpb"]) in report, name + " stream bpb stated in report.md")
        tokens = results["regime"]["stream_tokens"]
        check(len(tokens) == len(sched["stream_bpb"]) == results["regime"]["streams"] and
              sum(tokens) == results["eval_tokens"] and
              math.isclose(sum(t * b for t, b in zip(tokens, sched["stream_bpb"])) / sum(tokens), sched["bpb"],
                           rel_tol=1e-9),
              name + ": bits/byte is the per-stream bits/byte weighted by the scored tokens in regime.stream_tokens")
    check("attention" in bins[0]["mean_loss"] and os.path.exists(os.path.join(out, "attention", "checkpoint.ckpt")),
          "the attention-only baseline was trained and read on the same streams")
    check("## Is the question live here?" in report and "Carry factor per TTT layer" in report and
          "What inner learning buys" in report, "report states the regime checks")
    reg = results["regime"]
    early = [b for b in bins if b["lo"] >= 16 and b["hi"] <= 64 and b["tokens"] > 0]
    gain = sum((b["mean_loss"]["uniform-0"] - b["mean_loss"]["uniform-1"]) * b["tokens"] for b in early)
    check(math.isclose(gain / sum(b["tokens"] for b in early), reg["ttt_benefit_early_nats"], rel_tol=1e-9),
          "the early TTT benefit recomputed from the bins")
    check(reg["ttt_benefit_grows_with_position"] == (reg["ttt_benefit_late_nats"] > reg["ttt_benefit_early_nats"]),
          "benefit_grows agrees with its numbers")
    check(os.path.getsize(os.path.join(out, "loss_by_position.png")) > 0, "loss_by_position.png written")
    zero = by["uniform-0"]["seeds"][0]
    check(zero["inner_flops_per_token"] == 0 and zero["overhead_flops_per_token"] == 0, "uniform-0 spends no inner FLOPs")
    # `ponder compare --attention`: the run's attention-only model read beside TTT on the same streams; a baseline
    # with TTT layers is refused before any work.
    with tempfile.TemporaryDirectory() as cmp:
        attn = os.path.join(out, "attention", "checkpoint.ckpt")
        compare = [ponder, "--threads", "2", "compare", "--config", os.path.join(root, "configs", "ci.yaml"),
                   "--checkpoint", os.path.join(out, "checkpoint.ckpt"), "--out", cmp, "--seeds", "1",
                   "--set", "compare.methods=[uniform-0,uniform-1]"]
        c = subprocess.run(compare + ["--attention", attn], capture_output=True, text=True, timeout=600)
        check(c.returncode == 0, "compare --attention exits 0: " + c.stderr[-1500:])
        got = json.load(open(os.path.join(cmp, "results.json")))["regime"]["attention"]
        check(got["checkpoint"] == attn and math.isclose(got["bpb"], reg["attention"]["bpb"], rel_tol=1e-9),
              "compare --attention reads the baseline on the same streams as quick: %s vs %s" %
              (got["bpb"], reg["attention"]["bpb"]))
        bad = subprocess.run(compare + ["--attention", os.path.join(out, "checkpoint.ckpt")], capture_output=True,
                             text=True, timeout=600)
        check(bad.returncode != 0 and "TTT layer(s); the baseline must be attention-only" in bad.stderr and
              "compare: oracle" not in bad.stderr, "a TTT checkpoint as --attention is refused first: " + bad.stderr[-500:])

# A part that fails (here model 2 cannot make its folder) stops the run with its name, status and log; the parts
# that do not depend on it finish and are kept for the rerun.
with tempfile.TemporaryDirectory() as broken:
    open(os.path.join(broken, "model-2"), "w").close()
    r = quick(broken, "--jobs", "2")
    check(r.returncode == 1 and r.stderr.count("ponder: error: quick: a part failed") == 1 and
          "model-2-train exited with status 1; the end of " + os.path.join(broken, "logs", "model-2-train.log") in r.stderr,
          "a failed part is named with its status and log, in one error line: " + r.stderr[-800:])
    # The trainings start first (each carries its comparison), so model 1's was running when model 2's failed.
    check(os.path.exists(os.path.join(broken, "checkpoint.ckpt")) and
          "started model-1-train" in r.stderr and "started model-2-train" in r.stderr,
          "the part running when it failed (model 1's training) finished and is kept")
    stamp = os.path.getmtime(os.path.join(broken, "checkpoint.ckpt"))
    os.remove(os.path.join(broken, "model-2"))
    r = quick(broken, "--jobs", "2")
    check(r.returncode == 0 and os.path.getmtime(os.path.join(broken, "checkpoint.ckpt")) == stamp,
          "once the cause is gone, a rerun finishes and reuses what was done: " + r.stderr[-800:])

finish()
