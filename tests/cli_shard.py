#!/usr/bin/env python3
"""Comparisons split into shards, end to end: `ponder compare|ablate --shard i/n` computes shard i's cells into its own
folder, and `ponder merge` of the n folders writes the results.json and report.md of the unsharded run (timings and
the command line aside; every number equal, since each cell is deterministic and journaled whole).

- compare on one CI checkpoint in 2 shards, merged = unsharded; the shards hold journals and manifests only
- compare over two checkpoints (statistics over models) in 3 shards, merged = unsharded, per model and over them
- ablate in 2 shards, merged = unsharded (ablation.json and results.json)
- scripts/slurm_sweep.sh submitting an array of 2 tasks and the merge, through a stand-in sbatch (tests/fake_sbatch.sh)
- refusals, each one error line: --shard 3/2, a missing or repeated shard, shards of different runs, an unfinished
  shard, --out one of the shards
(The ranks under mpirun as shards are tests/cli_mpi.py's.)
Usage: cli_shard.py PONDER"""
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile

from cli_util import check, finish, same

ponder = os.path.abspath(sys.argv[1])
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
config = os.path.join(root, "configs", "ci.yaml")
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def run(*args):
    # From the repository root, as scripts/slurm_sweep.sh runs below: a report names the positive control found under
    # results/control of the working directory, so every run compared here must look in the same one.
    return subprocess.run([ponder, "--threads", "1", *args], capture_output=True, text=True, timeout=600,
                          env=ENV, cwd=root)


def report_text(folder):
    """The report's lines with measured durations masked: a learned policy's "trained in N s" is a timing, which
    the JSON comparison drops too."""
    text = open(os.path.join(folder, "report.md")).read()
    return re.sub(r"trained in [0-9.]+ s", "trained in (time) s", text).splitlines()


def results_equal(a, b, name, files=("results.json",)):
    for f in files:
        pa, pb = os.path.join(a, f), os.path.join(b, f)
        if not (os.path.exists(pa) and os.path.exists(pb)):
            check(False, "%s: %s exists in both folders" % (name, f))
            continue
        where = same(json.load(open(pa)), json.load(open(pb)))
        check(where == "", "%s: %s equals the unsharded run's, timings aside%s" % (name, f, where and ": " + where))
    if os.path.exists(os.path.join(a, "report.md")):
        ra, rb = report_text(a), report_text(b)
        diff = next((x + " | " + y for x, y in zip(ra, rb) if x != y), "")
        check(ra == rb and len(ra) > 10, "%s: report.md equals the unsharded run's %s" % (name, diff))


def one_error(r, text, what):
    check(r.returncode == 1 and r.stderr.count("ponder: error:") == 1 and text in r.stderr,
          "%s: one error line saying '%s': %s" % (what, text, r.stderr.strip()[-400:]))


