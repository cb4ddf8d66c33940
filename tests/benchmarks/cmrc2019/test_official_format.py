"""Tests for reading and writing the official CMRC 2019 JSON files."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cmrcx.benchmarks.cmrc2019.official_format import (
    BLANK_PATTERN,
    ClozePassage,
    DataFormatError,
    read_passages,
    read_predictions,
    write_predictions,
)


def _record(context_id: str = "DEV_1") -> dict[str, Any]:
    """A valid record: 3 blanks, 5 choices, of which choices 1 and 3 are fakes."""
    return {
        "context_id": context_id,
        "context": "小明出门了。[BLANK1]，天下着雨。[BLANK2]。他回家了，[BLANK3]。",
        "choices": ["他没带伞", "猫在睡觉", "衣服湿透了", "月亮很圆", "妈妈很生气"],
        "answers": [0, 2, 4],
    }


def _write(tmp_path: Path, document: Any, name: str = "cmrc2019_dev.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def _with_bad_record(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A dataset whose record 0 is fine and record 1 (context_id DEV_1) is edited."""
    bad = _record("DEV_1")
    edit(bad)
    return _write(tmp_path, {"data": [_record("DEV_0"), bad]})


def test_reads_valid_file(tmp_path: Path) -> None:
    path = _write(tmp_path, {"data": [_record("DEV_0"), _record("DEV_1")]})
    passages = read_passages(path)
    assert [p.context_id for p in passages] == ["DEV_0", "DEV_1"]
    first = passages[0]
    assert isinstance(first, ClozePassage)
    assert first.choices[2] == "衣服湿透了"
    assert first.answers == (0, 2, 4)
    assert first.num_blanks == 3
    assert first.fake_candidates == (1, 3)
    assert BLANK_PATTERN.findall(first.context) == ["1", "2", "3"]


def test_markers_in_any_textual_order(tmp_path: Path) -> None:
    # The official test file has QUALIFY_95 with "... [BLANK9] [BLANK11] [BLANK10] [BLANK12]":
    # a blank is its number, wherever it stands; answers[k] fills [BLANK{k+1}].
    record = _record("QUALIFY_95")
    record["context"] = "小明出门了。[BLANK1]，天下着雨。[BLANK3]。他回家了，[BLANK2]。"
    passages = read_passages(_write(tmp_path, {"data": [record]}))
    assert passages[0].num_blanks == 3
    assert passages[0].answers == (0, 2, 4)
    assert passages[0].blank_numbers_in_text == (1, 3, 2)


def test_adjacent_markers_are_fine(tmp_path: Path) -> None:
    # The trial data has "[BLANK5][BLANK6]" with nothing in between.
    record = _record()
    record["context"] = "开头[BLANK1][BLANK2]中间[BLANK3]。"
    assert read_passages(_write(tmp_path, {"data": [record]}))[0].num_blanks == 3


@pytest.mark.parametrize("answers_value", ["missing", []])
def test_unlabelled_split_gives_none(tmp_path: Path, answers_value: Any) -> None:
    record = _record("TEST_1")
    if answers_value == "missing":
        del record["answers"]
    else:
        record["answers"] = answers_value
    path = _write(tmp_path, {"data": [record]}, name="cmrc2019_qualify.json")
    (passage,) = read_passages(path, require_answers=False)
    assert passage.answers is None
    assert passage.fake_candidates == ()
    assert passage.num_blanks == 3


def test_empty_answers_rejected_when_required(tmp_path: Path) -> None:
    path = _with_bad_record(tmp_path, lambda r: r.update(answers=[]))
    with pytest.raises(DataFormatError, match="require_answers=False") as info:
        read_passages(path)
    assert "record 1 (context_id 'DEV_1'): field 'answers'" in str(info.value)


def test_present_answers_still_checked_without_require(tmp_path: Path) -> None:
    path = _with_bad_record(tmp_path, lambda r: r.update(answers=[0, 9, 4]))
    with pytest.raises(DataFormatError, match="out of range"):
        read_passages(path, require_answers=False)


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.__setitem__(key, value)


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.__delitem__(key)


