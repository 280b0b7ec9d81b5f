#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one go, for a machine that has one: the CUDA test suite with
# PONDER_EXPECT_GPU=1 (a suite that cannot reach the device fails instead of passing), again with
# PONDER_CUDA_SYNC=1 (a fault names its kernel), the op table's gradcheck on the device, the CUDA benchmarks
# (GEMM against cuBLAS, kernels against a copy, training tokens/s and MFU on the 125M shape) and then every
# CPU test suite of the build. Each step has its own time limit and log; a failed step does not stop the rest.
#
#   bash scripts/gpu_check.sh [BUILD_DIR] [LOG_DIR]      (defaults: build, gpu_check)
#
# The summary (one line per step: name, exit status, seconds) is printed and written to LOG_DIR/summary.txt.
# GPU_CHECK_SECONDS caps the whole run (default 3600): a step gets at most what is left, and steps that no longer
# fit are listed as skipped, so on a machine lent for minutes the most important checks run first.
# GPU_CHECK_SKIP: space-separated step names to leave out (e.g. "bench_matmul bench_ops"; "cpu_suites" leaves out
# the CPU test suites).
set -u
build=${1:-build}
logs=${2:-gpu_check}
ponder="$build/experiments/ponder"
mkdir -p "$logs"
[ -x "$ponder" ] || { echo "gpu_check: no ponder binary at $ponder (build first: bash scripts/setup.sh)" >&2; exit 2; }
export PONDER_EXPECT_GPU=1 OMP_WAIT_POLICY=passive
: > "$logs/summary.txt"

deadline=$((SECONDS + ${GPU_CHECK_SECONDS:-3600}))

# step NAME SECONDS COMMAND...: runs COMMAND with a time limit (cut to what is left), output to LOG_DIR/NAME.log.
step() {
  local name=$1 limit=$2
  shift 2
  case " ${GPU_CHECK_SKIP:-} " in *" $name "*) printf '%-22s skipped (GPU_CHECK_SKIP)\n' "$name" | tee -a "$logs/summary.txt"; return ;; esac
  local left=$((deadline - SECONDS))
  if [ "$left" -lt 10 ]; then
    printf '%-22s skipped (GPU_CHECK_SECONDS spent)\n' "$name" | tee -a "$logs/summary.txt"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  printf '%-22s rc=%-3d %4ds\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$logs/summary.txt"
  tail -n 4 "$logs/$name.log" | sed 's/^/    /'
}

step version 60 "$ponder" --version
command -v nvidia-smi > /dev/null && step nvidia_smi 30 nvidia-smi
step test_cuda 180 "$build/tests/test_cuda" --duration=true
# Only when the suite failed: the same run with a synchronisation after every launch names the faulting kernel.
grep -q '^test_cuda  *rc=[1-9]' "$logs/summary.txt" &&
  step test_cuda_sync 180 env PONDER_CUDA_SYNC=1 "$build/tests/test_cuda"
# The fused dual-form kernel alone at the 125M shape: checked against the CPU, shared against global scratch, and
# the backward phase by phase.
step bench_dual 90 "$ponder" bench dual --device cuda
# The same over a whole 2,048-token sequence (128 units): the scan kernels (one launch a layer) against the one-unit
# kernels launched unit by unit, both checked against the CPU first.
step bench_dual_scan 90 "$ponder" bench dual --device cuda --units 128
# The same with the products at one output per thread instead of the default tensor cores (`bench dual` above times
# the one-unit kernel at every unroll).
step bench_dual_scan_u1 90 env PONDER_CUDA_DUAL_UNROLL=1 "$ponder" bench dual --device cuda --units 128
# Wave quantisation: the 125M training step's batch 32 gives the scan 384 head blocks; at two blocks a multiprocessor
# (register-bound) an H100/H200's 132 make 264 slots, so the launch runs in two rounds, the second 45 % full. Batch
# 22 (264 blocks) fills one round exactly. Per-head time at 22 against 32 says what the partial round costs.
step bench_dual_scan_b22 60 "$ponder" bench dual --device cuda --units 128 --batch 22 --no-phases
step bench_dual_scan_b32 60 "$ponder" bench dual --device cuda --units 128 --batch 32 --no-phases
# TTT-MLP's dual-form kernel alone at the 125M MLP shape (h 256), checked against the CPU first; then against its
# composition in training, in one run (tokens/s; the model tests above check values).
step bench_dual_mlp 90 "$ponder" bench dual --device cuda --inner mlp
# The same with its products at one output per thread instead of the default tensor cores (checked against the CPU
# first, as every row).
step bench_dual_mlp_u1 90 env PONDER_CUDA_DUAL_UNROLL=1 "$ponder" bench dual --device cuda --inner mlp
# TTT-MLP's scan kernels over 32 units against its one-unit kernel launched unit by unit; in training, dual (the
# scan kernels), dual-units (the scan node calling the one-unit kernel unit by unit), dual-loop (one op per unit).
step bench_dual_scan_mlp 90 "$ponder" bench dual --device cuda --inner mlp --units 32
step bench_train_small_mlp 150 "$ponder" bench train --device cuda --config configs/small_mlp.yaml \
  --variants dual,dual-units,dual-loop,dual-composed --steps 2 --profile
