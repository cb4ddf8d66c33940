"""CMRC 2018 windows in XLNet's layout: SentencePiece pieces with character offsets.

Source: CLUEbenchmark/CLUE ``baselines/models/xlnet/run_cmrc_drcd.py`` (commit
2ea90461e0a0321945f880330b629ce09e0e3fd2; zihangdai/xlnet's ``run_squad.py`` for
CMRC 2018 / DRCD), [XL] below:

1. The passage is preprocessed and split into pieces whole ([XL] ``encode_pieces`` of
   ``preprocess_text(paragraph)``); each piece knows the passage characters it covers.
   [XL] finds them with a banded longest-common-subsequence match between the passage and
   the pieces joined; here they come from SentencePiece's own offsets on the preprocessed
   text, mapped back through the preprocessing
   (`cmrcx.vocab.xlnet.XLNetVocabulary.pieces_with_offsets`): exact, and no "MISMATCH
   DETECTED" passages to skip. The question is encoded whole and cut to 64 pieces.
2. Windows (`question_windows`): ``passage[start:start+n] <sep> question <sep> <cls>``,
   passage first ([XL]: "we put P before Q because during pretraining, B is always
   shorter than A"); segment ids 0 (passage and its <sep>), 1 (question and its <sep>),
   2 (<cls>), 3 (padding); ``n`` = max_length - len(question) - 3; window starts
   ``doc_stride`` apart and the max-context rule as `cmrcx.benchmarks.windows` (the same
   loop and ``_check_is_max_context`` in [XL]). Padded on the LEFT, the family's layout
   (`cmrcx.vocab.layouts`, as transformers' SQuAD features for XLNet, whose tokenizer pads
   on the left); [XL] pads on the right. With relative positions and padding masked
   out, the encoder gives the real tokens the same states either way.
3. Training labels (`answer_pieces`): the first answer's characters (found as the BERT
   path finds them, `cmrc2018_format.baseline_answer_chars`, so both layouts train on
   the same characters); the first piece ending after its first character, the last
   piece starting at or before its last. A window without the whole answer points at
   <cls> ([XL]: ``span_is_impossible`` -> ``cls_index``), the last slot here. An answer
   whose characters come out reversed (``answer_start`` -1, see
   `baseline_answer_chars`) has no span: every window of it points at <cls>, where [XL]
   would fail its ``assert tok_start_position <= tok_end_position``.
4. Decoding (`cmrc2018_windows.nbest_answers` with ``covered_text=True``): the text of
   a span is the passage's characters from its first piece's first to its last piece's
   last character, stripped ([XL] ``write_predictions``:
   ``paragraph_text[start_orig_pos: end_orig_pos + 1].strip()``), so the official
   evaluator scores the passage's own characters.

The span head is a linear layer on every token (transformers'
``XLNetForQuestionAnsweringSimple``), decoded like the BERT path (20 best starts and
ends, answers of at most 50 pieces), not [XL]'s beam over start / end classifiers
(``XLNetForQuestionAnswering``, 5 x 5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from cmrcx.benchmarks.clue.cmrc2018_format import Cmrc2018Question, baseline_answer_chars
from cmrcx.benchmarks.clue.cmrc2018_windows import (
    DOC_STRIDE,
    MAX_LENGTH,
    MAX_QUERY_TOKENS,
    WINDOW_FEATURES,
    max_context_windows,
)
from cmrcx.benchmarks.windows import (
    XLNET_TYPE_A,
    XLNET_TYPE_B,
    XLNET_TYPE_CLS,
    XLNET_TYPE_PAD,
    SpecialIds,
    doc_spans,
)

# text -> (id, start, end) per piece, text[start:end] the characters it covers
# (`cmrcx.vocab.xlnet.XLNetVocabulary.pieces_with_offsets`).
TokenizeWithOffsets = Callable[[str], Sequence[tuple[int, int, int]]]


class XLNetPassage(NamedTuple):
    """A context's pieces: piece_ids, char_start, char_end int32 [num_pieces]; piece p
    covers ``context[char_start[p]:char_end[p]]`` (empty for a lone "▁")."""

    context: str
    piece_ids: np.ndarray
    char_start: np.ndarray
    char_end: np.ndarray


def tokenize_passage(context: str, tokenize: TokenizeWithOffsets) -> XLNetPassage:
    pieces = np.asarray(list(tokenize(context)), np.int32).reshape(-1, 3)
    return XLNetPassage(context, pieces[:, 0], pieces[:, 1], pieces[:, 2])


def answer_pieces(passage: XLNetPassage, text: str, answer_start: int) -> tuple[int, int] | None:
    """(first piece, last piece) of an answer, or None when its characters come out
    reversed (trained as "not in this window", <cls>).

    Raises:
      ValueError: the answer is not inside the context (`baseline_answer_chars`), or no
        piece covers its characters.
    """
    first, last = baseline_answer_chars(passage.context, text, answer_start)
    if last < first:
        return None
    covers = passage.char_end > passage.char_start
    starts = np.flatnonzero(covers & (passage.char_end > first))
    ends = np.flatnonzero(covers & (passage.char_start <= last))
    if not len(starts) or not len(ends) or starts[0] > ends[-1]:
        raise ValueError(f"answer {text!r}: no piece covers its characters")
    return int(starts[0]), int(ends[-1])


def question_windows(
    question_ids: Sequence[int],
    passage: XLNetPassage,
    ids: SpecialIds,
    answer: tuple[int, int] | None = None,
    *,
    max_length: int = MAX_LENGTH,
    max_query_tokens: int = MAX_QUERY_TOKENS,
    doc_stride: int = DOC_STRIDE,
) -> dict[str, np.ndarray]:
    """All windows of one question, the arrays of `cmrc2018_windows.question_windows`
    (same keys and shapes) in XLNet's layout. start/end_position point at <cls>
    (``max_length - 1``) in a window without the whole answer, and without ``answer``."""
    query = np.asarray(question_ids, np.int32)[:max_query_tokens]
    pieces = passage.piece_ids
    spans = doc_spans(len(pieces), max_length - len(query) - 3, doc_stride)
    scoring_span = max_context_windows(spans, len(pieces))
    cls_index = max_length - 1
    out: dict[str, list] = {key: [] for key in WINDOW_FEATURES}
    for index, span in enumerate(spans):
        window = np.arange(span.start, span.start + span.length)
        tokens = np.concatenate([pieces[window], [ids.sep_id], query, [ids.sep_id, ids.cls_id]])
        offset = max_length - len(tokens)  # the passage's first slot, after the padding
        row = np.full([max_length], ids.pad_id, np.int32)
        row[offset:] = tokens
        segments = np.full([max_length], XLNET_TYPE_PAD, np.int32)
        segments[offset : offset + span.length + 1] = XLNET_TYPE_A
        segments[offset + span.length + 1 : cls_index] = XLNET_TYPE_B
        segments[cls_index] = XLNET_TYPE_CLS
        mask = (np.arange(max_length) >= offset).astype(np.int32)
        char_start = np.full([max_length], -1, np.int32)
        char_end = np.full([max_length], -1, np.int32)
        is_max = np.zeros([max_length], np.int32)
        slots = slice(offset, offset + span.length)
        char_start[slots] = passage.char_start[window]
        char_end[slots] = passage.char_end[window]
        is_max[slots] = scoring_span[window] == index
        start = end = cls_index
        if answer is not None:
            if answer[0] >= span.start and answer[1] <= span.start + span.length - 1:
                start, end = answer[0] - span.start + offset, answer[1] - span.start + offset
        values = (row, segments, mask, start, end, char_start, char_end, is_max, index)
        for key, value in zip(WINDOW_FEATURES, values, strict=True):
            out[key].append(value)
    return {key: np.asarray(value, np.int32) for key, value in out.items()}


def split_windows(
    questions: Sequence[Cmrc2018Question],
    tokenize: TokenizeWithOffsets,
    ids: SpecialIds,
    *,
    training: bool,
    max_length: int = MAX_LENGTH,
    max_query_tokens: int = MAX_QUERY_TOKENS,
    doc_stride: int = DOC_STRIDE,
) -> dict[str, np.ndarray]:
    """`cmrc2018_windows.split_windows` in XLNet's layout (each context tokenized once;
    ``example_index`` added).

    Raises:
      ValueError: naming the question whose first answer cannot be placed (training).
    """
    passages: dict[str, XLNetPassage] = {}
    parts = []
    for example_index, question in enumerate(questions):
        if question.context not in passages:
            passages[question.context] = tokenize_passage(question.context, tokenize)
        passage = passages[question.context]
        answer = None
        if training:
            if not question.answers:
                raise ValueError(f"question {question.qid!r} has no answer to train on")
            try:
                answer = answer_pieces(passage, question.answers[0], question.answer_starts[0])
            except ValueError as e:
                raise ValueError(f"question {question.qid!r}: {e}") from None
        question_ids = [piece for piece, _, _ in tokenize(question.question)]
        windows = question_windows(
            question_ids,
            passage,
            ids,
            answer,
            max_length=max_length,
            max_query_tokens=max_query_tokens,
            doc_stride=doc_stride,
        )
        windows["example_index"] = np.full([len(windows["input_ids"])], example_index, np.int32)
        parts.append(windows)
    if not parts:
        raise ValueError("no questions")
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
