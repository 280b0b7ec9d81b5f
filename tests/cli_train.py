#!/usr/bin/env python3
"""End to end through the CLI on configs/ci.yaml: `ponder train` writes a checkpoint and a JSON-lines log;
a run stopped with --stop-after and continued with --resume ends in a byte-identical checkpoint;
`ponder eval` reports finite bits per byte and the per-position curve; errors are one line naming the cause;
the device (`model.device` in the config, `--device` on the command line) is printed, recorded, and refused
with one line when it is cuda and no GPU can be used.
Usage: cli_train.py PATH/TO/ponder (run from anywhere; standard library only)."""
import json
import math
import os
import subprocess
import sys
import tempfile

PONDER = os.path.abspath(sys.argv[1])
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "ci.yaml")


def ponder(*args, ok=True):
    r = subprocess.run([PONDER, "--threads", "1", *args], capture_output=True, text=True)
    if ok and r.returncode != 0:
        sys.exit(f"FAIL: ponder {' '.join(args)} exited {r.returncode}\n{r.stderr}")
    if not ok and r.returncode == 0:
        sys.exit(f"FAIL: ponder {' '.join(args)} succeeded, expected an error")
    return r


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:", what)


def error_line(r):
    lines = r.stderr.strip().splitlines()
    return lines[-1] if lines else ""