# The 125M shape at batch 32 (65,536 tokens a step), where the GPU is fullest: MFU at bf16 and TF32, and a profile;
# dual-units calls the one-unit dual kernels unit by unit where dual runs the scan kernels (one launch a layer).
sed 's/^  batch_size: .*/  batch_size: 32/' configs/ttt125m.yaml > "$logs/ttt125m_b32.yaml"
step bench_train_125m_b32_bf16 150 "$ponder" bench train --device cuda --config "$logs/ttt125m_b32.yaml" \
  --variants dual,dual-units,dual-only --steps 2 --precision bf16
# The same training step with the dual-form kernels' products at one output per thread (the default before the
# tensor-core products were measured faster).
step bench_train_125m_b32_bf16_u1 120 env PONDER_CUDA_DUAL_UNROLL=1 "$ponder" bench train --device cuda \
  --config "$logs/ttt125m_b32.yaml" --variants dual --steps 2 --precision bf16
# Where that step's time goes: each kernel's device time by kind, and the time the GPU waited for the host.
step bench_train_125m_b32_prof 120 "$ponder" bench train --device cuda --config "$logs/ttt125m_b32.yaml" \
  --variants dual --steps 1 --precision bf16 --profile
# Why the dual-form kernels run far below the GPU's peak (a few percent of it at the 125M shape): Nsight Compute's
# stall reasons, occupancy and memory traffic for one forward and one backward launch at that shape, where ncu is
# installed and may read the performance counters (a permission error is in the log).
ncu_bin=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -n 1)
if [ -n "$ncu_bin" ]; then
  step ncu_dual 150 "$ncu_bin" --kernel-name 'regex:dual_(forward|backward)_kernel' --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters \
    "$ponder" bench dual --device cuda --check-only
  # The same for the tensor-core products: the fifth variant --check-only runs, after four variants of one forward
  # and one backward launch each. Shared-memory bank conflicts of the fragment loads show in the memory tables.
  step ncu_dual_mma 150 "$ncu_bin" --kernel-name 'regex:dual_(forward|backward)_kernel' --launch-skip 8 \
    --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SourceCounters \
    "$ponder" bench dual --device cuda --check-only
fi
# The attention kernels against their composition in training: small.yaml with attention in every layer.
sed 's/^model:$/model:\n  mixers: [attention, attention, attention, attention]/' configs/small.yaml > "$logs/small_attn.yaml"
step bench_train_small_attn 120 "$ponder" bench train --device cuda --config "$logs/small_attn.yaml" \
  --variants dual,dual-only --steps 2 --profile
step bench_train_125m_b32_tf32 120 "$ponder" bench train --device cuda --config "$logs/ttt125m_b32.yaml" \
  --variants dual --steps 2 --precision tf32
