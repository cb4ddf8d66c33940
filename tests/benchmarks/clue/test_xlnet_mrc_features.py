"""CLUE's reading-comprehension inputs in XLNet's layout (`a <sep> b <sep> <cls>`, left
padding, token types 0/1/2 and 3 for padding), checked against hand-built sequences from
the bundled tiny spiece.model, and CMRC 2018 answers mapped to pieces and back."""

import functools

import numpy as np
import pytest

from cmrcx.benchmarks.clue import c3, chid, cmrc2018_xlnet
from cmrcx.benchmarks.clue import cmrc2018_windows as spans
from cmrcx.benchmarks.clue.cmrc2018_format import Cmrc2018Question
from cmrcx.benchmarks.windows import SpecialIds
from cmrcx.common.paths import package_path
from cmrcx.vocab import layouts
from cmrcx.vocab.xlnet import XLNetVocabulary

CLS, SEP, PAD, MASK, UNK = 3, 4, 5, 6, 0  # XLNet's ids, those of the tiny model too


@pytest.fixture(scope="module")
def vocab():
    return XLNetVocabulary(package_path("data/xlnet_tiny/spiece.model"))


def _ids(vocab, text):
    return list(vocab.encode(text))


def test_c3_choice_is_context_sep_question_sep_choice_sep_cls_left_padded(vocab):
    question = c3.C3Question(
        id=0, source="d-dev.json", record=0, question_index=0, document_id=None,
        context=("他在北京。", "天安门"), question="他在哪里？", choices=("北京", "上海"),
        answer="北京", label=0,
    )  # fmt: skip
    ids = layouts.XLNET.special_ids(vocab)
    assert (ids.cls_id, ids.sep_id, ids.pad_id) == (CLS, SEP, PAD)
    features = layouts.XLNET.choices(question, lambda t: _ids(vocab, t), vocab, 40)
    context, query = _ids(vocab, "他在北京。\n天安门"), _ids(vocab, "他在哪里？")
    for k, choice in enumerate(("北京", "上海", "无效答案", "无效答案")):
        sequence = [*context, SEP, *query, SEP, *_ids(vocab, choice), SEP, CLS]
        pad = 40 - len(sequence)
        types = [0] * (len(context) + 1) + [1] * (len(sequence) - len(context) - 2) + [2]
        assert features["input_ids"][k].tolist() == [PAD] * pad + sequence
        assert features["token_type_ids"][k].tolist() == [3] * pad + types
        assert features["input_mask"][k].tolist() == [0] * pad + [1] * len(sequence)
    assert features["choice_mask"].tolist() == [1, 1, 0, 0] and features["label"] == 0


def test_c3_xlnet_cut_keeps_the_bert_rule(vocab):
    context = ("一二三四五六七八九十" * 3,)
    question = c3.C3Question(0, "d", 0, 0, None, context, "问", ("答",), "答", 0)
    ids = SpecialIds(CLS, SEP, PAD)
    tokenize = lambda t: _ids(vocab, t)  # noqa: E731
    xlnet_frame = functools.partial(layouts.XLNET.frame, ids)
    xlnet = c3.question_features(question, tokenize, xlnet_frame, 12)
    bert = c3.question_features(question, tokenize, functools.partial(layouts.BERT.frame, ids), 12)
    # Same kept tokens (12 - 4 of them), framed differently; every row full.
    assert xlnet["input_mask"].sum(axis=1).tolist() == bert["input_mask"].sum(axis=1).tolist()
    assert xlnet["input_mask"].min() == 1 and xlnet["input_ids"][0, -1] == CLS


def test_chid_candidate_is_idiom_sep_window_sep_cls(vocab):
    blank = chid.ChidBlank(
        line_index=0, line_number=1, passage_index=0, tag="#idiom000001#",
        passage="他说#idiom000001#，我们#idiom000002#。", candidates=("一心一意", "三心二意"),
        label=1,
    )  # fmt: skip
    ids = layouts.XLNET.special_ids(vocab)
    assert (ids.blank_id, ids.other_blank_id) == (MASK, UNK)
    tokenize = lambda t: _ids(vocab, t)  # noqa: E731
    features = layouts.XLNET.cloze(blank, tokenize, vocab, max_length=32)
    # Doc tokens one by one (as the BERT path), the blank <mask>, another blank 4 <unk>,
    # and the right side cut back to its piece count before that (9), as the BERT path.
    right = [*_ids(vocab, "，"), *_ids(vocab, "我"), *_ids(vocab, "们"), UNK, UNK, UNK, UNK]
    right += _ids(vocab, "。")
    window = [*_ids(vocab, "他"), *_ids(vocab, "说"), MASK, *right[: len(right) - 3]]
    for c, idiom in enumerate(blank.candidates):
        first = _ids(vocab, idiom)
        sequence = [*first, SEP, *window, SEP, CLS]
        pad = 32 - len(sequence)
        types = [3] * pad + [0] * (len(first) + 1) + [1] * (len(window) + 1) + [2]
        assert features["input_ids"][c].tolist() == [PAD] * pad + sequence
        assert features["token_type_ids"][c].tolist() == types
        assert features["input_mask"][c].tolist() == [0] * pad + [1] * len(sequence)
    assert (features["input_ids"][2:] == PAD).all() and (features["input_mask"][2:] == 0).all()
    assert (features["token_type_ids"][2:] == 3).all()
    assert features["choice_mask"].tolist() == [1, 1] + [0] * 8 and features["label"] == 1


