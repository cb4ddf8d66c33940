"""ChID: strict reading, the baseline's per-blank input, decoding, submissions, TFDS build."""

from __future__ import annotations

import doctest
import functools
import itertools
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

import cmrcx.data
from cmrcx.benchmarks.clue import chid, chid_decoding
from cmrcx.benchmarks.windows import SpecialIds
from cmrcx.common.errors import DataFormatError, MissingSplitError
from cmrcx.common.paths import package_path
from cmrcx.datasets import chid as chid_tfds
from cmrcx.vocab import layouts

SAMPLE = Path(cmrcx.data.__file__).parent / "clue_mrc_sample" / "chid_public"
IDS = SpecialIds(cls_id=1, sep_id=2, blank_id=4, other_blank_id=3)
FRAME = functools.partial(layouts.BERT.frame, IDS)  # the baseline's
CLS, SEP, M, MARK = 1, 2, 3, 4


class CharTokenizer:
    """A tiny WordPiece stand-in: one id per non-space character; records each call."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.calls: list[str] = []

    def __call__(self, text: str) -> list[int]:
        self.calls.append(text)
        return [self.ids.setdefault(ch, 100 + len(self.ids)) for ch in text if not ch.isspace()]

    def of(self, text: str) -> list[int]:
        return [self.ids[ch] for ch in text]


def _blank(passage: str, tag: str = "#idiom000001#", candidates=("甲乙丙丁",), label=0):
    return chid.ChidBlank(0, 1, 0, tag, passage, tuple(candidates), label)


def _sequence(tok: CharTokenizer, blank: chid.ChidBlank, max_seq_length: int) -> list[int]:
    """Candidate 0's unpadded sequence."""
    features = chid.blank_features(blank, tok, IDS, FRAME, max_seq_length, max_num_choices=2)
    return features["input_ids"][0, : features["input_mask"][0].sum()].tolist()


def _write(directory: Path, lines: list, answers: dict | None, name: str = "dev.json"):
    directory.mkdir(parents=True, exist_ok=True)
    text = "".join(
        (x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)) + "\n" for x in lines
    )
    (directory / name).write_text(text, encoding="utf-8")
    if answers is not None:
        (directory / name.replace(".json", "_answer.json")).write_text(json.dumps(answers))
    return directory / name


CANDIDATES = ["一心一意", "三心二意", "半途而废"]
GOOD_LINES = [
    {
        "content": ["他做事#idiom000001#。", "她#idiom000002#地听#idiom000003#。"],
        "candidates": CANDIDATES,
    },
    {"content": ["大家#idiom000004#。"], "candidates": CANDIDATES},
]
GOOD_ANSWERS = {"#idiom000001#": 0, "#idiom000002#": 2, "#idiom000003#": 1, "#idiom000004#": 1}


def test_doctests() -> None:
    assert doctest.testmod(chid).failed == 0


# --- Reading ------------------------------------------------------------------------------


def test_reader_keeps_blanks_in_file_order_with_their_line(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD_LINES, GOOD_ANSWERS)
    split = chid.read_examples(path, tmp_path / "dev_answer.json")
    assert [(b.tag, b.line_index, b.passage_index, b.label) for b in split.blanks] == [
        ("#idiom000001#", 0, 0, 0),
        ("#idiom000002#", 0, 1, 2),
        ("#idiom000003#", 0, 1, 1),
        ("#idiom000004#", 1, 0, 1),
    ]
    assert split.answers() == GOOD_ANSWERS and split.num_lines == 2
    assert split.blanks[2].passage == "她#idiom000002#地听#idiom000003#。"
    assert all(b.label is None for b in chid.read_examples(path).blanks)


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"content": ["a"], ', "line 2: malformed JSON"),
        ({"candidates": CANDIDATES}, "line 2: field 'content': missing"),
        ({"content": ["好#idiom12#"], "candidates": CANDIDATES}, "line 2: field 'content[0]'"),
        ({"content": ["好", 3], "candidates": CANDIDATES}, "line 2: field 'content[1]'"),
        (
            {"content": ["#idiom000001#"], "candidates": CANDIDATES},
            "line 2: field 'content[0]': #idiom000001# already at line 1",
        ),
        ({"content": ["#idiom000009#"], "candidates": {}}, "line 2: field 'candidates'"),
        ({"content": ["#idiom000009#"], "candidates": ["好", 3]}, "line 2: field 'candidates[1]'"),
        # More blanks than candidates: the decoding would leave one without a prediction
        # (the submission writer's "-1 is not a candidate index", after all the training).
        (
            {"content": ["#idiom000009#", "#idiom000010#"], "candidates": ["好"]},
            "line 2: field 'candidates': the line has 2 blanks but 1 candidates",
        ),
        ({"content": ["#idiom000009#"], "candidates": []}, "line 2: field 'candidates': the li"),
        (
            {"content": ["#idiom000009#"], "candidates": ["一二三四"] * 11},
            "line 2: field 'candidates': has 11 candidates; the baseline's input holds at most 10",
        ),
    ],
)
def test_reader_errors_name_file_line_and_field(tmp_path: Path, line, message) -> None:
    path = _write(tmp_path, [GOOD_LINES[0], line], None)
    with pytest.raises(DataFormatError, match=r"dev\.json: " + message.replace("[", r"\[")):
        chid.read_examples(path)


