#!/usr/bin/env python3
"""Crash consistency, end to end: `ponder train`, `ponder compare` and `ponder ablate` are stopped by SIGKILL or
SIGTERM at chosen points (util/fault.h: after an optimiser step, after a log line, with a new checkpoint written but
not yet renamed, renamed but its folder not yet synced, after a journal record, half-way through a journal record),
then run again with the same command and --resume (train) or as they were (compare, ablate). Each must end where an
uninterrupted run ends: the same checkpoint bytes for train (CPU, same threads), the same results for compare and
ablate (timings aside). 31 points in all; a closed terminal (SIGHUP) and a closed pipe (SIGPIPE) stop training
as SIGTERM does. Usage: cli_crash.py PONDER"""
import json
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import check, finish  # noqa: E402

ponder = sys.argv[1]
KILLED = (-9, 137)  # SIGKILL as Popen reports it, or as a shell would


def run(args, fault=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PONDER_FAULT", None)
    if fault:
        env["PONDER_FAULT"] = fault
    return subprocess.run([ponder, "--threads", "1", *args], capture_output=True, text=True, timeout=600, env=env)


def stopped(r, fault):
    """Whether the run stopped the way the fault says: killed, or for TERM, HUP and PIPE a clean exit 1 with a resume
    hint (a checkpoint written first)."""
    if fault.endswith(":KILL"):
        return r.returncode in KILLED
    return r.returncode == 1 and "--resume" in r.stderr


def same(x, y, drop=("seconds", "seconds_per_token", "train_seconds", "command", "wall_seconds")):
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(k in drop or same(x[k], y[k]) for k in x)
    if isinstance(x, list):
        return isinstance(y, list) and len(x) == len(y) and all(same(u, v) for u, v in zip(x, y))
    return x == y


with tempfile.TemporaryDirectory(prefix="ponder_cli_crash_") as tmp:
    # The CI model, 24 steps, a checkpoint every 4 steps and a log line every 2: many points to stop at.
    cfg = os.path.join(tmp, "crash.yaml")
    text = open(os.path.join(root, "configs", "ci.yaml")).read()
    for old, new in (("steps: 40", "steps: 24"), ("log_every: 10", "log_every: 2"), ("eval_every: 20", "eval_every: 12"),
                     ("checkpoint_every: 20", "checkpoint_every: 4")):
        assert old in text, old
        text = text.replace(old, new)
    open(cfg, "w").write(text)
    ref = os.path.join(tmp, "ref")
    r = run(["train", "--config", cfg, "--out", ref])
    check(r.returncode == 0, "the uninterrupted run trains: " + r.stderr[-500:])
    want = open(os.path.join(ref, "checkpoint.ckpt"), "rb").read()

    # ---- train: one fault, or a chain of two, then the same command with --resume until it finishes
    chains = [[f] for f in (
        "train.step:1:KILL", "train.step:3:KILL", "train.step:7:KILL", "train.step:13:KILL", "train.step:24:KILL",
        "checkpoint.tmp:1:KILL", "checkpoint.tmp:3:KILL", "checkpoint.tmp:6:KILL",
        "checkpoint.rename:1:KILL", "checkpoint.rename:2:KILL", "checkpoint.rename:5:KILL",
        "train.log:2:KILL", "train.log:7:KILL",
        "train.step:3:TERM", "train.step:10:TERM", "train.step:21:TERM", "checkpoint.tmp:2:TERM",
        "checkpoint.rename:3:TERM", "train.log:4:TERM", "train.step:6:HUP", "train.step:11:PIPE")]
    chains += [["train.step:5:KILL", "checkpoint.tmp:2:KILL"], ["checkpoint.rename:2:KILL", "train.step:9:TERM"]]
    for i, chain in enumerate(chains):
        out = os.path.join(tmp, "train%d" % i)
        ok = True
        for n, fault in enumerate(chain):
            r = run(["train", "--config", cfg, "--out", out] + (["--resume"] if n else []), fault)
            ok = ok and stopped(r, fault)
        r = run(["train", "--config", cfg, "--out", out, "--resume"])
        done = r.returncode == 0 and os.path.exists(os.path.join(out, "checkpoint.ckpt"))
        got = open(os.path.join(out, "checkpoint.ckpt"), "rb").read() if done else b""
        check(ok and done and got == want, "train stopped at %s, resumed: the uninterrupted run's checkpoint, byte for "
              "byte%s" % (" then ".join(chain), "" if done else ": " + r.stderr[-300:]))
        check(not os.path.exists(os.path.join(out, "checkpoint.ckpt.tmp")), "no stray checkpoint.ckpt.tmp after %s"
              % chain[-1])

    # ---- compare and ablate: killed or stopped between and inside journal records, then run again as they were
    ckpt = os.path.join(ref, "checkpoint.ckpt")
    jobs = {
        "compare": ["compare", "--checkpoint", ckpt, "--config", cfg, "--seeds", "2", "--windows", "3",
                    "--set", "compare.methods=[oracle, uniform-1, uniform-2, random, entropy]"],
        "ablate": ["ablate", "--checkpoint", ckpt, "--config", cfg, "--groups", "gamma", "--iterations", "2",
                   "--seeds", "2", "--windows", "3"],
    }
    faults = {"compare": ["journal.line:2:KILL", "journal.line:5:KILL", "journal.half:3:KILL", "journal.half:7:KILL",
                          "journal.line:4:TERM", "journal.line:9:KILL"],
              "ablate": ["journal.line:3:KILL", "journal.half:4:KILL"]}
    for name, args in jobs.items():
        whole = os.path.join(tmp, name + "-whole")
        r = run(args + ["--out", whole])
        check(r.returncode == 0, name + " runs uninterrupted: " + r.stderr[-300:])
        results = "ablation.json" if name == "ablate" else "results.json"
        a = json.load(open(os.path.join(whole, results))) if r.returncode == 0 else {}
        for i, fault in enumerate(faults[name]):
            out = os.path.join(tmp, "%s%d" % (name, i))
            r = run(args + ["--out", out], fault)
            died = r.returncode in KILLED or (fault.endswith(":TERM") and r.returncode != 0)
            journal = os.path.join(out, "journal.jsonl")
            left = os.path.exists(journal)
            r = run(args + ["--out", out])
            b = json.load(open(os.path.join(out, results))) if r.returncode == 0 else {}
            check(died and left and "resuming from" in r.stderr and a and same(a, b),
                  "%s stopped at %s, run again: resumes from its journal to the uninterrupted results" % (name, fault))
finish()
