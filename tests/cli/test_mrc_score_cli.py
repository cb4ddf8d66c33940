"""`python -m cmrcx.score` for CLUE's reading comprehension (CMRC 2018, ChID, C3) on the
bundled samples: a perfect file scores 100, a wrong one the hand-computed lower score, a
malformed one a one-line error naming the file and the record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cmrcx import score
from tests.support import REPO_ROOT

REPO = REPO_ROOT
SAMPLE = REPO / "cmrcx/data/clue_mrc_sample"
CMRC2018_DEV = SAMPLE / "cmrc2018_public/dev.json"
CHID_ANSWERS = SAMPLE / "chid_public/dev_answer.json"
C3_DIR = SAMPLE / "c3_public"


def _score(capsys, *args: str | Path) -> tuple[int, str, str]:
    status = score.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def _dump(path: Path, document) -> Path:
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def _lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _cmrc2018_first_answers() -> dict[str, str]:
    document = json.loads(CMRC2018_DEV.read_text(encoding="utf-8"))
    return {
        qa["id"]: qa["answers"][0]["text"]
        for article in document["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    }


def _c3_dev_labels() -> list[int]:
    """Index of each dev answer among its choices, d-dev.json then m-dev.json."""
    labels = []
    for name in ("d-dev.json", "m-dev.json"):
        for _, questions, *_ in json.loads((C3_DIR / name).read_text(encoding="utf-8")):
            labels.extend(q["choice"].index(q["answer"]) for q in questions)
    return labels


def _assert_one_line_error(status: int, out: str, err: str, start: str) -> None:
    assert (status, out) == (2, "")
    assert err.startswith(f"error: {start}") and err.count("\n") == 1, err


# --- CMRC 2018 -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cmrc2018", "clue_cmrc2018"])
def test_cmrc2018_perfect(tmp_path, capsys, name):
    predictions = _dump(tmp_path / "pred.json", _cmrc2018_first_answers())
    status, out, err = _score(capsys, name, CMRC2018_DEV, predictions)
    assert (status, err) == (0, "")
    assert json.loads(out) == {"AVERAGE": 100.0, "F1": 100.0, "EM": 100.0, "TOTAL": 8, "SKIP": 0}


def test_cmrc2018_wrong_and_missing(tmp_path, capsys):
    answers = _cmrc2018_first_answers()
    # Gold "1998年" / "1998": "1999年" shares the token 年 of 2 with the first -> F1 0.5, EM 0.
    answers["DEV_0_QUERY_3"] = "1999年"
    del answers["DEV_1_QUERY_3"]  # skipped: counts 0
    answers["TRIAL_9_QUERY_9"] = "多余"  # not a dev question: ignored, as by the script
    status, out, err = _score(capsys, "cmrc2018", CMRC2018_DEV, _dump(tmp_path / "p.json", answers))
    assert status == 0
    # EM 6/8; F1 (6 + 0.5)/8; AVERAGE their mean.
    assert json.loads(out) == {"AVERAGE": 78.125, "F1": 81.25, "EM": 75.0, "TOTAL": 8, "SKIP": 1}
    assert "warning: 1 of 8 questions" in err and "'DEV_1_QUERY_3'" in err
    assert "'TRIAL_9_QUERY_9'" in err


def test_cmrc2018_official_shapes_are_scored(tmp_path, capsys):
    """An empty question (the official trial file's TRIAL_20_QUERY_0, TRIAL_776_QUERY_4)
    and answers with answer_start -1 (the official dev file's): the evaluator scores them."""
    document = json.loads(CMRC2018_DEV.read_text(encoding="utf-8"))
    first, second = document["data"][0]["paragraphs"][0]["qas"][:2]
    first["question"] = ""
    first["answers"][0]["answer_start"] = -1
    second["answers"][1] = {"text": "别的答案", "answer_start": -1}
    gold = _dump(tmp_path / "dev.json", document)
    answers = _cmrc2018_first_answers()
    answers[first["id"]] = ""  # an empty prediction for the empty question: EM 0, F1 0
    answers[second["id"]] = "别的答案"  # the -1 answer is a gold answer like any other
    status, out, err = _score(capsys, "cmrc2018", gold, _dump(tmp_path / "p.json", answers))
    assert (status, err) == (0, "")
    assert json.loads(out) == {"AVERAGE": 87.5, "F1": 87.5, "EM": 87.5, "TOTAL": 8, "SKIP": 0}


def test_cmrc2018_malformed_and_foreign_predictions(tmp_path, capsys):
    answers = _cmrc2018_first_answers()
    answers["DEV_0_QUERY_1"] = ["a list"]
    predictions = _dump(tmp_path / "p.json", answers)
    status, out, err = _score(capsys, "cmrc2018", CMRC2018_DEV, predictions)
    _assert_one_line_error(status, out, err, f"{predictions}: question id 'DEV_0_QUERY_1': ")

    test_predictions = _dump(tmp_path / "test.json", {"TEST_0_QUERY_0": "x"})
    status, out, err = _score(capsys, "cmrc2018", CMRC2018_DEV, test_predictions)
    _assert_one_line_error(status, out, err, f"{test_predictions}: question id 'TEST_0_QUERY_0'")
    assert "no id matches" in err


# --- ChID ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["chid", "clue_chid11", "clue_chid10"])
def test_chid_perfect(capsys, name):
    status, out, err = _score(capsys, name, CHID_ANSWERS, CHID_ANSWERS)
    assert (status, err) == (0, "")
    assert json.loads(out) == {"accuracy": 100.0, "correct": 10, "total": 10}


def test_chid_three_wrong(tmp_path, capsys):
    answers = json.loads(CHID_ANSWERS.read_text(encoding="utf-8"))
    predictions = dict(answers)
    for tag in list(answers)[:3]:
        predictions[tag] = (answers[tag] + 1) % 10
    status, out, _ = _score(
        capsys, "clue_chid11", CHID_ANSWERS, _dump(tmp_path / "p.json", predictions)
    )
    assert status == 0
    assert json.loads(out) == {"accuracy": 70.0, "correct": 7, "total": 10}


def test_chid_malformed_missing_and_extra(tmp_path, capsys):
    answers = json.loads(CHID_ANSWERS.read_text(encoding="utf-8"))
    bad = _dump(tmp_path / "bad.json", {**answers, "#idiom000025#": 10})
    status, out, err = _score(capsys, "chid", CHID_ANSWERS, bad)
    _assert_one_line_error(status, out, err, f"{bad}: key '#idiom000025#': ")

    missing = _dump(
        tmp_path / "missing.json", {k: v for k, v in answers.items() if k != "#idiom000030#"}
    )
    status, out, err = _score(capsys, "chid", CHID_ANSWERS, missing)
    _assert_one_line_error(status, out, err, f"{missing}: no prediction for 1 of the 10 blanks")
    assert "#idiom000030#" in err

    extra = _dump(tmp_path / "extra.json", {**answers, "#idiom000099#": 0})
    status, out, err = _score(capsys, "chid", CHID_ANSWERS, extra)
    _assert_one_line_error(status, out, err, f"{extra}: key '#idiom000099#': not a blank of ")


def test_chid_data_file_as_gold_points_to_the_answer_file(capsys):
    status, out, err = _score(capsys, "chid", SAMPLE / "chid_public/dev.json", CHID_ANSWERS)
    _assert_one_line_error(status, out, err, str(SAMPLE / "chid_public/dev.json"))
    assert f"GOLD is the answer file, e.g. {CHID_ANSWERS}" in err


# --- C3 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["c3", "clue_c311", "clue_c310"])
def test_c3_perfect(tmp_path, capsys, name):
    lines = [{"id": i, "label": label} for i, label in enumerate(_c3_dev_labels())]
    status, out, err = _score(capsys, name, C3_DIR, _lines(tmp_path / "c311_predict.json", lines))
    assert (status, err) == (0, "")
    assert json.loads(out) == {"accuracy": 100.0, "correct": 9, "total": 9}


def test_c3_two_wrong(tmp_path, capsys):
    labels = _c3_dev_labels()
    labels[0], labels[8] = (labels[0] + 1) % 2, (labels[8] + 1) % 2
    lines = [{"id": i, "label": label} for i, label in enumerate(labels)]
    status, out, _ = _score(capsys, "c3", C3_DIR, _lines(tmp_path / "p.json", lines))
    assert status == 0
    assert json.loads(out) == {"accuracy": pytest.approx(700 / 9), "correct": 7, "total": 9}


def test_c3_malformed_misordered_and_not_a_folder(tmp_path, capsys):
    lines = [{"id": i, "label": label} for i, label in enumerate(_c3_dev_labels())]
    lines[2]["label"] = "B"
    bad = _lines(tmp_path / "bad.json", lines)
    status, out, err = _score(capsys, "c3", C3_DIR, bad)
    _assert_one_line_error(status, out, err, f"{bad}: line 3: field 'label': ")

    lines = [{"id": i, "label": 0} for i in (1, 0, *range(2, 9))]
    swapped = _lines(tmp_path / "swapped.json", lines)
    status, out, err = _score(capsys, "c3", C3_DIR, swapped)
    _assert_one_line_error(status, out, err, f"{swapped}: line 1: field 'id': 1, but ")
    assert "d-dev.json record 0" in err

    status, out, err = _score(capsys, "c3", C3_DIR / "d-dev.json", swapped)
    _assert_one_line_error(status, out, err, f"{C3_DIR / 'd-dev.json'}: not a folder")


# --- The command ---------------------------------------------------------------------------


def test_help_says_what_gold_is(capsys):
    with pytest.raises(SystemExit) as exit_:
        score.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "chid_public/dev_answer.json" in out and "c3_public/" in out and "clue_c310" in out


def test_as_a_command(tmp_path):
    predictions = _dump(tmp_path / "p.json", {"#idiom000023#": 5})
    result = subprocess.run(
        [sys.executable, "-m", "cmrcx.score", "clue_chid10", str(CHID_ANSWERS), str(predictions)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {predictions}: no prediction for 9 of the 10 blanks of {CHID_ANSWERS}, "
        "e.g. #idiom000024#\n"
    )
