"""Submission files, accuracy and file-level scoring (cmrcx.benchmarks.clue.submission/metrics)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from cmrcx.benchmarks.clue import TASKS, DataFormatError, read_split
from cmrcx.benchmarks.clue.metrics import accuracy, score_submission
from cmrcx.benchmarks.clue.submission import (
    labels_from_indices,
    read_submission,
    submission_path,
    write_submission,
)
from tests.benchmarks.clue.test_clue_fixtures import FIXTURES, write_lines, write_task_dir
from tests.support import REPO_ROOT

# The leaderboard's file names ([SUBMIT], [RUN], [3P] in cmrcx.benchmarks.clue.tasks).
OFFICIAL_NAMES = {
    "clue_afqmc": "afqmc_predict.json",
    "clue_tnews10": "tnews10_predict.json",
    "clue_tnews11": "tnews11_predict.json",
    "clue_iflytek": "iflytek_predict.json",
    "clue_ocnli": "ocnli_50k_predict.json",
    "clue_cmnli": "cmnli_predict.json",
    "clue_cluewsc10": "cluewsc10_predict.json",
    "clue_cluewsc11": "cluewsc11_predict.json",
    "clue_csl": "csl_predict.json",
    "clue_diagnostics": "diagnostics_predict.json",
}


@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_write_read_score_round_trip(tmp_path: Path, task_name: str) -> None:
    directory = write_task_dir(tmp_path / "data", task_name)
    split, _ = FIXTURES[task_name]["labelled"]
    gold = read_split(task_name, directory, split)
    ids = [e.id for e in gold.examples]
    labels = [e.label for e in gold.examples]
    labels[-1] = next(x for x in TASKS[task_name].labels if x != labels[-1])  # one wrong
    path = write_submission(task_name, tmp_path / "out", ids, labels)
    assert path.name == OFFICIAL_NAMES[task_name]
    assert path == submission_path(task_name, tmp_path / "out")
    lines = read_submission(task_name, path)
    assert [(p.id, p.label) for p in lines] == list(zip(ids, labels, strict=True))
    n = len(ids)
    scores = score_submission(task_name, gold.path, path)
    assert scores == {"accuracy": 100.0 * (n - 1) / n, "correct": n - 1, "total": n}


def test_test_file_submission_lines_exactly(tmp_path: Path) -> None:
    test = read_split("clue_csl", write_task_dir(tmp_path, "clue_csl"), "test")
    path = write_submission("clue_csl", tmp_path, [e.id for e in test.examples], ["1", "0"])
    assert path.read_text(encoding="utf-8") == (
        '{"id": 2415, "label": "1"}\n{"id": 2416, "label": "0"}\n'
    )
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["csl_predict.json", "csl_public"]


def test_write_accepts_numpy_ids_and_string_ids(tmp_path: Path) -> None:
    path = write_submission("clue_ocnli", tmp_path, [np.int64(3), "x9"], ["neutral", "entailment"])
    assert path.read_text(encoding="utf-8").splitlines() == [
        '{"id": 3, "label": "neutral"}',
        '{"id": "x9", "label": "entailment"}',
    ]


def test_write_rejects_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="2 ids but 1 labels"):
        write_submission("clue_afqmc", tmp_path, [0, 1], ["1"])
    with pytest.raises(ValueError, match="prediction 0: 1 is not an official label"):
        write_submission("clue_afqmc", tmp_path, [0], [1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="prediction 1: 'Neutral' is not an official label"):
        write_submission("clue_cmnli", tmp_path, [0, 1], ["neutral", "Neutral"])
    with pytest.raises(ValueError, match="id 1.5 is not an integer or string"):
        write_submission("clue_afqmc", tmp_path, [1.5], ["1"])
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_labels_from_indices_uses_the_official_order() -> None:
    assert labels_from_indices("clue_tnews11", [0, 5, 14]) == ["100", "106", "116"]
    assert labels_from_indices("clue_cmnli", np.array([0, 1, 2])) == [
        "contradiction",
        "entailment",
        "neutral",
    ]
    assert labels_from_indices("clue_cluewsc11", [0, 1]) == ["true", "false"]
    with pytest.raises(ValueError, match="class index 2 is not in"):
        labels_from_indices("clue_afqmc", [1, 2])
    with pytest.raises(ValueError, match="class index True"):
        labels_from_indices("clue_afqmc", [True])


_BAD_SUBMISSION_LINES = [
    ('{"id": 0, "label": 1}', "field 'label': expected a label string such as '0', got number"),
    ('{"id": 0, "label": "2"}', "field 'label': '2' is not a clue_afqmc label"),
    ('{"label": "1"}', "field 'id': missing"),
    ('{"id": 0}', "field 'label': missing"),
    ('{"id": null, "label": "1"}', "field 'id': expected an integer or string, got null"),
    ('{"id": 0, "label": "1"', "malformed JSON"),
    ("", "empty line"),
]


@pytest.mark.parametrize(("bad", "message"), _BAD_SUBMISSION_LINES)
def test_bad_submission_line_names_file_line_and_field(
    tmp_path: Path, bad: str, message: str
) -> None:
    path = tmp_path / "afqmc_predict.json"
    path.write_text(f'{{"id": 5, "label": "0"}}\n{bad}\n', encoding="utf-8")
    with pytest.raises(DataFormatError) as info:
        read_submission("clue_afqmc", path)
    assert str(info.value).startswith(f"{path}: line 2: ")
    assert message in str(info.value)


def test_submission_extra_keys_are_ignored(tmp_path: Path) -> None:
    # The reference runner adds "label_desc": "" to TNEWS lines.
    path = write_lines(
        tmp_path / "tnews11_predict.json", [{"id": 0, "label": "100", "label_desc": ""}]
    )
    assert read_submission("clue_tnews11", path)[0].label == "100"


def _dev(tmp_path: Path) -> Path:
    return write_task_dir(tmp_path, "clue_afqmc") / "dev.json"  # gold labels "1", "0"


def test_score_ids_compare_as_strings(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "p.json", [{"id": "0", "label": "1"}, {"id": 1, "label": "1"}])
    assert score_submission("clue_afqmc", _dev(tmp_path), path)["accuracy"] == 50.0


def test_score_refuses_misaligned_submissions(tmp_path: Path) -> None:
    dev = _dev(tmp_path)
    swapped = write_lines(tmp_path / "p.json", [{"id": 1, "label": "0"}, {"id": 0, "label": "1"}])
    with pytest.raises(DataFormatError, match=r"p\.json: line 1: field 'id': 1, but the example"):
        score_submission("clue_afqmc", dev, swapped)
    short = write_lines(tmp_path / "q.json", [{"id": 0, "label": "1"}])
    with pytest.raises(DataFormatError, match=r"q\.json: has 1 predictions but .* has 2"):
        score_submission("clue_afqmc", dev, short)
    empty = tmp_path / "empty_dev.json"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(DataFormatError, match="nothing to score"):
        score_submission("clue_afqmc", empty, short)


def test_score_ocnli_dev_with_no_majority_rows(tmp_path: Path) -> None:
    rows = [("entailment", 0), ("-", 1), ("neutral", 2)]
    dev = write_lines(
        tmp_path / "dev.json",
        [{"sentence1": "甲", "sentence2": "乙", "label": label, "id": i} for label, i in rows],
    )
    kept = [{"id": 0, "label": "entailment"}, {"id": 2, "label": "contradiction"}]
    expected = {"accuracy": 50.0, "correct": 1, "total": 2, "skipped": 1}
    assert score_submission("clue_ocnli", dev, write_lines(tmp_path / "a.json", kept)) == expected
    # A submission with a line for every row of the file scores the same.
    every_row = [kept[0], {"id": 1, "label": "neutral"}, kept[1]]
    assert score_submission("clue_ocnli", dev, write_lines(tmp_path / "b.json", every_row)) == (
        expected
    )


def test_accuracy_metric() -> None:
    assert accuracy(["1", "0", "1", "1"], ["1", "1", "1", "0"]) == {"accuracy": 50.0}
    assert accuracy([2, 0], [2, 0]) == {"accuracy": 100.0}
    with pytest.raises(ValueError, match="2 targets but 1 predictions"):
        accuracy(["1", "0"], ["1"])
    with pytest.raises(ValueError, match="no examples"):
        accuracy([], [])


def test_submission_is_json_lines_in_order(tmp_path: Path) -> None:
    test = read_split(
        "clue_afqmc",
        REPO_ROOT / "cmrcx/data/clue_sample/afqmc_public",
        "test",
    )
    labels = labels_from_indices("clue_afqmc", [i % 2 for i in range(len(test.examples))])
    path = write_submission("clue_afqmc", tmp_path, [e.id for e in test.examples], labels)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1]]
    assert [r["id"] for r in records] == list(range(16))
    assert all(set(r) == {"id", "label"} for r in records)
