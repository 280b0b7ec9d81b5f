#!/usr/bin/env python3
"""End to end: what keeps one run's outputs from being spoiled by another, or by the environment. One writer per
output folder (a second `train` into a busy folder is refused naming the holder's pid, from a ponder holding it and
from any process holding its lock file); a killed `--jobs` parent takes its parts with it; `control` refuses a
checkpoint of another config in its folder instead of deleting it; a checkpoint is not read with a corpus other than
the one it was trained on unless asked; unknown PONDER_* variables and values and a round of bad config values are
one-line errors before any work; a comparison without its budget's uniform method says it has no answer. Usage: cli_hardening.py PONDER"""
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import check, finish  # noqa: E402

PONDER = os.path.abspath(sys.argv[1])


def ponder(*args, env=None, timeout=300):
    return subprocess.run([PONDER, "--threads", "1", *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def last_line(r):
    lines = r.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def wait_for(pred, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def children_of(pid):
    found = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open("/proc/%s/stat" % p).read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(p))
    return found


def alive(pid):
    try:
        state = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def check_locks(tmp):
    out = os.path.join(tmp, "busy")
    first = subprocess.Popen([PONDER, "--threads", "1", "train", "--config", "ci", "--out", out, "--set",
                              "train.steps=100000", "--set", "train.checkpoint_every=0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lock = os.path.join(out, ".ponder.lock")
    log = os.path.join(out, "train.jsonl")
    # Its steps have begun (a logged step: the SIGTERM handler is in place by then; sanitized builds start slowly).
    held = wait_for(lambda: os.path.exists(lock) and ("pid %d" % first.pid) in open(lock).read() and
                    os.path.exists(log) and '"type":"step"' in open(log).read().replace(" ", ""), 180)
    r = ponder("train", "--config", "ci", "--out", out)
    check(held and r.returncode == 1 and ("pid %d" % first.pid) in last_line(r) and "in use" in last_line(r),
          "a second train into a busy folder is refused, naming the first's pid: " + last_line(r))
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=120)
    check(first.returncode == 1 and os.path.exists(os.path.join(out, "checkpoint.ckpt")),
          "the first run, stopped by SIGTERM, wrote its checkpoint")
    with open(lock) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            free = True
        except OSError:
            free = False
    check(free, "once it ended its lock is free again")
    # Any process holding the lock file counts, whatever it wrote there.
    other = os.path.join(tmp, "held")
    os.makedirs(other)
    with open(os.path.join(other, ".ponder.lock"), "w") as f:
        f.write("pid 4242\nsomething else\n")
        f.flush()
        fcntl.flock(f, fcntl.LOCK_EX)
        r = ponder("train", "--config", "ci", "--out", other)
        check(r.returncode == 1 and "pid 4242" in last_line(r) and not os.path.exists(os.path.join(other, "train.jsonl")),
              "a folder whose lock another process holds is refused, nothing written: " + last_line(r))


def check_parent_kill(tmp):
    out = os.path.join(tmp, "parts")
    parent = subprocess.Popen([PONDER, "--threads", "2", "quick", "--config", "ci", "--control", "none", "--jobs", "2",
                               "--out", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = wait_for(lambda: len(children_of(parent.pid)) >= 2, 120)
    kids = children_of(parent.pid)
    parent.kill()
    parent.wait()
    gone = wait_for(lambda: not any(alive(k) for k in kids), 60)
    for k in kids:
        if alive(k):
            os.kill(k, signal.SIGKILL)
    check(started and gone, "kill -9 of a --jobs parent ends its %d parts too (SIGTERM: training parts checkpoint)" % len(kids))


def check_foreign_checkpoint(tmp):
    out = os.path.join(tmp, "control")
    r = ponder("train", "--config", "ci", "--out", out)
    check(r.returncode == 0, "a CI model trains into the folder: " + last_line(r))
    before = open(os.path.join(out, "checkpoint.ckpt"), "rb").read()
    r = ponder("control", "--out", out)
    check(r.returncode == 1 and "another run" in last_line(r) and "--retrain" in last_line(r)
          and open(os.path.join(out, "checkpoint.ckpt"), "rb").read() == before,
          "control refuses, and keeps, another config's checkpoint in its folder: " + last_line(r))


def craft(src, dst, patch):
    """A checkpoint whose payload `patch` rewrote, with its sha256 made right again: what only a crafted file has."""
    import hashlib
    import struct
    b = open(src, "rb").read()
    size = struct.unpack_from("<Q", b, 12)[0]
    payload = bytearray(b[20:20 + size])
    patch(payload)
    open(dst, "wb").write(b[:12] + struct.pack("<Q", len(payload)) + bytes(payload) +
                          hashlib.sha256(bytes(payload)).hexdigest().encode())


def check_crafted_checkpoints(tmp):
    import struct
    run = os.path.join(tmp, "crafted_model")
    r = ponder("train", "--config", "ci", "--out", run)
    src = os.path.join(run, "checkpoint.ckpt")
    text_len = struct.unpack_from("<Q", open(src, "rb").read(), 20)[0]
    meta_at = 8 + text_len  # after the config text: the metadata count

    def huge_meta(p):
        struct.pack_into("<Q", p, meta_at, 1 << 40)
    bad = os.path.join(tmp, "huge_meta.ckpt")
    craft(src, bad, huge_meta)
    r = ponder("eval", "--checkpoint", bad)
    check(r.returncode == 1 and "metadata entries cannot fit" in last_line(r) and "config" not in last_line(r).split("malformed")[1],
          "a crafted metadata count of 2^40 is named as the checkpoint's fault: " + last_line(r))


def check_environment(tmp):
    for name, value, want in [("PONDER_DUAL_SCAN", "2", "PONDER_DUAL_SCAN=2 must be one of 0, 1"),
                              ("PONDER_FAULT", "nowhere:1:KILL", "unknown point 'nowhere'"),
                              ("PONDER_FAULT", "train.step:1:STOP", "SIGNAL one of"),
                              ("PONDER_CUDA_DUAL_UNROLL", "3", "must be one of 1, 2, 4, tiles, mma"),
                              ("PONDER_DATADIR", "/x", "unknown environment variable PONDER_DATADIR")]:
        r = ponder("train", "--config", "ci", "--out", os.path.join(tmp, "env"), env={name: value})
        check(r.returncode == 1 and want in last_line(r) and not os.path.exists(os.path.join(tmp, "env")),
              "%s=%s is refused before any work: %s" % (name, value, last_line(r)))


def check_bad_input(tmp):
    """Old leftovers: each is one line naming the key or the value, before any work, instead of a silent default, a
    wrong message or a NaN that a report calls the best."""
    out = os.path.join(tmp, "bad")
    cases = [
        (["train", "--config", "ci", "--out", out, "--set", "model.vocab=100"], "model.vocab must be at least 256"),
        (["train", "--config", "ci", "--out", out, "--set", "learn.reinforce_entropy=.nan"], "learn.reinforce_entropy must be a finite"),
        (["train", "--config", "ci", "--out", out, "--set", "learn.reinforce_lambda=.nan"], "learn.reinforce_lambda must be a finite"),
        (["train", "--config", "ci", "--out", out, "--set", "learn.hidden=100000000"], "learn.hidden (the policy network's width)"),
        (["train", "--config", "ci", "--out", out, "--set", "compare.methods=[]"], "at least one method"),
        (["train", "--config", "ci", "--out", out, "--set", "compare.methods=[uniform-1,gate-recon]", "--set",
          "compare.mode=prefix"], "compare.methods: gate-recon reads a unit's own reconstruction loss"),
        (["train", "--config", "ci", "--out", out, "--set", "compare.two_stage=maybe"], "compare.two_stage: expected true or false, got 'maybe'"),
        (["train", "--config", "ci", "--out", out, "--set", "adapt.step_options=[]"], "at least one step count"),
        (["train", "--config", "ci", "--out", out, "--steps", "20", "--set", "train.steps=3"], "both set the step count"),
        (["train", "--config", "ci", "--out", out, "--set", "adapt.rank=1000"], "adapt.rank 1000 exceeds model.d = 64"),
        (["trian", "--config", "ci"], "unknown subcommand 'trian' (did you mean 'train'?)"),
        (["quick", "--seeds", "0", "--out", out], "--seeds: must be positive"),
        (["quick", "--out", ""], "--out: must not be empty"),
        (["merge", "x", "--out", out, "--jobs", "-1"], "--jobs: must be >= 0, got -1"),
        (["flops", "--config", "ci", "--schedule", "uniform-100000"], "an integer in 0..64"),
    ]
    for args, want in cases:
        r = ponder(*args)
        line = last_line(r)
        check(r.returncode == 1 and want in line and "1.79769" not in line and not os.path.exists(os.path.join(out, "train.jsonl")),
              "ponder %s: %s" % (" ".join(args[:1] + args[-2:]), line))
    afile = os.path.join(tmp, "a_file")
    open(afile, "w").write("x")
    for args in (["control", "--out", afile], ["train", "--config", "ci", "--out", afile]):
        r = ponder(*args)
        check(r.returncode == 1 and "exists and is not a folder" in last_line(r) and "filesystem error" not in r.stderr,
              "ponder %s --out FILE names the file: %s" % (args[0], last_line(r)))
    r = ponder("flops", "--config", "ci", "--schedule", "uniform-2", env={"OMP_NUM_THREADS": "100000"})
    check(r.returncode == 0 and "OMP_NUM_THREADS" in r.stderr and "using %d" % os.cpu_count() in r.stderr,
          "OMP_NUM_THREADS=100000 is cut to the CPUs there are, and said: " + (r.stderr.strip().splitlines() or [""])[0])


def write_corpus(folder, seed):
    import random
    rng = random.Random(seed)
    words = ["def", "return", "self", "value", "import", "class", "for", "in", "if", "else", "print", "x", "y", "=", ":"]
    os.makedirs(folder)
    for i in range(30):
        with open(os.path.join(folder, "f%02d.py" % i), "w") as f:
            for _ in range(600):
                f.write(" ".join(rng.choice(words) for _ in range(8)) + "\n")


def check_corpus_identity(tmp):
    """A path corpus is resolved from the working folder: read from another one, it is another corpus, and a
    checkpoint's recorded data_sha256 says so."""
    a, b = os.path.join(tmp, "A"), os.path.join(tmp, "B")
    write_corpus(os.path.join(a, "corp"), 1)
    write_corpus(os.path.join(b, "corp"), 2)
    run = os.path.join(tmp, "corpus_run")
    ckpt = os.path.join(run, "checkpoint.ckpt")

    def at(folder, *args):
        return subprocess.run([PONDER, "--threads", "1", *args], capture_output=True, text=True, timeout=300, cwd=folder)
    r = at(a, "train", "--config", "ci", "--set", "data.corpus=./corp", "--set", "train.steps=12", "--set",
           "train.warmup=2", "--out", run)
    check(r.returncode == 0, "a model trains on ./corp from folder A: " + last_line(r))
    for args in (["eval", "--checkpoint", ckpt], ["compare", "--checkpoint", ckpt, "--seeds", "1", "--out",
                                                  os.path.join(tmp, "corpus_cmp")],
                 ["train", "--out", run, "--resume", "--steps", "20"]):
        r = at(b, *args)
        check(r.returncode == 1 and "was trained on a corpus with sha256" in last_line(r),
              "from folder B, ponder %s refuses the other ./corp: %s" % (args[0], last_line(r)[:160]))
    r = at(b, "eval", "--checkpoint", ckpt, "--other-corpus", "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check(j and j["data_sha256"] != j["trained_on_data_sha256"],
          "--other-corpus reads it on purpose and records both hashes")
    r = at(a, "eval", "--checkpoint", ckpt, "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check(j and j["data_sha256"] == j["trained_on_data_sha256"], "from folder A the same corpus reads without a word")


def check_journal_spelling(tmp):
    """A comparison stopped part-way resumes its journal when rerun with the checkpoint and config spelt otherwise
    and another --threads; a journal of another run is kept as journal.jsonl.stale, not deleted."""
    run = os.path.join(tmp, "journal_model")
    r = ponder("train", "--config", "ci", "--out", run)
    check(r.returncode == 0, "a CI model trains: " + last_line(r))
    out = os.path.join(tmp, "journal_cmp")
    base = ["compare", "--seeds", "1", "--out", out, "--set", "compare.methods=[uniform-1,uniform-2,random]"]
    r = ponder(*base, "--checkpoint", os.path.join(run, "checkpoint.ckpt"), "--config", "ci",
               env={"PONDER_FAULT": "journal.line:3:KILL"})
    check(r.returncode in (-9, 137) and os.path.exists(os.path.join(out, "journal.jsonl")), "compare killed after 3 cells")
    rel = os.path.relpath(os.path.join(run, "checkpoint.ckpt"), tmp)
    cfg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "ci.yaml")
    again = subprocess.run([PONDER, "--threads", "2", *base, "--checkpoint", "./" + rel, "--config", cfg],
                           capture_output=True, text=True, timeout=300, cwd=tmp)
    check(again.returncode == 0 and "finished cells are reused" in again.stderr and "another run" not in again.stderr,
          "rerun with ./relative checkpoint, the config's path and --threads 2 resumes the journal: " +
          next((l for l in again.stderr.splitlines() if "reused" in l or "another run" in l), last_line(again)))
    # A record whose sha256 holds but that lacks a field (another build's, or crafted): named, not a raw JSON error
    import hashlib
    r = ponder(*base, "--checkpoint", os.path.join(run, "checkpoint.ckpt"), env={"PONDER_FAULT": "journal.line:6:KILL"})
    path = os.path.join(out, "journal.jsonl")
    lines = open(path).read().splitlines()
    edited = False
    for i, line in enumerate(lines[1:], 1):
        rec = json.loads(line)
        if isinstance(rec["record"], dict) and "unit_k" in rec["record"] and not edited:
            del rec["record"]["unit_k"]
            body = json.dumps(rec["record"], separators=(",", ":"), sort_keys=True, ensure_ascii=False)
            rec["sha256"] = hashlib.sha256((rec["key"] + "\n" + body).encode()).hexdigest()
            lines[i] = json.dumps(rec, separators=(",", ":"))
            edited = rec["key"]
    open(path, "w").write("\n".join(lines) + "\n")
    r = ponder(*base, "--checkpoint", os.path.join(run, "checkpoint.ckpt"))
    check(bool(edited) and r.returncode == 1 and ("the record '%s' lacks what this build reads" % edited) in last_line(r)
          and "[json.exception" in last_line(r).split("lacks")[1],
          "a sha-valid record without unit_k is named with its journal and key: " + last_line(r)[:220])
    os.remove(path)
    r = ponder(*base, "--checkpoint", os.path.join(run, "checkpoint.ckpt"), env={"PONDER_FAULT": "journal.line:2:KILL"})
    r = ponder(*base[:-2], "--set", "compare.methods=[uniform-1,uniform-2]", "--checkpoint",
               os.path.join(run, "checkpoint.ckpt"))
    # --config on a checkpoint job: the model, data and train sections come from the checkpoint, and both are said
    other = os.path.join(tmp, "other.yaml")
    text = open(cfg).read().replace("d: 64", "d: 32")
    assert text != open(cfg).read()
    open(other, "w").write(text)
    said = ponder("compare", "--seeds", "1", "--windows", "2", "--out", os.path.join(tmp, "cfg_cmp"), "--set",
                  "compare.methods=[uniform-1,uniform-2]", "--checkpoint", os.path.join(run, "checkpoint.ckpt"),
                  "--config", other)
    res = json.load(open(os.path.join(tmp, "cfg_cmp", "results.json"))) if said.returncode == 0 else {}
    prov = res.get("provenance", res)
    check(said.returncode == 0 and "model: of " + other in said.stderr and "differs from the checkpoint's and is not used" in said.stderr
          and "d: 64" in prov.get("config", "") and "d: 32" in prov.get("config_applied", ""),
          "compare --config with another model: section says it is not used, and results.json records both configs: "
          + next((l for l in said.stderr.splitlines() if "not used" in l), last_line(said))[:200])
    stale = os.path.join(out, "journal.jsonl.stale")
    check(r.returncode == 0 and "kept as" in r.stderr and "config" in r.stderr and os.path.exists(stale),
          "a journal of another config is kept as journal.jsonl.stale, the differing field named: " +
          next((l for l in r.stderr.splitlines() if "kept as" in l), last_line(r)))


def check_missing_budget(tmp):
    """A method list without uniform-<budget_k> runs, but says on stderr and in the report that nothing could be
    tested, instead of a report whose every comparison is silently empty."""
    out = os.path.join(tmp, "nobudget_cmp")
    r = ponder("compare", "--seeds", "1", "--windows", "2", "--out", out, "--set", "compare.methods=[uniform-1,random]",
               "--checkpoint", os.path.join(tmp, "journal_model", "checkpoint.ckpt"))
    warned = "compare.methods has no uniform-2 (compare.budget_k = 2)" in r.stderr
    md = open(os.path.join(out, "report.md")).read() if r.returncode == 0 else ""
    res = json.load(open(os.path.join(out, "results.json"))) if r.returncode == 0 else {}
    reasons = res.get("degenerate", {}).get("reason", [])
    check(r.returncode == 0 and warned and "No answer: the methods compared do not include uniform-2" in md and
          res.get("degenerate", {}).get("value") is True and any("has no uniform-2" in x for x in reasons),
          "methods without uniform-<budget_k>: warned, the answer says why there is none, results.json degenerate: %s %s"
          % (warned, reasons))


with tempfile.TemporaryDirectory(prefix="ponder_cli_hardening_") as tmp:
    check_journal_spelling(tmp)
    check_missing_budget(tmp)
    check_bad_input(tmp)
    check_crafted_checkpoints(tmp)
    check_corpus_identity(tmp)
    check_environment(tmp)
    check_locks(tmp)
    check_foreign_checkpoint(tmp)
    check_parent_kill(tmp)
finish()
