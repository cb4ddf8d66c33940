"""Sliding windows over passages longer than the encoder, shared by CMRC 2019 (sentence
cloze) and CMRC 2018 (span extraction): both baselines are BERT's SQuAD code, whose
`doc_spans` starts a window every `doc_stride` tokens and whose max-context rule scores a
position only in the window where it has the most context on its scarcer side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

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
    """The ids a BERT input's frame needs: ``[CLS] ... [SEP] ... [SEP]`` and the padding
    (0, ``[PAD]`` in BERT vocabularies, in every baseline). CMRC 2018 and C3 use it; ChID's
    own adds [MASK] and its blank marker."""

    cls_id: int
    sep_id: int
    pad_id: int = 0

    @classmethod
    def from_vocabulary(cls, vocabulary) -> SpecialIds:
        """From anything with ``token_to_id`` (e.g. `cmrcx.vocab.wordpiece.WordPieceVocabulary`)."""
        return cls(*(vocabulary.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")))


# XLNet's segment ids (zihangdai/xlnet run_squad.py SEG_ID_P, SEG_ID_Q, SEG_ID_CLS; the
# padding's is XLNetTokenizer's `pad_token_type_id`, 3, as the classification tasks use).
XLNET_TYPE_A, XLNET_TYPE_B, XLNET_TYPE_CLS, XLNET_TYPE_PAD = 0, 1, 2, 3


def xlnet_frame(
    first: Sequence[int], second: Sequence[int], ids: SpecialIds, max_length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """XLNet's ``a <sep> b <sep> <cls>`` padded on the left to ``max_length``.

    Returns input_ids, token_type_ids (0 for a and its <sep>, 1 for b and its <sep>, 2 for
    <cls>, `XLNET_TYPE_PAD` for padding) and input_mask (1 = real token), int32
    [max_length] each.

    >>> [a.tolist() for a in xlnet_frame([7, 8], [9], SpecialIds(3, 4, 5), 7)]
    [[5, 7, 8, 4, 9, 4, 3], [3, 0, 0, 0, 1, 1, 2], [0, 1, 1, 1, 1, 1, 1]]
    """
    sequence = [*first, ids.sep_id, *second, ids.sep_id, ids.cls_id]
    types = [XLNET_TYPE_A] * (len(first) + 1) + [XLNET_TYPE_B] * (len(second) + 1)
    types.append(XLNET_TYPE_CLS)
    pad = max_length - len(sequence)
    if pad < 0:
        raise ValueError(f"{len(sequence)} tokens > max_length {max_length}")
    input_ids = np.asarray([ids.pad_id] * pad + sequence, np.int32)
    token_type_ids = np.asarray([XLNET_TYPE_PAD] * pad + types, np.int32)
    input_mask = np.asarray([0] * pad + [1] * len(sequence), np.int32)
    return input_ids, token_type_ids, input_mask
