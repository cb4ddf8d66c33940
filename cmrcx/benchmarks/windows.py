"""Sliding windows over passages longer than the encoder, shared by CMRC 2019 (sentence
cloze) and CMRC 2018 (span extraction): both baselines are BERT's SQuAD code, whose
`doc_spans` starts a window every `doc_stride` tokens and whose max-context rule scores a
position only in the window where it has the most context on its scarcer side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np


class Span(NamedTuple):
    start: int
    length: int


def doc_spans(num_tokens: int, max_tokens_for_doc: int, doc_stride: int) -> list[Span]:
    """Window spans over a passage, exactly as the authors' baseline makes them.

    >>> doc_spans(10, 4, 2)
    [Span(start=0, length=4), Span(start=2, length=4), Span(start=4, length=4), \
Span(start=6, length=4)]
    """
    if max_tokens_for_doc < 1:
        raise ValueError(f"no room for the passage: max_tokens_for_doc={max_tokens_for_doc}")
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append(Span(start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans or [Span(0, 0)]


def max_context_span(spans: list[Span], position: int) -> int:
    """Index of the span in which `position` has maximum context (BERT's rule).

    The score is min(left context, right context) + 0.01 * span length; the first
    span wins ties. Returns -1 when no span holds the position.
    """
    best_score, best_index = None, -1
    for index, span in enumerate(spans):
        end = span.start + span.length - 1
        if not span.start <= position <= end:
            continue
        score = min(position - span.start, end - position) + 0.01 * span.length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return best_index


class SpecialIds(NamedTuple):
    """A vocabulary's special ids, as its input layout reads them (`cmrcx.vocab.layouts`
    `Layout.special_ids`, the one place that knows which token is which): the frame's
    (``[CLS]``/``<cls>``, ``[SEP]``/``<sep>``, the padding: 0, ``[PAD]`` in BERT
    vocabularies, in every baseline) and the markers a benchmark writes into a text (None
    where the vocabulary has none)."""

    cls_id: int | None  # None: T5's vocabulary has no [CLS]
    sep_id: int  # T5's: <sep> (LOT's pointer layouts)
    pad_id: int = 0
    # ChID's blank to fill ([unused1]; XLNet's <mask>); LOT's place in a story where a
    # sentence is missing or may go (WordPiece's [unused1])
    blank_id: int | None = None
    other_blank_id: int | None = None  # ChID: another blank's 4 tokens ([MASK]; <unk>)
    end_id: int | None = None  # LOT: the end of a sentence outside the story ([unused2])
    mask_id: int | None = None  # LOT: the context token, last (T5's <mask>)
    eos_id: int | None = None  # </s>, ending every T5 input (T5Tokenizer appends it)
    sentinels: tuple[int, ...] = ()  # sentinels[k]: the id of <extra_id_k> (T5)
    blank_markers: tuple[int, ...] = ()  # CMRC 2019: the id of [BLANKk]'s [unusedk] at k-1


class Frame(Protocol):
    """A layout's frame with its special ids bound (`cmrcx.vocab.layouts` `Layout.frame`):
    each choice's parts (id lists; a separator follows every part) framed and padded to
    ``max_length``, the rows past the choices all padding: input_ids, token_type_ids,
    input_mask int32 [rows (default: the choices), max_length]. ``one_segment``: every
    token type 0 where the layout's frame has segment types 0/1 (the BERT ChID
    baseline's input). ValueError when a choice does not fit."""

    def __call__(
        self,
        choices: Sequence[Sequence[Sequence[int]]],
        max_length: int,
        *,
        rows: int | None = None,
        one_segment: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


# XLNet's segment ids (zihangdai/xlnet run_squad.py SEG_ID_P, SEG_ID_Q, SEG_ID_CLS; the
# padding's is XLNetTokenizer's `pad_token_type_id`, 3, as the classification tasks use).
XLNET_TYPE_A, XLNET_TYPE_B, XLNET_TYPE_CLS, XLNET_TYPE_PAD = 0, 1, 2, 3
