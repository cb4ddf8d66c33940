"""CLUE's CMRC 2018 baseline features and decoding (cmrcx.benchmarks.clue.cmrc2018_windows),
the windows in BERT's frame."""

from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from cmrcx.benchmarks.clue import cmrc2018_windows as spans
from cmrcx.benchmarks.clue.cmrc2018_format import Cmrc2018Question
from cmrcx.benchmarks.windows import SpecialIds, doc_spans, max_context_span
from cmrcx.vocab import layouts

# A long passage: an English name at the very start, ~300 CJK characters, a mixed-case
# word split into two pieces near the very end.
FILLER = "天地玄黄宇宙洪荒日月盈昃辰宿列张寒来暑往秋收冬藏闰余成岁律吕调阳云腾致雨露结为霜" * 8
CONTEXT = f"Harry Potter是一部小说。{FILLER}最后是iPhone手机，还有abab。"
CJK = sorted({c for c in CONTEXT + "谁写的什么小说哪里问题" if spans.is_cjk(c) or not c.isascii()})
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "harry", "potter", "ip", "##hone", "ab", "##ab"]
VOCAB += CJK + [".", ","]
IDS = {token: i for i, token in enumerate(VOCAB)}
SPECIAL = SpecialIds(cls_id=IDS["[CLS]"], sep_id=IDS["[SEP]"], pad_id=IDS["[PAD]"])
SMALL = dict(max_length=48, max_query_tokens=8, doc_stride=16)


def _wordpiece(word: str) -> list[int]:
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in IDS:
                pieces.append(IDS[piece])
                start = end
                break
        else:
            return [IDS["[UNK]"]]
    return pieces


def tiny_tokenize(words):
    """A small stand-in for BertTokenizer.tokenize, one word at a time."""
    out = []
    for word in words:
        word = unicodedata.normalize("NFD", word.lower())
        word = "".join(c for c in word if unicodedata.category(c) != "Mn")
        parts = re.findall(r"[\u4e00-\u9fff]|[^\W\u4e00-\u9fff]+|[^\w\s]", word)
        out.append([i for part in parts for i in _wordpiece(part)])
    return out


WORDS = spans.word_tokenizer(tiny_tokenize)  # the baseline's doc tokens, then the pieces
FRAME = functools.partial(layouts.BERT.window_frame, SPECIAL)


def _question(qid, question, answer, start=None, context=CONTEXT):
    start = context.find(answer) if start is None else start
    return Cmrc2018Question(qid, "C", context, question, (answer,), (start,))


def _tokens(row: np.ndarray) -> list[str]:
    return [VOCAB[i] for i in row]


def test_doc_tokens_split_cjk_and_listed_punctuation_and_keep_other_runs() -> None:
    context = "AB 中x，y\t z“引”"
    doc = spans.split_doc_tokens(context)
    words = [context[s:e] for s, e in zip(doc.starts, doc.ends, strict=True)]
    assert words == ["AB", "中", "x", "，", "y", "z", "“", "引", "”"]
    # char_to_word_offset: whitespace belongs to the token before it.
    assert doc.char_to_doc.tolist() == [0, 0, 0, 1, 2, 3, 4, 4, 4, 5, 6, 7, 8]
    assert spans.split_doc_tokens("").starts.shape == (0,)


def test_passage_pieces_map_back_to_doc_tokens() -> None:
    passage = spans.tokenize_passage("iPhone手机", tiny_tokenize)
    assert _tokens(passage.piece_ids) == ["ip", "##hone", "手", "机"]
    assert passage.piece_doc.tolist() == [0, 0, 1, 2]
    assert passage.doc_first_piece.tolist() == [0, 2, 3]