with tempfile.TemporaryDirectory(prefix="ponder_cli_shard_") as tmp:
    d = lambda name: os.path.join(tmp, name)
    short = ["--set", "train.steps=8", "--set", "train.warmup=2", "--set", "train.eval_every=0"]
    for seed in (0, 1):
        r = run("train", "--config", config, "--out", d("m%d" % seed), "--seed", str(seed), *short)
        check(r.returncode == 0, "model %d trains: %s" % (seed, r.stderr[-300:]))
    ck = [os.path.join(d("m%d" % s), "checkpoint.ckpt") for s in (0, 1)]
    cmp = ["compare", "--checkpoint", ck[0], "--seeds", "2", "--windows", "3",
           "--set", "compare.methods=[oracle, uniform-1, uniform-2, random, entropy]"]

    # ---- one checkpoint, 2 shards
    r = run(*cmp, "--out", d("whole"))
    check(r.returncode == 0, "compare runs unsharded: " + r.stderr[-300:])
    for i in (0, 1):
        r = run(*cmp, "--shard", "%d/2" % i, "--out", d("s%d" % i))
        check(r.returncode == 0 and "ponder merge" in r.stderr, "shard %d/2 runs and says how to merge: %s" %
              (i, r.stderr[-300:]))
        m = json.load(open(os.path.join(d("s%d" % i), "shard.json")))
        check(m["ponder_shard"] == {"index": i, "count": 2} and m["finished"] and "--shard" not in m["args"] and
              "--out" not in m["args"] and m["command"] == "compare", "shard %d's manifest: %s" % (i, m))
        check(os.path.exists(os.path.join(d("s%d" % i), "journal.jsonl")) and
              not os.path.exists(os.path.join(d("s%d" % i), "results.json")),
              "shard %d holds its journal and no results of its own" % i)
    keys = [set(json.loads(l).get("key", "") for l in open(os.path.join(d("s%d" % i), "journal.jsonl")))
            for i in (0, 1)]
    check(keys[0] - {"method oracle", ""} and keys[1] - {"method oracle", ""} and
          not (keys[0] & keys[1]) - {"method oracle", ""},
          "the shards computed different cells: %s | %s" % (sorted(keys[0]), sorted(keys[1])))
    r = run("merge", d("s1"), d("s0"), "--out", d("merged"))
    check(r.returncode == 0, "merge of the 2 shards (in any order) runs: " + r.stderr[-400:])
    results_equal(d("merged"), d("whole"), "2 shards merged")
    check(not os.path.exists(os.path.join(d("merged"), "journal.jsonl")), "the merged run's journal is removed once "
          "its results are written, as an unsharded run's")

    # ---- refusals
    one_error(run(*cmp, "--shard", "3/2", "--out", d("bad")), "--shard 3/2: the shard index must lie in 0..1",
              "--shard 3/2")
    one_error(run(*cmp, "--shard", "1of2", "--out", d("bad")), "expected i/n", "--shard 1of2")
    one_error(run("merge", d("s0"), "--out", d("bad")), "shard 1/2 is missing", "merge of one shard of 2")
    one_error(run("merge", d("s0"), d("s0"), "--out", d("bad")), "are both shard 0/2", "merge of a shard twice")
    one_error(run("merge", d("s0"), d("s1"), "--out", d("s1")), "is one of the shards' folders", "--out a shard")
    one_error(run("merge", d("whole"), d("s1"), "--out", d("bad")), "holds no shard.json", "merge of a whole run")
    r = run(*cmp, "--set", "compare.oracle_bisect=1", "--shard", "1/2", "--out", d("other1"))
    one_error(run("merge", d("s0"), d("other1"), "--out", d("bad")), "are shards of different runs",
              "merge of shards of different command lines")
    manifest = os.path.join(d("s1"), "shard.json")
    m = json.load(open(manifest))
    m["finished"] = False
    json.dump(m, open(manifest, "w"))
    one_error(run("merge", d("s0"), d("s1"), "--out", d("bad")), "has not finished", "merge of an unfinished shard")
    check(not os.path.exists(d("bad")), "no refused merge wrote anything")

    # ---- two checkpoints (statistics over models), 3 shards
    many = ["compare", "--checkpoint", ck[0], "--checkpoint", ck[1], "--seeds", "1", "--windows", "3", "--jobs", "1",
            "--set", "compare.methods=[oracle, uniform-1, uniform-2, random]",
            "--set", "compare.frontier_mus=[0.0, 0.1]"]
    r = run(*many, "--out", d("many"))
    check(r.returncode == 0, "compare over 2 models runs unsharded: " + r.stderr[-300:])
    for i in range(3):
        r = run(*many, "--shard", "%d/3" % i, "--out", d("many%d" % i))
        check(r.returncode == 0, "shard %d/3 over 2 models runs: %s" % (i, r.stderr[-300:]))
    r = run("merge", d("many0"), d("many1"), d("many2"), "--out", d("many-merged"))
    check(r.returncode == 0, "merge of the 3 shards runs: " + r.stderr[-400:])
    results_equal(d("many-merged"), d("many"), "3 shards over 2 models")
    for k in (1, 2):
        results_equal(os.path.join(d("many-merged"), "model-%d" % k), os.path.join(d("many"), "model-%d" % k),
                      "3 shards, model %d" % k)

    # ---- ablate, 2 shards
    abl = ["ablate", "--checkpoint", ck[0], "--groups", "gamma", "--iterations", "2", "--seeds", "2", "--windows", "3"]
    r = run(*abl, "--out", d("abl"))
    check(r.returncode == 0, "ablate runs unsharded: " + r.stderr[-300:])
    ok = all(run(*abl, "--shard", "%d/2" % i, "--out", d("abl%d" % i)).returncode == 0 for i in (0, 1))
    r = run("merge", d("abl0"), d("abl1"), "--out", d("abl-merged"))
    check(ok and r.returncode == 0, "ablate's 2 shards and their merge run: " + r.stderr[-400:])
    results_equal(d("abl-merged"), d("abl"), "ablate in 2 shards", ("ablation.json", "results.json"))

    # ---- the Slurm job array, through a stand-in sbatch
    bin_dir, jobs = d("bin"), d("slurm")
    os.makedirs(bin_dir)
    os.makedirs(jobs)
    shutil.copy(os.path.join(root, "tests", "fake_sbatch.sh"), os.path.join(bin_dir, "sbatch"))
    env = dict(ENV, PATH=bin_dir + os.pathsep + ENV["PATH"], PONDER=os.path.abspath(ponder), FAKE_SLURM_DIR=jobs)
    r = subprocess.run(["bash", os.path.join(root, "scripts", "slurm_sweep.sh"), "2", d("sweep"), *cmp],
                       capture_output=True, text=True, timeout=600, env=env, cwd=root)
    logs = " | ".join(open(os.path.join(jobs, f)).read()[-300:] for f in sorted(os.listdir(jobs)) if f.endswith(".log"))
    check(r.returncode == 0 and "merge job" in r.stdout, "slurm_sweep.sh submits the array and the merge: " +
          r.stdout + r.stderr[-300:] + logs)
    results_equal(d("sweep"), d("whole"), "the Slurm array of 2 tasks, merged")
    r = subprocess.run(["bash", os.path.join(root, "scripts", "slurm_sweep.sh"), "2", d("x"), *cmp, "--shard", "0/2"],
                       capture_output=True, text=True, timeout=60, env=env, cwd=root)
    check(r.returncode == 2 and "set by the script" in r.stderr, "slurm_sweep.sh refuses --shard: " + r.stderr[-200:])

finish()
