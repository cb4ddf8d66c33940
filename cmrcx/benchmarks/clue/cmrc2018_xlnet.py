"""CMRC 2018 in XLNet's layout: SentencePiece pieces with character offsets.

Source: CLUEbenchmark/CLUE ``baselines/models/xlnet/run_cmrc_drcd.py`` (commit
2ea90461e0a0321945f880330b629ce09e0e3fd2; zihangdai/xlnet's ``run_squad.py`` for
CMRC 2018 / DRCD), [XL] below:

1. The passage is preprocessed and split into pieces whole ([XL] ``encode_pieces`` of
   ``preprocess_text(paragraph)``); each piece knows the passage characters it covers.
   [XL] finds them with a banded longest-common-subsequence match between the passage and
   the pieces joined; here they come from SentencePiece's own offsets on the preprocessed
   text, mapped back through the preprocessing
   (`cmrcx.vocab.xlnet.XLNetVocabulary.pieces_with_offsets`): exact, and no "MISMATCH
   DETECTED" passages to skip. The question is encoded whole and cut to 64 pieces
   (`piece_tokenizer`).
2. Windows (`cmrc2018_windows.question_windows`, the loop of every layout, framed by
   `cmrcx.vocab.layouts` `XLNetLayout.window_frame`): ``passage[start:start+n] <sep>
   question <sep> <cls>``, passage first ([XL]: "we put P before Q because during
   pretraining, B is always shorter than A"); segment ids 0 (passage and its <sep>), 1
   (question and its <sep>), 2 (<cls>), 3 (padding); ``n`` = max_length - len(question) -
   3; window starts ``doc_stride`` apart and the max-context rule as
   `cmrcx.benchmarks.windows` (the same loop and ``_check_is_max_context`` in [XL]).
   Padded on the LEFT, the family's layout (as transformers' SQuAD features for XLNet,
   whose tokenizer pads on the left); [XL] pads on the right. With relative positions and
   padding masked out, the encoder gives the real tokens the same states either way.
3. Training labels (`XLNetPassage.answer_pieces`): the first answer's characters (found
   as the BERT path finds them, `cmrc2018_format.baseline_answer_chars`, so both layouts
   train on the same characters); the first piece ending after its first character, the
   last piece starting at or before its last. A window without the whole answer points at
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

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from cmrcx.benchmarks.clue.cmrc2018_format import baseline_answer_chars
from cmrcx.benchmarks.clue.cmrc2018_windows import Cmrc2018Tokenizer

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

    def answer_pieces(self, text: str, answer_start: int) -> tuple[int, int] | None:
        """(first piece, last piece) of an answer, or None when its characters come out
        reversed (trained as "not in this window", <cls>).

        Raises:
          ValueError: the answer is not inside the context (`baseline_answer_chars`), or
            no piece covers its characters.
        """
        first, last = baseline_answer_chars(self.context, text, answer_start)
        if last < first:
            return None
        covers = self.char_end > self.char_start
        starts = np.flatnonzero(covers & (self.char_end > first))
        ends = np.flatnonzero(covers & (self.char_start <= last))
        if not len(starts) or not len(ends) or starts[0] > ends[-1]:
            raise ValueError(f"answer {text!r}: no piece covers its characters")
        return int(starts[0]), int(ends[-1])


def tokenize_passage(context: str, tokenize: TokenizeWithOffsets) -> XLNetPassage:
    pieces = np.asarray(list(tokenize(context)), np.int32).reshape(-1, 3)
    return XLNetPassage(context, pieces[:, 0], pieces[:, 1], pieces[:, 2])


def piece_tokenizer(tokenize: TokenizeWithOffsets) -> Cmrc2018Tokenizer:
    """XLNet's tokenization (step 1): each question's pieces and each passage's, whole."""

    def questions(texts: Sequence[str]) -> list[list[int]]:
        return [[piece for piece, _, _ in tokenize(text)] for text in texts]

    return Cmrc2018Tokenizer(questions, functools.partial(tokenize_passage, tokenize=tokenize))
