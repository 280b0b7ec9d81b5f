#!/usr/bin/env bash
# Does carrying the TTT state across a repository's files help, against resetting it at each file's start? Training
# windows never cross a file boundary (data/windows.h), so a carried state meets one only at evaluation. This trains
# three models of the main job's config (configs/quick.yaml, train.seed 0, 1, 2) on a corpus of repositories, then
# reads every scored token of its test split under uniform-K with the state carried through each repository (its
# adaptation files, then its evaluation files) and with it reset at every file (`ponder eval --streams
# --reset-at-documents`: each file alone after the byte before it, the same predictions scored), and uniform-0 (no
# inner learning) beside them: results/reset_<corpus>/<model>-u<K>-<carry|reset>.json and the table
# results/reset_<corpus>/table.md (scripts/reset_table.py). The control for length: uniform-1 over the same tokens in
# segments of 1,024 scored tokens, each read after at most the 1,024 before it (files or not), carried and reset
# (<model>-u1-bounded-<carry|reset>.json): a state carried no further than the training windows' length.
#
#   bash scripts/reset_runs.sh [pystdlib|pycode]   (default pystdlib, the main job's corpus; pycode needs
#                                                   bash scripts/setup.sh --corpora pycode first)
#   RESET_KS="1 2 4" bash scripts/reset_runs.sh    (schedules read both ways; default "1 4")
#   ACROSS=1 bash scripts/reset_runs.sh [corpus]   (models trained with data.train_across_files: windows drawn from each
#                                                   training repository's files joined, so they cross file boundaries
#                                                   as a carried state does; runs/reset_<corpus>_across-s<S>,
#                                                   results/reset_<corpus>_across)
#   CONTINUE=carry|fresh bash scripts/reset_runs.sh [corpus]
#                                                  (each of the three models above continued CONTINUE_STEPS steps
#                                                   (default 160; lr 1e-3 to 1e-4, every parameter training), each step
#                                                   one run of SPAN consecutive 1,024-token windows (default 16: 16,384
#                                                   tokens) of a training repository's files joined
#                                                   (data.train_across_files). carry: the state carried (and detached)
#                                                   from one window to the next (train.carry_state), so the model is
#                                                   trained to read as far as a file and across file boundaries; fresh:
#                                                   the control, the same windows each from a fresh state.
#                                                   runs/reset_<corpus>_<CONTINUE><SPAN>[_<STEPS>steps]-s<S>,
#                                                   results/reset_<corpus>_<CONTINUE><SPAN>[_<STEPS>steps])
#   COMPARE=1 ...                                  (also the allocation comparison on the three models: see the end)
#
# On pystdlib the models are the main job's own: results/quick/{,model-2/,model-3/}checkpoint.ckpt are reused when
# `ponder quick` made them. Every step resumes: a finished model or result is kept. On 2 cores of an Intel Xeon VM:
# ~1.5 minutes a model (two side by side), then ~11 s a carried pass of pystdlib's split (1.66M tokens read, 300k
# scored) and ~33 s of pycode's (4.5M read, 808k scored); a reset pass reads only the evaluation files.
set -euo pipefail
cd "$(dirname "$0")/.."
ponder=./build/experiments/ponder
[ -x "$ponder" ] || { echo "reset_runs.sh: $ponder is missing; build first (bash scripts/setup.sh)" >&2; exit 2; }
corpus=${1:-pystdlib}
case "$corpus" in pystdlib | pycode) ;; *) echo "reset_runs.sh: unknown corpus '$corpus' (pystdlib, pycode)" >&2; exit 2 ;; esac
ks=${RESET_KS:-"1 4"}
seeds=${SEEDS:-"0 1 2"}
across=${ACROSS:-0}
continue=${CONTINUE:-}
span=${SPAN:-16}
name=$corpus
train_set=()
if [ "$across" = 1 ]; then
  name=${corpus}_across
  train_set=(--set data.train_across_files=true)
fi
case "$continue" in
  "") ;;
  carry | fresh)
    [ "$across" = 1 ] && { echo "reset_runs.sh: CONTINUE continues the models trained without ACROSS" >&2; exit 2; }
    name=${corpus}_$continue$span
    [ "${CONTINUE_STEPS:-160}" = 160 ] || name=${name}_${CONTINUE_STEPS}steps ;;
  *) echo "reset_runs.sh: CONTINUE must be carry or fresh, got '$continue'" >&2; exit 2 ;;
esac
results=results/reset_$name
mkdir -p "$results"

# checkpoint SEED [NAME]: the model of train.seed SEED, trained here unless the main job already has it.
checkpoint() {
  local quick=(results/quick/checkpoint.ckpt results/quick/model-2/checkpoint.ckpt results/quick/model-3/checkpoint.ckpt)
  local of=${2:-$name}
  if [ "$of" = pystdlib ] && [ -f "${quick[$1]:-}" ]; then echo "${quick[$1]}"; else echo "runs/reset_$of-s$1/checkpoint.ckpt"; fi
}

