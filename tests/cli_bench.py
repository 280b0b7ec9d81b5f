#!/usr/bin/env python3
"""`ponder bench train` through the CLI on configs/ci.yaml: --variants picks and orders the rows and rejects
unknown names with one line; a variant whose estimated step memory exceeds --mem-limit-mb is reported as
skipped (with the estimate) instead of being run; --profile adds the per-kind and per-kernel times; --precision
bf16 runs (on the CPU, rounded operands) and its rows say so, an unknown precision is refused, and --device cuda runs on a GPU or says in one line why it cannot. --reps reports the fastest of several repetitions and lists them all. `bench dual` gives its rows (checked against the CPU kernel on a GPU). The rows say how OpenMP threads waited
(ponder's short spin unless the user chose) and which OpenBLAS kernels ran. No timing is checked. Usage: cli_bench.py PATH/TO/ponder (standard library only)."""
import json
import os
import subprocess
import sys
import tempfile

PONDER = os.path.abspath(sys.argv[1])
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "ci.yaml")


def bench(*args, ok=True):
    r = subprocess.run([PONDER, "bench", "train", "--config", CONFIG, "--threads-list", "1", "--steps", "1", *args],
                       capture_output=True, text=True)
    if ok and r.returncode != 0:
        sys.exit(f"FAIL: bench train {' '.join(args)} exited {r.returncode}\n{r.stderr}")
    if not ok and r.returncode == 0:
        sys.exit(f"FAIL: bench train {' '.join(args)} succeeded, expected an error")
    return r


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:", what)


