#!/usr/bin/env python3
"""End to end: the positive control of the fast-weight path (configs/adapt_planted.yaml). On generated documents
whose 64-byte lines are one chunk each, a base that sees no context can learn a document's alphabet only through
the fast weights, so `ponder adapt` must find an oracle headroom over uniform-1 at equal FLOPs with the oracle
stepping more on text chunks than on noise ones; and with fast weights that cannot move (adapt.lr 0) the same
check must fail. Usage: cli_adapt_control.py PONDER"""
import json
import os
import sys
import tempfile
from cli_util import check, finish, runner

ponder = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
config = os.path.join(root, "configs", "adapt_planted.yaml")
run = runner(ponder, timeout=900)
# 20 test documents of 48 chunks, the methods the verdict needs
small = ["--set", "data.test_frac=0.05", "--seeds", "1", "--set", "adapt.methods=[oracle,uniform-0,uniform-1,uniform-2,loss]"]

with tempfile.TemporaryDirectory() as tmp:
    run("train", "--config", config, "--out", os.path.join(tmp, "base"), "--set", "train.steps=150",
        "--set", "train.warmup=15", "--set", "data.test_frac=0.05")
    ckpt = os.path.join(tmp, "base", "checkpoint.ckpt")
    out = os.path.join(tmp, "adapt")
    r = run("adapt", "--config", config, "--checkpoint", ckpt, "--out", out, *small)
    res = json.load(open(os.path.join(out, "results.json")))
    pc = res.get("positive_control", {})
    h = pc.get("oracle_headroom", {})
    check(pc.get("passed") is True and h.get("ci95", [0])[0] > 0.01 and "adapt: positive control passed" in r.stderr,
          "the fast-weight path finds the planted effect: oracle headroom %s over %s" % (h.get("ci95"), pc.get("baseline")))
    k = pc.get("oracle_mean_k", {})
    check(k.get("n_text", 0) + k.get("n_noise", 0) == 20 * 48, "20 test documents of 48 chunks were read")
    check(k.get("text_units", 0) > k.get("noise_units", 0), "the oracle steps more on text chunks than on noise chunks: %s" % k)
    by = {m["name"]: m for m in res["methods"]}
    check(by["uniform-1"]["bpb"]["mean"] < by["uniform-0"]["bpb"]["mean"] - 0.05,
          "the fast weights learn the alphabet: uniform-1 is well below SKIP")
    check(by["loss"]["bpb"]["mean"] > by["uniform-1"]["bpb"]["mean"],
          "the loss heuristic steps where the loss is high, on noise, and loses to uniform-1 (as planted)")
    report = open(os.path.join(out, "report.md")).read()
    check(report.count("## Positive control") == 1 and "**Passed in this build**" in report,
          "report.md states the verdict")
    # Fast weights that cannot move: every K gives the same losses, so there is nothing to find.
    dead = os.path.join(tmp, "dead")
    r = run("adapt", "--config", config, "--checkpoint", ckpt, "--out", dead, *small, "--set", "adapt.lr=0")
    pc = json.load(open(os.path.join(dead, "results.json"))).get("positive_control", {})
    check(pc.get("passed") is False and "adapt: positive control FAILED" in r.stderr and
          any("headroom" in f for f in pc.get("failed", [])), "with adapt.lr 0 the control fails: %s" % pc.get("failed"))

finish()
