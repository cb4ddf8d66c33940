#!/usr/bin/env bash
# Reproduce the six CMRC 2019 baselines (the paper's Table 3) on an accelerator host.
#
#   tools/reproduce_cmrc2019.sh DATA_DIR CKPT_ROOT [OUT_DIR]
#
# DATA_DIR   the official cmrc2019_train.json, cmrc2019_dev.json (and, for test
#            predictions, cmrc2019_qualify.json)
# CKPT_ROOT  one released checkpoint per model, HuggingFace or Google TF format:
#            CKPT_ROOT/{bert,bert_multilingual,bert_wwm,bert_wwm_ext,
#                       roberta_wwm_ext,roberta_wwm_ext_large}/
# OUT_DIR    runs/ by default: exports, checkpoints, predictions, metrics
#
# Each model: convert -> train (3 epochs, paper setting) -> eval dev -> predict
# test. The test split has no public answers: its predictions file
# (OUT_DIR/<model>/predictions/*_test.json) is what the CMRC 2019 CodaLab
# evaluation takes. Prints the dev QAC/PAC table at the end (decoding: paper).
# Extra gin bindings for every run can be passed in CMRCX_GIN_ARGS.
# DRY_RUN=1 prints the commands (one line each; skipped models on stderr) and runs none.
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '2,18p' "$0"; exit 2; fi
DATA_DIR=$(realpath "$1"); CKPT_ROOT=$(realpath "$2"); OUT_DIR=$(realpath -m "${3:-runs}")
PYTHON=${PYTHON:-python}
MODELS="bert bert_multilingual bert_wwm bert_wwm_ext roberta_wwm_ext roberta_wwm_ext_large"
read -r -a EXTRA <<< "${CMRCX_GIN_ARGS:-}"
# One command: printed (DRY_RUN=1) or run.
step() {
  if [ -z "${DRY_RUN:-}" ]; then "$@"; return; fi
  local line; line=$(printf '%q ' "$@"); echo "${line% }"
}

found=0
for model in $MODELS; do
  if [ ! -d "$CKPT_ROOT/$model" ]; then echo "skip $model: no $CKPT_ROOT/$model" >&2; continue; fi
  found=$((found + 1))
  run="$OUT_DIR/$model"
  gin=(--gin_file="cmrc2019_$model.gin" --gin.MODEL_DIR="'$run'" --gin.DATA_DIR="'$DATA_DIR'"
       --gin.PRETRAINED="'$run/pretrained'" "${EXTRA[@]}")
  [ -f "$run/pretrained/model_config.json" ] || \
    step "$PYTHON" -m cmrcx.convert --from "$CKPT_ROOT/$model" --to "$run/pretrained"
  if [ -n "${DRY_RUN:-}" ]; then
    step "$PYTHON" -m cmrcx.train "${gin[@]}"
  else
    "$PYTHON" -m cmrcx.train "${gin[@]}" | tail -n 1 > "$run/dev_metrics.json"
  fi
  if [ -f "$DATA_DIR/cmrc2019_qualify.json" ]; then
    if [ -n "${DRY_RUN:-}" ]; then
      step "$PYTHON" -m cmrcx.eval "${gin[@]}" --split test
    else
      "$PYTHON" -m cmrcx.eval "${gin[@]}" --split test > /dev/null
    fi
  fi
done
if [ "$found" -eq 0 ]; then
  echo "no checkpoint folder under $CKPT_ROOT: name them $(echo $MODELS | sed 's/ /, /g')" >&2
  exit 1
fi
[ -z "${DRY_RUN:-}" ] || exit 0

"$PYTHON" - "$OUT_DIR" $MODELS <<'PY'
import json, os, sys
out, models = sys.argv[1], sys.argv[2:]
print(f"| model | dev QAC | dev PAC |\n|---|---|---|")
for model in models:
    path = os.path.join(out, model, "dev_metrics.json")
    if os.path.isfile(path):
        m = json.load(open(path))
        print(f"| {model} | {m['qac/paper']:.3f} | {m['pac/paper']:.3f} |")
    else:
        print(f"| {model} | - | - |")
PY
