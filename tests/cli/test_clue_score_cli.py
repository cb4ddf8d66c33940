"""`python -m cmrcx.score clue_<task> GOLD SUBMISSION`, in a subprocess like a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cmrcx.benchmarks.clue import TASKS
from cmrcx.score import SCORERS
from tests.benchmarks.clue.test_clue_fixtures import write_lines, write_task_dir
from tests.support import REPO_ROOT, run_cli_in

REPO = REPO_ROOT
SAMPLE_DEV = REPO / "cmrcx/data/clue_sample/afqmc_public/dev.json"


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli_in(REPO_ROOT, "score", *args, timeout=120)


def _gold_labels(path: Path) -> list[str]:
    return [json.loads(line)["label"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_every_clue_task_has_a_scorer() -> None:
    assert set(TASKS) <= set(SCORERS)
    assert "cmrc2019" in SCORERS


def test_scores_the_bundled_afqmc_sample(tmp_path: Path) -> None:
    labels = _gold_labels(SAMPLE_DEV)
    predicted = ["1" if label == "0" else "0" for label in labels[:4]] + labels[4:]  # 4 wrong
    submission = write_lines(
        tmp_path / "afqmc_predict.json",
        [{"id": i, "label": label} for i, label in enumerate(predicted)],
    )
    result = _run("clue_afqmc", SAMPLE_DEV, submission)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"accuracy": 75.0, "correct": 12, "total": 16}
    assert result.stdout.count("\n") == 1  # exactly one JSON object, one line
    assert result.stderr == ""


def test_skipped_rows_are_reported(tmp_path: Path) -> None:
    dev = write_lines(
        tmp_path / "dev.json",
        [
            {"sentence1": "甲", "sentence2": "乙", "label": "-", "id": 0},
            {"sentence1": "丙", "sentence2": "丁", "label": "neutral", "id": 1},
        ],
    )
    submission = write_lines(tmp_path / "p.json", [{"id": 1, "label": "neutral"}])
    result = _run("clue_cmnli", dev, submission)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"accuracy": 100.0, "correct": 1, "total": 1, "skipped": 1}
    assert "note: 1 rows of" in result.stderr and "label '-'" in result.stderr


def test_malformed_gold_exits_2_naming_file_line_and_field(tmp_path: Path) -> None:
    directory = write_task_dir(tmp_path, "clue_tnews11")
    dev = directory / "dev.json"
    dev.write_text(
        dev.read_text(encoding="utf-8") + '{"label": 101, "sentence": "x"}\n', encoding="utf-8"
    )
    submission = write_lines(tmp_path / "p.json", [{"id": 0, "label": "100"}])
    result = _run("clue_tnews11", dev, submission)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {dev}: line 3: field 'label': ")


def test_bad_submission_exits_2(tmp_path: Path) -> None:
    submission = tmp_path / "my_pred.json"
    submission.write_text('{"id": 0, "label": "1"}\n{"id": 1, "label": 0}\n', encoding="utf-8")
    result = _run("clue_afqmc", SAMPLE_DEV, submission)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {submission}: line 2: field 'label': ")


def test_misaligned_submission_exits_2(tmp_path: Path) -> None:
    submission = write_lines(tmp_path / "p.json", [{"id": 0, "label": "1"}])
    result = _run("clue_afqmc", SAMPLE_DEV, submission)
    assert result.returncode == 2
    assert "has 1 predictions but" in result.stderr


def test_unknown_task_rejected(tmp_path: Path) -> None:
    result = _run("clue_c4", SAMPLE_DEV, SAMPLE_DEV)
    assert result.returncode == 2  # argparse usage error
    assert "clue_afqmc" in result.stderr


def test_clue_layer_imports_no_jax_or_tensorflow() -> None:
    code = (
        "import sys, cmrcx.benchmarks.clue.metrics, cmrcx.benchmarks.clue.inputs; "
        "print(sorted({'jax', 'tensorflow', 'numpy'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
