#!/usr/bin/env python3
"""End to end: `ponder adapt` (fast weights on a frozen CI model, updated chunk by chunk) through the CLI. Checks that
SKIP reads the streams exactly as the frozen base does (its bits/byte equals the regime's reading of the same model
on the same tokens), that update FLOPs grow with K and SKIP spends none, recomputes the share of the SKIP -> oracle
gap from the per-stream numbers, runs the statistics over two independently trained bases, and checks that methods
the path cannot run and a malformed adapt: section are refused with the reason.
Usage: cli_adapt.py PONDER"""
import json
import os
import sys
import tempfile

from cli_util import check, finish, runner

ponder = sys.argv[1]
SMALL = ["--set", "adapt.chunk=64", "--set", "adapt.calib_len=256", "--set", "compare.calib_windows=2",
         "--set", "adapt.lr=1", "--set", "compare.frontier_mus=[0, 1]", "--set", "compare.oracle_bisect=0"]


run = runner(ponder)


def per_stream(m):
    return m["seeds"][0]["window_bpb"]


def gap(skip, oracle, m):
    s = sum(skip) / len(skip)
    return (s - sum(m) / len(m)) / (s - sum(oracle) / len(oracle))


with tempfile.TemporaryDirectory() as tmp:
    cks = []
    for seed in (0, 1):
        out = os.path.join(tmp, "ci%d" % seed)
        run("train", "--config", "ci", "--seed", str(seed), "--out", out)
        cks.append(os.path.join(out, "checkpoint.ckpt"))

    one = os.path.join(tmp, "one")
    r = run("adapt", "--checkpoint", cks[0], "--out", one, *SMALL, "--set",
            "adapt.methods=[oracle, uniform-0, uniform-1, uniform-2, uniform-4, every-2/2, random, loss, entropy, "
            "'learned-reinforce[iters=3]', 'learned-ppo-pid[iters=2]', 'pondernet[iters=2]']")
    res = json.load(open(os.path.join(one, "results.json")))
    check(res["produced_by"] == "ponder adapt", "results.json says ponder adapt produced it")
    for key in ("corpus", "adapt", "adapt_summary", "cost_multiples", "methods", "eval_tokens", "ngram_bpb",
                "loss_by_position", "carry_token_factor", "scored_fraction"):
        check(key in res, "results.json has " + key)
    check(res["adapt"]["fast"] == "lora" and res["adapt"]["chunk"] == 64, "the adapt settings are recorded")
    check(res["segments"] >= len(res["streams"]) and res["context_tokens"] >= 0, "segments and their context counted")
    setup = open(os.path.join(one, "report.md")).read()
    check(("unscored tokens of context on average" in setup) == (res["context_tokens"] > 0) and
          ("no segment has unscored context" in setup) == (res["context_tokens"] == 0),
          "the setup line says how much unscored context the segments had (%d tokens)" % res["context_tokens"])
    methods = {m["name"]: m for m in res["methods"]}
    for name in ("oracle", "uniform-0", "uniform-1", "uniform-2", "uniform-4", "every-2/2", "random", "loss", "entropy",
                 "learned-reinforce[iters=3]", "learned-ppo-pid[iters=2]", "pondernet[iters=2]"):
        check(name in methods, "method " + name + " was run")
    seeds = {n: m["seeds"][0] for n, m in methods.items()}
    check(seeds["uniform-0"]["inner_flops_per_token"] == 0, "SKIP spends no update FLOPs")
    inner = [seeds["uniform-%d" % k]["inner_flops_per_token"] for k in (1, 2, 4)]
    check(inner[0] > 0 and abs(inner[1] / inner[0] - 2) < 0.01 and abs(inner[2] / inner[0] - 4) < 0.01,
          "update FLOPs are K times one step's: %s" % inner)
    mult = [c["measured_multiple"] for c in res["cost_multiples"]]
    check(mult[0] == 1 and all(a < b for a, b in zip(mult, mult[1:])), "cost multiples grow with K: %s" % mult)
    # SKIP is the frozen base: the regime read the same streams with the base as it is (its TTT layers at K = 1)
    base = next((u["bpb"] for u in res.get("regime", {}).get("uniform", []) if u["schedule"] == "uniform-1"), None)
    check(base is not None and abs(seeds["uniform-0"]["bpb"] - base) < 1e-4,
          "SKIP's bits/byte %.6f equals the frozen base's reading of the same tokens %s" % (seeds["uniform-0"]["bpb"], base))
    n = len(per_stream(methods["uniform-0"]))
    check(n >= 2 and all(len(per_stream(m)) == n for m in methods.values()), "every method scored the same %d streams" % n)
    rows = {x["method"]: x for x in res["adapt_summary"]["methods"]}
    sk, orc = per_stream(methods["uniform-0"]), per_stream(methods["oracle"])
    if abs(sum(sk) - sum(orc)) > 1e-9:
        for name in ("uniform-1", "loss", "random"):
            want = gap(sk, orc, per_stream(methods[name]))
            got = rows[name]["gap_recovered"]
            check(got is not None and abs(got - want) < 1e-9, "%s's gap share %s recomputed as %.6f" % (name, got, want))
            lo, hi = rows[name]["gap_ci"]
            check(lo <= want <= hi, "%s's gap share lies in its interval [%s, %s]" % (name, lo, hi))
    ppo = methods["learned-ppo-pid[iters=2]"]
    check(len(ppo.get("training_curve", [])) == 2 and "PPO-PID budget" in ppo["detail"],
          "PPO-PID trained on the fast-weight path: " + ppo["detail"][:120])
    used = [k for k, n in zip(ppo["k_options"], ppo["k_hist"]) if n > 0]
    check(used and all(k in (0, 1, 2, 4) for k in used), "its decisions are SKIP/UPDATE_1/2/4: %s" % used)
    pn = methods["pondernet[iters=2]"]
    check(len(pn.get("training_curve", [])) == 2 and "PonderNet halting" in pn["detail"],
          "PonderNet trained on the fast-weight path (its trials: updates on a chunk, the next chunk's loss): " +
          pn["detail"][:120])
    check(pn["seeds"][0]["inner_flops_per_token"] > 0, "PonderNet's chunks take at least one update")
    check(rows["uniform-0"]["gap_recovered"] == 0 and rows["oracle"]["gap_recovered"] == 1,
          "SKIP recovers 0 of the gap and the oracle all of it")
    ps = res["adapt_summary"]["per_stream"]
    check(len(ps) == n and all(abs(p["bpb"]["uniform-1"] - v) < 1e-12 for p, v in zip(ps, per_stream(methods["uniform-1"]))),
          "per-stream bits/byte of every method are listed, in stream order")
    worse = sum(a > b for a, b in zip(per_stream(methods["uniform-4"]), sk))
    check(res["adapt_summary"]["streams_worse_than_skip"]["uniform-4"] == worse,
          "uniform-4 scored worse than SKIP on %d streams, as counted here" % worse)
    # Spending by difficulty: every chunk in one band by SKIP's loss; uniform-K takes K in every band, SKIP is its own
    # reference, and the bands' K averaged by their chunk counts give the method's mean K (one seed here).
    bd = res["adapt_summary"]["by_difficulty"]
    bands, brows = bd["bands"], {x["method"]: x for x in bd["methods"]}
    chunks = [b["chunks"] for b in bands]
    check(len(bands) == 3 and min(chunks) > 0 and all(a["skip_loss_hi"] <= b["skip_loss_lo"] for a, b in zip(bands, bands[1:])),
          "three bands of chunks, ordered by SKIP's loss: %s" % bands)
    check(set(brows) == set(methods), "every method is in the difficulty table: %s" % sorted(brows))
    check(brows["uniform-0"]["delta_nats_vs_skip"] == [0, 0, 0] and brows["uniform-0"]["share_worse_than_skip"] == [0, 0, 0],
          "SKIP against itself: no difference, no chunk worse")
    check(brows["uniform-2"]["mean_k"] == [2, 2, 2], "uniform-2 takes 2 steps in every band")
    for name in ("oracle", "loss", "random"):
        k = sum(x * c for x, c in zip(brows[name]["mean_k"], chunks)) / sum(chunks)
        check(abs(k - seeds[name]["mean_k"]) < 1e-9, "%s: the bands' K, weighted by chunks, is its mean K %.4f (%.4f)" %
              (name, seeds[name]["mean_k"], k))
    report = open(os.path.join(one, "report.md")).read()
    check("# ponder adapt" in report and "Fast weights on the frozen base" in report, "report.md has the adapt section")
    check("Spending by difficulty" in report and "oracle K" in report, "report.md has the difficulty table")
    check("share of the SKIP" in r.stdout, "the summary is printed")

    head = os.path.join(tmp, "head")
    run("adapt", "--checkpoint", cks[0], "--out", head, *SMALL, "--set", "adapt.fast=head",
        "--set", "adapt.methods=[oracle, uniform-0, uniform-1, loss]")
    h = {m["name"]: m["seeds"][0] for m in json.load(open(os.path.join(head, "results.json")))["methods"]}
    check(abs(h["uniform-0"]["bpb"] - seeds["uniform-0"]["bpb"]) < 1e-6, "a head that has not learned is the base too")

    # adapt.split valid reads the validation streams (other documents than the test split's), and says so.
    valid = os.path.join(tmp, "valid")
    run("adapt", "--checkpoint", cks[0], "--out", valid, *SMALL, "--set", "adapt.split=valid",
        "--set", "adapt.methods=[uniform-0, uniform-1]")
    rv = json.load(open(os.path.join(valid, "results.json")))
    check(rv["adapt"]["split"] == "valid" and res["adapt"]["split"] == "test", "results.json records the split read")
    check(rv["streams"] and not set(rv["streams"]) & set(res["streams"]),
          "the validation streams share no document with the test streams: %s vs %s" % (rv["streams"][:3], res["streams"][:3]))
    check("**Validation streams**" in open(os.path.join(valid, "report.md")).read(), "the report says it read them")
    both = run("adapt", "--checkpoint", cks[0], "--out", os.path.join(tmp, "bad"), "--set", "adapt.split=valid",
               "--bench", "humaneval", ok=False)
    check(both.returncode != 0 and "drop adapt.split valid" in both.stderr, "--bench with adapt.split valid is refused")

    two = os.path.join(tmp, "two")
    run("adapt", "--checkpoint", cks[0], "--checkpoint", cks[1], "--out", two, *SMALL,
        "--set", "adapt.methods=[oracle, uniform-0, uniform-1, uniform-2, loss]")
    res2 = json.load(open(os.path.join(two, "results.json")))
    check(res2["produced_by"] == "ponder adapt" and res2["models"] == 2, "statistics over 2 bases")
    rep = {m["method"]: m for m in res2["replicates"]["methods"]}
    check("loss" in rep and len(rep["loss"]["per_model"]) == 2, "the loss heuristic is compared over both models")
    check(res2["replicates"]["baseline"] == "uniform-1", "against uniform-<adapt.budget_k>, the hard budget")
    check(os.path.exists(os.path.join(two, "model-2", "results.json")), "each base has its own comparison")
    # The fast-weight views pooled over the bases, at the top of the multi-model outputs.
    per = [json.load(open(os.path.join(two, "model-%d" % i, "results.json")))["adapt_summary"] for i in (1, 2)]
    pooled = {m["method"]: m for m in res2["adapt_summary"]["methods"]}
    for name in ("oracle", "uniform-0", "uniform-1", "uniform-2", "loss"):
        want = sum(next(m["bpb"] for m in p["methods"] if m["method"] == name) for p in per) / 2
        check(abs(pooled[name]["bpb"] - want) < 1e-12, "%s: pooled bits/byte %s = the mean of the models' %s"
              % (name, pooled[name]["bpb"], want))
    check([c["k"] for c in res2["cost_multiples"]] == [0, 1, 2, 4] and
          all(c["min"] <= c["measured_multiple"] <= c["max"] for c in res2["cost_multiples"]),
          "cost multiples of every K, with their range over models: %s" % res2["cost_multiples"])
    st = res2["adapt_summary"]["per_stream"]
    check(len(st) == len(per[0]["per_stream"]) and all(abs(s["regret_vs_oracle"]["oracle"]) < 1e-12 for s in st),
          "every stream, with each method's regret against the oracle")
    bands = res2["adapt_summary"]["by_difficulty"]
    check(len(bands["bands"]) == 3 and sum(b["chunks"] for b in bands["bands"]) ==
          sum(b["chunks"] for p in per for b in p["by_difficulty"]["bands"]), "difficulty bands pooled over the bases")
    check("## Fast weights on the frozen bases, over 2 models" in open(os.path.join(two, "report.md")).read(),
          "the multi-model report has the pooled section")

    bench_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "bench")
    if os.path.exists(os.path.join(bench_dir, "HumanEval.jsonl.gz")):
        he = os.path.join(tmp, "he")
        run("adapt", "--checkpoint", cks[0], "--out", he, "--bench", "humaneval", "--bench-dir", bench_dir, *SMALL,
            "--set", "adapt.methods=[uniform-0, uniform-1]")
        hr = json.load(open(os.path.join(he, "results.json")))
        check(hr.get("code_benchmark", {}).get("bench") == "humaneval" and hr["code_benchmark"]["problems"] == 164,
              "HumanEval's 164 problems were the streams")
        hm = {m["name"]: m for m in hr["methods"]}
        check(len(per_stream(hm["uniform-1"])) == 164, "each problem's canonical solution is scored as one stream")
        check(hr["adapt_summary"]["per_stream"][0]["stream"] == "HumanEval/0", "streams are named by task id")
    else:
        print("skip the --bench humaneval run: %s has no HumanEval.jsonl.gz" % bench_dir)
    missing = run("adapt", "--checkpoint", cks[0], "--out", os.path.join(tmp, "nob"), "--bench", "humaneval",
                  "--bench-dir", os.path.join(tmp, "nowhere"), ok=False)
    check(missing.returncode != 0 and "nowhere" in missing.stderr, "a missing benchmark folder is named: " +
          missing.stderr.strip()[-160:])

    for sets, why in ((["adapt.methods=['learned-reinforce[probe=1]']"], "the inner-loss probe reads TTT layers"),
                      (["adapt.methods=[ttt-loss]"], "probes the TTT layers' inner loss"),
                      (["adapt.fast=bogus"], "expected one of lora, head"),
                      (["adapt.targets=[ffn.w7]"], "no parameter block1.ffn.w7"),
                      (["adapt.chunk=24"], "adapt.chunk must be a positive multiple of model.mini_batch")):
        args = []
        for s in sets:
            args += ["--set", s]
        bad = run("adapt", "--checkpoint", cks[0], "--out", os.path.join(tmp, "bad"), *args, ok=False)
        check(bad.returncode != 0 and why in bad.stderr, "%s is refused: %s" % (sets, bad.stderr.strip()[-200:]))
    check(not os.path.exists(os.path.join(tmp, "bad", "journal.jsonl")), "a refused run computes nothing")

finish()