def test_what_the_baseline_reads_is_read(tmp_path: Path) -> None:
    """[PRE] reads a line without passages (no examples) and an empty candidate idiom (no
    pieces); so does the reader."""
    lines = [*GOOD_LINES, {"content": [], "candidates": CANDIDATES}]
    lines.append({"content": ["好#idiom000005#"], "candidates": ["", "一心一意"]})
    answers = {**GOOD_ANSWERS, "#idiom000005#": 0}
    split = chid.read_examples(_write(tmp_path, lines, answers), tmp_path / "dev_answer.json")
    assert split.num_lines == 4 and [b.line_index for b in split.blanks] == [0, 0, 0, 1, 3]
    assert split.blanks[-1].candidates == ("", "一心一意") and split.blanks[-1].label == 0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"#idiom000004#": None}, r"no answer for #idiom000004# \(.*dev\.json line 2\)"),
        ({"#idiom000004#": 3}, r"key '#idiom000004#': expected a candidate index in \[0, 3\)"),
        ({"#idiom000004#": True}, "key '#idiom000004#'"),
        ({"#idiom000099#": 0}, "key '#idiom000099#': no blank of"),
    ],
)
def test_answer_file_errors_name_the_file_and_key(tmp_path: Path, change, message) -> None:
    answers = {k: v for k, v in {**GOOD_ANSWERS, **change}.items() if v is not None}
    path = _write(tmp_path, GOOD_LINES, answers)
    with pytest.raises(DataFormatError, match=r"dev_answer\.json: " + message):
        chid.read_examples(path, tmp_path / "dev_answer.json")


def test_split_files_and_missing_split(tmp_path: Path) -> None:
    assert chid.split_files("train") == ("train.json", "train_answer.json")
    assert chid.split_files("test", "1.0") == ("test1.0.json",)
    assert chid_tfds.available_splits(str(SAMPLE), "1.1") == ["train", "validation", "test"]
    with pytest.raises(MissingSplitError, match="test1.1.json"):
        chid_tfds.require_split(str(tmp_path), "test")


# --- Input construction -------------------------------------------------------------------


def test_passage_tokens_follow_the_baseline_split() -> None:
    text = "他说：“好…”——然后NBA 2019年#idiom000001#abc，"
    assert chid.passage_tokens(text) == [
        "他",
        "说",
        "：",
        '"',
        "好",
        "...",
        '"',
        "-",
        "-",
        "然",
        "后",
        "NBA",
        "2019",
        "年",
        "#idiom000001#",
        "abc",
        "，",
    ]


def _character_loop(passage: str) -> list[str]:
    """The loop over characters `chid.passage_tokens` ran until its regular expression
    (2026-11-29), which the tests above and the real-data runs had checked."""
    text = chid.normalize_passage(passage)
    tokens: list[str] = []
    glued, i = False, 0
    while i < len(text):
        if text.startswith(chid.TAG_PREFIX, i):
            tokens.append(text[i : i + chid.TAG_LENGTH])
            i, glued = i + chid.TAG_LENGTH, False
            continue
        char = text[i]
        if char in chid._WHITESPACE:
            glued = False
        elif char in chid._PUNCTUATION or chid._CJK.match(char):
            tokens.append(char)
            glued = False
        elif glued:
            tokens[-1] += char
        else:
            tokens.append(char)
            glued = True
        i += 1
    return tokens


