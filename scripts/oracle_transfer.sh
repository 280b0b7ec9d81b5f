#!/usr/bin/env bash
# Is the oracle's headroom in the text? Each model of a set is compared against its own uniform frontier with the
# oracle K of every *other* model replayed on it (`replay:<oracle.json>`, methods/registry.h), one at a time and as their
# consensus (on each unit the step option nearest the others' mean K), and the consensus's K permuted within each
# segment (`replay-shuffled-S:`, S = 1..$SHUFFLES, default 3: the placement null, the same steps in random places).
# With ORDERS=DIR (scripts/oracle_imitate.py's output), also the consensus placed in the order of DIR/model-<i>/
# order.json, what a policy imitating the oracles from what it can read would place; and the imitation as a two-level
# policy (two_level.json), with its shuffles and the calibrated random policy beside it. Those choices read labels,
# but another model's, so what they buy on this model is what the text itself says about where steps pay; the
# model's own oracle beside them is the headroom they are measured against. The oracle.json files come from `ponder oracle` in streams mode on
# the same segments (the same streams.* settings as passed here), one per model, in the checkpoints' order.
#
#   bash scripts/oracle_transfer.sh OUT ORACLE_DIR CKPT_0 CKPT_1 ... [-- --set section.key=value ...]
#
# ORACLE_DIR/model-<i>/oracle.json belongs to CKPT_i. Writes OUT/model-<i>/ (report.md, results.json of each
# comparison, two side by side on one thread each) and OUT/table.md (scripts/oracle_transfer.py). A finished model is
# kept. docs/method.md §5.6 has the command lines of the runs it reports.
set -euo pipefail
cd "$(dirname "$0")/.."
ponder=${PONDER:-./build/experiments/ponder}  # PONDER: another binary (e.g. a copy, while rebuilding)
shuffles=${SHUFFLES:-3}  # permutations of the consensus run as the placement null (replay-shuffled-1..SHUFFLES)
orders=${ORDERS:-}  # a folder of scripts/oracle_imitate.py: also the consensus placed by its model-<i>/order.json
[ -x "$ponder" ] || { echo "oracle_transfer.sh: $ponder is missing; build first (bash scripts/setup.sh)" >&2; exit 2; }
[ $# -ge 4 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
out=$1 oracles=$2
shift 2
ckpts=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do ckpts+=("$1"); shift; done
[ $# -gt 0 ] && shift
extra=("$@")
n=${#ckpts[@]}
for i in $(seq 0 $((n - 1))); do
  [ -f "$oracles/model-$i/oracle.json" ] || { echo "oracle_transfer.sh: $oracles/model-$i/oracle.json is missing" >&2; exit 2; }
done
mkdir -p "$out"

compare_one() {  # i
  local i=$1 methods="uniform-0,uniform-1,uniform-2,uniform-4,uniform-8,oracle" others=""
  for j in $(seq 0 $((n - 1))); do
    [ "$j" = "$i" ] && continue
    methods+=",'replay:$oracles/model-$j/oracle.json'"
    others+="${others:++}$oracles/model-$j/oracle.json"
  done
  [ -f "$out/model-$i/results.json" ] && return 0
  if [ "$n" -gt 2 ]; then
    methods+=",'replay:$others'"
    # the placement null: the consensus's K permuted within each segment, SHUFFLES permutations
    for s in $(seq 1 "$shuffles"); do methods+=",'replay-shuffled-$s:$others'"; done
    # the imitation: the consensus's K placed by a causal fit's predictions (scripts/oracle_imitate.py)
    if [ -n "$orders" ]; then
      methods+=",'replay:$others@$orders/model-$i/order.json',random,'replay:$orders/model-$i/two_level.json'"
      for s in $(seq 1 "$shuffles"); do methods+=",'replay-shuffled-$s:$orders/model-$i/two_level.json'"; done
    fi
  fi
  echo "oracle_transfer.sh: model $i of $n: comparing (progress in $out/model-$i.log)" >&2
  local t0=$SECONDS
  "$ponder" --threads 1 compare --checkpoint "${ckpts[$i]}" --seeds 1 --out "$out/model-$i" \
    --set compare.streams=true --set "compare.methods=[$methods]" --set 'compare.frontier_mus=[]' \
    --set compare.oracle_bisect=0 "${extra[@]}" >"$out/model-$i.log" 2>&1 ||
    { echo "oracle_transfer.sh: model $i failed ($out/model-$i.log)" >&2; return 1; }
  echo "oracle_transfer.sh: model $i done in $((SECONDS - t0)) s" >&2
}

for i in $(seq 0 2 $((n - 1))); do
  compare_one "$i" &
  first=$!
  [ $((i + 1)) -lt "$n" ] && compare_one $((i + 1))
  wait "$first"
done
python3 scripts/oracle_transfer.py "$out" "$n" | tee "$out/table.md"
