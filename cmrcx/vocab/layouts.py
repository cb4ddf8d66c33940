"""Input layouts: how a model family's vocabulary tokenizes a text and frames an example.

A family's registry row carries its layout (`cmrcx.models.registry.Family.layout`), one
object of a class below; the benchmarks (`cmrcx.benchmarks`) build layout-free pieces
(token ids of a text, a ChID window, CMRC 2018's passage pieces) and the tasks frame
them through the layout. Every question a task asks of a layout is a method of `Layout`;
nothing outside this module branches on which layout (or vocabulary) it has.

  "bert"   WordPiece (`cmrcx.vocab.wordpiece`, vocab.txt): [CLS] a [SEP] b [SEP], padded
           on the right, token types 0 (a, with [CLS] and its [SEP]) and 1 (b and its
           [SEP]). BERT, ERNIE, RoBERTa-wwm, ALBERT.
  "gpt2"   BERT's WordPiece and frames, read by a decoder-only model (`causal`): LOT's
           pointer layouts put what a state must see first (UER's GPT-2).
  "xlnet"  XLNet's SentencePiece (`cmrcx.vocab.xlnet`, spiece.model): a <sep> b <sep>
           <cls>, padded on the left, token types 0, 1 and 2 (<cls>), padding 3
           (XLNetTokenizer's).
  "t5"     T5's SentencePiece (`cmrcx.vocab.sentencepiece`, spiece.model, sentinels):
           LOT's pointer layouts end in <mask> and </s>; <sep>/<mask> are appended after
           a vocabulary without them (`appends_markers`). No CLUE frame.

A new family of an existing layout names that layout on its row; a new layout is a class
here (the framings it supports, the others raise `ValueError`) and a `LAYOUTS` entry. One
with a CLUE frame subclasses `_FramedLayout` and gives its segments (`_segments`) and
padding: the pair (TF), the choice rows of C3 and ChID (NumPy) and CMRC 2018's window
frames (`window_frame`; the parts' order: `passage_first`) follow from them. Its CMRC 2018
tokenization (`_cmrc2018_tokenizer`: questions and passages in pieces, each piece's
characters) feeds the one windowing loop, `cmrc2018_windows.split_windows`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from cmrcx.benchmarks import windows as frames
from cmrcx.benchmarks.clue import c3, chid, cmrc2018_xlnet
from cmrcx.benchmarks.clue import cmrc2018_windows as spans
from cmrcx.benchmarks.lot import understanding

if TYPE_CHECKING:  # seqio imports TensorFlow: not before the entry points' quiet start
    import seqio

SpecialIds = frames.SpecialIds  # the frame's ids and a benchmark's markers
Tokenize = Callable[[str], Sequence[int]]


class Layout:
    """The protocol: a vocabulary, its special ids, and the framing of a pair (CLUE
    classification), choices (C3), a cloze (ChID), windows (CMRC 2018) and LOT's pointer
    layouts (ClozeT, SenPos). A framing the layout does not have raises ValueError."""

    name = ""  # the registry row's, the task docs' and the error messages' word for it
    vocab_file = ""  # the vocabulary's file in an export or release directory
    causal = False  # read by a decoder-only model (its states see the tokens before them)
    # <sep>/<mask> are appended after a SentencePiece vocabulary that lacks them, so a
    # model's embedding rows must reach them (`cmrcx.training.run_tasks.lot`).
    appends_markers = False
    # Many texts are tokenized in one `encode_tf` call (WordPiece); else one at a time.
    encodes_in_batches = False
    # CMRC 2018 answers are the characters a span's pieces cover (`nbest_answers`'s
    # `covered_text`), not the baseline's doc tokens joined.
    answers_cover_pieces = False

    def __repr__(self) -> str:
        return f"<{self.name} layout>"

    def _missing(self, what: str) -> ValueError:
        return ValueError(f"the {self.name!r} input layout has no {what}")

    def vocabulary(self, vocab_file: str, lower_case: bool = True) -> seqio.Vocabulary:
        """The layout's vocabulary read from `vocab_file` (vocab.txt, spiece.model)."""
        raise self._missing("vocabulary")

    def special_ids(self, vocabulary, num_blanks: int = 0) -> SpecialIds:
        """The vocabulary's special ids: the frames' cls, sep and padding tokens, and the
        markers the benchmarks write (ChID's blanks, LOT's pointer markers, CMRC 2019's
        `num_blanks` blank markers: ValueError where the layout has none)."""
        self._check_blank_markers(num_blanks)
        return SpecialIds(vocabulary.cls_id, vocabulary.sep_id, vocabulary.pad_id)

    def _check_blank_markers(self, num_blanks: int) -> None:
        if num_blanks:
            raise self._missing("CMRC 2019 blank markers")

    def pair(self, ids_a, ids_b, ids: SpecialIds, max_length: int):
        """A pair of id tensors (already cut to fit; b may be empty: a single text) framed
        and padded to `max_length` as TF ops: input_ids, token_type_ids, input_mask
        int32 [max_length]. The second separator is there only when b has a token."""
        raise self._missing("CLUE pair frame")

    def frame(self, ids: SpecialIds, choices, max_length: int, *, rows=None, one_segment=False):
        """The NumPy frame of choices, each a list of parts (id lists), a separator after
        every part: `cmrcx.benchmarks.windows.Frame` once ``ids`` are bound (`framing`)."""
        raise self._missing("CLUE choice frame")

    def framing(self, vocabulary) -> frames.Frame:
        """`frame` with the vocabulary's special ids bound: what the benchmarks frame with."""
        return functools.partial(self.frame, self.special_ids(vocabulary))

    def choices(self, question, tokenize: Tokenize, vocabulary, max_length: int) -> dict:
        """A C3 question's padded choices (`c3.question_features`' features)."""
        raise self._missing("C3 choice frame")

    def cloze(self, blank, tokenize: Tokenize, vocabulary, max_length: int) -> dict:
        """A ChID blank's candidates (`chid.blank_features`' features)."""
        raise self._missing("ChID cloze frame")

    def windows(self, questions, vocabulary, **options) -> dict[str, np.ndarray]:
        """CMRC 2018: every window of `questions` (`cmrc2018_windows.split_windows`'
        arrays: the loop of every layout, which this one's tokenization and
        `window_frame` feed); options: training, max_length, doc_stride."""
        raise self._missing("CMRC 2018 windows")

    def window_frame(self, ids: SpecialIds, question_ids, passage_ids, max_length: int):
        """A CMRC 2018 window framed, with where its passage and its cls token land
        (`cmrc2018_windows.FramedWindow`): `cmrc2018_windows.WindowFrame` once ``ids``
        are bound."""
        raise self._missing("CMRC 2018 window frame")

    def pointer(self, data_task: str) -> Callable[..., dict]:
        """LOT's candidate-pointer layout of "clozet" or "senpos":
        (record, tokenize, ids, max_length) -> example (`cmrcx.benchmarks.lot.understanding`;
        ids: `special_ids`)."""
        raise self._missing("LOT pointer layout")

    def marker_names(self, vocabulary) -> dict[int, str]:
        """id -> text of the markers a readable view names (`cmrcx.inspect`)."""
        return {}

    def file_tokens(self, vocab_file: str) -> int | None:
        """Reads `vocab_file` as this layout's runs will, before anything is built
        (`RunConfig.checked`): ValueError when it does not read; its token count where
        every line is an id the model must have an embedding row for (WordPiece's
        vocab.txt), else None."""
        return None

    def readable(self, vocabulary, ids: Sequence[int]) -> str:
        """ids -> what a reader should see (`cmrcx.inspect`): the decoded text."""
        return vocabulary.decode(list(ids))


