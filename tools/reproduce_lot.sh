#!/usr/bin/env bash
# Reproduce one model's rows of the LOT paper's Tables 10 and 11 (Guan et al., TACL 2022).
#
#   tools/reproduce_lot.sh MODEL LOT_DATA_ROOT PRETRAINED_EXPORT RUNS_ROOT [gin flags...]
#
# MODEL              transformer | bert | roberta | gpt2 | mt5_base | longlm_small |
#                    longlm_base | longlm_large (gin_configs/lot/lot_<task>_<MODEL>.gin)
# LOT_DATA_ROOT      the official task folders: clozet/, senpos/, plotcom/, outgen/, each
#                    holding train.jsonl, val.jsonl, test.jsonl; a missing one is skipped
# PRETRAINED_EXPORT  a cmrcx export of the released checkpoint (python -m cmrcx.convert);
#                    for `transformer` (trained from scratch) the vocab.txt to use
# RUNS_ROOT          one run per task: RUNS_ROOT/lot_<task>/
# gin flags          appended to every training run, after the experiment file (e.g.
#                    --gin_file=local_tiny.gin --gin.RunConfig.num_train_steps=2)
#
# Trains each task present that has a gin file for MODEL, then `cmrcx.eval --mixture=lot`
# on the validation and test splits: Tables 10 and 11 with the paper's overall scores
# (RUNS_ROOT/lot_<split>_results.json), under each table's row the paper's published row
# of MODEL on that split (its gin files' RunConfig.paper_model), for comparison.
# DRY_RUN=1 prints the commands (one line each; skipped tasks on stderr) and runs none.
set -euo pipefail
if [ $# -lt 4 ]; then sed -n '2,21p' "$0"; exit 2; fi
MODEL=$1; DATA_ROOT=$(realpath "$2"); PRETRAINED=$(realpath -m "$3")
RUNS_ROOT=$(realpath -m "$4"); shift 4
PYTHON=${PYTHON:-python}
GIN_DIR=$(dirname "$(realpath "$0")")/../gin_configs/lot
gins=0
for task in clozet senpos plotcom outgen; do
  if [ -f "$GIN_DIR/lot_${task}_$MODEL.gin" ]; then gins=$((gins + 1)); fi
done
if [ "$gins" -eq 0 ]; then
  known=$(cd "$GIN_DIR" && ls lot_{clozet,senpos,plotcom,outgen}_*.gin \
    | sed -E 's/^lot_(clozet|senpos|plotcom|outgen)_//; s/[.]gin$//' | sort -u | paste -sd ' ')
  echo "unknown MODEL $MODEL: no gin_configs/lot/lot_<task>_$MODEL.gin; known: $known" >&2
  exit 2
fi
# One command: printed (DRY_RUN=1) or run.
step() {
  if [ -z "${DRY_RUN:-}" ]; then "$@"; return; fi
  local line; line=$(printf '%q ' "$@"); echo "${line% }"
}
if [ "$MODEL" = transformer ]; then WEIGHTS=(--gin.VOCAB_FILE="'$PRETRAINED'")
else WEIGHTS=(--gin.PRETRAINED="'$PRETRAINED'"); fi

[ -n "${DRY_RUN:-}" ] || mkdir -p "$RUNS_ROOT"
trained=0
for task in clozet senpos plotcom outgen; do
  data="$DATA_ROOT/$task"
  if [ ! -f "$GIN_DIR/lot_${task}_$MODEL.gin" ]; then echo "skip $task: no gin for $MODEL" >&2; continue; fi
  if [ ! -d "$data" ]; then echo "skip $task: no $data" >&2; continue; fi
  run="$RUNS_ROOT/lot_$task"
  train=("$PYTHON" -m cmrcx.train --gin_file="lot_${task}_$MODEL.gin" --gin.MODEL_DIR="'$run'"
    --gin.DATA_DIR="'$data'" "${WEIGHTS[@]}" "$@")
  trained=$((trained + 1))
  if [ -n "${DRY_RUN:-}" ]; then step "${train[@]}"; continue; fi
  mkdir -p "$run"
  echo "=== train lot_$task ($MODEL) -> $run" >&2
  "${train[@]}" | tail -n 1 > "$run/dev_metrics.json"
done
if [ "$trained" -eq 0 ]; then echo "no task folder found under $DATA_ROOT" >&2; exit 1; fi

for split in validation test; do
  if ls "$DATA_ROOT"/*/"$( [ $split = validation ] && echo val || echo test ).jsonl" > /dev/null 2>&1; then
    step "$PYTHON" -m cmrcx.eval --mixture=lot --runs_root="$RUNS_ROOT" --split $split
  fi
done