def test_window_layout_and_question_cut() -> None:
    passage = spans.tokenize_passage(CONTEXT, tiny_tokenize)
    question = tiny_tokenize(["谁写的什么小说哪里问题谁写的"])[0]  # 14 pieces, cut to 8
    windows = spans.question_windows(question, passage, FRAME, **SMALL)
    row = windows["input_ids"][0]
    assert _tokens(row[:10]) == ["[CLS]", *"谁写的什么小说哪", "[SEP]"]
    length = int(windows["input_mask"][0].sum())
    assert length == 48 and _tokens(row[length - 1 : length]) == ["[SEP]"]
    assert windows["token_type_ids"][0].tolist() == [0] * 10 + [1] * 38
    last = windows["input_ids"][-1]
    real = int(windows["input_mask"][-1].sum())
    assert (last[real:] == SPECIAL.pad_id).all() and (
        windows["token_type_ids"][-1][real:] == 0
    ).all()
    assert windows["window_index"].tolist() == list(range(len(windows["input_ids"])))
    assert (windows["start_position"] == 0).all()  # no answer given: all [CLS]


def test_every_piece_is_scored_in_exactly_its_max_context_window() -> None:
    passage = spans.tokenize_passage(CONTEXT, tiny_tokenize)
    windows = spans.question_windows([IDS["谁"]], passage, FRAME, **SMALL)
    num_pieces = len(passage.piece_ids)
    doc_windows = doc_spans(num_pieces, SMALL["max_length"] - 1 - 3, SMALL["doc_stride"])
    assert len(doc_windows) == len(windows["input_ids"]) > 10
    scored = np.zeros(num_pieces, int)
    for w, window in enumerate(doc_windows):
        flags = windows["token_is_max_context"][w][3 : 3 + window.length]
        for offset in np.flatnonzero(flags):
            piece = window.start + offset
            assert max_context_span(doc_windows, piece) == w
            scored[piece] += 1
    assert (scored == 1).all()
    np.testing.assert_array_equal(
        spans.max_context_windows(doc_windows, num_pieces),
        [max_context_span(doc_windows, p) for p in range(num_pieces)],
    )


def test_answers_at_both_ends_are_labelled_in_every_window_holding_them() -> None:
    questions = [_question("first", "谁", "Harry Potter"), _question("last", "什么", "iPhone手机")]
    windows = spans.split_windows(questions, WORDS, FRAME, training=True, **SMALL)
    for index, answer in enumerate([["harry", "potter"], ["ip", "##hone", "手", "机"]]):
        rows = np.flatnonzero(windows["example_index"] == index)
        labelled = [r for r in rows if windows["start_position"][r] > 0]
        assert labelled, "the answer was lost to windowing"
        for r in rows:
            start, end = windows["start_position"][r], windows["end_position"][r]
            if r not in labelled:
                assert start == end == 0
                continue
            assert _tokens(windows["input_ids"][r][start : end + 1]) == answer
    first_rows = np.flatnonzero(windows["example_index"] == 0)
    assert windows["start_position"][first_rows[0]] == 3  # [CLS] 谁 [SEP] harry
    assert windows["start_position"][first_rows[-1]] == 0


def test_training_answer_search_and_punctuation_start() -> None:
    passage = spans.tokenize_passage("甲，乙丙丁", tiny_tokenize)
    assert passage.answer_pieces("乙丙", 2) == (2, 3)
    assert passage.answer_pieces("乙丙", 4) == (2, 3)  # found 2 characters left
    assert passage.answer_pieces("，乙", 1) == (2, 2)  # a start on "，" moves right
    # Not found within 3 characters: trained on the span 3 characters left anyway.
    passage = spans.tokenize_passage("甲乙丙丁戊", tiny_tokenize)
    assert passage.answer_pieces("己庚", 4) == (1, 2)
    bad = [_question("q9", "谁", "乙丙", start=40, context="甲，乙丙丁")]
    with pytest.raises(ValueError, match="question 'q9': answer '乙丙' with answer_start 40"):
        spans.split_windows(bad, WORDS, FRAME, training=True, **SMALL)


