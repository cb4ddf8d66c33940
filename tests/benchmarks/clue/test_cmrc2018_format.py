"""CMRC 2018's official file format (cmrcx.benchmarks.clue.cmrc2018_format) and its
TFDS builder (cmrcx.datasets.cmrc2018)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cmrcx.benchmarks.clue import cmrc2018_format as fmt
from cmrcx.common.errors import DataFormatError, MissingSplitError
from tests.support import REPO_ROOT

SAMPLE = REPO_ROOT / "cmrcx/data/clue_mrc_sample/cmrc2018_public"

DOCUMENT = {
    "version": "v1.0",
    "data": [
        {
            "id": "DEV_7",
            "title": "标题",
            "paragraphs": [
                {
                    "id": "DEV_7",
                    "context": "北京是中国的首都。",
                    "qas": [
                        {
                            "question": "中国的首都是哪里？",
                            "id": "DEV_7_QUERY_0",
                            "answers": [
                                {"text": "北京", "answer_start": 0},
                                {"text": "北京", "answer_start": 0},
                            ],
                        },
                        {
                            "question": "北京是哪国的首都？",
                            "id": "DEV_7_QUERY_1",
                            "answers": [{"text": "中国", "answer_start": 5}],  # really 3
                        },
                    ],
                }
            ],
        }
    ],
}


def _write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def _broken(tmp_path: Path, edit) -> Path:
    document = copy.deepcopy(DOCUMENT)
    edit(document)
    return _write(tmp_path / "dev.json", document)


def test_reads_questions_in_file_order_with_all_answers(tmp_path: Path) -> None:
    split = fmt.read_questions(_write(tmp_path / "dev.json", DOCUMENT), labelled=True)
    first, second = split.questions
    assert first == fmt.Cmrc2018Question(
        qid="DEV_7_QUERY_0",
        context_id="DEV_7",
        context="北京是中国的首都。",
        question="中国的首都是哪里？",
        answers=("北京", "北京"),
        answer_starts=(0, 0),
        position="data[0].paragraphs[0].qas[0]",
    )
    assert second.answer_starts == (5,)
    # A first answer away from its answer_start is counted, not refused (the baseline
    # searches left of it).
    assert split.misplaced_starts == ("DEV_7_QUERY_1",)
    assert "2 questions, 1 passages, 1 first answers not at their answer_start" in split.summary()


def test_an_answer_the_baselines_search_cannot_find_is_named(tmp_path: Path) -> None:
    import copy

    document = copy.deepcopy(DOCUMENT)
    qas = document["data"][0]["paragraphs"][0]["qas"]
    qas[0]["answers"] = [{"text": "上海", "answer_start": 0}]  # nowhere in the passage
    split = fmt.read_questions(_write(tmp_path / "dev.json", document), labelled=True)
    assert split.misplaced_starts == ("DEV_7_QUERY_0", "DEV_7_QUERY_1")
    assert split.unfound_answers == ("DEV_7_QUERY_0",)  # QUERY_1 is found 2 to the left
    assert (
        "2 first answers not at their answer_start (searched up to 3 characters to the "
        "left, as the baseline does), 1 of them not found there either (trained on the span "
        "where the search stops, as the baseline), e.g. 'DEV_7_QUERY_0'" in split.summary()
    )


def test_bundled_sample_splits() -> None:
    counts = {"train": 16, "validation": 8, "test": 3}
    for split, count in counts.items():
        records = fmt.read_split(SAMPLE, split)
        assert len(records.questions) == count and not records.misplaced_starts
    assert all(q.answers == () for q in fmt.read_split(SAMPLE, "test").questions)
    assert all(len(q.answers) == 3 for q in fmt.read_split(SAMPLE, "validation").questions)


def test_test_files_may_lack_answers(tmp_path: Path) -> None:
    def strip(document):
        qas = document["data"][0]["paragraphs"][0]["qas"]
        del qas[0]["answers"]
        qas[1]["answers"] = []
        del document["data"][0]["id"], document["data"][0]["paragraphs"][0]["id"]

    path = _broken(tmp_path, strip)
    questions = fmt.read_questions(path, labelled=False).questions
    assert [q.answers for q in questions] == [(), ()]
    assert questions[0].context_id == "data[0].paragraphs[0]"  # no paragraph or article id
    with pytest.raises(DataFormatError, match=r"qas\[0\] \(id 'DEV_7_QUERY_0'\): field 'answers'"):
        fmt.read_questions(path, labelled=True)


def test_the_test_files_placeholder_answers_are_dropped(tmp_path: Path) -> None:
    """CLUE's test.json: three {"text": "FAKE_ANSWER_n", "answer_start": -1} per question
    (the CLUE test passage as dbiir/UER-py keeps it). Not answers: dropped when the file is
    read unlabelled, refused when it is read as gold."""

    def fake(document):
        for qa in document["data"][0]["paragraphs"][0]["qas"]:
            qa["answers"] = [{"text": f"FAKE_ANSWER_{n}", "answer_start": -1} for n in (1, 2, 3)]

    path = _broken(tmp_path, fake)
    split = fmt.read_questions(path, labelled=False)
    assert [q.answers for q in split.questions] == [(), ()]
    assert not split.misplaced_starts
    with pytest.raises(DataFormatError, match=r"field 'answers': holds the test file's placeh"):
        fmt.read_questions(path, labelled=True)


def _qa(document) -> dict:
    return document["data"][0]["paragraphs"][0]["qas"][1]


BROKEN = [
    (
        lambda d: _qa(d)["answers"][0].update(answer_start="5"),
        r"dev\.json: data\[0\]\.paragraphs\[0\]\.qas\[1\] \(id 'DEV_7_QUERY_1'\): "
        r"field 'answers\[0\]\.answer_start': expected an integer, got string",
    ),
    (
        lambda d: _qa(d)["answers"][0].pop("text"),
        r"qas\[1\] \(id 'DEV_7_QUERY_1'\): field 'answers\[0\]\.text': missing",
    ),
    (lambda d: _qa(d).pop("question"), r"qas\[1\] \(id 'DEV_7_QUERY_1'\): field 'question'"),
    (lambda d: _qa(d).update(id=7), r"qas\[1\]: field 'id': expected a string, got number"),
    (
        lambda d: _qa(d).update(id="DEV_7_QUERY_0"),
        r"qas\[1\] \(id 'DEV_7_QUERY_0'\): field 'id': "
        r"duplicate of data\[0\]\.paragraphs\[0\]\.qas\[0\]",
    ),
    (
        lambda d: d["data"][0]["paragraphs"][0].update(context=["x"]),
        r"data\[0\]\.paragraphs\[0\] \(id 'DEV_7'\): field 'context': expected a string, got array",
    ),
    (
        lambda d: d["data"][0]["paragraphs"][0].pop("qas"),
        r"paragraphs\[0\] \(id 'DEV_7'\): field 'qas': missing",
    ),
    (
        lambda d: d["data"][0].update(title=None),
        r"data\[0\] \(id 'DEV_7'\): field 'title': expected a string, got null",
    ),
    (lambda d: d["data"].append(3), r"dev\.json: data\[1\]: expected an object, got number"),
    (lambda d: d.pop("data"), r"dev\.json: top level: field 'data': missing"),
]


@pytest.mark.parametrize(("edit", "message"), BROKEN)
def test_errors_name_file_record_and_field(tmp_path: Path, edit, message: str) -> None:
    with pytest.raises(DataFormatError, match=message):
        fmt.read_questions(_broken(tmp_path, edit), labelled=True)


def _official_shapes(document) -> None:
    """The shapes of the official files: an empty question (the trial file's
    TRIAL_20_QUERY_0 and TRIAL_776_QUERY_4), answers with answer_start -1 (200 in dev.json),
    first or not, an empty first answer text, an empty passage and an empty id."""
    paragraph = document["data"][0]["paragraphs"][0]
    first, second = paragraph["qas"]
    first["question"] = ""
    first["answers"].append({"text": "中国首都北京", "answer_start": -1})
    second["answers"] = [{"text": "中国", "answer_start": -1}, {"text": "", "answer_start": 3}]
    document["data"].append(
        {"paragraphs": [{"context": " ", "qas": [{"id": "", "question": "？", "answers": [
            {"text": "", "answer_start": 0}]}]}]}
    )  # fmt: skip


def test_official_shapes_are_read_and_counted(tmp_path: Path) -> None:
    """What the evaluator scores and the baseline trains on is read, not refused; each
    shape is counted in the summary the TFDS builder prints."""
    path = _broken(tmp_path, _official_shapes)
    split = fmt.read_questions(path, labelled=True)
    first, second, third = split.questions
    assert first.question == "" and first.answer_starts == (0, 0, -1)
    assert second.answers == ("中国", "") and second.answer_starts == (-1, 3)
    assert (third.qid, third.context, third.answers) == ("", " ", ("",))
    assert split.empty_questions == ("DEV_7_QUERY_0",)
    assert split.empty_contexts == ("",)
    assert split.empty_first_answers == ("",)
    # The empty text stands at its answer_start 0 (an empty slice); -1 does not.
    assert split.misplaced_starts == split.negative_starts == ("DEV_7_QUERY_1",)
    summary = split.summary()
    assert "3 questions, 2 passages, 1 empty questions (read as an empty query" in summary
    assert "1 empty passages" in summary and "1 empty first answers" in summary
    assert "1 first answers not at their answer_start" in summary
    assert "1 of them at answer_start -1" in summary


def test_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "dev.json").write_text('{"data": [', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"dev\.json: malformed JSON at line 1"):
        fmt.read_split(tmp_path, "validation")
    _write(tmp_path / "dev.json", [DOCUMENT])
    with pytest.raises(DataFormatError, match=r"dev\.json: top level: expected an object"):
        fmt.read_split(tmp_path, "validation")
    with pytest.raises(DataFormatError, match=r"train\.json: file not found"):
        fmt.read_split(tmp_path, "train")
    with pytest.raises(DataFormatError, match="no 'dev' split"):
        fmt.read_split(tmp_path, "dev")


def test_baseline_answer_search() -> None:
    context = "在 北京。"
    assert fmt.baseline_answer_chars(context, "北京", 2) == (2, 3)
    assert fmt.baseline_answer_chars(context, "北京", 5) == (2, 3)  # 3 to the left
    # Not found: the span 3 characters left; then its start skips the space (end stays).
    assert fmt.baseline_answer_chars(context, "上海", 4) == (2, 2)
    with pytest.raises(ValueError, match="does not lie in the context"):
        fmt.baseline_answer_chars(context, "北京", 30)
    # answer_start -1: json2features's negative positions count from the passage's end
    # (start -4, end -3 after the 3 steps left), as Python indexes them.
    assert fmt.baseline_answer_chars("在北京的天安门。", "北京", -1) == (4, 5)
    # A long answer's end stays near the start: the span comes out reversed.
    assert fmt.baseline_answer_chars("在北京的天安门。", "北京的天安门", -1) == (4, 1)
    # An empty text matches where it stands.
    assert fmt.baseline_answer_chars(context, "", 2) == (2, 1)
    with pytest.raises(ValueError, match="does not lie in the context"):
        fmt.baseline_answer_chars(" ", "", 0)  # the start runs past the whitespace


def test_tfds_builder_prepares_one_split(tmp_path: Path) -> None:
    import tensorflow_datasets as tfds

    from cmrcx.datasets import cmrc2018 as cmrc2018_tfds

    data_dir = tmp_path / "cmrc2018_public"
    data_dir.mkdir()
    shutil.copy(SAMPLE / "dev.json", data_dir / "dev.json")
    shutil.copy(SAMPLE / "test.json", data_dir / "test.json")
    (data_dir / "trial.json").write_text("not json", encoding="utf-8")  # read only if asked
    cache = str(tmp_path / "cache")
    assert cmrc2018_tfds.available_splits(str(data_dir)) == ["validation", "test", "trial"]
    records = list(tfds.as_numpy(cmrc2018_tfds.load_split(str(data_dir), "validation", cache)))
    expected = fmt.read_split(SAMPLE, "validation").questions
    assert [r["id"].decode() for r in records] == [q.qid for q in expected]
    second = records[1]
    assert second["context_id"].decode() == "DEV_0"
    assert second["question"].decode() == expected[1].question
    assert [a.decode() for a in second["answers"]] == list(expected[1].answers)
    assert second["answer_starts"].tolist() == list(expected[1].answer_starts)
    assert second["context"].decode() == expected[1].context
    with pytest.raises(MissingSplitError, match=r"'train' needs train\.json"):
        cmrc2018_tfds.prepare(str(data_dir), "train", cache)
    test = list(tfds.as_numpy(cmrc2018_tfds.load_split(str(data_dir), "test", cache)))
    assert [len(r["answers"]) for r in test] == [0, 0, 0]
    with pytest.raises(DataFormatError, match=r"trial\.json: malformed JSON"):
        cmrc2018_tfds.prepare(str(data_dir), "trial", cache)
