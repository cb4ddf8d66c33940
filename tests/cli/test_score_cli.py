"""`python -m cmrcx.score` end to end, in a subprocess like a user would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO_ROOT, run_cli_in

REPO = REPO_ROOT


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli_in(REPO_ROOT, "score", *args, timeout=120)


def _dump(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """Two passages: DEV_1 with 3 blanks (gold [2, 0, 1]), DEV_2 with 2 (gold [1, 3])."""
    records = [
        {
            "context_id": "DEV_1",
            "context": "他来了。[BLANK1]，[BLANK2]。最后[BLANK3]。",
            "choices": ["天黑了", "大家都笑了", "门开了", "鸟飞走了"],
            "answers": [2, 0, 1],
        },
        {
            "context_id": "DEV_2",
            "context": "[BLANK1]，然后[BLANK2]。",
            "choices": ["下雨了", "太阳出来了", "风停了", "我们出发了"],
            "answers": [1, 3],
        },
    ]
    return _dump(tmp_path / "cmrc2019_dev.json", {"data": records})


def test_scores(tmp_path: Path, dataset: Path) -> None:
    # DEV_1: 2 of 3 right; DEV_2: 2 of 2. QAC = 4/5 = 80%, PAC = 1/2 = 50%.
    predictions = _dump(tmp_path / "pred.json", {"DEV_1": [2, 0, 3], "DEV_2": [1, 3]})
    result = _run("cmrc2019", dataset, predictions)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"qac": 80.0, "pac": 50.0, "total": 5, "skip": 0}
    assert result.stdout.count("\n") == 1  # exactly one JSON object, one line
    assert result.stderr == ""


def test_missing_passage_reported(tmp_path: Path, dataset: Path) -> None:
    # DEV_1 missing: 0 right, its 3 blanks skipped. QAC = 2/5 = 40%, PAC = 1/2 = 50%.
    predictions = _dump(tmp_path / "pred.json", {"DEV_2": [1, 3]})
    result = _run("cmrc2019", dataset, predictions)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "qac": 40.0,
        "pac": 50.0,
        "total": 5,
        "skip": 3,
        "missing": ["DEV_1"],
    }
    assert "warning: 1 of 2 passages" in result.stderr


def test_official_semantics_end_to_end(tmp_path: Path, dataset: Path) -> None:
    # eae5c10: DEV_1 gold [2, 0, 1], pred ["2"] -> 1 right - 2 uncovered = -1, floored at 0
    # (string indices compare as strings). DEV_2 right, plus an id not in the dataset.
    # QAC = 2/5 = 40%, PAC = 1/2 = 50%, skip = 2.
    predictions = _dump(tmp_path / "pred.json", {"DEV_1": ["2"], "DEV_2": [1, 3], "X": [0]})
    result = _run("cmrc2019", dataset, predictions)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"qac": 40.0, "pac": 50.0, "total": 5, "skip": 2}


def test_malformed_dataset_exits_2(tmp_path: Path) -> None:
    dataset = tmp_path / "broken_dev.json"
    dataset.write_text('{"data": [', encoding="utf-8")
    predictions = _dump(tmp_path / "pred.json", {})
    result = _run("cmrc2019", dataset, predictions)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert "broken_dev.json" in result.stderr


def test_bad_predictions_exit_2(tmp_path: Path, dataset: Path) -> None:
    predictions = _dump(tmp_path / "my_pred.json", {"DEV_1": "2,0,1"})
    result = _run("cmrc2019", dataset, predictions)
    assert result.returncode == 2
    assert "my_pred.json" in result.stderr
    assert "DEV_1" in result.stderr


def test_unknown_benchmark_rejected(tmp_path: Path, dataset: Path) -> None:
    result = _run("squad", dataset, dataset)
    assert result.returncode == 2  # argparse usage error
    assert "cmrc2019" in result.stderr


def test_does_not_import_jax_or_tensorflow() -> None:
    # Scoring must start fast; importing jax or tensorflow costs seconds.
    code = "import sys, cmrcx.score; print(sorted({'jax', 'tensorflow'} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_empty_dataset_exits_2(tmp_path: Path) -> None:
    dataset = _dump(tmp_path / "empty_dev.json", {"data": []})
    result = _run("cmrc2019", dataset, _dump(tmp_path / "pred.json", {}))
    assert result.returncode == 2
    assert "empty_dev.json" in result.stderr
    assert "nothing to score" in result.stderr
