#!/usr/bin/env python3
"""Data-parallel training over MPI, end to end: `mpirun -np 2 ponder train` on the CI config against one process
accumulating the same micro-batches.

- 2 ranks × 1 micro-batch (train.grad_accum = 2) equal one process with grad_accum = 2 bit for bit: every logged
  loss, gradient norm and learning rate, the validation bits/byte, and the final checkpoint's parameters, AdamW
  moments, data and schedule positions (only its "ranks" metadata differs). The ranks' gradients are added in rank
  order, the order one process adds its micro-batches', so no tolerance is needed.
- 2 ranks × 2 micro-batches (grad_accum = 4) against one process with grad_accum = 4: the sum is grouped
  (g0 + g1) + (g2 + g3) instead of ((g0 + g1) + g2) + g3, so they agree to float32 rounding: losses and gradient
  norms within 1e-5 relative, parameters and AdamW moments within 1e-4 absolute after 8 steps (measured: 7e-9 and
  5e-7).
- Stopped with --stop-after and resumed on 2 ranks: the uninterrupted 2-rank checkpoint byte for byte; resuming it
  with one process, or a grad_accum that the ranks do not divide, is one error line.
- `mpirun -np 2 ponder compare`: each rank computes a shard of the cells and rank 0 merges them: the one-process
  run's results.json (timings aside) and report.md; --shard under mpirun, or a command that does not divide its work,
  is refused with one error line.
- Ranks started with different model sizes, learning rates, step counts, or one resuming and one starting fresh are
  refused before any step, naming the rank and the field (MPMD mpirun: `-np 1 A : -np 1 B`); so are compare ranks
  with another config, command line or checkpoint file, before any cell, and a checkpoint missing on one rank.
Exit status 77 (meson: skipped) when this build has no MPI or mpirun is missing.
Usage: cli_mpi.py PONDER"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from cli_util import check, finish, same

ponder = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
config = os.path.join(root, "configs", "ci.yaml")

version = subprocess.run([ponder, "--version"], capture_output=True, text=True).stdout
if "MPI: not built" in version or shutil.which("mpirun") is None:
    print("SKIP: this ponder was built without MPI, or mpirun is missing (Debian: libopenmpi-dev openmpi-bin, "
          "which scripts/setup.sh installs)")
    sys.exit(77)

# Open MPI refuses root without --allow-run-as-root; --oversubscribe lets 2 ranks share fewer free cores; no binding,
# so that a busy core does not hold a rank; shared memory between the ranks on one machine (self, vader).
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader"]
ENV = dict(os.environ, OMP_NUM_THREADS="1")
SHORT = ["--set", "train.steps=8", "--set", "train.warmup=2", "--set", "train.log_every=1",
         "--set", "train.eval_every=4", "--set", "train.checkpoint_every=4"]


def ponder_run(args, ranks=1):
    cmd = (MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + [ponder, "--threads", "1", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)


def error_line(r):
    return next((l for l in r.stderr.splitlines() if "ponder: error:" in l), r.stderr.strip()[-300:])


def train(out, ranks, accum, *extra):
    return ponder_run(["train", "--config", config, "--out", out, *SHORT, "--set", "train.grad_accum=%d" % accum,
                       *extra], ranks)


def steps(out):
    lines = [json.loads(l) for l in open(os.path.join(out, "train.jsonl"))]
    return [l for l in lines if l["type"] == "step"]


def checkpoint(path):
    """(meta, everything after it, the float32 tensors' values) of a checkpoint: "PONDERCK" | u32 version | u64 size |
    payload | sha256; the payload holds the config text, the metadata, the step and positions, then three lists of
    tensors (name, u8 dtype, u32 rank, i64 shape, data) (ttt/checkpoint_io.h)."""
    b = open(path, "rb").read()
    assert b[:8] == b"PONDERCK", path
    size = struct.unpack_from("<Q", b, 12)[0]
    payload = b[20:20 + size]
    at = 0

    def take(fmt):
        nonlocal at
        v = struct.unpack_from("<" + fmt, payload, at)
        at += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]

    def text():
        nonlocal at
        n = take("Q")
        at += n
        return payload[at - n:at].decode()

    text()  # the config
    meta = dict((text(), text()) for _ in range(take("Q")))
    rest = payload[at:]
    take("qQQq")  # step, sampler and schedule positions, AdamW steps
    values = []
    for _ in range(3):  # parameters, first and second moments
        for _ in range(take("Q")):
            text()
            dtype, rank = take("B"), take("I")
            n = 1
            for _ in range(rank):
                n *= take("q")
            assert dtype == 0, "float32 tensors"
            values += list(take("%df" % n)) if n > 1 else [take("f")]
    return meta, rest, values


with tempfile.TemporaryDirectory(prefix="ponder_cli_mpi_") as tmp:
    d = lambda name: os.path.join(tmp, name)
    # ---- 2 ranks × 1 micro-batch = one process accumulating 2, bit for bit
    r1 = train(d("one2"), 1, 2)
    r2 = train(d("mpi2"), 2, 2)
    ok = check(r1.returncode == 0 and r2.returncode == 0, "one process and 2 ranks train: " + r1.stderr[-300:] +
               r2.stderr[-600:])
    if ok:
        a, b = steps(d("one2")), steps(d("mpi2"))
        check(len(a) == 8 and [s["step"] for s in a] == [s["step"] for s in b], "both log steps 1..8")
        for key in ("loss", "grad_norm", "lr", "val_bpb"):
            check([s.get(key) for s in a] == [s.get(key) for s in b],
                  "2 ranks: every step's %s equals one process's exactly: %s vs %s" %
                  (key, [s.get(key) for s in a][:3], [s.get(key) for s in b][:3]))
        check(all("allreduce_s" in s and s["allreduce_s"] >= 0 for s in b) and not any("allreduce_s" in s for s in a),
              "the 2-rank log has each step's all-reduce time, the one-process log none")
        head = [json.loads(l) for l in open(os.path.join(d("mpi2"), "train.jsonl"))][0]
        check(head.get("ranks") == 2, "the 2-rank log's header says ranks 2: %s" % head.get("ranks"))
        m1, rest1, _ = checkpoint(os.path.join(d("one2"), "checkpoint.ckpt"))
        m2, rest2, _ = checkpoint(os.path.join(d("mpi2"), "checkpoint.ckpt"))
        check(m1.get("ranks") == "1" and m2.get("ranks") == "2", "the checkpoints record their ranks: %s, %s" %
              (m1.get("ranks"), m2.get("ranks")))
        check(rest1 == rest2, "the final checkpoints hold the same step, data and schedule positions, parameters "
              "and AdamW moments, byte for byte (%d bytes)" % len(rest1))
        check(not os.path.exists(os.path.join(d("mpi2"), "shard-0-of-2")) and
              sorted(os.listdir(d("mpi2"))) == sorted(os.listdir(d("one2"))),
              "rank 0 alone wrote the run folder, with the same files: %s" % sorted(os.listdir(d("mpi2"))))

    # ---- 2 ranks × 2 micro-batches: the same sum grouped otherwise, so equal to float32 rounding
    r1 = train(d("one4"), 1, 4)
    r2 = train(d("mpi4"), 2, 4)
    if check(r1.returncode == 0 and r2.returncode == 0, "grad_accum 4 on one process and on 2 ranks: " +
             r2.stderr[-600:]):
        a, b = steps(d("one4")), steps(d("mpi4"))
        worst = max(abs(x[k] - y[k]) / abs(x[k]) for x, y in zip(a, b) for k in ("loss", "grad_norm"))
        check(len(a) == len(b) == 8 and worst < 1e-5, "the losses and gradient norms agree within 1e-5 relative "
              "(worst %.2g)" % worst)
        _, _, f1 = checkpoint(os.path.join(d("one4"), "checkpoint.ckpt"))
        _, _, f2 = checkpoint(os.path.join(d("mpi4"), "checkpoint.ckpt"))
        diff = max(abs(x - y) for x, y in zip(f1, f2))
        check(len(f1) == len(f2) > 0 and diff < 1e-4 and f1 != f2, "the final parameters and AdamW moments agree "
              "within 1e-4 (largest difference %.2g over %d values), not bit for bit" % (diff, len(f1)))

    # ---- resume on the same ranks; refusals
    r = train(d("stop"), 2, 2, "--stop-after", "4")
    check(r.returncode == 0 and os.path.exists(os.path.join(d("stop"), "checkpoint.ckpt")),
          "2 ranks stop after step 4 with a checkpoint: " + r.stderr[-300:])
    r = ponder_run(["train", "--out", d("stop"), "--resume"], 1)
    check(r.returncode == 1 and r.stderr.count("ponder: error:") == 1 and "trained on 2 rank(s)" in r.stderr and
          "this run has 1" in r.stderr, "resuming a 2-rank run with one process is one error naming both counts: " +
          r.stderr.strip()[-300:])
    r = ponder_run(["train", "--out", d("stop"), "--resume"], 2)
    identical = r.returncode == 0 and open(os.path.join(d("stop"), "checkpoint.ckpt"), "rb").read() == \
        open(os.path.join(d("mpi2"), "checkpoint.ckpt"), "rb").read()
    check(identical, "resumed on 2 ranks, it ends on the uninterrupted 2-rank checkpoint, byte for byte: " +
          r.stderr[-300:])
    r = train(d("odd"), 2, 1)
    check(r.returncode != 0 and r.stderr.count("ponder: error:") == 1 and
          "train.grad_accum = 1 must be a multiple of the 2 ranks" in r.stderr,
          "grad_accum 1 on 2 ranks is one error line: " + r.stderr.strip()[-300:])
    check(not os.path.exists(os.path.join(d("odd"), "checkpoint.ckpt")), "and trains nothing")
    # ---- ranks that would train different runs: refused before any step, naming the rank and what differs
    def mismatched(out, extra, resume_rank0=None):
        one = [ponder, "--threads", "1", "train", "--config", config, "--out", out, *SHORT, "--set", "train.grad_accum=2"]
        two = one + extra
        if resume_rank0:
            one = [ponder, "--threads", "1", "train", "--out", resume_rank0, "--resume"]
        cmd = MPIRUN + ["-np", "1", *one, ":", "-np", "1", *two]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ENV)
    for extra, field in ((["--set", "train.lr=1e-3"], "the config"), (["--set", "model.d=32"], "the config"),
                         (["--set", "train.steps=9"], "the config"), (["--stop-after", "3"], "the step range")):
        out = d("mismatch%s" % extra[-1].replace("=", "_"))
        r = mismatched(out, extra)
        check(r.returncode != 0 and r.stderr.count("ponder: error:") == 1 and
              ("rank 1 disagrees with rank 0 on %s" % field) in r.stderr and
              not os.path.exists(os.path.join(out, "checkpoint.ckpt")),
              "rank 1 with %s is refused before any step: %s" % (" ".join(extra), r.stderr.strip().splitlines()[0][:200]))
    r = train(d("half"), 2, 2, "--stop-after", "4")
    r = mismatched(d("fresh"), [], resume_rank0=d("half"))
    check(r.returncode != 0 and "rank 1 disagrees with rank 0 on the step range" in r.stderr,
          "rank 0 resuming at step 4, rank 1 starting fresh: refused, not a hang: " +
          r.stderr.strip().splitlines()[0][:200])
    # ---- compare under mpirun: each rank a shard of the cells (experiments/study/shard.h), rank 0 merges into --out
    cmp = ["compare", "--checkpoint", os.path.join(d("one2"), "checkpoint.ckpt"), "--seeds", "2", "--windows", "3",
           "--set", "compare.methods=[oracle, uniform-1, uniform-2, random, entropy]"]
    r1 = ponder_run(cmp + ["--out", d("cmp1")], 1)
    r2 = ponder_run(cmp + ["--out", d("cmp2")], 2)
    if check(r1.returncode == 0 and r2.returncode == 0, "compare on one process and on 2 ranks: " + r2.stderr[-600:]):
        where = same(json.load(open(os.path.join(d("cmp1"), "results.json"))),
                     json.load(open(os.path.join(d("cmp2"), "results.json"))))
        check(where == "", "2 ranks: results.json equals the one-process run's, timings aside " + where)
        check(open(os.path.join(d("cmp1"), "report.md")).read() == open(os.path.join(d("cmp2"), "report.md")).read(),
              "2 ranks: report.md equals the one-process run's")
        check(not [f for f in os.listdir(d("cmp2")) if f.startswith("shard-") or f == "journal.jsonl"],
              "the ranks' shard folders and the journal are gone once the results are written: %s" %
              sorted(os.listdir(d("cmp2"))))
    r = ponder_run(cmp + ["--shard", "0/2", "--out", d("cmp3")], 2)
    check(r.returncode != 0 and r.stderr.count("ponder: error:") == 1 and "and mpirun both split the cells" in r.stderr,
          "--shard under mpirun is one error line: " + r.stderr.strip()[-300:])
    # ---- compare ranks that would compute shards of different runs: refused before any cell (no shard folder)
    def compare_mismatched(out, one_extra, two_extra, two_checkpoint=None):
        base = [ponder, "--threads", "1", *cmp, "--out", out]
        two = [two_checkpoint if two_checkpoint and a == cmp[2] else a for a in base]
        cmd = MPIRUN + ["-np", "1", *base, *one_extra, ":", "-np", "1", *two, *two_extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ENV)
    other = os.path.join(d("one2"), "other.ckpt")
    shutil.copyfile(os.path.join(d("mpi2"), "checkpoint.ckpt"), other)
    for one_extra, two_extra, two_checkpoint, field in (
            ([], ["--set", "compare.budget_k=1"], None, "the config"),
            ([], ["--device", "cpu"], None, "the command line"),
            ([], [], other, "the checkpoint files")):
        out = d("cmpmismatch%d" % len(field))
        r = compare_mismatched(out, one_extra, two_extra, two_checkpoint)
        shards = [f for f in os.listdir(out) if f.startswith("shard-")] if os.path.isdir(out) else []
        check(r.returncode != 0 and r.stderr.count("ponder: error:") == 1 and
              ("rank 1 disagrees with rank 0 on %s" % field) in r.stderr and not shards,
              "compare: rank 1 with %s is refused before any cell: %s %s" %
              (" ".join(two_extra) or "another checkpoint", error_line(r)[:240], shards))
    r = compare_mismatched(d("cmpmissing"), [], [], os.path.join(d("one2"), "missing.ckpt"))
    check(r.returncode != 0 and r.stderr.count("ponder: error:") == 1 and "missing.ckpt" in r.stderr,
          "compare: a checkpoint missing on rank 1 stops both ranks with one error naming it: " + error_line(r)[:240])
    r = ponder_run(["eval", "--checkpoint", os.path.join(d("mpi2"), "checkpoint.ckpt")], 2)
    check(r.returncode != 0 and r.stderr.count("ponder: error:") == 1 and "runs as one process" in r.stderr,
          "a command that does not divide its work is refused under mpirun, once: " + r.stderr.strip()[-300:])
finish()