# (edit to record 1, field named in the message, further expected text)
BAD_RECORDS = {
    "missing context": (_drop("context"), "context", "missing"),
    "missing choices": (_drop("choices"), "choices", "missing"),
    "missing answers": (_drop("answers"), "answers", "missing"),
    "context not str": (_set("context", ["a"]), "context", "got array"),
    "choices not list": (_set("choices", "abc"), "choices", "got string"),
    "choice not str": (_set("choices", ["a", 3, "c", "d", "e"]), "choices", "choice 1 is number"),
    "empty choice": (_set("choices", ["a", "b", "", "d", "e"]), "choices", "choice 2 is empty"),
    "answers not list": (_set("answers", "0,2,4"), "answers", "got string"),
    "answer is bool": (_set("answers", [0, True, 4]), "answers", "answer 1 is boolean"),
    "answer is float": (_set("answers", [0, 2.0, 4]), "answers", "answer 1 is number"),
    "blank context": (_set("context", "  \n "), "context", "is empty"),
    "no blank": (_set("context", "没有空。"), "context", "no [BLANKk] marker"),
    "marker missing": (_set("context", "[BLANK1]x[BLANK3]"), "context", "missing [BLANK2]"),
    "marker twice": (
        _set("context", "[BLANK1]x[BLANK1]y[BLANK2]"),
        "context",
        "duplicated [BLANK1]",
    ),
    "marker zero": (_set("context", "[BLANK0]x[BLANK1]"), "context", "[BLANK0]"),
    "too few answers": (_set("answers", [0, 2]), "answers", "2 answers but the context has 3"),
    "index too big": (_set("answers", [0, 17, 4]), "answers", "index 17 is out of range for 5"),
    "index negative": (_set("answers", [0, -1, 4]), "answers", "index -1 is out of range"),
    "choice reused": (
        _set("answers", [0, 2, 0]),
        "answers",
        "choice 0 is used for both [BLANK1] and [BLANK3]",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_bad_record_names_file_record_and_field(tmp_path: Path, case: str) -> None:
    edit, field, detail = BAD_RECORDS[case]
    path = _with_bad_record(tmp_path, edit)
    with pytest.raises(DataFormatError) as info:
        read_passages(path)
    message = str(info.value)
    assert str(path) in message
    assert "record 1 (context_id 'DEV_1')" in message
    assert f"field {field!r}" in message
    assert detail in message


@pytest.mark.parametrize(
    ("edit", "detail"),
    [(_drop("context_id"), "missing"), (_set("context_id", 7), "expected a string, got number")],
    ids=["missing", "not str"],
)
def test_bad_context_id_names_record_index(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], detail: str
) -> None:
    path = _with_bad_record(tmp_path, edit)
    with pytest.raises(DataFormatError) as info:
        read_passages(path)
    assert f"{path}: record 1: field 'context_id': {detail}" in str(info.value)


def test_record_not_an_object(tmp_path: Path) -> None:
    path = _write(tmp_path, {"data": [_record("DEV_0"), ["not", "a", "record"]]})
    with pytest.raises(DataFormatError, match="record 1: expected an object, got array") as info:
        read_passages(path)
    assert str(path) in str(info.value)


def test_duplicate_context_id_names_both_records(tmp_path: Path) -> None:
    records = [_record("DEV_0"), _record("DEV_1"), _record("DEV_0")]
    path = _write(tmp_path, {"data": records})
    with pytest.raises(DataFormatError) as info:
        read_passages(path)
    assert (
        f"{path}: record 2 (context_id 'DEV_0'): field 'context_id': duplicate of record 0"
        in str(info.value)
    )


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "cmrc2019_dev.json"
    with pytest.raises(DataFormatError, match="file not found") as info:
        read_passages(path)
    assert str(path) in str(info.value)


def test_malformed_json_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "cmrc2019_dev.json"
    path.write_text('{"data": [\n  {"context_id": "DEV_0",,}\n]}', encoding="utf-8")
    with pytest.raises(DataFormatError) as info:
        read_passages(path)
    assert f"{path}: malformed JSON at line 2 column 26" in str(info.value)


@pytest.mark.parametrize(
    ("document", "detail"),
    [
        ([_record()], "top level: expected an object with a 'data' array, got array"),
        ({"version": 1}, "top level: field 'data': missing"),
        ({"data": {"DEV_0": _record()}}, "top level: field 'data': expected an array, got object"),
    ],
)
def test_bad_top_level(tmp_path: Path, document: Any, detail: str) -> None:
    path = _write(tmp_path, document)
    with pytest.raises(DataFormatError) as info:
        read_passages(path)
    assert f"{path}: {detail}" in str(info.value)


def test_read_predictions(tmp_path: Path) -> None:
    path = _write(tmp_path, {"DEV_0": [0, 2, -1], "DEV_1": []}, name="pred.json")
    assert read_predictions(path) == {"DEV_0": [0, 2, -1], "DEV_1": []}


def test_read_predictions_keeps_string_indices(tmp_path: Path) -> None:
    # The official evaluator compares str(gold) with str(pred): "2" is a valid answer.
    path = _write(tmp_path, {"DEV_0": [0, "2", -1]}, name="pred.json")
    assert read_predictions(path) == {"DEV_0": [0, "2", -1]}


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ('{"DEV_0": [0, 2', "malformed JSON at line 1 column"),
        ("[[0, 2, 4]]", "top level: expected an object"),
        ('{"DEV_0": 3}', "context_id 'DEV_0': expected an array of integers, got number"),
        ('{"DEV_0": [0, 2.5, 4]}', "context_id 'DEV_0': blank 2: expected an integer, got number"),
        ('{"DEV_0": [0, null]}', "context_id 'DEV_0': blank 2: expected an integer, got null"),
        ('{"DEV_0": [0, false]}', "context_id 'DEV_0': blank 2: expected an integer, got boolean"),
    ],
)
def test_bad_predictions(tmp_path: Path, text: str, detail: str) -> None:
    path = tmp_path / "pred.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataFormatError) as info:
        read_predictions(path)
    assert f"{path}: {detail}" in str(info.value)


def test_write_predictions_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "dev" / "predictions.json"  # parent dirs do not exist yet
    predictions = {"试验_1": [np.int64(3), 0, -1], "DEV_2": [1]}
    write_predictions(path, predictions)
    text = path.read_text(encoding="utf-8")
    assert "试验_1" in text  # ensure_ascii=False keeps ids readable
    assert text.startswith('{\n "')  # indent=1
    assert read_predictions(path) == {"试验_1": [3, 0, -1], "DEV_2": [1]}
    assert os.listdir(path.parent) == ["predictions.json"]  # no temp file left behind


def test_write_predictions_replaces_existing(tmp_path: Path) -> None:
    path = tmp_path / "predictions.json"
    write_predictions(path, {"A": [0, 1, 2]})
    write_predictions(path, {"B": [1]})
    assert read_predictions(path) == {"B": [1]}
    assert sorted(os.listdir(tmp_path)) == ["predictions.json"]