def test_pieces_with_offsets_are_encodes_ids_and_cover_the_original_characters(vocab):
    for text in ("他在北京。 天安门", "  Café  ``ok''  ，2019,年", "ｆｕｌｌ… 9,1", ""):
        pieces = vocab.pieces_with_offsets(text)
        assert [piece for piece, _, _ in pieces] == list(vocab.encode(text))
        assert all(0 <= s <= e <= len(text) for _, s, e in pieces)
    pieces = vocab.pieces_with_offsets("  Café  ``ok''")
    covered = ["  Café  ``ok''"[s:e] for _, s, e in pieces]
    assert "".join(covered) == "Café  ``ok''"  # the leading spaces are stripped away


def _question(context, answer, start, qid="Q0"):
    return Cmrc2018Question(qid, "C0", context, "北京在哪", (answer,), (start,))


def test_cmrc2018_window_is_passage_sep_question_sep_cls_left_padded(vocab):
    context = "他在北京。 天安门广场在北京。"
    question = _question(context, "天安门广场", 6)
    windows = layouts.XLNET.windows([question], vocab, training=True, max_length=48)
    passage, query = _ids(vocab, context), _ids(vocab, "北京在哪")
    sequence = [*passage, SEP, *query, SEP, CLS]
    pad = 48 - len(sequence)
    assert windows["input_ids"].tolist() == [[PAD] * pad + sequence]
    types = [3] * pad + [0] * (len(passage) + 1) + [1] * (len(query) + 1) + [2]
    assert windows["token_type_ids"].tolist() == [types]
    assert windows["input_mask"].tolist() == [[0] * pad + [1] * len(sequence)]
    # The label's pieces are those of "天安门广场", and they cover exactly its characters.
    start, end = int(windows["start_position"][0]), int(windows["end_position"][0])
    covered = [vocab.tokens[i] for i in windows["input_ids"][0, start : end + 1]]
    assert "".join(covered).replace("<unk>", "?") in ("天安门?场", "天安门广场")
    chars = windows["token_char_start"][0, start], windows["token_char_end"][0, end]
    assert context[chars[0] : chars[1]] == "天安门广场"
    # Only passage slots carry characters, all scored (one window).
    in_passage = windows["token_char_start"][0] >= 0
    assert in_passage.sum() == len(passage) and in_passage[pad : pad + len(passage)].all()
    assert (windows["token_is_max_context"][0] == in_passage).all()


def test_cmrc2018_answer_round_trip_over_windows_and_max_context(vocab):
    context = "他在北京。" * 6 + "天安门广场在北京。" + "我们去上海。" * 6
    answer_start = context.index("天安门")
    question = _question(context, "天安门广场", answer_start)
    windows = layouts.XLNET.windows([question], vocab, training=True, max_length=32, doc_stride=8)
    assert len(windows["input_ids"]) > 3
    holding = np.flatnonzero(windows["start_position"] != 31)
    assert len(holding) >= 1  # the others point at <cls>, the last slot
    # Each passage piece is scored in exactly one window (the max-context rule).
    assert windows["token_is_max_context"].sum() == len(vocab.pieces_with_offsets(context))
    assert (windows["end_position"][windows["start_position"] == 31] == 31).all()
    # Decoding: logits peaked on the label in one window give back the exact characters.
    best = int(holding[len(holding) // 2])
    start_logits = np.zeros(windows["input_ids"].shape, np.float32)
    end_logits = np.zeros_like(start_logits)
    start_logits[best, windows["start_position"][best]] = 10
    end_logits[best, windows["end_position"][best]] = 10
    windows["token_is_max_context"][best] = windows["token_char_start"][best] >= 0
    predictions = spans.predict_answers(
        [question], windows, start_logits, end_logits, vocab.tokens, covered_text=True
    )
    assert predictions == {"Q0": "天安门广场"}


def test_cmrc2018_decoded_text_is_the_passages_characters_stripped(vocab):
    context = "Harry Potter 在 北京"
    question = _question(context, "Harry Potter", 0)
    windows = layouts.XLNET.windows([question], vocab, training=True, max_length=40)
    start, end = int(windows["start_position"][0]), int(windows["end_position"][0])
    first, last = windows["token_char_start"][0, start], windows["token_char_end"][0, end]
    assert context[first:last].strip() == "Harry Potter"  # the space kept, not "HarryPotter"


def test_cmrc2018_reversed_answer_points_every_window_at_cls(vocab):
    # answer_start -1: `baseline_answer_chars` gives characters (4, 2), reversed; the
    # XLNet windows train such a question as "not in this window" (<cls>).
    context = "在北京的天安门。"
    question = _question(context, "在北京的天安门", -1)
    passage = cmrc2018_xlnet.tokenize_passage(context, vocab.pieces_with_offsets)
    assert passage.answer_pieces("在北京的天安门", -1) is None
    windows = layouts.XLNET.windows([question], vocab, training=True, max_length=32)
    assert windows["start_position"].tolist() == windows["end_position"].tolist() == [31]
