#!/usr/bin/env bash
# A comparison run as a Slurm job array: array task i of N runs `ponder <compare|ablate> ... --shard i/N` into
# OUT/shard-i (its own journal), and a second job, started only once every task has succeeded, runs
# `ponder merge OUT/shard-0 ... --out OUT`, which writes the results.json and report.md of the unsharded run.
#
# Submit from the repository root (after bash scripts/setup.sh), on a machine where sbatch works:
#   bash scripts/slurm_sweep.sh N OUT compare --checkpoint runs/a/checkpoint.ckpt --checkpoint runs/b/checkpoint.ckpt
#   bash scripts/slurm_sweep.sh N OUT ablate --checkpoint runs/a/checkpoint.ckpt --groups gamma,lambda
# The arguments after OUT are the command's own (no --out or --shard). OUT must be on a filesystem every node sees.
# Options for both sbatch calls go in SBATCH_ARGS, e.g. SBATCH_ARGS="--partition=cpu --time=08:00:00"; PONDER names
# another ponder binary (default: build/experiments/ponder). A task that fails or is cut short leaves its finished
# cells in its journal: resubmit that task alone (sbatch --array=i ... with the same arguments; see the job's log for
# the exact line), then the merge (ponder merge ... --out OUT).
#
# Each task runs on one node with --cpus-per-task threads (a comparison runs on one thread: give it 1 or 2).
#SBATCH --job-name=ponder-shard
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --output=ponder-shard-%A_%a.log
set -euo pipefail

if [[ "${1:-}" == --task ]]; then
  # Inside array task SLURM_ARRAY_TASK_ID: the arguments are the ones the submission below passed.
  ponder=$2 count=$3 out=$4
  shift 4
  i=${SLURM_ARRAY_TASK_ID:?run by sbatch --array, which sets SLURM_ARRAY_TASK_ID}
  exec "$ponder" --threads "${SLURM_CPUS_PER_TASK:-1}" "$@" --shard "$i/$count" --out "$out/shard-$i"
fi

if (($# < 3)) || ! [[ "$1" =~ ^[1-9][0-9]*$ ]] || [[ "$3" != compare && "$3" != ablate ]]; then
  sed -n '2,16p' "$0" >&2
  echo "usage: bash scripts/slurm_sweep.sh N OUT compare|ablate [its options...]" >&2
  exit 2
fi
count=$1 out=$2
shift 2
for a in "$@"; do
  case "$a" in
    --out|--out=*|--shard|--shard=*) echo "slurm_sweep.sh: $a is set by the script (OUT/shard-i, i/N)" >&2; exit 2 ;;
  esac
done
ponder=$(realpath "${PONDER:-build/experiments/ponder}")
[[ -x "$ponder" ]] || { echo "slurm_sweep.sh: no ponder at $ponder (bash scripts/setup.sh builds it)" >&2; exit 1; }
mkdir -p "$out"
out=$(realpath "$out")
# shellcheck disable=SC2086  # SBATCH_ARGS holds several options
array_job=$(sbatch --parsable ${SBATCH_ARGS:-} --array="0-$((count - 1))" "$0" --task "$ponder" "$count" "$out" "$@")
array_job=${array_job%%;*}  # --parsable prints "id" or "id;cluster"
dirs=()
for ((i = 0; i < count; i++)); do dirs+=("$out/shard-$i"); done
merge=$(printf '%q ' "$ponder" merge "${dirs[@]}" --out "$out")
# shellcheck disable=SC2086
merge_job=$(sbatch --parsable ${SBATCH_ARGS:-} --job-name=ponder-merge --dependency="afterok:$array_job" \
  --output=ponder-merge-%j.log --wrap "$merge")
merge_job=${merge_job%%;*}
echo "slurm_sweep.sh: array job $array_job ($count tasks) -> $out/shard-*; merge job $merge_job -> $out"
