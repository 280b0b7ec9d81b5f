#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer (leak checks included) over the test suites, built with clang in
# build-san/, then every libFuzzer target of tests/fuzz/ for FUZZ_SECONDS each (default 20), seeded with the
# repository's own files. Part of the README's test command, so CI runs it.
#   bash scripts/sanitize.sh                      everything (14 minutes on 2 cores measured, the build included)
#   bash scripts/sanitize.sh --no-fuzz            the sanitized suites only
#   FUZZ_SECONDS=3600 bash scripts/sanitize.sh --fuzz-only   longer fuzzing; findings land in build-san/fuzz/<target>/
# A crash found by a fuzzer is saved as build-san/fuzz/<target>/crash-*; rerun it with
# build-san/tests/fuzz/fuzz_<target> FILE, and add it to the tests as a case of its own.
# Left out under the sanitizers (run only in the release build), for CI's time: cli_control, cli_adapt_control,
# cli_adapt and cli_analyses (each over 10 minutes instrumented on 2 cores: model training and comparisons whose code
# the other suites run too), cli_codebench (sandboxed Python), cli_crash (about 60 short runs stopped by signals: what it
# checks is file handling, which the sanitizers do not see into past a SIGKILL), cli_mpi (every case runs under mpirun,
# and LeakSanitizer reports Open MPI's own allocations, in libmpi and its plugins, as leaks; with leak checks off it
# passes sanitized: ASAN_OPTIONS=detect_leaks=0 python3 tests/cli_mpi.py build-san/experiments/ponder, 2 minutes),
# cli_replicates and cli_shard (over 4 minutes each instrumented: several trainings and comparisons whose code
# cli_quick runs sanitized; their own logic, the statistics over models and the shard/merge bookkeeping, runs
# sanitized in test_stats and test_train). The CUDA suite runs here without a GPU (about 30 s): its emulated kernel
# phases, where an index past a head's scratch shows as a GPU's memcheck would show it, and its host-side plans.
# PONDER_SANITIZED=1 tells the suites that remain to leave out what checks results rather than memory at great cost
# (cli_quick's second, serial run; in C++ the test cases marked doctest::skip(kSanitized) are left out at compile
# time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh >/dev/null
fuzz_seconds=${FUZZ_SECONDS:-20}
if [[ ! -f build-san/meson-private/coredata.dat ]]; then
  # Unity build as in setup.sh. -O1 with line tables only (what AddressSanitizer's documentation suggests): reports
  # keep file and line, and the build takes about a quarter less time than -O2 -g. -Wno-pass-failed: the
  # instrumentation keeps clang from vectorising the loops marked `omp simd`, and it says so once per loop.
  CC=clang CXX=clang++ meson setup build-san -Doptimization=1 -Ddebug=false -Db_sanitize=address,undefined \
    -Db_lundef=false -Dcuda=disabled -Dfuzz=true -Dunity=on -Dunity_size=8 \
    '-Dcpp_args=-gline-tables-only -Wno-pass-failed' >/dev/null
fi
# Quiet when it builds; the compiler's messages when it does not (a failure here must say why).
build_log=$(mktemp)
meson compile -C build-san >"$build_log" 2>&1 || {
  grep -E -B2 -A12 'error|FAILED' "$build_log" | head -n 80
  echo "sanitize.sh: the sanitized build (clang) failed; its messages are above" >&2
  exit 1
}
rm -f "$build_log"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export PONDER_SANITIZED=1
mode=${1:-all}
if [[ "$mode" != --fuzz-only ]]; then
  suites=$(meson test -C build-san --list 2>/dev/null | sed 's/^ponderttt:[a-z]* \/ //; s/^ponderttt \/ //' |
           grep -vxE 'cli_control|cli_adapt_control|cli_adapt|cli_analyses|cli_codebench|cli_crash|cli_mpi|cli_replicates|cli_shard')
  # shellcheck disable=SC2086
  meson test -C build-san --print-errorlogs --timeout-multiplier 4 $suites
fi

[[ "$mode" == --no-fuzz ]] && exit 0
# Seeds: every shipped config, a checkpoint of the CI config and a damaged copy, a small journal, the method and
# schedule names, a few source files.
seeds=build-san/fuzz/seeds
rm -rf "$seeds" && mkdir -p "$seeds"/{config,checkpoint,journal,names,corpus}
cp configs/*.yaml "$seeds/config/"
./build-san/experiments/ponder --threads 1 train --config configs/ci.yaml --out "$seeds/run" \
  --set train.steps=1 --set train.warmup=0 --set train.eval_every=0 >/dev/null 2>&1
cp "$seeds/run/checkpoint.ckpt" "$seeds/checkpoint/whole.ckpt"
head -c 3000 "$seeds/run/checkpoint.ckpt" >"$seeds/checkpoint/torn.ckpt"
printf '%s\n%s\n' '{"journal":"ponder","fingerprint":{"fuzz":1}}' \
  '{"key":"uniform-1 seed 0","record":{"bpb":3.5,"window_bpb":[3.4,3.6]}}' >"$seeds/journal/journal.jsonl"
printf '%s\n' uniform-1 every-2/3 front-4 random loss learned-reinforce[gamma=0.5,net=lstm] oracle fixed:1,2,0 \
  uniform-64 replay:a.json+b.json replay-shuffled-3:a.json replay:a.json@order.json >"$seeds/names/names.txt"
cp README.md experiments/process/parts.cpp "$seeds/corpus/"
for target in config checkpoint journal names corpus; do
  dir=build-san/fuzz/$target
  mkdir -p "$dir/found"
  echo "fuzz_$target: ${fuzz_seconds} s"
  (cd "$dir" && ../../tests/fuzz/fuzz_$target -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 found "../seeds/$target" 2>log.txt) || {
    tail -40 "$dir/log.txt"
    echo "sanitize.sh: fuzz_$target found a failure (saved in $dir)" >&2
    exit 1
  }
  grep -E '^stat::number_of_executed_units|^stat::peak_rss' "$dir/log.txt" | tr '\n' ' '
  echo
done
echo "sanitize.sh: every sanitized suite and fuzz target passed"
