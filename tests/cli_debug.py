#!/usr/bin/env python3
"""End to end: the debugging commands on the CI model. `ponder flops` tabulates one training step's FLOPs by section
and phase, summing to the engine's totals, with a second inner step showing up in the TTT sections alone; `ponder
graph` names every parameter's accumulator and keeps to the section asked for; `ponder gradcheck --model` passes on
every piece of a TTT + attention model; bad arguments get one clear line each. Usage: cli_debug.py PONDER"""
import json
import os
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import check, finish, runner  # noqa: E402

run = runner(sys.argv[1])
ci = os.path.join(root, "configs", "ci.yaml")


def flops(*extra):
    r = run("flops", "--config", ci, "--json", *extra)
    return json.loads(r.stdout) if r.returncode == 0 else {"sections": []}


one, two = flops(), flops("--schedule", "uniform-2")
names = [s["section"] for s in one["sections"]]
check(names == ["embedding", "block0.seq_norm", "block0.ttt", "block0.ffn", "block1.seq_norm", "block1.ttt",
                "block1.ffn", "final_norm", "logits+loss"], "flops: the sections in forward order: %s" % names)
for j, what in ((one, "uniform-1"), (two, "uniform-2")):
    check(sum(s["forward"] for s in j["sections"]) == j.get("forward_total") and
          sum(s["backward"] for s in j["sections"]) == j.get("backward_total") and j.get("backward_total", 0) > 0,
          "flops %s: the sections sum to the engine's forward and backward totals" % what)
check(one.get("optimizer", 0) > 0, "flops: the AdamW step is counted")
for a, b in zip(one["sections"], two["sections"]):
    if a["section"].endswith(".ttt"):
        check(b["forward"] > a["forward"] and b["backward"] > a["backward"],
              "flops: a second inner step costs more in %s, forward and backward" % a["section"])
    else:
        check(b["forward"] == a["forward"], "flops: the second inner step leaves %s's forward alone" % a["section"])
text = run("flops", "--config", ci).stdout
check("sum = engine total" in text and "AdamW step" in text, "flops: the table ends with its checked sum")

graph = run("graph", "--config", ci, "--section", "block0.ttt").stdout.splitlines()
table = graph[next((i for i, line in enumerate(graph) if line.startswith("#")), len(graph)) + 1:]
rows = [line.split() for line in table]
check(len(rows) > 20 and all(r[1] == "block0.ttt" for r in rows),
      "graph --section block0.ttt: %d nodes, all of that section" % len(rows))
params = {r[3] for r in rows if r[2] == "param"}
check({"block0.ttt.wq", "block0.ttt.W1"} <= params, "graph: parameters named at their accumulators: %s"
      % sorted(params)[:6])
check(any(float(r[-1]) > 0 for r in rows), "graph: gradient norms are measured")

mixed = ("--set", "model.mixers=[ttt,attention]")
r = run("gradcheck", "--model", ci, *mixed)
for piece in ("ttt", "attention", "block", "model", "policy", "lstm"):
    check(any(line.startswith(piece + " ") and line.rstrip().endswith("ok") for line in r.stdout.splitlines()),
          "gradcheck --model: the %s piece passes first and second order" % piece)

r = run("gradcheck", "--model", ci, "--piece", "attention", ok=False)
check(r.returncode == 1 and "the model has no such piece" in r.stderr, "gradcheck: an absent piece is named")
r = run("gradcheck", "--model", ci, "--piece", "nope", ok=False)
check(r.returncode == 1 and "expected one of ttt, attention" in r.stderr, "gradcheck: an unknown piece lists the names")
r = run("graph", "--config", ci, "--section", "block9.ttt", ok=False)
check(r.returncode == 1 and "no such section (embedding, block0.seq_norm" in r.stderr, "graph: an unknown section is named")
r = run("flops", ok=False)
check(r.returncode == 1 and "exactly one of --config" in r.stderr, "flops: neither --config nor --checkpoint")
r = run("flops", "--config", ci, "--tokens", "20", ok=False)
check(r.returncode == 1 and "multiple of model.mini_batch" in r.stderr, "flops: --tokens off the mini-batch grid")
finish()