def test_passage_tokens_are_the_character_loops_on_random_texts() -> None:
    rng = random.Random(29)
    alphabet = [*"ab1 \t\n\r#idom0.~$'-", "#idiom", "#idiom000001#", "\u2581", "\u202f"]
    alphabet += [*"。，“”‘’—―…好𠀀ｶ－～「」（）", "——", "\U0002f800", "\uf900", "\u3400"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assert chid.passage_tokens(text) == _character_loop(text), repr(text)
    passage = "他说：“好…”——然后NBA 2019年#idiom000001#abc#idiom12，尾#idiom"
    assert chid.passage_tokens(passage) == _character_loop(passage)


def test_each_doc_token_is_tokenized_on_its_own() -> None:
    tok = CharTokenizer()
    chid.blank_features(_blank("在NBA 2019年#idiom000001#打球"), tok, IDS, FRAME, 64, 2)
    assert tok.calls == ["在", "NBA", "2019", "年", "打", "球", "甲乙丙丁"]


def test_blank_in_the_middle_gets_half_the_window_each_side() -> None:
    tok = CharTokenizer()
    passage = "一二三四五六七八" + "#idiom000001#" + "九十百千万亿兆京"
    blank = _blank(passage)
    sequence = _sequence(tok, blank, max_seq_length=16)  # window of 16 - 8 = 8 pieces
    assert sequence == [
        CLS,
        *tok.of("甲乙丙丁"),
        SEP,
        *tok.of("五六七八"),
        MARK,
        *tok.of("九十百千"),
        SEP,
    ]


def test_blank_at_passage_start_and_end() -> None:
    tok = CharTokenizer()
    start = _sequence(tok, _blank("#idiom000001#一二三四五六七八九十"), 16)
    assert start == [CLS, *tok.of("甲乙丙丁"), SEP, MARK, *tok.of("一二三四五六七八"), SEP]
    end = _sequence(tok, _blank("一二三四五六七八九十#idiom000001#"), 16)
    assert end == [CLS, *tok.of("甲乙丙丁"), SEP, *tok.of("三四五六七八九十"), MARK, SEP]


def test_other_blanks_become_four_masks_and_the_sides_keep_their_length() -> None:
    tok = CharTokenizer()
    passage = "一二三四五六#idiom000001#七八#idiom000002#九十"
    first = _sequence(tok, _blank(passage), 16)
    assert first == [
        CLS,
        *tok.of("甲乙丙丁"),
        SEP,
        *tok.of("三四五六"),
        MARK,
        *tok.of("七八"),
        M,
        M,
        SEP,
    ]
    second = _sequence(tok, _blank(passage, "#idiom000002#"), 16)
    assert second == [
        CLS,
        *tok.of("甲乙丙丁"),
        SEP,
        M,
        M,
        M,
        M,
        *tok.of("七八"),
        MARK,
        *tok.of("九十"),
        SEP,
    ]


def test_short_passage_keeps_the_baselines_negative_slice() -> None:
    # 8 pieces, blank at 6, window 8: [PRE] slices pieces[-1:6], which is empty.
    tok = CharTokenizer()
    sequence = _sequence(tok, _blank("一二三四五六#idiom000001#七"), 16)
    assert sequence == [CLS, *tok.of("甲乙丙丁"), SEP, MARK, *tok.of("七"), SEP]


def test_features_layout_padding_and_label() -> None:
    tok = CharTokenizer()
    blank = _blank("一二#idiom000001#三", candidates=CANDIDATES, label=2)
    features = chid.blank_features(blank, tok, IDS, FRAME)
    assert features["input_ids"].shape == (10, 64) and features["input_ids"].dtype == np.int32
    assert features["choice_mask"].tolist() == [1, 1, 1] + [0] * 7
    assert not features["input_ids"][3:].any() and not features["input_mask"][3:].any()
    assert not features["token_type_ids"].any() and int(features["label"]) == 2
    for c, idiom in enumerate(CANDIDATES):
        assert features["input_ids"][c, 1:5].tolist() == tok.of(idiom)
    unlabelled = chid.blank_features(_blank("好#idiom000001#", label=None), tok, IDS, FRAME)
    assert int(unlabelled["label"]) == -1


def test_too_many_or_too_long_candidates_are_errors() -> None:
    tok = CharTokenizer()
    with pytest.raises(ValueError, match="11 candidates > 10"):
        blank = _blank("好#idiom000001#", candidates=["一二三四"] * 11)
        chid.blank_features(blank, tok, IDS, FRAME)
    long_passage = "好" * 80 + "#idiom000001#" + "好" * 80
    with pytest.raises(ValueError, match="candidate 1 .* 65 tokens > max_seq_length 64"):
        blank = _blank(long_passage, candidates=["一二三四", "一二三四五"])
        chid.blank_features(blank, tok, IDS, FRAME)


def test_encode_blanks_stacks_and_carries_metadata() -> None:
    blanks = chid.read_split(SAMPLE, "validation").blanks
    batch, metadata = chid.encode_blanks(blanks, CharTokenizer(), IDS, FRAME)
    assert batch["input_ids"].shape == (len(blanks), 10, 64)
    assert batch["label"].tolist() == [b.label for b in blanks]
    assert metadata["tag"] == [b.tag for b in blanks]
    assert metadata["line_index"].tolist() == [b.line_index for b in blanks]


# --- Decoding -----------------------------------------------------------------------------


def _script_greedy(logits_matrix) -> list[int]:
    """[PRE] `logits_matrix_to_array` transcribed: rows are blanks; returns choice per blank."""
    logits_matrix = np.transpose(np.array(logits_matrix))
    tmp = [(i, j, col) for i, row in enumerate(logits_matrix) for j, col in enumerate(row)]
    choice, blanks = set(range(logits_matrix.shape[0])), set(range(logits_matrix.shape[1]))
    results = []
    for i, j, _ in sorted(tmp, key=lambda x: x[2], reverse=True):
        if j in blanks and i in choice:
            results.append((i, j))
            blanks.remove(j)
            choice.remove(i)
    return [i for i, _ in sorted(results, key=lambda x: x[1])]


def test_baseline_greedy_and_optimal_assignment_differ() -> None:
    logits = [[10.0, 9.0], [8.0, 0.0]]  # blank 0 takes choice 0 first, leaving blank 1 poor
    assert chid_decoding.decode_line("baseline", logits) == [0, 1]  # 10 + 0
    assert chid_decoding.decode_line("assignment", logits) == [1, 0]  # 9 + 8
    assert chid_decoding.decode_line("argmax", logits) == [0, 0]
    with pytest.raises(ValueError, match="unknown ChID decoding mode"):
        chid_decoding.decode_line("paper", logits)


def test_baseline_matches_the_script_including_ties() -> None:
    rng = random.Random(0)
    for _ in range(200):
        blanks, choices = rng.randint(1, 4), rng.randint(4, 6)
        logits = [[float(rng.randint(0, 3)) for _ in range(choices)] for _ in range(blanks)]
        assert chid_decoding.decode_baseline(logits) == _script_greedy(logits)


def test_assignment_is_one_to_one_and_optimal() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        logits = rng.normal(size=(3, 5))
        prediction = chid_decoding.decode_assignment(logits)
        assert len(set(prediction)) == 3
        best = max(
            sum(logits[b, c] for b, c in enumerate(p)) for p in itertools.permutations(range(5), 3)
        )
        assert np.isclose(sum(logits[b, c] for b, c in enumerate(prediction)), best)


def test_predictions_are_decoded_per_line() -> None:
    tags = ["#idiom000001#", "#idiom000002#", "#idiom000003#"]
    logits = np.array([[5.0, 4.0, 0.0], [6.0, 0.0, 0.0], [5.0, 4.0, -1e30]])
    mask = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 0]])
    # Line 0 holds two blanks that both want choice 0; line 1 is on its own.
    assert chid_decoding.decode_predictions("baseline", [0, 0, 1], tags, logits, mask) == {
        tags[0]: 1,
        tags[1]: 0,
        tags[2]: 0,
    }
    assert chid_decoding.decode_predictions("argmax", [0, 0, 1], tags, logits) == dict.fromkeys(
        tags, 0
    )


