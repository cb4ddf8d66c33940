#!/usr/bin/env bash
# The device check (tools/benchkit/device_check.py): platform and versions, every family's
# logits on the default device against the CPU, BERT-base and LongLM-large train-step MFU,
# LongLM-small sampling, the CMRC 2019 tiny run. Writes DIR/device_check.json after each row.
#   tools/device_check.sh --out DIR            # one GPU / TPU: within 8 minutes
#   tools/device_check.sh --smoke --out DIR    # a CPU: small sizes, within 3 minutes
# PYTHON picks the interpreter (default: the repository's .venv, else python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
[[ -x "$python" ]] || python="$(command -v python3)"
cd "$root"
PYTHONPATH="$root/tools${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m benchkit.device_check "$@"
