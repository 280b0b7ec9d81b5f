#!/usr/bin/env bash
# Does training with the state carried across windows (train.carry_state) stop a TTT model's state from drifting on
# long streams? A `small` model of scripts/small_runs.sh was trained on 2,048-byte windows from a fresh state; read
# whole, its held-out streams (sotu addresses up to 217 kB; pycode repositories of several MB) take its inner weights
# far past anything it was trained on. Two continuations of that checkpoint, alike in every other way:
#   runs/<corpus>_small_carry  160 steps, each of 8 consecutive 2,048-byte windows of one document read with the state
#                              carried (and detached) between them: 16,384 bytes with one state (documents shorter
#                              than that are not drawn);
#   runs/<corpus>_small_fresh  the same 160 steps of 8 windows (drawn one by one), every window from a fresh state:
#                              the control for "160 more steps at a lower learning rate".
# Then every held-out stream read whole under uniform-K (ponder eval --streams), loss by position from 32 held-out
# documents' starts (16,384 bytes of each sotu address, 4,096 of each Python file), for the base and both
# continuations: results/<corpus>_carry/<model>-u<K>.json, and the table results/<corpus>_carry/table.md.
#
#   bash scripts/carry_runs.sh [sotu|pycode]   (default sotu; after scripts/small_runs.sh <corpus> trained the base)
#   CARRY_SEEDS="0 1" bash scripts/carry_runs.sh   (the pair again with other draws of windows: train.seed 1 gives
#                                        runs/<corpus>_small_{carry,fresh}-s1; the base is the same model)
#   CARRY_SCRATCH=1 bash scripts/carry_runs.sh     (sotu: also runs/sotu_small_carry_scratch, configs/sotu_small_carry.yaml:
#                                        the carried state from the first step at the base's token budget, ~2.5 hours
#                                        on 2 threads; read as the model "scratch")
#
# Every step resumes: a finished run or result is kept. On 2 cores of an AMD EPYC VM: ~25 minutes for the two
# trainings side by side (1 thread each), ~10-15 minutes a pass of one schedule over sotu's 2.58M scored tokens. On
# pycode (2 cores of an Intel Xeon VM, every pass sharing them with another): ~12-16 s a continuation step, ~33-37
# minutes a uniform-1 pass over the 3 test repositories (4.5M tokens read, 808k scored).
set -euo pipefail
cd "$(dirname "$0")/.."
ponder=./build/experiments/ponder
[ -x "$ponder" ] || { echo "carry_runs.sh: $ponder is missing; build first (bash scripts/setup.sh)" >&2; exit 2; }
corpus=${1:-sotu}
case "$corpus" in sotu) position_len=16384 ;; pycode) position_len=4096 ;; *) echo "carry_runs.sh: unknown corpus '$corpus' (sotu, pycode)" >&2; exit 2 ;; esac
base=runs/${corpus}_small/checkpoint.ckpt
[ -f "$base" ] || { echo "carry_runs.sh: $base is missing: bash scripts/small_runs.sh $corpus trains it" >&2; exit 2; }
ks=${CARRY_KS:-"1 4"}
seeds=${CARRY_SEEDS:-0}
results=results/${corpus}_carry

# continue NAME CARRY SEED: 160 steps from the base, every parameter training, 8 windows of 2,048 a step.
continue_run() {
  local name=$1 carry=$2 seed=$3 out=runs/$1
  if [ -f "$out/checkpoint.ckpt" ]; then
    "$ponder" --threads 1 train --out "$out" --resume >>"runs/$name.log" 2>&1 ||
      tail -n 3 "runs/$name.log" | grep -q "nothing left to train"
  else
    "$ponder" --threads 1 train --config configs/${corpus}_small.yaml --out "$out" \
      --set train.init_from=$base --set train.freeze_loaded=false --set train.carry_state=$carry --set train.seed=$seed \
      --set train.batch_size=1 --set train.grad_accum=8 --set train.steps=160 --set train.lr=1e-3 \
      --set train.min_lr=1e-4 --set train.warmup=16 --set train.eval_every=0 --set train.checkpoint_every=20 \
      >"runs/$name.log" 2>&1
  fi
}

suffix() { [ "$1" = 0 ] || echo "-s$1"; }
for seed in $seeds; do
  continue_run "${corpus}_small_carry$(suffix $seed)" true $seed &
  a=$!
  continue_run "${corpus}_small_fresh$(suffix $seed)" false $seed &
  b=$!
  wait $a
  wait $b
done
scratch=
if [ "${CARRY_SCRATCH:-0}" = 1 ]; then
  [ "$corpus" = sotu ] || { echo "carry_runs.sh: CARRY_SCRATCH has a config for sotu only" >&2; exit 2; }
  scratch=runs/sotu_small_carry_scratch
  if [ -f $scratch/checkpoint.ckpt ]; then
    "$ponder" --threads 2 train --out $scratch --resume >>$scratch.log 2>&1 ||
      tail -n 3 $scratch.log | grep -q "nothing left to train"
  else
    "$ponder" --threads 2 train --config configs/sotu_small_carry.yaml --out $scratch >$scratch.log 2>&1
  fi
fi

mkdir -p $results
# evaluate MODEL CHECKPOINT K: one schedule over the whole held-out split, kept once written.
evaluate() {
  local out=$results/$1-u$3.json
  [ -s "$out" ] && return 0
  "$ponder" --threads 1 eval --checkpoint "$2" --streams --split test --schedule "uniform-$3" --position-docs 32 \
    --position-len $position_len --json >"$out.tmp" 2>"$results/$1-u$3.log"
  mv "$out.tmp" "$out"
}
# Two passes at a time, one thread each.
models=(base)
for seed in $seeds; do models+=("carry$(suffix $seed)" "fresh$(suffix $seed)"); done
[ -n "$scratch" ] && models+=(scratch)
running=0
for k in $ks; do
  for model in "${models[@]}"; do
    ckpt=runs/${corpus}_small_$model/checkpoint.ckpt
    [ $model = base ] && ckpt=$base
    [ $model = scratch ] && ckpt=$scratch/checkpoint.ckpt
    if [ $running -ge 2 ]; then wait -n; running=$((running - 1)); fi
    evaluate $model "$ckpt" "$k" &
    running=$((running + 1))
  done
done
wait
reference=results/${corpus}_small/results.json  # the attention twin and n-grams on the same tokens, when there
[ -f $reference ] || reference=
python3 scripts/carry_table.py $results $reference