# compute-sanitizer on the dual-form kernels at a small shape, each variant run once: memcheck (out-of-bounds and
# misaligned accesses) and racecheck (shared-memory hazards between a block's threads).
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -n 1)
if [ -n "$cs" ]; then
  step memcheck_dual 90 "$cs" --tool memcheck --error-exitcode 9 "$ponder" bench dual --device cuda --batch 1 \
    --heads 2 --check-only
  step racecheck_dual 150 "$cs" --tool racecheck --error-exitcode 9 "$ponder" bench dual --device cuda --batch 1 \
    --heads 2 --check-only
  # memcheck on the fused norm, gated-product, RoPE and AdamW kernels, through their test against the CPU kernels.
  step memcheck_fused 120 "$cs" --tool memcheck --error-exitcode 9 "$build/tests/test_cuda" \
    -tc='cuda: the fused norm*'
  # The scan kernels (the dual form over every unit of a layer, carrying each head's state in global memory).
  step memcheck_scan 90 "$cs" --tool memcheck --error-exitcode 9 "$build/tests/test_cuda" \
    -tc='cuda: the TTT-Linear scan kernels give*'
  step racecheck_scan 150 "$cs" --tool racecheck --error-exitcode 9 "$build/tests/test_cuda" \
    -tc='cuda: the TTT-Linear scan kernels give*'
  step memcheck_scan_mlp 120 "$cs" --tool memcheck --error-exitcode 9 "$build/tests/test_cuda" \
    -tc='cuda: the TTT-MLP scan kernels give*'
  step memcheck_dual_mlp 90 "$cs" --tool memcheck --error-exitcode 9 "$ponder" bench dual --device cuda \
    --inner mlp --batch 1 --heads 2 --check-only
  # memcheck on TTT-MLP's dual-form kernels and the scan node, through the tiny models' GPU-against-CPU test.
  step memcheck_attention 90 "$cs" --tool memcheck --error-exitcode 9 "$build/tests/test_cuda" \
    -tc='cuda: the attention kernels match*'
  step racecheck_attention 120 "$cs" --tool racecheck --error-exitcode 9 "$build/tests/test_cuda" \
    -tc='cuda: the attention kernels match*'
  step memcheck_prefix 90 "$cs" --tool memcheck --error-exitcode 9 "$build/tests/test_cuda" \
    -tc='cuda: the prefix-mode kernels match*'
  step memcheck_models 150 "$cs" --tool memcheck --error-exitcode 9 "$build/tests/test_cuda" \
    -tc='cuda: a tiny model*'
fi
step bench_train_125m 150 "$ponder" bench train --device cuda --config configs/ttt125m.yaml --variants dual,dual-composed \
  --steps 2
step bench_train_125m_bf16 150 "$ponder" bench train --device cuda --config configs/ttt125m.yaml --variants dual \
  --steps 2 --precision bf16
step bench_train_125m_tf32 150 "$ponder" bench train --device cuda --config configs/ttt125m.yaml --variants dual \
  --steps 2 --precision tf32
step bench_train_125m_prof 120 "$ponder" bench train --device cuda --config configs/ttt125m.yaml --variants dual \
  --steps 1 --profile
# End to end through the CLI: train the CI model on the GPU, then evaluate its checkpoint on both devices.
step train_cuda 120 "$ponder" train --config configs/ci.yaml --device cuda --out "$logs/train_ci" --steps 40
step eval_cuda 60 "$ponder" eval --checkpoint "$logs/train_ci/checkpoint.ckpt" --device cuda --max-windows 16
step eval_cpu 60 "$ponder" eval --checkpoint "$logs/train_ci/checkpoint.ckpt" --device cpu --max-windows 16
step gradcheck_cuda 150 "$ponder" gradcheck --all --device cuda
step bench_matmul 90 "$ponder" bench matmul --device cuda
step bench_matmul_bf16 90 "$ponder" bench matmul --device cuda --precision bf16
step bench_ops 90 "$ponder" bench ops --device cuda
step bench_train_small 120 "$ponder" bench train --device cuda --config configs/small.yaml \
  --variants dual,dual-composed,prefix-closed-4,prefix-composed-4,prefix-4 --steps 3 --profile
# The CPU suites: four at a time, four threads each, with what is left.
case " ${GPU_CHECK_SKIP:-} " in *" cpu_suites "*) echo "cpu_suites             skipped (GPU_CHECK_SKIP)" |
  tee -a "$logs/summary.txt"; exit 0 ;; esac
left=$((deadline - SECONDS))
[ "$left" -lt 10 ] && { echo "CPU suites skipped (GPU_CHECK_SECONDS spent)" | tee -a "$logs/summary.txt"; exit 0; }
for t in "$build"/tests/test_*; do
  [ -f "$t" ] && [ -x "$t" ] && [ "$(basename "$t")" != test_cuda ] && echo "$t"
done | xargs -P 4 -I{} env OMP_NUM_THREADS=4 bash -c \
  't0=$SECONDS; n=$(basename {}); timeout '"$left"' {} > "'"$logs"'/$n.log" 2>&1; rc=$?;
   printf "%-22s rc=%-3d %4ds\n" "$n" "$rc" "$((SECONDS - t0))" | tee -a "'"$logs"'/summary.txt"'
echo "gpu_check: logs in $logs/"
