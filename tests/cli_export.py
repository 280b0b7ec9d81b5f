#!/usr/bin/env python3
"""End to end: `ponder export` writes a CI checkpoint's parameters as safetensors, and an independent numpy reader
(scripts/read_safetensors.py) finds every parameter with the dtype, shape, L2 norm and sum that ponder itself reports,
the config in the metadata, and rejects a truncated file. Usage: cli_export.py PONDER"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "scripts"))
from read_safetensors import load  # noqa: E402
from cli_util import check, finish  # noqa: E402

ponder = sys.argv[1]



with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([ponder, "train", "--config", os.path.join(root, "configs", "ci.yaml"), "--out", tmp],
                   capture_output=True, check=True, timeout=600)
    ckpt = os.path.join(tmp, "checkpoint.ckpt")
    out = os.path.join(tmp, "model.safetensors")
    run = subprocess.run([ponder, "export", "--checkpoint", ckpt, "--out", out, "--summary"], capture_output=True,
                         text=True, timeout=600)
    check(run.returncode == 0, "ponder export exits 0: " + run.stderr[-1000:])
    summary = json.loads(run.stdout)
    tensors, meta = load(out)
    check(list(tensors) == [p["name"] for p in summary] and len(tensors) > 10,
          "every parameter is in the file, in checkpoint order (%d)" % len(tensors))
    check("emb.weight" in tensors and "block0.ttt.wq" in tensors and "final_norm.weight" in tensors,
          "tensors carry the model's descriptive names")
    for p in summary:
        t = tensors[p["name"]].astype(np.float64)
        ok = (list(t.shape) == p["shape"] and str(tensors[p["name"]].dtype) == {"F32": "float32", "F64": "float64"}[p["dtype"]]
              and math.isclose(float(np.linalg.norm(t)), p["l2"], rel_tol=1e-9, abs_tol=1e-12)
              and math.isclose(float(t.sum()), p["sum"], rel_tol=1e-6, abs_tol=1e-9))
        check(ok, p["name"] + ": dtype, shape, L2 norm and sum agree with ponder's")
    with open(os.path.join(root, "configs", "ci.yaml")) as f:
        check(meta.get("config") == f.read() and meta.get("step") == "40", "metadata: the config text and the step")
    check(sum(t.size for t in tensors.values()) > 0 and all(np.isfinite(t).all() for t in tensors.values()),
          "every value is finite")
    raw = open(out, "rb").read()
    cut = os.path.join(tmp, "cut.safetensors")
    open(cut, "wb").write(raw[:-4])
    try:
        load(cut)
        check(False, "a truncated file is rejected")
    except ValueError as e:
        check("tensor" in str(e) or "cover" in str(e), "a truncated file is rejected: " + str(e))
    bad = subprocess.run([ponder, "export", "--checkpoint", os.path.join(tmp, "missing.ckpt")], capture_output=True,
                         text=True, timeout=60)
    check(bad.returncode != 0 and "missing.ckpt" in bad.stderr, "a missing checkpoint is a clear error")
    ro = subprocess.run([ponder, "export", "--checkpoint", ckpt, "--out", "/proc/nope/x.safetensors"],
                        capture_output=True, text=True, timeout=60)
    check(ro.returncode != 0 and "x.safetensors" in ro.stderr, "an unwritable output is a clear error: " + ro.stderr[-200:])
    # --out may replace an earlier export, nothing else.
    log = os.path.join(tmp, "train.jsonl")
    open(log, "w").write('{"step": 1}\n')
    os.symlink(log, os.path.join(tmp, "link.safetensors"))
    os.mkfifo(os.path.join(tmp, "fifo.safetensors"))
    before = open(ckpt, "rb").read()
    for target, why in [(ckpt, "is the checkpoint itself"), (log, "is not a safetensors file"),
                        (os.path.join(tmp, "link.safetensors"), "symbolic link"), (os.path.join(tmp, "fifo.safetensors"), "FIFO"),
                        (tmp, "folder"), ("/dev/null", "device")]:
        r = subprocess.run([ponder, "export", "--checkpoint", ckpt, "--out", target], capture_output=True, text=True,
                           timeout=60)
        line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        check(r.returncode == 1 and why in line and "Traceback" not in r.stderr, "--out %s is refused: %s" % (target, line))
    check(open(ckpt, "rb").read() == before and open(log).read() == '{"step": 1}\n' and os.path.islink(os.path.join(tmp, "link.safetensors"))
          and os.path.exists("/dev/null") and not os.path.isfile("/dev/null"),
          "the checkpoint, the log, the link and /dev/null are untouched")
    again = subprocess.run([ponder, "export", "--checkpoint", ckpt, "--out", out], capture_output=True, text=True, timeout=60)
    check(again.returncode == 0, "an earlier export is replaced: " + again.stderr[-200:])
    empty = subprocess.run([ponder, "export", "--checkpoint", ckpt, "--out", ""], capture_output=True, text=True, timeout=60)
    check(empty.returncode != 0 and "--out" in empty.stderr and "empty" in empty.stderr, "--out '' is refused: " + empty.stderr.strip())

finish()