# train SEED THREADS: one model of the main job's config on the corpus, or (CONTINUE) its continuation.
train() {
  local ck out base
  ck=$(checkpoint "$1")
  [ -f "$ck" ] && [ -z "$continue" ] && return 0  # a continuation resumes instead (a no-op once finished)
  out=$(dirname "$ck")
  echo "reset_runs.sh: training $out (log $out.log)"
  mkdir -p "$(dirname "$out")"
  if [ -z "$continue" ]; then
    "$ponder" --threads "$2" train --config quick --set data.corpus="$corpus" "${train_set[@]}" --seed "$1" \
      --out "$out" > "$out.log" 2>&1
    return
  fi
  base=$(checkpoint "$1" "$corpus")
  [ -f "$base" ] || { echo "reset_runs.sh: $base is missing: bash scripts/reset_runs.sh $corpus trains it" >&2; return 2; }
  # One init_from path for every seed ({seed} stands for train.seed), so the continuations' configs differ only in
  # train.seed and `ponder compare` takes them as replicates of one experiment.
  ln -sfn "$(realpath "$base")" "runs/reset_${corpus}_base-s$1.ckpt"
  if [ -f "$ck" ]; then
    "$ponder" --threads "$2" train --out "$out" --resume >> "$out.log" 2>&1 || tail -n 3 "$out.log" | grep -q "nothing left"
  else
    "$ponder" --threads "$2" train --config quick --set data.corpus="$corpus" --set data.train_across_files=true \
      --seed "$1" --out "$out" --set "train.init_from=runs/reset_${corpus}_base-s{seed}.ckpt" --set train.freeze_loaded=false \
      --set train.carry_state="$([ "$continue" = carry ] && echo true || echo false)" --set train.batch_size=1 \
      --set train.grad_accum="$span" --set train.steps="${CONTINUE_STEPS:-160}" --set train.lr=1e-3 \
      --set train.min_lr=1e-4 --set train.warmup=16 --set train.eval_every=0 --set train.checkpoint_every=20 \
      > "$out.log" 2>&1
  fi
}

# read SEED K HOW [CAP]: every scored token of the test split under uniform-K, carried or reset; with CAP, in segments
# of CAP scored tokens each read after at most CAP tokens before it.
read_split() {
  local f=$results/model-$1-u$2-$3.json extra=() cap=${4:-0}
  [ "$cap" != 0 ] && f=$results/model-$1-u$2-bounded-$3.json
  [ -s "$f" ] && return 0
  [ "$3" = reset ] && extra=(--reset-at-documents)
  echo "reset_runs.sh: model $1, uniform-$2, $3${4:+, segments of $cap}"
  "$ponder" eval --checkpoint "$(checkpoint "$1")" --split test --schedule "uniform-$2" --streams --max-adapt "$cap" \
    --max-scored "$cap" --max-segments 0 --position-docs 0 "${extra[@]}" --json > "$f.tmp"
  mv "$f.tmp" "$f"
}

# two models side by side on one thread each, an odd one out on two
set -- $seeds
while [ $# -ge 2 ]; do
  train "$1" 1 & a=$!
  train "$2" 1 & b=$!
  wait $a; wait $b
  shift 2
done
[ $# = 1 ] && train "$1" 2
for s in $seeds; do
  read_split "$s" 0 reset  # uniform-0 changes no state: carried and reset read alike
  for k in $ks; do
    read_split "$s" "$k" carry
    read_split "$s" "$k" reset
  done
  read_split "$s" 1 carry 1024
  read_split "$s" 1 reset 1024
done
python3 scripts/reset_table.py "$results" $ks > "$results/table.md"
cat "$results/table.md"

# COMPARE=1: the allocation comparison on the models of SEEDS (statistics over models), on two segments per held-out
# package of 2,048 scored tokens after 4,096 read: far enough into a stream that a state trained to carry is past where
# the fresh-window models drift. Without the learned policies unless LEARNED=1 (REINFORCE, PPO-PID and PonderNet,
# trained LEARN_ITERATIONS iterations, default 60, PonderNet PONDERNET_ITERATIONS, default 20: each of its iterations
# tries every K on every unit, ~3× a REINFORCE iteration's time); heuristics calibrated (and policies trained) on fresh validation
# windows of 1,024 tokens, or with CALIBRATE_FROM=streams on validation stream segments cut as the scored ones are.
# results/reset_<name>/compare[_calstreams][_learned][_<n>models]/report.md
if [ "${COMPARE:-0}" = 1 ]; then
  calibrate=${CALIBRATE_FROM:-windows}
  learned=${LEARNED:-0}
  iters=${LEARN_ITERATIONS:-60}
  methods=oracle,uniform-0,uniform-1,uniform-2,uniform-4,random,entropy,loss,ttt-loss
  out=$results/compare
  [ "$calibrate" = streams ] && out=${out}_calstreams
  [ "$learned" = 1 ] && { out=${out}_learned; methods=$methods,learned-reinforce,learned-ppo-pid,pondernet; }
  set -- $seeds
  [ $# = 3 ] || out=${out}_$#models
  cks=()
  for s in $seeds; do cks+=(--checkpoint "$(checkpoint "$s")"); done
  if ! [ -s "$out/results.json" ]; then
    echo "reset_runs.sh: comparing the models of seeds $seeds (log $out.log)"
    "$ponder" --threads 2 compare "${cks[@]}" --out "$out" --set "compare.methods=[$methods]" \
      --set compare.calibrate_from="$calibrate" --set learn.reinforce_iterations="$iters" \
      --set learn.ppo_iterations="$iters" --set learn.pondernet_iterations="${PONDERNET_ITERATIONS:-20}" \
      --set streams.max_adapt=4096 --set streams.max_scored=2048 --set streams.max_segments=2 > "$out.log" 2>&1
  fi
fi
