#!/usr/bin/env bash
# Reproduce one model's rows of the LOT paper's Tables 10 and 11 (Guan et al., TACL 2022).
#
#   tools/reproduce_lot.sh MODEL LOT_DATA_ROOT PRETRAINED_EXPORT RUNS_ROOT [gin flags...]
#
# MODEL              transformer | bert | roberta | mt5_base | longlm_small | longlm_base |
#                    longlm_large (gin_configs/lot/lot_<task>_<MODEL>.gin)
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
# (RUNS_ROOT/lot_<split>_results.json). Prints the paper's published rows for MODEL last.
set -euo pipefail
if [ $# -lt 4 ]; then sed -n '2,19p' "$0"; exit 2; fi
MODEL=$1; DATA_ROOT=$(realpath "$2"); PRETRAINED=$(realpath -m "$3")
RUNS_ROOT=$(realpath -m "$4"); shift 4
PYTHON=${PYTHON:-python}
GIN_DIR=$(dirname "$(realpath "$0")")/../gin_configs/lot
if ! ls "$GIN_DIR"/lot_*_"$MODEL".gin > /dev/null 2>&1; then
  echo "unknown MODEL $MODEL: no gin_configs/lot/lot_<task>_$MODEL.gin" >&2; exit 2
fi
if [ "$MODEL" = transformer ]; then WEIGHTS=(--gin.VOCAB_FILE="'$PRETRAINED'")
else WEIGHTS=(--gin.PRETRAINED="'$PRETRAINED'"); fi

mkdir -p "$RUNS_ROOT"
trained=0
for task in clozet senpos plotcom outgen; do
  data="$DATA_ROOT/$task"
  if [ ! -f "$GIN_DIR/lot_${task}_$MODEL.gin" ]; then echo "skip $task: no gin for $MODEL" >&2; continue; fi
  if [ ! -d "$data" ]; then echo "skip $task: no $data" >&2; continue; fi
  run="$RUNS_ROOT/lot_$task"
  mkdir -p "$run"
  echo "=== train lot_$task ($MODEL) -> $run" >&2
  "$PYTHON" -m cmrcx.train --gin_file="lot_${task}_$MODEL.gin" --gin.MODEL_DIR="'$run'" \
    --gin.DATA_DIR="'$data'" "${WEIGHTS[@]}" "$@" | tail -n 1 > "$run/dev_metrics.json"
  trained=$((trained + 1))
done
if [ "$trained" -eq 0 ]; then echo "no task folder found under $DATA_ROOT" >&2; exit 1; fi

for split in validation test; do
  if ls "$DATA_ROOT"/*/"$( [ $split = validation ] && echo val || echo test ).jsonl" > /dev/null 2>&1; then
    "$PYTHON" -m cmrcx.eval --mixture=lot --runs_root="$RUNS_ROOT" --split $split
  fi
done

"$PYTHON" - "$MODEL" <<'PY'
import sys

from cmrcx.benchmarks.lot import paper

ROWS = {"transformer": "Transformer", "bert": "BERT-base", "roberta": "RoBERTa-base",
        "mt5_base": "mT5-base", "longlm_small": "LongLM-small", "longlm_base": "LongLM-base",
        "longlm_large": "LongLM-large"}
model = ROWS[sys.argv[1]]
for title, table, columns in (("Table 10", paper.TABLE_10, paper.TABLE_10_COLUMNS),
                              ("Table 11", paper.TABLE_11, paper.TABLE_11_COLUMNS)):
    for split in paper.SPLITS:
        try:
            row = paper.row(table, split, model)
        except KeyError:
            continue
        cells = "  ".join(f"{c} {v:.2f}" for (c, _, _), v in zip(columns, row.scores))
        print(f"published, {title} {model} {split}: {cells}  Overall {row.overall:.2f}")
PY