def test_official_shapes_train_and_decode_as_the_baseline() -> None:
    """An empty question is ``[CLS] [SEP] passage [SEP]``; a first answer with answer_start
    -1 is placed from the passage's end, as json2features's negative indexes place it; an
    empty passage gives the baseline's "empty" answer and cannot be trained on."""
    context = "天地玄黄宇宙"
    questions = [
        _question("empty", "", "地玄", context=context),
        _question("minus", "谁", "地玄", start=-1, context=context),
    ]
    windows = spans.split_windows(questions, WORDS, FRAME, training=True, **SMALL)
    assert _tokens(windows["input_ids"][0][:9]) == ["[CLS]", "[SEP]", *context, "[SEP]"]
    assert windows["token_type_ids"][0][:9].tolist() == [0, 0] + [1] * 7
    assert (windows["start_position"][0], windows["end_position"][0]) == (3, 4)  # 地玄
    # -1 -> characters -4 and -3 after the 3 steps left: 玄黄, the question's window.
    assert (windows["start_position"][1], windows["end_position"][1]) == (5, 6)
    # A long answer's end stays near the passage's start: the label comes out reversed.
    passage = spans.tokenize_passage(context, tiny_tokenize)
    assert passage.answer_pieces("天地玄黄宇", -1) == (2, 0)
    empty = [_question("blank", "谁", "天", start=0, context="")]
    windows = spans.split_windows(empty, WORDS, FRAME, training=False, **SMALL)
    start = np.zeros(windows["input_ids"].shape, np.float32)
    assert spans.predict_answers(empty, windows, start, start, VOCAB) == {"blank": "empty"}
    with pytest.raises(ValueError, match="question 'blank': answer '天'"):
        spans.split_windows(empty, WORDS, FRAME, training=True, **SMALL)


def _logits(windows, starts: dict[tuple[int, int], float], ends: dict[tuple[int, int], float]):
    """Start and end logits: -10 everywhere except the given (window, position) entries."""
    start = np.full(windows["input_ids"].shape, -10.0, np.float32)
    end = start.copy()
    for array, marks in ((start, starts), (end, ends)):
        for (w, position), value in marks.items():
            array[w, position] = value
    return start, end


def _position(windows, w: int, token: str) -> int:
    """Row position of ``token`` in window ``w`` where that window scores it."""
    for position in np.flatnonzero(windows["input_ids"][w] == IDS[token]):
        if windows["token_is_max_context"][w][position]:
            return int(position)
    raise AssertionError(f"{token} not scored in window {w}")


def test_decoded_text_is_original_characters_not_wordpieces() -> None:
    passage = spans.tokenize_passage(CONTEXT, tiny_tokenize)
    windows = spans.question_windows([IDS["谁"]], passage, FRAME, **SMALL)
    harry, potter = _position(windows, 0, "harry"), _position(windows, 0, "potter")
    start, end = _logits(windows, {(0, harry): 5.0}, {(0, potter): 5.0})
    best = spans.nbest_answers(CONTEXT, windows, start, end, VOCAB)[0]
    # The baseline joins doc tokens without the whitespace between them; casing is kept.
    assert best == ("HarryPotter", 0, 12, 5.0, 5.0)
    kept = spans.nbest_answers(CONTEXT, windows, start, end, VOCAB, keep_whitespace=True)
    assert kept[0].text == "Harry Potter"
    w = len(windows["input_ids"]) - 1
    hone, ji = _position(windows, w, "##hone"), _position(windows, w, "机")
    start, end = _logits(windows, {(w, hone): 5.0}, {(w, ji): 5.0})
    best = spans.nbest_answers(CONTEXT, windows, start, end, VOCAB)[0]
    assert best.text == "hone手机"  # from a piece inside "iPhone"; no spaces between CJK
    assert CONTEXT[best.start_char : best.end_char] == "hone手机"
    # get_final_text finds the piece text's first occurrence in its doc tokens: the second
    # piece of "abab" maps back to the first "ab".
    second_ab = _position(windows, w, "##ab")
    start, end = _logits(windows, {(w, second_ab): 5.0}, {(w, second_ab): 5.0})
    best = spans.nbest_answers(CONTEXT, windows, start, end, VOCAB)[0]
    assert best.text == "ab" and best.start_char == CONTEXT.index("abab")