with tempfile.TemporaryDirectory(prefix="ponder_cli_train_") as tmp:
    whole, split = os.path.join(tmp, "whole"), os.path.join(tmp, "split")
    ponder("train", "--config", CONFIG, "--out", whole)
    ckpt = os.path.join(whole, "checkpoint.ckpt")
    check(os.path.isfile(ckpt), "train writes checkpoint.ckpt")
    log = [json.loads(line) for line in open(os.path.join(whole, "train.jsonl"))]
    header = log[0]
    check(header["type"] == "header" and header["config"] == open(CONFIG).read(), "log header holds the config text")
    check(all(k in header for k in ("seed", "commit", "data_sha256", "build_type", "threads")), "header provenance")
    check(header["device"].startswith("cpu: "), "log header records the device: " + header["device"])
    steps = [x for x in log[1:] if x["type"] == "step"]
    check(all(k in x for x in steps for k in ("step", "loss", "lr", "grad_norm", "tokens_per_s")), "step lines")
    check([x["step"] for x in steps if "val_bpb" in x] == [20, 40], "validation at steps 20 and 40")
    with open(os.path.join(whole, "train.csv")) as f:
        rows = [line.rstrip("\n").split(",") for line in f]
    check(rows[0] == ["step", "loss", "lr", "grad_norm", "tokens_per_s", "val_loss", "val_bpb"] and
          [int(r[0]) for r in rows[1:]] == [x["step"] for x in steps] and
          all(math.isclose(float(r[1]), x["loss"], rel_tol=1e-8) for r, x in zip(rows[1:], steps)) and
          [r[6] != "" for r in rows[1:]] == ["val_bpb" in x for x in steps],
          "train.csv holds the logged steps, validation where it ran")

    # eval.stream_tokens: each validation also reads the validation streams with the state carried.
    streams_run = os.path.join(tmp, "streams")
    r = ponder("train", "--config", CONFIG, "--out", streams_run, "--set", "train.steps=20", "--set",
               "eval.stream_tokens=64")
    vals = [json.loads(line) for line in open(os.path.join(streams_run, "train.jsonl"))]
    vals = [x for x in vals if x.get("type") == "step" and "val_bpb" in x]
    check(len(vals) == 1 and math.isfinite(vals[0]["val_stream_bpb"]) and vals[0]["val_stream_tokens"] > 0 and
          vals[0]["val_stream_bpb"] != vals[0]["val_bpb"], "stream validation logged beside the windows' at step 20")
    check("val streams" in r.stderr and "state carried" in r.stderr, "stream validation on the console")
    check(all("val_stream_bpb" not in x for x in steps), "no stream validation by default")

    ponder("train", "--config", CONFIG, "--out", split, "--stop-after", "13")
    r = ponder("train", "--out", split, "--resume")
    check("trained to step 40" in r.stdout, "resume continues to the end")
    a = open(ckpt, "rb").read()
    b = open(os.path.join(split, "checkpoint.ckpt"), "rb").read()
    check(a == b, "stop at 13 + resume gives a byte-identical final checkpoint")

    r = ponder("train", "--config", CONFIG, "--out", whole, ok=False)
    check("--resume" in error_line(r), "refuses to overwrite a run without --resume")

    # A log that cannot be written (here /dev/full) stops the run, with a checkpoint once training has begun.
    for name, when in (("train.jsonl", "before training"), ("train.csv", "at the first logged step")):
        full = os.path.join(tmp, "full-" + name)
        os.makedirs(full)
        os.symlink("/dev/full", os.path.join(full, name))
        r = ponder("train", "--config", CONFIG, "--out", full, ok=False)
        ckpt_full = os.path.join(full, "checkpoint.ckpt")
        msg = error_line(r)
        if name == "train.jsonl":
            check("cannot write the log" in msg and name in msg and not os.path.exists(ckpt_full),
                  "a log that fails %s stops with nothing trained: %s" % (when, msg))
        else:
            step = json.loads(ponder("eval", "--checkpoint", ckpt_full, "--json", "--max-windows", "1").stdout)["step"]
            check("cannot write the log" in msg and name in msg and ("stopped after step %d" % step) in msg
                  and 10 <= step < 40, "a log that fails %s stops with a checkpoint (step %d): %s" % (when, step, msg))

    r = ponder("eval", "--checkpoint", ckpt, "--split", "test", "--schedule", "uniform-2", "--json")
    ev = json.loads(r.stdout)
    check(math.isfinite(ev["bpb"]) and ev["bpb"] < 8, f"eval bpb finite ({ev['bpb']:.3f})")
    check(len(ev["position_loss"]) == 64 and ev["mean_k"] == 2.0, "per-position loss over the window, mean K")
    check(ev["device"].startswith("cpu: "), "eval --json records the device")
    r0 = json.loads(ponder("eval", "--checkpoint", ckpt, "--split", "test", "--schedule", "uniform-0",
                           "--json").stdout)
    check(r0["flops_per_token"] < ev["flops_per_token"], "FLOPs per token grow with K")
    sec = json.loads(ponder("eval", "--checkpoint", ckpt, "--max-windows", "2", "--flops-by-layer", "--json").stdout)
    sec = {s["section"]: s for s in sec["flops_by_section"]}
    check(list(sec)[0] == "embedding" and list(sec)[-1] == "logits" and "block1.ttt" in sec and
          math.isclose(sum(s["share"] for s in sec.values()), 1.0, rel_tol=1e-9) and
          sec["block0.ttt"]["flops_per_token"] > 0, "eval --flops-by-layer gives each section's FLOPs and share")
    r = ponder("eval", "--checkpoint", ckpt, "--max-windows", "4")
    check("bits/byte" in r.stdout and "loss by position" in r.stdout, "text report")
    check(r.stdout.startswith("device cpu: "), "eval prints the device first")
    rp = ponder("eval", "--checkpoint", ckpt, "--max-windows", "4", "--schedule", "uniform-2", "--mode", "prefix")
    check("mode prefix, path dual" in rp.stdout and "every K >= 1 alike" not in rp.stdout and
          "every K >= 1 alike" in r.stdout,
          "prefix mode's K = 2 runs on the dual path, and only carry mode says a dead carry makes K >= 1 alike")

    # --streams: the held-out streams read whole with the state carried; the whole and per-stream numbers agree.
    st = json.loads(ponder("eval", "--checkpoint", ckpt, "--split", "test", "--schedule", "uniform-1", "--streams",
                           "--json").stdout)
    weighted = sum(b * n for b, n in zip(st["stream_bpb"], st["stream_tokens"])) / sum(st["stream_tokens"])
    check(len(st["stream_names"]) == st["streams"] and len(set(st["stream_names"])) == st["streams"] and
          all(st["stream_names"]), "eval --streams names its streams, in the order of stream_bpb: %s" % st["stream_names"])
    check(st["streams"] == len(st["stream_bpb"]) > 1 and st["scored_tokens"] == sum(st["stream_tokens"]) and
          0 < st["scored_tokens"] <= st["split_tokens"] and math.isclose(st["bpb"], weighted, rel_tol=1e-9) and
          math.isclose(st["bpb_mean_over_streams"], sum(st["stream_bpb"]) / st["streams"], rel_tol=1e-9),
          "eval --streams: bits/byte weigh every scored token, the per-stream mean is said beside it")
    check(sum(b["tokens"] for b in st["loss_by_position"]) == st["read_tokens"] and st["produced_by"] == "ponder eval --streams",
          "eval --streams: loss by position counts every prediction read; the JSON says what produced it")
    docs = json.loads(ponder("eval", "--checkpoint", ckpt, "--split", "test", "--streams", "--position-docs", "2",
                             "--position-len", "256", "--json").stdout)
    check(sum(b["tokens"] for b in docs["loss_by_position"]) == 2 * 255 and docs["bpb"] == st["bpb"] and
          "2 documents read from their first token" in docs["loss_by_position_source"],
          "eval --streams --position-docs: loss by position from documents' starts, the streams' score as before")
    r = ponder("eval", "--checkpoint", ckpt, "--streams", "--position-docs", "2", "--position-len", "100000000", ok=False)
    check("streams.position_len" in error_line(r), "documents longer than the split has: " + error_line(r))
    r = ponder("eval", "--checkpoint", ckpt, "--position-docs", "2", ok=False)
    check("add --streams" in error_line(r), "--position-docs without --streams is refused by name")
    # --reset-at-documents: this corpus's streams are one document each, so a reset reads what the carried pass read.
    rs = json.loads(ponder("eval", "--checkpoint", ckpt, "--split", "test", "--schedule", "uniform-1", "--streams",
                           "--reset-at-documents", "--json").stdout)
    check(rs["reset_at_documents"] and rs["documents_read_alone"] == rs["streams"] == st["streams"] and
          rs["stream_bpb"] == st["stream_bpb"] and "reset" in rs["read"],
          "eval --streams --reset-at-documents on one-document streams reads them as the carried pass does")
    cut = json.loads(ponder("eval", "--checkpoint", ckpt, "--split", "test", "--schedule", "uniform-1", "--streams",
                            "--max-scored", "100", "--max-segments", "1", "--json").stdout)
    check(cut["streams"] == st["streams"] and cut["scored_tokens"] == sum(min(100, n) for n in st["stream_tokens"]),
          "eval --streams --max-scored/--max-segments override the config's caps: the first 100 scored tokens a stream")
    r = ponder("eval", "--checkpoint", ckpt, "--max-segments", "1", ok=False)
    check("add --streams" in error_line(r), "--max-segments without --streams is refused by name")
    r = ponder("eval", "--checkpoint", ckpt, "--reset-at-documents", ok=False)
    check("add --streams" in error_line(r), "--reset-at-documents without --streams is refused by name")

    bad = os.path.join(tmp, "bad.ckpt")
    data = bytearray(a)
    data[len(data) // 2] ^= 0xFF
    open(bad, "wb").write(data)
    r = ponder("eval", "--checkpoint", bad, ok=False)
    check(error_line(r).startswith("ponder: error: checkpoint '" + bad + "' is corrupt"), "corrupt checkpoint")

    cfg = os.path.join(tmp, "typo.yaml")
    open(cfg, "w").write(open(CONFIG).read().replace("  lr:", "  learning_rate:"))
    r = ponder("train", "--config", cfg, "--out", os.path.join(tmp, "typo"), ok=False)
    check(error_line(r).startswith("ponder: error: " + cfg + ":") and "train.learning_rate: unknown key"
          in error_line(r), "unknown config key named with file and line")

    # The device: model.device in the config, --device over it, a one-line error for cuda without a GPU.
    text = open(CONFIG).read()
    cfg = os.path.join(tmp, "tpu.yaml")
    open(cfg, "w").write(text.replace("model:\n", "model:\n  device: tpu\n", 1))
    r = ponder("train", "--config", cfg, "--out", os.path.join(tmp, "tpu"), ok=False)
    check(error_line(r) == "ponder: error: " + cfg + ":3: model.device: expected one of cpu, cuda, got 'tpu'",
          "config device: tpu is refused naming the key")
    gpu_cfg = os.path.join(tmp, "gpu.yaml")
    open(gpu_cfg, "w").write(text.replace("model:\n", "model:\n  device: cuda\n", 1))
    gpu_usable = "CUDA: built; device " in ponder("--version").stdout
    expect_gpu = os.environ.get("PONDER_EXPECT_GPU", "0") not in ("", "0")
    check(gpu_usable or not expect_gpu, "PONDER_EXPECT_GPU is set, so a usable GPU must be found: " +
          ponder("--version").stdout.strip().replace("\n", "; "))
    if gpu_usable:
        r = ponder("train", "--config", gpu_cfg, "--out", os.path.join(tmp, "gpu"), "--stop-after", "1")
        head = json.loads(open(os.path.join(tmp, "gpu", "train.jsonl")).readline())
        check(head["device"].startswith("cuda: "), "model.device: cuda trains on the GPU: " + head["device"])
        cpu_eval = json.loads(ponder("eval", "--checkpoint", ckpt, "--max-windows", "4", "--json").stdout)
        gpu_eval = json.loads(ponder("eval", "--checkpoint", ckpt, "--device", "cuda", "--max-windows", "4",
                                     "--json").stdout)
        check(gpu_eval["device"].startswith("cuda: ") and abs(gpu_eval["bpb"] - cpu_eval["bpb"]) < 1e-3,
              "a CPU-trained checkpoint evaluates on the GPU to the CPU's bits per byte")
    else:
        for args, where in ((["--config", gpu_cfg], gpu_cfg + ": model.device: cuda: no CUDA device: "),
                            (["--config", CONFIG, "--device", "cuda"], "--device cuda: no CUDA device: ")):
            r = ponder("train", *args, "--out", os.path.join(tmp, "nogpu"), ok=False)
            check(error_line(r).startswith("ponder: error: " + where) and len(r.stderr.strip().splitlines()) == 1,
                  "cuda without a GPU is one line, before any work: " + error_line(r))
        check(not os.path.exists(os.path.join(tmp, "nogpu")), "nothing was written for the refused run")
        r = ponder("eval", "--checkpoint", ckpt, "--device", "cuda", ok=False)
        check(error_line(r).startswith("ponder: error: --device cuda: no CUDA device: "), "eval --device cuda refused")
        r = ponder("compare", "--checkpoint", ckpt, "--config", gpu_cfg, "--out", os.path.join(tmp, "cmp"), ok=False)
        check(error_line(r).startswith("ponder: error: " + gpu_cfg + ": model.device: cuda: no CUDA device: "),
              "compare refuses the config's cuda before loading anything")
        check(not os.path.exists(os.path.join(tmp, "cmp")), "nothing was written for the refused comparison")
    # --device cpu wins over the config's cuda, wherever it runs.
    r = ponder("train", "--config", gpu_cfg, "--device", "cpu", "--out", os.path.join(tmp, "cpu"), "--stop-after", "1")
    check("train: device cpu: " in r.stderr, "train prints the device it runs on")
    head = json.loads(open(os.path.join(tmp, "cpu", "train.jsonl")).readline())
    check(head["device"].startswith("cpu: ") and head["config"] == open(gpu_cfg).read(),
          "--device cpu overrides model.device: cuda; the stored config is unchanged")
    # A scheduler's SIGTERM, like Ctrl-C, finishes the step, checkpoints and says how to resume.
    import signal
    import time
    term = os.path.join(tmp, "term")
    proc = subprocess.Popen([PONDER, "--threads", "1", "train", "--config", CONFIG, "--steps", "100000", "--out", term],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = os.path.join(term, "train.jsonl")
    deadline = time.time() + 60
    while time.time() < deadline and not (os.path.exists(log) and sum(1 for _ in open(log)) >= 3):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    check(proc.returncode == 1 and "SIGTERM: interrupted after step " in last and "--resume" in last,
          "SIGTERM stops training with a checkpoint and the resume command: " + last)
    step = int(last.split("interrupted after step ")[1].split(";")[0])
    r = ponder("eval", "--checkpoint", os.path.join(term, "checkpoint.ckpt"), "--max-windows", "2", "--json")
    check(json.loads(r.stdout)["step"] == step, "the checkpoint holds the step SIGTERM stopped at")

# AddressSanitizer reserves terabytes of address space, so the checks under `ulimit -v` run only without it
# (scripts/sanitize.sh sets ASAN_OPTIONS).
if "ASAN_OPTIONS" in os.environ:
    print("skipped under AddressSanitizer: the checks under an address-space limit")
else:
    # Under an address-space limit, more threads than OpenBLAS's per-thread buffers fit in were a hang before any output
    # (OpenBLAS retries a refused buffer forever): the threads are cut to what half the limit holds at 200 MiB each
    # (OpenBLAS's buffer and a glibc arena per BLAS-calling thread), and that is said. 15 threads hung here now and
    # then once the TTT dual form's kernel called BLAS from every worker.
    with tempfile.TemporaryDirectory(prefix="ponder_cli_threads_") as tmp:
        r = subprocess.run(["bash", "-c", 'ulimit -v 4194304 && exec "$0" --threads 32 train --config "$1" --out "$2" '
                            '--set train.steps=2 --set train.warmup=0', PONDER, CONFIG, tmp],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and "32 threads would need more address space than the limit" in r.stderr and
              "using 10" in r.stderr, "--threads 32 under ulimit -v 4 GiB trains on 10 threads and says so: " + r.stderr[-300:])

    # Out of memory is one line naming what to change: a model whose parameters cannot fit is refused before anything is
    # made, and activations that do not fit end in a clear error instead of std::bad_alloc (or an abort while unwinding).
    with tempfile.TemporaryDirectory(prefix="ponder_cli_oom_") as tmp:
        def limited(yaml_text, kib):
            cfg = os.path.join(tmp, "c.yaml")
            open(cfg, "w").write(yaml_text)
            return subprocess.run(["bash", "-c", 'ulimit -v %d && exec "$0" --threads 1 train --config "$1" --out "$2"' % kib,
                                   PONDER, cfg, os.path.join(tmp, "out")], capture_output=True, text=True, timeout=300)
        r = limited("model:\n  d: 8192\n  layers: 24\n", 8388608)
        check(r.returncode == 1 and "model.d 8192 with model.layers 24 needs at least 288.1 GiB" in error_line(r) and
              "8.0 GiB of memory this process may use" in error_line(r), "a model too big to fit is refused by name: " +
              error_line(r))
        r = limited("model:\n  d: 512\n  layers: 4\ntrain:\n  batch_size: 64\n  seq_len: 4096\n", 2097152)
        check(r.returncode == 1 and error_line(r).startswith("ponder: error: out of memory (std::bad_alloc)") and
              "train.batch_size" in error_line(r), "activations that do not fit: one line naming the keys: " + error_line(r))

# Whole TTT layers are gradient-checked from the command line too: first and second order through inner steps.
r = ponder("gradcheck", "--op", "ttt-linear")
rows = [l for l in r.stdout.splitlines() if l.startswith("ttt-linear ")]
check(len(rows) == 5 and all(l.rstrip().endswith(" ok") for l in rows) and "5 TTT layer cases: ok" in r.stdout,
      "gradcheck --op ttt-linear checks 5 layer cases (carry and prefix, K=1,1,1 and 2,0,3; prefix's closed form), "
      "first and second order")
r = ponder("gradcheck", "--list")
check("ttt-mlp prefix K=2,0,3" in r.stdout.splitlines() and "ttt-linear prefix K=2,0,3 closed form" in r.stdout.splitlines(),
      "gradcheck --list names the TTT layer cases")
r = ponder("gradcheck", "--op", "no-such-op", ok=False)
check("no op matches 'no-such-op'" in error_line(r), "gradcheck of an unknown op is one line naming it")
print("all CLI training checks passed")