def test_accuracy_is_the_official_evaluate() -> None:
    answers = {"#idiom000001#": 0, "#idiom000002#": 3}
    assert chid_decoding.accuracy(answers, {**answers, "#idiom000009#": 1}) == {"accuracy": 100.0}
    assert chid_decoding.accuracy(answers, {"#idiom000001#": 0, "#idiom000002#": 1}) == {
        "accuracy": 50.0
    }
    with pytest.raises(ValueError, match="no prediction for 1 blanks"):
        chid_decoding.accuracy(answers, {"#idiom000001#": 0})


# --- Submissions --------------------------------------------------------------------------


def test_submission_round_trip(tmp_path: Path) -> None:
    split = chid.read_split(SAMPLE, "test", "1.1")
    predictions = {b.tag: np.int64(len(b.candidates) - 1) for b in split.blanks}
    path = chid_decoding.write_submission(tmp_path, predictions)
    assert path.name == "chid11_predict.json"
    assert (
        chid_decoding.write_submission(tmp_path, predictions, "1.0").name == "chid10_predict.json"
    )
    read = chid_decoding.read_submission(path, split)
    assert read == {tag: int(i) for tag, i in predictions.items()}
    assert json.loads(path.read_text()) == read


@pytest.mark.parametrize(
    "document, message",
    [
        ([1, 2], "expected one JSON object"),
        ({"idiom1": 0}, "key 'idiom1': not a #idiomNNNNNN# tag"),
        ({"#idiom000033#": 10}, r"key '#idiom000033#': expected a candidate index in \[0, 10\)"),
        ({"#idiom000033#": "1"}, "key '#idiom000033#'"),
        ({"#idiom000099#": 1}, "key '#idiom000099#': no blank of"),
        ({"#idiom000033#": 1}, r"no prediction for 3 blanks .* e\.g\. #idiom000034#"),
    ],
)
def test_submission_reader_errors(tmp_path: Path, document, message) -> None:
    path = tmp_path / "chid11_predict.json"
    path.write_text(json.dumps(document))
    with pytest.raises(DataFormatError, match=message):
        chid_decoding.read_submission(path, chid.read_split(SAMPLE, "test", "1.1"))
    with pytest.raises(ValueError, match="not a candidate index"):
        chid_decoding.write_submission(tmp_path, {"#idiom000001#": -1})


