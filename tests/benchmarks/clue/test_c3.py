"""C3: strict reading (d + m merged), the baseline's 4-choice input, submissions, TFDS build."""

from __future__ import annotations

import doctest
import functools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import cmrcx.data
from cmrcx.benchmarks.clue import c3
from cmrcx.benchmarks.windows import SpecialIds
from cmrcx.common.errors import DataFormatError, MissingSplitError
from cmrcx.common.paths import package_path
from cmrcx.datasets import c3 as c3_tfds
from cmrcx.vocab import layouts

SAMPLE = Path(cmrcx.data.__file__).parent / "clue_mrc_sample" / "c3_public"
FRAME = functools.partial(layouts.BERT.frame, SpecialIds(cls_id=1, sep_id=2))  # the baseline's
CLS, SEP = 1, 2


class CharTokenizer:
    """A tiny WordPiece stand-in: one id per non-space character."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, text: str) -> list[int]:
        return [self.ids.setdefault(ch, 100 + len(self.ids)) for ch in text if not ch.isspace()]

    def of(self, text: str) -> list[int]:
        return [self.ids[ch] for ch in text]


def _question(
    context=("男：你好。", "女：再见。"), question="谁说再见？", choices=("男", "女"), label=1
) -> c3.C3Question:
    return c3.C3Question(
        0, "d-dev.json", 0, 0, "1-1", tuple(context), question, tuple(choices), None, label
    )


def _write(path: Path, documents) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(documents, ensure_ascii=False), encoding="utf-8")
    return path


DOCUMENT = [
    ["男：几点了？", "女：八点。"],
    [{"question": "现在几点？", "choice": ["七点", "八点"], "answer": "八点"}],
    "7-1",
]


def test_doctests() -> None:
    assert doctest.testmod(c3).failed == 0


# --- Reading ------------------------------------------------------------------------------


def test_split_reads_d_then_m_in_file_order() -> None:
    questions = c3.read_split(SAMPLE, "validation")
    sources = [q.source for q in questions]
    assert sources == ["d-dev.json"] * 4 + ["m-dev.json"] * 5
    assert [q.id for q in questions] == list(range(9))  # no ids in dev files: split index
    second_doc = [q for q in questions if q.source == "m-dev.json" and q.record == 1]
    assert [q.question_index for q in second_doc] == [0, 1]
    assert second_doc[0].document_id == "m-v2" and second_doc[0].label == 0
    test = c3.read_split(SAMPLE, "test", "1.1")
    assert [q.id for q in test] == [0, 1, 2, 3] and {q.label for q in test} == {None}
    assert [q.source for q in c3.read_split(SAMPLE, "test", "1.0")] == ["test1.0.json"] * 3


def test_label_is_the_last_match_of_the_lowercased_answer(tmp_path: Path) -> None:
    document = [["甲"], [{"question": "?", "choice": ["A", "b", "a"], "answer": "a"}], "x"]
    path = _write(tmp_path / "d-dev.json", [document])
    assert c3.read_examples([path], labelled=True)[0].label == 2
    assert c3.answer_label(["好", "坏"], "无效答案") == 3  # the filler pads to 4


def test_what_the_baseline_reads_is_read(tmp_path: Path) -> None:
    """run_c3.py reads a document without sentences as the context "" and one without
    questions as no examples, and an empty question as such; so does the reader."""
    empty = [[], [{"question": "", "choice": ["a", "b"], "answer": "b"}], "x-1"]
    path = _write(tmp_path / "d-dev.json", [empty, [["甲"], [], "x-2"], DOCUMENT])
    first, *rest = c3.read_examples([path], labelled=True)
    assert (first.context, first.question, first.label) == ((), "", 1)
    assert [q.record for q in rest] == [2] * len(DOCUMENT[1])
    features = c3.question_features(first, lambda text: [7] * len(text), FRAME)
    assert features["input_ids"][0, :4].tolist() == [1, 2, 2, 7]  # [CLS] [SEP] [SEP] a


DOC = r"record 1 \(id '7-1'\): "


@pytest.mark.parametrize(
    "document, message",
    [
        ({"a": 1}, "record 1: expected"),
        ([["甲"]], "record 1: expected"),
        ([{}, DOCUMENT[1], "7-1"], DOC + r"field '\[0\]': expected an array"),
        ([DOCUMENT[0], {}, "7-1"], DOC + r"field '\[1\]'"),
        ([DOCUMENT[0], DOCUMENT[1], 7], r"record 1: field '\[2\]'"),
        (
            [DOCUMENT[0], [{"question": "?", "choice": list("abcde"), "answer": "a"}], "7-1"],
            DOC + r"field '\[1\]\[0\]\.choice': has 5 entries",
        ),
        (
            [DOCUMENT[0], [{"question": "?", "choice": ["a", 2], "answer": "a"}], "7-1"],
            DOC + r"field '\[1\]\[0\]\.choice\[1\]'",
        ),
        (
            [DOCUMENT[0], DOCUMENT[1] + [{"question": "?", "choice": ["a", "b"]}], "7-1"],
            DOC + r"field '\[1\]\[1\]\.answer': missing",
        ),
        (
            [DOCUMENT[0], [{"question": "?", "choice": ["a", "b"], "answer": "c"}], "7-1"],
            DOC + r"field '\[1\]\[0\]\.answer': 'c' is not one of the choices",
        ),
        (
            [DOCUMENT[0], [{"question": 1, "choice": ["a"], "answer": "a"}], "7-1"],
            DOC + r"field '\[1\]\[0\]\.question'",
        ),
    ],
)
def test_reader_errors_name_file_record_and_field(tmp_path: Path, document, message) -> None:
    path = _write(tmp_path / "m-dev.json", [DOCUMENT, document])
    with pytest.raises(DataFormatError, match=r"m-dev\.json: " + message):
        c3.read_examples([path], labelled=True)


def test_unlabelled_files_need_no_answer_and_top_level_is_checked(tmp_path: Path) -> None:
    document = [["甲"], [{"question": "?", "choice": ["a", "b"], "id": 17}], "x"]
    path = _write(tmp_path / "test1.1.json", [document])
    (question,) = c3.read_examples([path], labelled=False)
    assert question.id == 17 and question.label is None and question.answer is None
    bad = _write(tmp_path / "bad.json", {"data": []})
    with pytest.raises(DataFormatError, match="bad.json: expected a JSON array of documents"):
        c3.read_examples([bad], labelled=False)


def test_split_files_and_missing_split(tmp_path: Path) -> None:
    assert c3.split_files("train") == ("d-train.json", "m-train.json")
    assert c3.split_files("test", "1.0") == ("test1.0.json",)
    assert c3_tfds.available_splits(str(SAMPLE), "1.0") == ["train", "validation", "test"]
    (tmp_path / "d-dev.json").write_text("[]")
    with pytest.raises(MissingSplitError, match="m-dev.json"):
        c3_tfds.require_split(str(tmp_path), "validation")


# --- Input construction -------------------------------------------------------------------


def test_input_is_context_question_choice_with_filler_padding() -> None:
    tok = CharTokenizer()
    question = _question(context=("男：Hi。", "女：再见。"))
    features = c3.question_features(question, tok, FRAME, max_seq_length=32)
    context = tok.of("男：hi。女：再见。")  # lower-cased, sentences joined by "\n"
    first = [CLS, *context, SEP]
    for k, choice in enumerate(["男", "女", "无效答案", "无效答案"]):
        sequence = [*first, *tok.of("谁说再见？"), SEP, *tok.of(choice), SEP]
        n = len(sequence)
        assert features["input_ids"][k, :n].tolist() == sequence
        assert not features["input_ids"][k, n:].any()
        assert features["token_type_ids"][k].tolist() == [0] * len(first) + [1] * (
            n - len(first)
        ) + [0] * (32 - n)
        assert features["input_mask"][k].tolist() == [1] * n + [0] * (32 - n)
    assert features["choice_mask"].tolist() == [1, 1, 0, 0]
    assert int(features["label"]) == 1 and features["input_ids"].dtype == np.int32
    assert int(c3.question_features(_question(label=None), tok, FRAME, 32)["label"]) == -1


def test_truncation_is_longest_first_to_max_length() -> None:
    tok = CharTokenizer()
    question = _question(
        context=("一二三四五六七八九十甲乙丙丁",), question="问什么", choices=("答",)
    )
    features = c3.question_features(question, tok, FRAME, max_seq_length=12)  # 8 tokens left
    # context 14, question 3, choice 1 -> the context loses its tail down to 4.
    assert features["input_ids"][0].tolist() == [
        CLS,
        *tok.of("一二三四"),
        SEP,
        *tok.of("问什么"),
        SEP,
        *tok.of("答"),
        SEP,
    ]
    # With the 4-token filler the longest list is cut in turn: context to 4, then the tie
    # goes to the context (3), then the filler (3), then the context again (2).
    assert features["input_ids"][1].tolist() == [
        CLS,
        *tok.of("一二"),
        SEP,
        *tok.of("问什么"),
        SEP,
        *tok.of("无效答"),
        SEP,
    ]


def test_truncate_seq_tuple_ties_go_to_a_then_b() -> None:
    a, b, c = list("一二"), list("甲乙"), list("子丑")
    c3.truncate_seq_tuple(a, b, c, 5)
    assert (a, b, c) == (["一"], ["甲", "乙"], ["子", "丑"])
    c3.truncate_seq_tuple(a, b, c, 4)
    assert (a, b, c) == (["一"], ["甲"], ["子", "丑"])
    c3.truncate_seq_tuple(a, b, c, 3)
    assert (a, b, c) == (["一"], ["甲"], ["子"])


# --- Submissions and scoring --------------------------------------------------------------


def test_submission_round_trip_and_names(tmp_path: Path) -> None:
    questions = c3.read_split(SAMPLE, "test", "1.1")
    ids = [q.id for q in questions]
    path = c3.write_submission(tmp_path, ids, np.array([2, 0, 1, 3]))
    assert path.name == "c311_predict.json"
    assert c3.write_submission(tmp_path, ids, [0] * 4, "1.0").name == "c310_predict.json"
    assert path.read_text().splitlines()[0] == '{"id": 0, "label": 2}'
    lines = c3.read_submission(path, questions)
    assert [(p.id, p.label) for p in lines] == [(0, 2), (1, 0), (2, 1), (3, 3)]
    with pytest.raises(ValueError, match="prediction 1: 4 is not a choice"):
        c3.write_submission(tmp_path, ids[:2], [0, 4])


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"id": 0}'], "line 1: field 'label': missing"),
        (['{"id": 0, "label": 4}'], "line 1: field 'label': 4 is not a choice"),
        (['{"id": [0], "label": 1}'], "line 1: field 'id'"),
        (['{"id": 0, "label": "2"}'], "1 lines for 4 questions"),
        (
            [
                '{"id": 0, "label": "2"}',
                '{"id": 2, "label": 1}',
                '{"id": 1, "label": 1}',
                '{"id": 3, "label": 0}',
            ],
            "line 2: field 'id': 2, but the question",
        ),
    ],
)
def test_submission_reader_errors(tmp_path: Path, lines, message) -> None:
    path = tmp_path / "c311_predict.json"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match=message):
        c3.read_submission(path, c3.read_split(SAMPLE, "test", "1.1"))


def test_score_submission_on_dev(tmp_path: Path) -> None:
    questions = c3.read_split(SAMPLE, "validation")
    labels = [q.label for q in questions]
    labels[0] = (labels[0] + 1) % 4
    path = c3.write_submission(tmp_path, [q.id for q in questions], labels)
    scores = c3.score_submission(SAMPLE, "validation", path)
    assert scores == {"accuracy": pytest.approx(800 / 9), "correct": 8, "total": 9}


# --- TFDS ---------------------------------------------------------------------------------


def test_tfds_builds_the_bundled_train_split(tmp_path: Path) -> None:
    records = list(
        c3_tfds.load_split(str(SAMPLE), "train", cache_dir=str(tmp_path)).as_numpy_iterator()
    )
    questions = c3.read_split(SAMPLE, "train")
    assert [c3_tfds.record_id(r["id"]) for r in records] == [q.id for q in questions]
    assert [r["source"].decode() for r in records] == [q.source for q in questions]
    assert [int(r["label"]) for r in records] == [q.label for q in questions]
    first = records[0]
    assert [s.decode() for s in first["context"]] == list(questions[0].context)
    assert [c.decode() for c in first["choices"]] == list(questions[0].choices)
    assert first["answer"].decode() == questions[0].answer


def test_the_current_zips_test_json_is_the_1_1_test_split(tmp_path):
    """CLUE's current c3_public.zip names its (1.1) test file test.json."""
    sample = Path(package_path("data/clue_mrc_sample/c3_public"))
    folder = tmp_path / "c3_public"
    shutil.copytree(sample, folder)
    (folder / "test1.1.json").rename(folder / "test.json")
    assert c3.split_files("test", "1.1", str(folder)) == ("test.json",)
    assert [q.id for q in c3.read_split(folder, "test", "1.1")] == [
        q.id for q in c3.read_split(sample, "test", "1.1")
    ]
