#!/usr/bin/env bash
# The long-window `small` runs of the regime study, per corpus: a TTT model (configs/<corpus>_small.yaml) and its
# attention-only twin (the same file with every mixer attention, window = the training length), trained on one
# thread each side by side, then two comparisons. Every step resumes: a finished training is kept, an interrupted
# one continues from its last checkpoint (train.checkpoint_every, or where SIGTERM stopped it), so the script can
# be stopped and run again at any time.
#
#   bash scripts/small_runs.sh [sotu] [pycode]        (default: both; fetch them first with setup.sh --corpora)
#
# Outputs: runs/<corpus>_small{,_attn}/ (checkpoints, train.jsonl, logs), and
#  - results/<corpus>_small/: the whole held-out split, every scored token once with its whole stream read before
#    it: TTT under uniform-0/1/2/4, the attention twin and the count n-grams on the same tokens, loss by position
#    from 32 held-out documents' first tokens (16,384 tokens of each sotu address, 4,096 of each Python file);
#  - results/<corpus>_small_oracle/: the greedy oracle against the uniform frontier, on segments of 2,048 scored
#    tokens after the 2,048 before them: the first of each sotu address, 16 spread along each pycode repository
#    (its look-ahead search costs about 20 times a uniform pass, so it reads a stated fraction of the split, which
#    its report gives).
# On 2 cores of an AMD EPYC VM one corpus takes about 2.5 hours of training (both models at ~1,700-2,000 tokens/s on
# one thread each; ~2,900 on two threads alone), and each comparison of sotu about 50 minutes on two threads
# (the whole split's estimated from its parts: one pass of one schedule over its 2.58M tokens takes 4-10 minutes).
# pycode's two comparisons side by side on one thread each: the whole split 1 h 40 min (9-15 minutes a TTT pass over
# its 3 repositories, 25 for attention), the oracle's 48 segments 50 minutes.
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
  # and the oracle's segments per stream: the first of each of sotu's 74 addresses; 16 spread along each of pycode's
  # 3 held-out repositories (its statistics still count a repository once)
  case "$corpus" in sotu) position_len=16384 segments=1 ;; pycode) position_len=4096 segments=16 ;; *) echo "small_runs.sh: unknown corpus '$corpus' (sotu, pycode)" >&2; exit 2 ;; esac
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
  models=(--config "configs/${corpus}_small.yaml" --checkpoint "runs/${corpus}_small/checkpoint.ckpt" --seeds 1)
  # The regime section reads uniform-0/1/2/4 on every stream itself; the comparison's own table needs only
  # uniform-1 (each of its methods is another pass: uniform-0 alone took 10 minutes on the sotu split), and no
  # oracle frontier (each of its points is an oracle pass, more than ten uniform ones; it is searched whether or
  # not the oracle is among the methods).
  # The two comparisons side by side, one thread each (two single-thread passes get more done than one on two).
  "$ponder" --threads 1 compare "${models[@]}" --attention "runs/${corpus}_small_attn/checkpoint.ckpt" \
    --out "results/${corpus}_small" --set 'compare.methods=[uniform-1]' --set 'compare.frontier_mus=[]' \
    --set compare.oracle_bisect=0 --set streams.position_docs=32 --set streams.position_len=$position_len \
    >"runs/${corpus}_small_compare.log" 2>&1 &
  whole=$!
  "$ponder" --threads 1 compare "${models[@]}" --out "results/${corpus}_small_oracle" \
    --set 'compare.methods=[oracle,uniform-0,uniform-1,uniform-2,uniform-4]' --set streams.max_segments=$segments \
    --set streams.max_scored=2048 --set streams.max_adapt=2048 --set 'compare.frontier_mus=[0,0.05,0.2]' \
    >"runs/${corpus}_small_oracle.log" 2>&1 &
  oracle=$!
  wait $whole || { echo "small_runs.sh: $corpus: the comparison failed (runs/${corpus}_small_compare.log)" >&2; exit 1; }
  echo "small_runs.sh: $corpus: results/${corpus}_small/report.md"
  wait $oracle || { echo "small_runs.sh: $corpus: the oracle comparison failed (runs/${corpus}_small_oracle.log)" >&2; exit 1; }
  echo "small_runs.sh: $corpus: results/${corpus}_small_oracle/report.md"
done