# --- TFDS ---------------------------------------------------------------------------------


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_tfds_records_are_the_readers_blanks_one_record_per_line(tmp_path: Path, split) -> None:
    records = list(
        chid_tfds.load_split(str(SAMPLE), split, cache_dir=str(tmp_path)).as_numpy_iterator()
    )
    read = chid.read_split(SAMPLE, split)
    assert [blank for r in records for blank in chid_tfds.blanks(r)] == list(read.blanks)
    assert [int(r["line_index"]) for r in records] == sorted({b.line_index for b in read.blanks})
    assert sum(len(r["tags"]) for r in records) == len(read.blanks) > len(records)


def test_tfds_records_of_a_line_with_passages_without_blanks(tmp_path: Path) -> None:
    lines = [
        {"content": ["无空。", "甲#idiom000002#乙", "也无。", "#idiom000001#丙"],
         "candidates": ["一二三四", "五六七八"]},
        {"content": ["没有空。"], "candidates": ["一二三四"]},
        {"content": ["丁#idiom000003#"], "candidates": ["五六七八", "一二三四"]},
    ]  # fmt: skip
    answers = {"#idiom000001#": 0, "#idiom000002#": 1, "#idiom000003#": 1}
    _write(tmp_path, lines, answers)
    records = list(
        chid_tfds.load_split(str(tmp_path), "validation", cache_dir=str(tmp_path / "c"))
        .as_numpy_iterator()
    )  # fmt: skip
    assert len(records) == 2  # the line without a blank has no record
    assert [p.decode() for p in records[0]["passages"]] == ["", lines[0]["content"][1], "",
                                                            lines[0]["content"][3]]  # fmt: skip
    blanks = [blank for r in records for blank in chid_tfds.blanks(r)]
    assert blanks == list(chid.read_split(tmp_path, "validation").blanks)
    assert [(b.tag, b.passage_index, b.label) for b in blanks] == [
        ("#idiom000002#", 1, 1), ("#idiom000001#", 3, 0), ("#idiom000003#", 0, 1)
    ]  # fmt: skip
    assert blanks[0].candidates is blanks[1].candidates  # one tuple per line


def test_the_current_zips_test_json_is_the_1_1_test_split(tmp_path):
    """CLUE's current chid_public.zip names its (1.1) test file test.json; the CLUE 1.1
    release's test1.1.json is read when that is what the folder has."""
    sample = Path(package_path("data/clue_mrc_sample/chid_public"))
    folder = tmp_path / "chid_public"
    shutil.copytree(sample, folder)
    (folder / "test1.1.json").rename(folder / "test.json")
    assert chid.split_files("test", "1.1", str(folder)) == ("test.json",)
    assert chid.split_files("test", "1.1", str(sample)) == ("test1.1.json",)
    from_zip = chid.read_split(folder, "test", "1.1")
    assert [b.tag for b in from_zip.blanks] == [
        b.tag for b in chid.read_split(sample, "test", "1.1").blanks
    ]
