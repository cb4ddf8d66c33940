#!/usr/bin/env bash
# Reproduce one model's row of the CLUE paper's Table 2 (all nine tasks, plus CMNLI).
#
#   tools/reproduce_clue.sh MODEL CLUE_DATA_ROOT PRETRAINED_EXPORT RUNS_ROOT [gin flags...]
#
# MODEL              a model of Table 7 (cmrcx.benchmarks.clue.paper.TABLE_7_MODELS), any family:
#                    bert | bert_wwm_ext | ernie | roberta_large | roberta_wwm_ext |
#                    roberta_wwm_ext_large | albert_tiny | albert_xxlarge | xlnet_mid
#                    (gin_configs/clue/clue_<task>_<MODEL>.gin, Table 7)
# CLUE_DATA_ROOT     the unpacked official downloads: tnews_public/, iflytek_public/,
#                    cluewsc2020_public/, afqmc_public/, csl_public/, ocnli_public/,
#                    cmnli_public/, cmrc2018_public/, chid_public/, c3_public/ (and
#                    clue_diagnostics_public/); a missing one is skipped
# PRETRAINED_EXPORT  a cmrcx export of the released checkpoint (python -m cmrcx.convert)
# RUNS_ROOT          one run per task: RUNS_ROOT/<task>/
# gin flags          appended to every training run, after the experiment file (e.g.
#                    --gin_file=local_tiny.gin --gin.RunConfig.num_train_steps=2)
#
# Trains each task present (TNEWS 1.1, IFLYTEK, CLUEWSC2020 1.1, AFQMC, CSL, OCNLI,
# CMRC 2018, ChID 1.1, C3 1.1, CMNLI),
# then `cmrcx.eval --mixture=clue`: the dev row (RUNS_ROOT/clue_validation_results.json)
# and the test predictions (RUNS_ROOT/clue_submission.zip, for the CLUE leaderboard).
# Under each row the table prints the paper's published Table 2 row for MODEL (its gin
# files' RunConfig.paper_model), for comparison.
# DRY_RUN=1 prints the commands (one line each; skipped tasks on stderr) and runs none.
set -euo pipefail
if [ $# -lt 4 ]; then sed -n '2,25p' "$0"; exit 2; fi
MODEL=$1; DATA_ROOT=$(realpath "$2"); PRETRAINED=$(realpath -m "$3")
RUNS_ROOT=$(realpath -m "$4"); shift 4
PYTHON=${PYTHON:-python}
# Table 2's columns in its order, then CMNLI (trained, not in Table 2).
TASKS="clue_tnews11 clue_iflytek clue_cluewsc11 clue_afqmc clue_csl clue_ocnli clue_cmrc2018
  clue_chid11 clue_c311 clue_cmnli"
GIN_DIR=$(dirname "$(realpath "$0")")/../gin_configs/clue
if [ ! -f "$GIN_DIR/clue_afqmc_$MODEL.gin" ]; then
  known=$(cd "$GIN_DIR" && ls clue_afqmc_*.gin | sed 's/^clue_afqmc_//; s/[.]gin$//' | paste -sd ' ')
  echo "unknown MODEL $MODEL: no gin_configs/clue/clue_afqmc_$MODEL.gin; known: $known" >&2
  exit 2
fi
# One command: printed (DRY_RUN=1) or run.
step() {
  if [ -z "${DRY_RUN:-}" ]; then "$@"; return; fi
  local line; line=$(printf '%q ' "$@"); echo "${line% }"
}
# The official folder name of each task (and of the diagnostics set) from the task table.
declare -A PUBLIC_DIR
while read -r task dir; do PUBLIC_DIR[$task]=$dir; done < <(
  "$PYTHON" -c 'from cmrcx.benchmarks.clue.tasks import TASKS
from cmrcx.benchmarks.clue.reading_tasks import TASKS as MRC_TASKS
for row in (*TASKS.values(), *MRC_TASKS.values()): print(row.name, row.public_dir)')

[ -n "${DRY_RUN:-}" ] || mkdir -p "$RUNS_ROOT"
trained=0
for task in $TASKS; do
  data="$DATA_ROOT/${PUBLIC_DIR[$task]}"
  if [ ! -d "$data" ]; then echo "skip $task: no $data" >&2; continue; fi
  run="$RUNS_ROOT/$task"
  train=("$PYTHON" -m cmrcx.train --gin_file="${task}_$MODEL.gin" --gin.MODEL_DIR="'$run'"
    --gin.DATA_DIR="'$data'" --gin.PRETRAINED="'$PRETRAINED'" "$@")
  trained=$((trained + 1))
  if [ -n "${DRY_RUN:-}" ]; then step "${train[@]}"; continue; fi
  mkdir -p "$run"
  echo "=== train $task ($MODEL) -> $run" >&2
  "${train[@]}" | tail -n 1 > "$run/dev_metrics.json"
done
if [ "$trained" -eq 0 ]; then echo "no task folder found under $DATA_ROOT" >&2; exit 1; fi

step "$PYTHON" -m cmrcx.eval --mixture=clue --runs_root="$RUNS_ROOT" --split validation
# The diagnostics set is only predicted (by the CMNLI run) for the test submission.
diagnostics=()
if [ -d "$DATA_ROOT/${PUBLIC_DIR[clue_diagnostics]}" ]; then
  diagnostics=(--diagnostics_dir "$DATA_ROOT/${PUBLIC_DIR[clue_diagnostics]}")
fi
step "$PYTHON" -m cmrcx.eval --mixture=clue --runs_root="$RUNS_ROOT" --split test "${diagnostics[@]}"