def test_only_max_context_starts_count() -> None:
    passage = spans.tokenize_passage(CONTEXT, tiny_tokenize)
    windows = spans.question_windows([IDS["谁"]], passage, FRAME, **SMALL)
    # A passage position of window 1 that window 1 does not score (it is also in window 0).
    position = next(
        p
        for p in np.flatnonzero(windows["token_char_start"][1] >= 0)
        if not windows["token_is_max_context"][1][p]
    )
    scored = _position(windows, 0, "potter")
    start, end = _logits(
        windows,
        {(1, position): 9.0, (0, scored): 1.0},
        {(1, position + 1): 9.0, (0, scored + 1): 1.0},
    )
    best = spans.nbest_answers(CONTEXT, windows, start, end, VOCAB)[0]
    assert best.start_logit == 1.0 and best.text == "Potter是"


def test_nbest_distinct_texts_in_score_order_and_length_limit() -> None:
    passage = spans.tokenize_passage(FILLER, tiny_tokenize)
    windows = spans.question_windows([IDS["谁"]], passage, FRAME, max_length=64)
    start = np.linspace(1, 0, 64, dtype=np.float32)[None]  # earlier positions score higher
    end = start.copy()
    # As the baseline, n_best also limits the start and end positions tried: the 8 best of
    # each are positions 0..7, of which 3..7 are passage pieces ([CLS] 谁 [SEP] first).
    nbest = spans.nbest_answers(FILLER, windows, start, end, VOCAB, n_best=8, max_answer_tokens=2)
    assert [c.text for c in nbest] == ["天", "天地", "地", "地玄", "玄", "玄黄", "黄", "黄宇"]
    scores = [c.start_logit + c.end_logit for c in nbest]
    assert scores == sorted(scores, reverse=True)
    nbest = spans.nbest_answers(FILLER, windows, start, end, VOCAB, n_best=5)
    assert [c.text for c in nbest] == ["天", "天地", "地"]
    # Equal texts count once: a second window holding the same characters adds nothing.
    twice = {key: np.concatenate([value[:1], value[:1]]) for key, value in windows.items()}
    both = np.concatenate([start, start])
    nbest = spans.nbest_answers(FILLER, twice, both, both, VOCAB, n_best=5)
    assert [c.text for c in nbest] == ["天", "天地", "地"]
    # Nothing valid (every score on question/padding positions): the baseline's "empty".
    start, end = np.full((1, 64), -1.0), np.full((1, 64), -1.0)
    windows = dict(windows, token_is_max_context=np.zeros_like(windows["token_is_max_context"]))
    assert spans.nbest_answers(FILLER, windows, start, end, VOCAB)[0].text == "empty"


def test_predict_answers_for_a_split() -> None:
    questions = [_question("a", "谁", "Harry Potter"), _question("b", "什么", "iPhone手机")]
    windows = spans.split_windows(questions, WORDS, FRAME, training=True, **SMALL)
    start = np.full(windows["input_ids"].shape, -10.0, np.float32)
    end = start.copy()
    for row in np.flatnonzero(windows["start_position"]):
        if windows["token_is_max_context"][row][windows["start_position"][row]]:
            start[row, windows["start_position"][row]] = 3.0
            end[row, windows["end_position"][row]] = 3.0
    order = np.random.default_rng(0).permutation(len(start))  # any window order
    shuffled = {key: value[order] for key, value in windows.items()}
    predictions = spans.predict_answers(questions, shuffled, start[order], end[order], VOCAB)
    assert predictions == {"a": "HarryPotter", "b": "iPhone手机"}
    kept = spans.predict_answers(
        questions, windows, start, end, VOCAB, keep_whitespace=True, n_best=2
    )
    assert kept == {"a": "Harry Potter", "b": "iPhone手机"}


def test_wordpiece_callable_matches_the_vocabulary_word_by_word() -> None:
    from cmrcx.vocab.wordpiece import WordPieceVocabulary

    vocabulary = WordPieceVocabulary(str(Path(spans.__file__).parents[2] / "data/tiny_vocab.txt"))
    tokenize = spans.wordpiece_tokenize_words(vocabulary)
    words = ["中国", "Abc", "，", "x.y", "\u200b"]
    assert tokenize(words) == [vocabulary.encode(word) for word in words]
    assert tokenize(words)[-1] == []  # a doc token BERT drops entirely has no pieces
    assert tokenize([]) == []
