#!/usr/bin/env bash
# A stand-in for Slurm's sbatch, for tests/cli_shard.py: an array job's tasks run at once, one after another, with
# SLURM_ARRAY_TASK_ID set; a --wrap job runs only when the job it depends on (afterok) succeeded. Prints a job id as
# sbatch --parsable does. It also holds the script to what sbatch reads: #SBATCH lines only before the first command.
set -uo pipefail
state=${FAKE_SLURM_DIR:?FAKE_SLURM_DIR names a folder for the fake jobs and their logs}
array="" dep="" wrap=""
while (($#)); do
  case "$1" in
    --array=*) array=${1#*=} ;;
    --dependency=*) dep=${1#*=} ;;
    --wrap) wrap=$2; shift ;;
    --parsable|--job-name=*|--output=*|--partition=*|--time=*) ;;
    -*) echo "fake sbatch: unexpected option $1" >&2; exit 1 ;;
    *) break ;;
  esac
  shift
done
id=$(cat "$state/next" 2>/dev/null || echo 100)
echo $((id + 1)) >"$state/next"
if [[ -n "$dep" ]]; then
  [[ "$dep" == afterok:* && -f "$state/ok-${dep#afterok:}" ]] || { echo "fake sbatch: $dep not satisfied" >&2; exit 1; }
fi
if [[ -n "$wrap" ]]; then
  bash -c "$wrap" >"$state/job-$id.log" 2>&1 && touch "$state/ok-$id"
  echo "$id"
  exit 0
fi
script=$1
shift
[[ -n "$array" && "$array" =~ ^[0-9]+-[0-9]+$ ]] || { echo "fake sbatch: expected --array=LO-HI" >&2; exit 1; }
awk 'NR > 1 && !/^#/ && !/^[[:space:]]*$/ { body = 1 } body && /^#SBATCH/ { bad = 1 } END { exit bad }' "$script" ||
  { echo "fake sbatch: #SBATCH after the first command of $script (sbatch ignores it)" >&2; exit 1; }
ok=1
for ((i = ${array%-*}; i <= ${array#*-}; i++)); do
  SLURM_ARRAY_JOB_ID=$id SLURM_ARRAY_TASK_ID=$i SLURM_CPUS_PER_TASK=1 \
    bash "$script" "$@" >"$state/job-${id}_$i.log" 2>&1 || ok=0
done
((ok)) && touch "$state/ok-$id"
echo "$id;fake"
