#!/usr/bin/env bash
# The long-window `small` runs of the regime study, per corpus: a TTT model (configs/<corpus>_small.yaml) and its
# attention-only twin (the same file with every mixer attention, window = the training length), trained on one
# thread each side by side, then one comparison that reads both on the same held-out streams next to the count
# n-grams. Every step resumes: a finished training or comparison is kept, an interrupted training continues from
# its last checkpoint (train.checkpoint_every), so the script can be stopped and run again at any time.
#
#   bash scripts/small_runs.sh [sotu] [pycode]        (default: both; fetch them first with setup.sh --corpora)
#
# Outputs: runs/<corpus>_small{,_attn}/ (checkpoints, train.jsonl, logs), results/<corpus>_small/ (report.md,
# results.json, loss_by_position.png). On 2 cores of an AMD EPYC VM one corpus takes about 2.5 hours of training
# (both models at ~2,000 tokens/s on one thread each) and 20-30 minutes of comparison.
#
# The comparison is a quick look at the held-out split, not the whole of it: one seed, two segments per stream of
# 2,048 scored tokens each after the 2,048 before them, the oracle and the uniform schedules; the report states the
# fraction of the split scored. Loss by position: 32 held-out documents from their first token (16,384 tokens of
# each sotu address, 4,096 of each Python file).
set -euo pipefail
cd "$(dirname "$0")/.."
ponder=./build/experiments/ponder
[ -x "$ponder" ] || { echo "small_runs.sh: $ponder is missing; build first (bash scripts/setup.sh)" >&2; exit 2; }
corpora=("$@")
[ ${#corpora[@]} -gt 0 ] || corpora=(sotu pycode)

# train NAME EXTRA...: runs/NAME to its last step, resuming when a checkpoint is there.
train() {
  local name=$1 corpus=$2; shift 2
  local out=runs/$name log=runs/$name.log
  if [ -f "$out/checkpoint.ckpt" ]; then
    if ! "$ponder" --threads 1 train --out "$out" --resume >>"$log" 2>&1; then
      tail -n 3 "$log" | grep -q "nothing left to train" || return 1  # finished before: kept as it is
    fi
  else
    mkdir -p runs
    "$ponder" --threads 1 train --config "configs/${corpus}_small.yaml" --out "$out" "$@" >"$log" 2>&1
  fi
}

for corpus in "${corpora[@]}"; do
  # loss by position over this many tokens of held-out documents from their start: whole addresses (most sotu
  # test addresses are longer), whole files (few Python files are)
  case "$corpus" in sotu) position_len=16384 ;; pycode) position_len=4096 ;; *) echo "small_runs.sh: unknown corpus '$corpus' (sotu, pycode)" >&2; exit 2 ;; esac
  echo "small_runs.sh: $corpus: training runs/${corpus}_small and runs/${corpus}_small_attn (logs runs/*.log)"
  train "${corpus}_small" "$corpus" &
  ttt=$!
  train "${corpus}_small_attn" "$corpus" --set 'model.mixers=[attention,attention,attention,attention]' \
    --set model.attn_window=2048 &
  attn=$!
  status=0
  wait $ttt || status=$?
  wait $attn || status=$?
  [ $status -eq 0 ] || { echo "small_runs.sh: $corpus: a training failed (see runs/${corpus}_small*.log)" >&2; exit 1; }
  "$ponder" compare --config "configs/${corpus}_small.yaml" --checkpoint "runs/${corpus}_small/checkpoint.ckpt" \
    --attention "runs/${corpus}_small_attn/checkpoint.ckpt" --out "results/${corpus}_small" --seeds 1 \
    --set 'compare.methods=[oracle,uniform-0,uniform-1,uniform-2,uniform-4]' --set streams.max_segments=2 \
    --set streams.max_scored=2048 --set streams.max_adapt=2048 --set streams.position_docs=32 \
    --set streams.position_len=$position_len
  echo "small_runs.sh: $corpus: results/${corpus}_small/report.md"
done