def bench_env(env, *args):
    r = subprocess.run([PONDER, "bench", "train", "--config", CONFIG, "--threads-list", "1", "--steps", "1", "--json",
                        *args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"FAIL: bench train {' '.join(args)} exited {r.returncode}\n{r.stderr}")
    return json.loads(r.stdout.splitlines()[0])


# How idle OpenMP threads wait: ponder picks a short spin unless the user set either variable, and says what ran.
bare = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
row = bench_env(bare, "--variants", "dual-only")
check((row["variant"], row["path"]) == ("dual-only", "dual"), "dual-only: every fused op but the dual form composed")
check(row["omp_wait"] == "GOMP_SPINCOUNT=3000", "with neither variable set, ponder spins 3000 times: " + row["omp_wait"])
check(bench_env(dict(bare, GOMP_SPINCOUNT="123"), "--variants", "dual")["omp_wait"] == "GOMP_SPINCOUNT=123",
      "a user's GOMP_SPINCOUNT stands")
check(bench_env(dict(bare, OMP_WAIT_POLICY="passive"), "--variants", "dual")["omp_wait"] == "OMP_WAIT_POLICY=passive",
      "a user's OMP_WAIT_POLICY stands, with no spin count added")
check(row["blas_core"] not in ("", "unknown"), "the row names the OpenBLAS kernels: " + row["blas_core"])

rows = [json.loads(l) for l in
        bench("--variants", "iter-2,dual,dual-composed,dual-units", "--json", "--profile").stdout.splitlines()]
check([(r["variant"], r["mode"], r["path"], r["K"]) for r in rows] ==
      [("iterative", "carry", "iterative", 2), ("dual", "carry", "dual", 1), ("dual-comp", "carry", "dual", 1),
       ("dual-units", "carry", "dual", 1)],
      "--variants picks and orders the rows")
check(all(r["tokens_per_s"] > 0 and r["estimated_mb"] > 0 for r in rows), "rows report tokens/s and a memory estimate")
check(all(0 < r["base_rss_mb"] < r["peak_rss_mb"] for r in rows),
      "rows report what was resident before the trainer existed, below the variant's peak: " +
      str([(r["base_rss_mb"], r["peak_rss_mb"]) for r in rows]))
prof = rows[1]["profile"]
check(prof["matmul"]["calls_per_step"] > 0 and prof["framework"]["ms_per_step"] >= 0 and
      any(k["kernel"] == "ttt_linear_scan" and k["kind"] == "fused" for k in prof["kernels"]) and
      any(k["kernel"] == "ttt_linear_scan_backward" for k in prof["kernels"]),
      "--profile reports kinds and kernels (the dual form's scan kernel over a layer's units, forward and backward)")
comp = [k["kernel"] for k in rows[2]["profile"]["kernels"]]
check("ttt_linear_dual" not in comp and "ttt_linear_scan" not in comp and "ln_l2_grad" in comp,
      "dual-composed runs the dual form as its composition (ln_l2_grad, no dual or scan kernel)")
units = {k["kernel"]: k["calls_per_step"] for k in rows[3]["profile"]["kernels"]}
scans = {k["kernel"]: k["calls_per_step"] for k in prof["kernels"]}
check("ttt_linear_scan" not in units and units.get("ttt_linear_dual", 0) > scans["ttt_linear_scan"] and
      units.get("ttt_linear_dual_backward", 0) > scans["ttt_linear_scan_backward"],
      "dual-units calls the one-unit kernels, more often than dual calls the scan kernels: " + str((units, scans)))
check(rows[3]["flops_per_token"] == rows[1]["flops_per_token"] and rows[3]["loss"] == rows[1]["loss"],
      "dual-units and dual count the same FLOPs per token and train to the same loss (the scan's bits): " +
      str((rows[3]["loss"], rows[1]["loss"])))

# Prefix mode on the dual path with its K-step kernel and as the kernel's composition: the same FLOPs per token
# (the kernel counts its composition's), the kernel in one profile only.
rows = [json.loads(l) for l in bench("--variants", "prefix-closed-2,prefix-composed-2", "--json", "--profile").stdout.splitlines()]
check([(r["variant"], r["mode"], r["path"], r["K"]) for r in rows] ==
      [("pfx-closed", "prefix", "dual", 2), ("pfx-comp", "prefix", "dual", 2)], "prefix-closed-K and prefix-composed-K rows")
names = [[k["kernel"] for k in r["profile"]["kernels"]] for r in rows]
check("ttt_prefix_steps" in names[0] and "ttt_prefix_steps_backward" in names[0] and
      not any(n.startswith("ttt_prefix_steps") for n in names[1]),
      "prefix-closed runs the K-step kernel, prefix-composed its composition")
check(rows[0]["flops_per_token"] == rows[1]["flops_per_token"], "the kernel counts its composition's FLOPs")

# TTT-MLP's dual form with its kernel and as its composition (ci.yaml with inner: mlp): the same FLOPs per token, the
# kernel in one profile only.
with tempfile.TemporaryDirectory() as tmp:
    mlp = os.path.join(tmp, "ci_mlp.yaml")
    with open(CONFIG) as src, open(mlp, "w") as dst:
        dst.write(src.read().replace("inner: linear", "inner: mlp"))
    r = subprocess.run([PONDER, "bench", "train", "--config", mlp, "--threads-list", "1", "--steps", "1", "--variants",
                        "dual,dual-composed,dual-loop", "--json", "--profile"], capture_output=True, text=True)
    check(r.returncode == 0, "bench train on a TTT-MLP config runs: " + r.stderr[-300:])
    rows = [json.loads(l) for l in r.stdout.splitlines()]
loop = rows.pop()
check(loop["variant"] == "dual-loop" and loop["loss"] == rows[0]["loss"] and
      loop["flops_per_token"] == rows[0]["flops_per_token"],
      "dual-loop (one ttt_mlp_dual op per unit) and dual (one ttt_mlp_scan op per chunk) train to the same loss at "
      "the same FLOPs: " + str((loop["loss"], rows[0]["loss"])))
copies = [r["profile"]["copy"]["calls_per_step"] for r in (rows[0], loop)]
check(copies[0] < copies[1], "the scan op makes fewer copies per step than the loop: " + str(copies))
names = [[k["kernel"] for k in r["profile"]["kernels"]] for r in rows]
check("ttt_mlp_dual" in names[0] and "ttt_mlp_dual_backward" in names[0] and
      not any(n.startswith("ttt_mlp_dual") for n in names[1]),
      "TTT-MLP's dual form runs its kernel; dual-composed its composition")
fwd = [r["flops_per_token"] * r["flop_share"]["forward"] for r in rows]
bwd = [r["flops_per_token"] * r["flop_share"]["backward"] for r in rows]
check(abs(fwd[0] - fwd[1]) <= 1e-9 * fwd[1], "the TTT-MLP kernel counts its composition's forward FLOPs")
# The kernel's backward counts its composition's backward with a gradient for all five outputs. The last unit's
# carried state (W1', b1', W2', b2') gets none, so the recorded composition skips that branch and counts less.
check(bwd[1] < bwd[0] < 1.1 * bwd[1], "its backward counts the composition's with every output's gradient")

# --reps: the row is the fastest repetition, and every repetition's tokens/s is listed in the order they ran.
row = json.loads(bench("--variants", "dual", "--json", "--reps", "3").stdout.splitlines()[-1])
check(row["reps"] == 3 and len(row["tokens_per_s_reps"]) == 3 and all(x > 0 for x in row["tokens_per_s_reps"]) and
      row["tokens_per_s"] == max(row["tokens_per_s_reps"]), "--reps 3: the fastest of three repetitions, all listed")
check("the fastest of 2 repetitions" in bench("--variants", "dual", "--reps", "2").stdout.splitlines()[0],
      "the table's header says the rows are the fastest of --reps repetitions")
r = bench("--reps", "0", ok=False)
check("--reps" in r.stderr, "--reps 0 is refused")

rows = [json.loads(l) for l in bench("--variants", "dual,prefix-2", "--json", "--mem-limit-mb", "1").stdout.splitlines()]
check(len(rows) == 2 and all("skipped" in r and r["estimated_mb"] > 1 and r["limit_mb"] == 1 for r in rows),
      "variants over --mem-limit-mb are skipped with their estimate")
check("tokens_per_s" not in rows[0], "a skipped variant is not run")
text = bench("--variants", "prefix-2", "--mem-limit-mb", "1").stdout
check("prefix      2       1 skipped: a step needs about" in text, "the table says which variant was skipped and why")

for bad, msg in [("foo", "unknown variant 'foo'"), ("prefix-0", "needs a step count >= 1"),
                 ("iter-x", "needs a step count >= 1")]:
    r = bench("--variants", bad, ok=False)
    check(msg in r.stderr.strip().splitlines()[-1], f"--variants {bad} is refused in one line")

# Mixed precision: a row at bf16 counts the same FLOPs as at f32 (rounding operands adds no matmul work) and says
# which precision it ran at; a precision the engine does not have is one line.
f32, bf16 = (json.loads(bench("--variants", "dual", "--json", "--precision", p).stdout.splitlines()[-1])
             for p in ("f32", "bf16"))
check(f32["matmul_precision"] == "f32" and bf16["matmul_precision"] == "bf16", "rows name their matmul precision")
check(bf16["flops_per_token"] == f32["flops_per_token"] and bf16["loss"] != f32["loss"],
      "--precision bf16 rounds the products (another loss) at the same FLOP count")
r = bench("--precision", "fp8", ok=False)
check("--precision" in r.stderr and "fp8" in r.stderr, "an unknown --precision is refused")

# The GPU option: without a GPU (or a CUDA build) --device cuda is one line naming why.
r = subprocess.run([PONDER, "bench", "train", "--config", CONFIG, "--device", "cuda", "--steps", "1", "--variants",
                    "dual", "--json"], capture_output=True, text=True)
if r.returncode == 0:  # a GPU machine: the row is the GPU's, with MFU where the device's peak is known
    row = json.loads(r.stdout.splitlines()[-1])
    check(row["device"] == "cuda" and row["tokens_per_s"] > 0 and row["reference_gemm"].startswith("cublas"),
          "--device cuda trains on the GPU against a cuBLAS GEMM")
else:
    check("--device cuda: no CUDA device" in r.stderr.strip().splitlines()[-1],
          "--device cuda without a usable GPU is one line naming why")

# `bench dual`: the dual-form kernel alone. On the CPU two rows (forward, backward) with the FLOPs of the op's rules
# (GFLOP/s > 0 means they were counted); on a GPU every variant is checked against the CPU kernel first.
r = subprocess.run([PONDER, "bench", "dual", "--device", "cpu", "--batch", "1", "--heads", "2", "--reps", "1",
                    "--json"], capture_output=True, text=True)
check(r.returncode == 0, "bench dual --device cpu runs")
rows = [json.loads(l) for l in r.stdout.splitlines()]
check([x["pass"] for x in rows] == ["forward", "backward"] and all(x["us_per_call"] > 0 and x["gflops"] > 0 and
      x["heads"] == 2 and x["mini_batch"] == 16 and x["head_dim"] == 64 for x in rows),
      "bench dual on the CPU: forward and backward rows with µs per call and counted GFLOP/s")
r = subprocess.run([PONDER, "bench", "dual", "--device", "cpu", "--inner", "mlp", "--batch", "1", "--heads", "2",
                    "--head-dim", "16", "--reps", "1", "--json"], capture_output=True, text=True)
check(r.returncode == 0, "bench dual --inner mlp --device cpu runs")
rows = [json.loads(l) for l in r.stdout.splitlines()]
check([x["pass"] for x in rows] == ["forward", "backward"] and all(x["inner"] == "mlp" and x["hidden"] == 64 and
      x["us_per_call"] > 0 and x["gflops"] > 0 for x in rows),
      "bench dual --inner mlp on the CPU: TTT-MLP's forward and backward rows, hidden 4 x head dim by default")
r = subprocess.run([PONDER, "bench", "dual", "--device", "cpu", "--units", "3", "--batch", "1", "--heads", "2",
                    "--head-dim", "16", "--reps", "1", "--json"], capture_output=True, text=True)
check(r.returncode == 0, "bench dual --units --device cpu runs")
rows = [json.loads(l) for l in r.stdout.splitlines()]
check([(x["pass"], x["kernel"]) for x in rows] ==
      [("forward", "scan"), ("backward", "scan"), ("forward", "units"), ("backward", "units")] and
      all(x["units"] == 3 and x["gflops"] > 0 and abs(x["us_per_unit"] * 3 - x["us_per_call"]) < 1e-6 * x["us_per_call"]
          for x in rows),
      "bench dual --units on the CPU: the scan kernel's rows, then the one-unit kernel's, per call and per unit")
r = subprocess.run([PONDER, "bench", "dual", "--device", "cpu", "--units", "3", "--inner", "mlp", "--batch", "1",
                    "--heads", "2", "--head-dim", "8", "--reps", "1", "--json"], capture_output=True, text=True)
check(r.returncode == 0, "bench dual --units --inner mlp --device cpu runs: " + r.stderr[-300:])
rows = [json.loads(l) for l in r.stdout.splitlines()]
check([(x["pass"], x["kernel"], x["inner"], x["hidden"]) for x in rows] ==
      [(p, k, "mlp", 32) for k in ("scan", "units") for p in ("forward", "backward")] and
      all(x["units"] == 3 and x["gflops"] > 0 for x in rows),
      "bench dual --units --inner mlp on the CPU: TTT-MLP's scan rows, then unit by unit")
r = subprocess.run([PONDER, "bench", "dual", "--device", "cuda", "--inner", "mlp", "--batch", "1", "--heads", "2",
                    "--check-only", "--json"], capture_output=True, text=True)
if r.returncode == 0:
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    check(len(rows) == 1 and rows[0]["max_rel_err"] < 1e-3, "bench dual --inner mlp --device cuda: checked")
else:
    check("--device cuda: no CUDA device" in r.stderr.strip().splitlines()[-1],
          "bench dual --inner mlp --device cuda without a usable GPU is one line naming why")
r = subprocess.run([PONDER, "bench", "dual", "--device", "cpu", "--check-only"], capture_output=True, text=True)
check(r.returncode != 0 and "--check-only needs --device cuda" in r.stderr.strip().splitlines()[-1],
      "bench dual --check-only on the CPU is refused in one line")
r = subprocess.run([PONDER, "bench", "dual", "--device", "cuda", "--batch", "1", "--heads", "2", "--reps", "1",
                    "--no-phases", "--json"], capture_output=True, text=True)
if r.returncode == 0:
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    check(len(rows) == 8 and all(x["max_rel_err"] is not None and x["max_rel_err"] < 1e-3 for x in rows),
          "bench dual --device cuda: every variant checked against the CPU kernel")
else:
    check("--device cuda: no CUDA device" in r.stderr.strip().splitlines()[-1],
          "bench dual --device cuda without a usable GPU is one line naming why")
