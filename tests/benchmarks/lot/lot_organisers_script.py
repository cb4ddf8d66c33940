"""The OutGen organisers' eval.py, run unchanged in a child process, for parity tests.

The script and the real data live beside the repository in ``shared/data/
lot_outgen_competition/`` (shared/data/README.md); tests skip, saying so, without them or
without the packages the script imports (rouge, nltk, jieba).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

DATA = REPO_ROOT.parent / "shared" / "data" / "lot_outgen_competition"
SCRIPT = DATA / "organisers_eval.py"
GOLD = DATA / "val.jsonl"  # 661 {story, outline} records
LONGLM_SMALL = DATA / "small_val.jsonl"  # LongLM-small's stories for them


def require_script() -> None:
    """Skip unless the organisers' script, its data and its imports are available."""
    if not SCRIPT.is_file() or not GOLD.is_file() or not LONGLM_SMALL.is_file():
        pytest.skip(f"the organisers' OutGen data is not at {DATA} (shared/data/README.md)")
    for module in ("rouge", "nltk", "jieba"):
        pytest.importorskip(module)


def import_copy(workdir: Path):
    """The script as a module, imported from a copy in `workdir` (its folder stays as it
    is: no __pycache__)."""
    copy = Path(shutil.copy(SCRIPT, workdir / "organisers_eval_copy.py"))
    spec = importlib.util.spec_from_file_location("organisers_eval_copy", copy)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def _number(text: str) -> float:
    return float(text)  # float() reads "nan"


def run_cli(predictions: Path, gold: Path) -> tuple[dict[str, float], float]:
    """``python organisers_eval.py PRED GOLD`` -> (its metric dict, its 加权总得分)."""
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(predictions), str(gold)],
        capture_output=True,
        text=True,
        check=True,
        cwd=predictions.parent,
        timeout=600,
    ).stdout
    metrics_line = next(line for line in out.splitlines() if line.startswith("所有指标"))
    weighted_line = next(line for line in out.splitlines() if line.startswith("加权总得分"))
    metrics = {
        key: _number(value)
        for key, value in re.findall(
            r"'([\w-]+)': (?:np\.float64\()?([-+0-9.eE]+|nan)", metrics_line
        )
    }
    return metrics, _number(weighted_line.split("：", 1)[1])


# Imports the script once and runs its `compute` on several (gold, predictions) pairs,
# through a `main` of the script's own stack depth (<module> -> main -> compute), so
# that rouge's recursion limit bites where it does in `python organisers_eval.py`.
_DRIVER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("organisers_eval", sys.argv[1])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)

def main(gold, predictions):
    return script.compute(gold, predictions)

for pair in json.loads(sys.argv[2]):
    try:
        metrics, weighted = main(pair[0], pair[1])
        out = {"metrics": {k: float(v) for k, v in metrics.items()}, "weighted": float(weighted)}
    except Exception as e:
        out = {"error": type(e).__name__}
    print(json.dumps(out))
"""


def run_compute(pairs: list[tuple[Path, Path]], workdir: Path) -> list[dict]:
    """The script's `compute(gold, predictions)` of each pair, in one child process:
    [{"metrics": {...}, "weighted": x}, or {"error": exception class name}]."""
    driver = workdir / "organisers_driver.py"
    driver.write_text(_DRIVER, encoding="utf-8")
    pairs_json = json.dumps([[str(gold), str(predictions)] for gold, predictions in pairs])
    out = subprocess.run(
        [sys.executable, str(driver), str(SCRIPT), pairs_json],
        capture_output=True,
        text=True,
        check=True,
        cwd=workdir,
        timeout=600,
    ).stdout
    return [json.loads(line) for line in out.splitlines()]