def _tf_frame(segments, max_length: int, pad_id: int, pad_type: int, left: bool):
    """(ids, token type) segments, concatenated and padded to `max_length` as TF ops:
    input_ids, token_type_ids, input_mask int32 [max_length]."""
    import tensorflow as tf

    input_ids = tf.concat([tf.cast(part, tf.int32) for part, _ in segments], 0)
    types = tf.concat([tf.fill([tf.size(part)], kind) for part, kind in segments], 0)

    def pad(values, value):
        space = max_length - tf.size(values)
        padded = tf.pad(values, [[space, 0] if left else [0, space]], constant_values=value)
        return tf.ensure_shape(padded, [max_length])

    return pad(input_ids, pad_id), pad(types, pad_type), pad(tf.ones_like(input_ids), 0)


def _second_sep(ids_b, sep_id: int):
    """[sep_id] when b has a token, else [] (the runner's ``if tokens_b:``)."""
    import tensorflow as tf

    return tf.fill([tf.minimum(tf.size(ids_b), 1)], sep_id)


class _FramedLayout(Layout):
    """A layout with a CLUE frame: the pair (TF), the choices (NumPy) and the C3 / ChID
    features built on them. A subclass gives its segments (`_segments`), the padding's
    token type and side."""

    pad_type = 0  # the token type of the padding
    pads_left = False
    passage_first = False  # a CMRC 2018 window frames the passage, then the question

    def _segments(self, parts, seps, ids: SpecialIds, one_segment: bool) -> list:
        """[(ids, token type)] of the frame: parts[k] followed by seps[k]."""
        raise NotImplementedError

    def pair(self, ids_a, ids_b, ids, max_length):
        seps = [[ids.sep_id], _second_sep(ids_b, ids.sep_id)]
        segments = self._segments([ids_a, ids_b], seps, ids, one_segment=False)
        return _tf_frame(segments, max_length, ids.pad_id, self.pad_type, left=self.pads_left)

    def frame(self, ids, choices, max_length, *, rows=None, one_segment=False):
        """Each choice's parts framed and padded to `max_length` (the TF `pair`'s frame,
        a separator after every part); rows past the choices all padding.

        >>> [a.tolist() for a in BERT.frame(SpecialIds(1, 2), [([7], [8, 9])], 6, rows=2)]
        [[[1, 7, 2, 8, 9, 2], [0, 0, 0, 0, 0, 0]], [[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0]], \
[[1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]]]
        """
        shape = (len(choices) if rows is None else rows, max_length)
        rows_out = self._padding(ids, shape)
        for row, parts in enumerate(choices):
            segments = self._segments(parts, [[ids.sep_id]] * len(parts), ids, one_segment)
            self._fill(segments, max_length, *(array[row] for array in rows_out))
        return rows_out

    def _padding(self, ids: SpecialIds, shape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """input_ids, token_type_ids, input_mask of `shape`, all padding."""
        return (
            np.full(shape, ids.pad_id, np.int32),
            np.full(shape, self.pad_type, np.int32),
            np.zeros(shape, np.int32),
        )

    def _fill(self, segments, max_length: int, input_ids, token_type_ids, input_mask) -> int:
        """Writes one row's segments into the three rows (padding around them on this
        layout's side); returns the slot of its first token. Whole arrays, not token by
        token: CMRC 2018 frames every window here."""
        tokens = np.concatenate([np.asarray(part, np.int32) for part, _ in segments])
        if len(tokens) > max_length:
            raise ValueError(f"{len(tokens)} tokens > max_length {max_length}")
        start = max_length - len(tokens) if self.pads_left else 0
        where = slice(start, start + len(tokens))
        input_ids[where] = tokens
        kinds, sizes = zip(*[(kind, len(part)) for part, kind in segments], strict=True)
        token_type_ids[where] = np.repeat(kinds, sizes)
        input_mask[where] = 1
        return start

    def window_frame(self, ids, question_ids, passage_ids, max_length):
        """The question and the passage pieces framed as one choice of `frame` (the
        passage first where `passage_first`).

        >>> window = BERT.window_frame(SpecialIds(1, 2), [7], [8, 9], 7)
        >>> [a.tolist() for a in window[:3]], window[3:]
        ([[1, 7, 2, 8, 9, 2, 0], [0, 0, 0, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 0]], (3, 0))
        >>> window = XLNET.window_frame(SpecialIds(3, 4, 5), [7], [8, 9], 7)
        >>> [a.tolist() for a in window[:3]], window[3:]
        ([[5, 8, 9, 4, 7, 4, 3], [3, 0, 0, 0, 1, 1, 2], [0, 1, 1, 1, 1, 1, 1]], (1, 6))
        """
        parts = [passage_ids, question_ids] if self.passage_first else [question_ids, passage_ids]
        seps = [[ids.sep_id]] * len(parts)
        segments = self._segments(parts, seps, ids, one_segment=False)
        rows = self._padding(ids, (max_length,))
        slot = self._fill(segments, max_length, *rows)
        # Where the passage and the cls token land: the segments are the parts and the
        # separators themselves, and the one other token is the cls.
        passage_start = cls_position = -1
        for tokens, _ in segments:
            if tokens is passage_ids:
                passage_start = slot
            elif tokens is not question_ids and tokens is not seps[0]:
                cls_position = slot
            slot += len(tokens)
        return spans.FramedWindow(*rows, passage_start, cls_position)

    def _cmrc2018_tokenizer(self, vocabulary) -> spans.Cmrc2018Tokenizer:
        """The vocabulary's CMRC 2018 tokenization of questions and passages."""
        raise self._missing("CMRC 2018 tokenization")

    def windows(self, questions, vocabulary, **options):
        frame = functools.partial(self.window_frame, self.special_ids(vocabulary))
        tokenizer = self._cmrc2018_tokenizer(vocabulary)
        return spans.split_windows(questions, tokenizer, frame, **options)

    def choices(self, question, tokenize, vocabulary, max_length):
        return c3.question_features(question, tokenize, self.framing(vocabulary), max_length)

    def cloze(self, blank, tokenize, vocabulary, max_length):
        ids = self.special_ids(vocabulary)
        frame = functools.partial(self.frame, ids)
        return chid.blank_features(blank, tokenize, ids, frame, max_length)


def _token_id(vocabulary, token: str) -> int | None:
    try:
        return vocabulary.token_to_id(token)
    except KeyError:
        return None


class BertLayout(_FramedLayout):
    """BERT's WordPiece and ``[CLS] a [SEP] b [SEP]`` frames (the CLUE baselines')."""

    name, vocab_file = "bert", "vocab.txt"
    encodes_in_batches = True

    def vocabulary(self, vocab_file, lower_case=True):
        from cmrcx.vocab.wordpiece import WordPieceVocabulary

        return WordPieceVocabulary(vocab_file, lower_case=lower_case)

    def special_ids(self, vocabulary, num_blanks=0):
        """[CLS], [SEP], [PAD]; the blank [unused1] (ChID's, CLUE's CHID_preprocess.py;
        LOT's) and other blanks' [MASK] (ChID's), LOT's end of a sentence [unused2]; None
        where the vocabulary lacks them. CMRC 2019's blank markers: [unused1] to
        [unused<num_blanks>] (the authors' script), KeyError naming the file where one is
        absent."""
        markers = range(1, num_blanks + 1)
        return SpecialIds(
            vocabulary.cls_id,
            vocabulary.sep_id,
            vocabulary.pad_id,
            blank_id=_token_id(vocabulary, "[unused1]"),
            other_blank_id=_token_id(vocabulary, "[MASK]"),
            end_id=_token_id(vocabulary, "[unused2]"),
            blank_markers=tuple(vocabulary.token_to_id(f"[unused{k}]") for k in markers),
        )

    def _segments(self, parts, seps, ids, one_segment):
        """``[CLS] a [SEP] b [SEP] ...``: types 0 (a, with [CLS] and its [SEP]), then 1, or
        0 throughout with ``one_segment``.

        >>> [t.numpy().tolist() for t in BERT.pair([7, 8], [9], SpecialIds(1, 2, 0), 7)]
        [[1, 7, 8, 2, 9, 2, 0], [0, 0, 0, 0, 1, 1, 0], [1, 1, 1, 1, 1, 1, 0]]
        """
        rest = 0 if one_segment else 1
        segments = [([ids.cls_id], 0), (parts[0], 0), (seps[0], 0)]
        for part, sep in zip(parts[1:], seps[1:], strict=True):
            segments += [(part, rest), (sep, rest)]
        return segments

    def _cmrc2018_tokenizer(self, vocabulary):
        """The CLUE baseline's: doc tokens, each WordPiece-tokenized on its own."""
        return spans.word_tokenizer(spans.wordpiece_tokenize_words(vocabulary))

    def pointer(self, data_task):
        return {"clozet": understanding.clozet_wordpiece, "senpos": understanding.senpos_wordpiece}[
            data_task
        ]

    def file_tokens(self, vocab_file):
        if not vocab_file.endswith(".txt"):
            return None
        from cmrcx.vocab.wordpiece import read_vocab_file

        return len(read_vocab_file(vocab_file))

    def readable(self, vocabulary, ids):
        """WordPiece token by token (`[CLS] 他 [unused1] ##s [SEP]`), not detokenized, so
        the framing, blank markers and word pieces stay visible."""
        tokens = vocabulary.tokens
        return " ".join(tokens[i] if 0 <= i < len(tokens) else f"<{i}>" for i in ids)


class CausalWordPieceLayout(BertLayout):
    """BERT's WordPiece and frames read by a decoder-only model (UER's GPT-2): ClozeT's
    pointer layout puts the context token last (SenPos's WordPiece one already does)."""

    name, causal = "gpt2", True

    def pointer(self, data_task):
        return {
            "clozet": understanding.clozet_wordpiece_causal,
            "senpos": understanding.senpos_wordpiece,  # its context is already last
        }[data_task]


class XLNetLayout(_FramedLayout):
    """XLNet's SentencePiece and ``a <sep> b <sep> <cls>`` frames padded on the left."""

    name, vocab_file = "xlnet", "spiece.model"
    answers_cover_pieces = True
    pad_type, pads_left = frames.XLNET_TYPE_PAD, True
    passage_first = True  # [XL]: "we put P before Q" (`cmrc2018_xlnet`)

    def vocabulary(self, vocab_file, lower_case=True):
        from cmrcx.vocab.xlnet import XLNetVocabulary

        return XLNetVocabulary(vocab_file, lower_case=lower_case)

    def special_ids(self, vocabulary, num_blanks=0):
        """<cls>, <sep>, <pad>; ChID's blank is <mask> and another blank 4 x <unk> (XLNet
        has no [unused1]: the blank to fill is the masked one, the others are unknown
        words)."""
        self._check_blank_markers(num_blanks)
        return SpecialIds(
            vocabulary.cls_id,
            vocabulary.sep_id,
            vocabulary.pad_id,
            blank_id=vocabulary.mask_id,
            other_blank_id=vocabulary.unk_id,
        )

    def _segments(self, parts, seps, ids, one_segment):
        """``a <sep> b <sep> ... <cls>``, types 0 (a and its <sep>), 1, 2 (<cls>), padded on
        the left (type `XLNET_TYPE_PAD`, as XLNetTokenizer pads). The CLUE XLNet baseline
        pads ids with 0 and types with 4: the encoder ignores both (masked keys; a type only
        says "same segment or not"). ``one_segment`` changes nothing: CLUE has no XLNet
        ChID script, and its XLNet frames a pair with its own types.

        >>> [t.numpy().tolist() for t in XLNET.pair([7, 8], [9], SpecialIds(3, 4, 5), 7)]
        [[5, 7, 8, 4, 9, 4, 3], [3, 0, 0, 0, 1, 1, 2], [0, 1, 1, 1, 1, 1, 1]]
        """
        segments = [(parts[0], frames.XLNET_TYPE_A), (seps[0], frames.XLNET_TYPE_A)]
        for part, sep in zip(parts[1:], seps[1:], strict=True):
            segments += [(part, frames.XLNET_TYPE_B), (sep, frames.XLNET_TYPE_B)]
        return [*segments, ([ids.cls_id], frames.XLNET_TYPE_CLS)]

    def _cmrc2018_tokenizer(self, vocabulary):
        """Pieces with the characters they cover, each text tokenized whole."""
        return cmrc2018_xlnet.piece_tokenizer(vocabulary.pieces_with_offsets)


class T5Layout(Layout):
    """T5's SentencePiece (sentinels, </s>): LOT's pointer layouts end in <mask> </s>."""

    name, vocab_file = "t5", "spiece.model"
    appends_markers = True

    def vocabulary(self, vocab_file, lower_case=True):
        from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary

        return T5SentencePieceVocabulary(vocab_file)

    def pointer(self, data_task):
        return {
            "clozet": understanding.clozet_sentencepiece,
            "senpos": understanding.senpos_sentencepiece,
        }[data_task]

    def file_tokens(self, vocab_file):
        """A spiece.model the T5 tasks cannot read (no <pad>, </s> or <unk> piece; not a
        model) is a ValueError."""
        if vocab_file.endswith(".model"):
            from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary

            T5SentencePieceVocabulary(vocab_file)
        return None

    def special_ids(self, vocabulary, num_blanks=0):
        """</s>, the sentinels, and LOT's pointer markers <sep> and <mask> (no [CLS]).

        `<sep>` and `<mask>` are the model's pieces when it has them (LongLM's spiece.model,
        Chinese XLNet's: 4 and 6); otherwise (mT5's, T5's) they are appended after the
        vocabulary, vocab_size and vocab_size + 1, as transformers' `add_special_tokens`
        appends a token a tokenizer lacks (`appends_markers`). Assumption (LongLM's
        tokenizer files are not available here): the authors' tokenizer reads `<sep>` and
        `<mask>` written in the text as one token each, as its `mask_token_id` in
        finetune.py:177 implies for `<mask>`. A model whose vocab_size is not above them
        cannot embed them.
        """
        self._check_blank_markers(num_blanks)
        pieces = vocabulary.tokens[: vocabulary.piece_size]
        found = {piece: i for i, piece in enumerate(pieces) if piece in ("<sep>", "<mask>")}
        appended = iter(range(vocabulary.vocab_size, vocabulary.vocab_size + 2))
        sep, mask = (found[p] if p in found else next(appended) for p in ("<sep>", "<mask>"))
        return SpecialIds(
            None,
            sep,
            vocabulary.pad_id,
            mask_id=mask,
            eos_id=vocabulary.eos_id,
            sentinels=tuple(vocabulary.sentinel_id(k) for k in range(vocabulary.extra_ids)),
        )

    def marker_names(self, vocabulary):
        """id -> text of </s>, <sep>, <mask> and the sentinels (<sep>/<mask> may lie past
        the vocabulary's pieces)."""
        ids = self.special_ids(vocabulary)
        names = {token: f"<extra_id_{k}>" for k, token in enumerate(ids.sentinels)}
        return names | {ids.eos_id: "</s>", ids.sep_id: "<sep>", ids.mask_id: "<mask>"}


BERT, GPT2, XLNET, T5 = BertLayout(), CausalWordPieceLayout(), XLNetLayout(), T5Layout()
LAYOUTS: dict[str, Layout] = {layout.name: layout for layout in (BERT, GPT2, XLNET, T5)}


def layout(name: str | Layout) -> Layout:
    """The layout of a name ("bert", "gpt2", "xlnet", "t5"); a layout is returned as is.
    ValueError naming the known ones."""
    if isinstance(name, Layout):
        return name
    if name not in LAYOUTS:
        raise ValueError(f"input layout {name!r}: use one of {', '.join(LAYOUTS)}")
    return LAYOUTS[name]


def of_vocabulary(vocabulary) -> Layout | None:
    """The layout whose vocabulary class `vocabulary` is (for a tool that holds a task's
    vocabulary, not a family: `cmrcx.inspect`): WordPiece -> BERT's, XLNet's
    SentencePiece -> XLNet's, T5's -> T5's; None for any other."""
    from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary
    from cmrcx.vocab.wordpiece import WordPieceVocabulary
    from cmrcx.vocab.xlnet import XLNetVocabulary

    classes: list[tuple[type, Layout]] = [
        (WordPieceVocabulary, BERT),
        (XLNetVocabulary, XLNET),
        (T5SentencePieceVocabulary, T5),
    ]
    for cls, found in classes:
        if isinstance(vocabulary, cls):
            return found
    return None


def vocabulary(name: str | Layout, vocab_file: str, lower_case: bool) -> seqio.Vocabulary:
    """The vocabulary of layout `name` read from `vocab_file` (vocab.txt, spiece.model)."""
    return layout(name).vocabulary(vocab_file, lower_case)


__all__ = ["BERT", "GPT2", "LAYOUTS", "T5", "XLNET", "Layout", "SpecialIds", "layout"]
