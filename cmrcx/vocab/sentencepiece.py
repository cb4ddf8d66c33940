"""seqio vocabulary for LongLM and mT5: SentencePiece plus T5's 100 sentinels.

Split from `cmrcx.vocab.wordpiece` (WordPiece), whose character-class helpers it uses.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Sequence

import seqio
import tensorflow as tf
import tensorflow_text as tf_text

from cmrcx.vocab.wordpiece import python_space_class

SENTINEL_TOKEN = "<extra_id_{}>"
# T5Tokenizer's pad, eos and unk pieces: special tokens, so split off wherever they
# are written in the text, like the sentinels.
T5_SPECIAL_PIECES = ("<pad>", "</s>", "<unk>")


class T5SentencePieceVocabulary(seqio.SentencePieceVocabulary):
    """A SentencePiece model plus `extra_ids` sentinels, tokenized as transformers' T5Tokenizer.

    The ids are those of the slow (SentencePiece) `T5Tokenizer` of transformers 4.6,
    which LongLM's authors use (`tokenizer(text, add_special_tokens=False)`): the text
    is cut at every special token written in it (`<extra_id_k>` for k < extra_ids,
    `<pad>`, `</s>`, `<unk>`), the white space next to each cut is dropped (Python's
    `str.strip`), each stretch in between is encoded by SentencePiece on its own (so it
    gets its own "▁" prefix), and `<extra_id_k>` becomes `vocab_size - 1 - k`, where
    `vocab_size` = pieces + extra_ids. Text that is only white space gives no ids.
    seqio's own class adds "▁<extra_id_k>" pieces to the model instead, which find a
    sentinel only at a word start and encode the stretches as one text. No EOS here:
    `seqio.preprocessors.append_eos` adds it, as T5Tokenizer appends `</s>` (it does
    not append a second one after a text that ends with a written "</s>").

    `decode` gives T5Tokenizer's `decode(ids)` (sentinels and unk as `<extra_id_k>`
    and `<unk>`, a space after each, ends stripped, `clean_up_tokenization`) of the ids
    before the first EOS, with padding dropped where T5Tokenizer would print `<pad>`.

    Accepted layouts: any model with the pieces "<pad>", "</s>" and "<unk>", at any
    ids. `pad_id`, `eos_id` and `unk_id` are those pieces' ids, as T5Tokenizer looks
    them up (`piece_to_id`), not the ids the model's trainer reserved. T5's and mT5's
    spiece.model: pad 0, eos 1, unk 2. Chinese XLNet's, which LongLM ships: unk 0,
    "<s>" 1, eos 2, "<pad>" 5 (a control piece; its trainer reserved no pad id), with
    "<sep>" 4 and "<mask>" 6 (control pieces: written in text they are plain
    characters, as for T5Tokenizer). `pad_id` is only the piece's id: batches may be
    padded with anything, the masks say what is real, so an id 0 in the text (XLNet's
    unk) is a token like any other. A model without one of the three pieces is a
    ValueError naming the file.

    Known difference, from T5Tokenizer's `_convert_token_to_id`: a run of characters
    the model does not know that begins with "<extra_id_" is one unknown piece for
    SentencePiece; T5Tokenizer reads a sentinel number out of its text (or fails).
    A *piece* of the model that begins so is mapped as T5Tokenizer maps it.

    Tested against a transcription of transformers 4.6's code in
    tests/vocab/test_sentencepiece_vocab.py.
    """

    def __init__(self, sentencepiece_model_file: str, extra_ids: int = 100):
        path = sentencepiece_model_file  # local or, through tf.io.gfile, gs://...
        path = path if "://" in path else os.path.abspath(path)
        if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
            raise FileNotFoundError(f"SentencePiece model not found: {path}")
        super().__init__(path, extra_ids=extra_ids)
        self._tf_ops = self._encode_traced = None  # built on first use
        with tf.io.gfile.GFile(path, "rb") as f:
            self._model_bytes = f.read()
        try:
            self._check_special_pieces()
        except (RuntimeError, OSError) as e:  # sentencepiece's error for a bad file
            raise ValueError(f"{path}: not a SentencePiece model ({e})") from e

    def _check_special_pieces(self) -> None:
        """ValueError naming the file unless "<pad>", "</s>" and "<unk>" are pieces of it.

        T5Tokenizer takes its pad, eos and unk ids from those piece strings
        (`piece_to_id`), whatever ids the model was trained to reserve; a missing
        piece would silently become the model's unk id.
        """
        sp = self._segment_model
        for piece, role in zip(T5_SPECIAL_PIECES, ("pad", "eos", "unk"), strict=True):
            if sp.id_to_piece(sp.piece_to_id(piece)) != piece:
                raise ValueError(
                    f"{self.sentencepiece_model_file}: expected the piece {piece!r} "
                    f"(T5Tokenizer's {role} token), found none in its "
                    f"{sp.get_piece_size()} pieces"
                )

    @functools.cached_property
    def _segment_model(self):
        """The model file as is (no sentinel pieces): what T5Tokenizer encodes stretches with."""
        import sentencepiece

        return sentencepiece.SentencePieceProcessor(model_proto=self._model_bytes)

    @property
    def piece_size(self) -> int:
        """Pieces of the model file; the sentinels follow, `<extra_id_0>` last."""
        return self._segment_model.get_piece_size()

    # T5Tokenizer's ids: those of the pieces "<pad>", "</s>", "<unk>", not the ids the
    # model's trainer_spec reserves (XLNet's spiece.model reserves no pad id at all).
    @property
    def pad_id(self) -> int:
        return self.special_token_ids["<pad>"]

    @property
    def eos_id(self) -> int:
        return self.special_token_ids["</s>"]

    @property
    def unk_id(self) -> int:
        return self.special_token_ids["<unk>"]

    @property
    def bos_id(self) -> int | None:
        return None if self._segment_model.bos_id() < 0 else self._segment_model.bos_id()

    @property
    def _base_vocab_size(self) -> int:
        return self.piece_size + self.extra_ids

    def sentinel_id(self, k: int) -> int:
        """The id of `<extra_id_k>`: `vocab_size - 1 - k`."""
        if not 0 <= k < self.extra_ids:
            raise ValueError(f"no sentinel <extra_id_{k}>: extra_ids={self.extra_ids}")
        return self.vocab_size - 1 - k

    @functools.cached_property
    def tokens(self) -> Sequence[str]:
        """Token string of every id: the model's pieces, then `<extra_id_{extra_ids-1}>`...`_0>`."""
        pieces = [self._segment_model.id_to_piece(i) for i in range(self.piece_size)]
        return pieces + [SENTINEL_TOKEN.format(k) for k in reversed(range(self.extra_ids))]

    @functools.cached_property
    def special_token_ids(self) -> dict[str, int]:
        """Token string -> id of every token cut out of the text before SentencePiece."""
        ids = {piece: self._segment_model.piece_to_id(piece) for piece in T5_SPECIAL_PIECES}
        return ids | {SENTINEL_TOKEN.format(k): self.sentinel_id(k) for k in range(self.extra_ids)}

    @property
    def _ops(self) -> _T5Ops:
        if self._tf_ops is None:
            # init_scope: the resources are made eagerly even when first used inside a
            # tf.data map trace, so every pipeline shares them.
            with tf.init_scope():
                self._tf_ops = _T5Ops(self)
        return self._tf_ops

    def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
        """`_encode_ops`; a scalar or a vector through its traced function."""
        traced = self._traced_encoders().get(s.shape.rank)
        return self._encode_ops(s) if traced is None else traced(s)

    def _traced_encoders(self) -> dict[int, tf.types.experimental.GenericFunction]:
        """`_encode_ops` of one string and of a vector of strings, traced once each per
        vocabulary: a Python caller pays ~1 ms a call where running the op eagerly takes
        ~10, and a SeqIO pipeline calls the function instead of building the op's graph
        again in every `map` it traces (about 1 s of CPU time each)."""
        if self._encode_traced is None:
            self._ops  # noqa: B018 (made outside the trace)
            self._encode_traced = {
                rank: tf.function(
                    self._encode_ops, input_signature=[tf.TensorSpec(shape, tf.string)]
                )
                for rank, shape in ((0, []), (1, [None]))
            }
        return self._encode_traced

    def _encode_ops(self, s: tf.Tensor) -> tf.Tensor:
        """str [] -> int32 [num_tokens]; str [n] -> ragged int32 [n, None] (no EOS)."""
        ops = self._ops
        # regex_split stops at a NUL: it goes through as "\x01a" ("\x01" as "\x01b").
        escaped = tf.strings.regex_replace(
            tf.strings.regex_replace(s, r"\x01", "\x01b"), r"\x00", "\x01a"
        )
        parts = tf_text.regex_split(escaped, ops.cut, ops.cut)  # a scalar: a batch of one
        flat = tf.strings.regex_replace(parts.flat_values, r"\x01a", "\x00")
        flat = tf.strings.regex_replace(flat, r"\x01b", "\x01")
        is_special = tf.strings.regex_full_match(flat, ops.cut)
        is_blank = tf.strings.regex_full_match(flat, f"{python_space_class()}*")
        text = tf.where(is_special | is_blank, "", flat)
        piece_ids = ops.sentencepiece.tokenize(text)  # "" gives no ids
        if ops.piece_remap is not None:
            piece_ids = piece_ids.with_flat_values(
                tf.gather(ops.piece_remap, piece_ids.flat_values)
            )
        special = ops.special_table.lookup(tf.strings.regex_replace(flat, python_space_class(), ""))
        part_ids = _with_special_ids(piece_ids, is_special, special)
        ids = tf.RaggedTensor.from_row_splits(part_ids, parts.row_splits).merge_dims(1, 2)
        return ids.flat_values if s.shape.rank == 0 else ids

    def _encode(self, s: str) -> list[int]:
        return self._encode_tf(tf.constant(s)).numpy().tolist()

    def _decode(self, ids: Sequence[int]) -> str:
        texts, run = [], []
        dropped, piece_size, unk_id = (self.pad_id, self.eos_id), self.piece_size, self.unk_id
        for token_id in map(int, ids):
            if token_id in dropped:
                continue
            if token_id >= piece_size or token_id == unk_id:  # T5Tokenizer's special tokens
                texts.append(self._segment_model.decode_ids(run) + self.tokens[token_id] + " ")
                run = []
            else:
                run.append(token_id)
        texts.append(self._segment_model.decode_ids(run))
        return _clean_up_tokenization("".join(texts).strip())

    def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
        """int [L] -> str []; int [B, L] (dense or ragged) -> str [B]."""
        ops = self._ops
        rank = ids.shape.rank
        rows = (
            ids
            if isinstance(ids, tf.RaggedTensor)
            else tf.RaggedTensor.from_tensor(ids[None] if rank == 1 else ids)
        )
        rows = tf.ragged.boolean_mask(rows, (rows != self.pad_id) & (rows != self.eos_id))
        values, row_ids = rows.flat_values, rows.value_rowids()
        is_special = (values >= self.piece_size) | (values == self.unk_id)
        # A run of ordinary pieces is decoded as one text; each special token is a run.
        first_in_row = tf.range(tf.size(values, tf.int64)) == tf.gather(rows.row_splits, row_ids)
        after_special = tf.concat([[False], is_special], 0)[:-1]
        starts = first_in_row | is_special | after_special
        run_ids = tf.cumsum(tf.cast(starts, tf.int64)) - 1
        runs = tf.RaggedTensor.from_value_rowids(
            tf.where(is_special, self.pad_id, values),
            run_ids,
            nrows=tf.reduce_sum(tf.cast(starts, tf.int64)),
        )
        run_is_special = tf.boolean_mask(is_special, starts)
        special_text = tf.gather(ops.token_strings, tf.boolean_mask(values, starts)) + " "
        run_text = tf.where(run_is_special, special_text, ops.sentencepiece.detokenize(runs))
        texts = tf.RaggedTensor.from_value_rowids(
            run_text, tf.boolean_mask(row_ids, starts), nrows=rows.nrows()
        )
        text = tf.strings.reduce_join(texts, axis=1)
        space = python_space_class()
        text = tf.strings.regex_replace(text, f"^{space}+|{space}+$", "")
        for written, cleaned in _CLEAN_UP:
            text = tf.strings.regex_replace(text, _re2_literal(written), cleaned)
        return text[0] if rank == 1 else text

    def __getstate__(self):
        state = super().__getstate__()
        for name in ("_tf_ops", "_encode_traced", "_segment_model", "tokens", "special_token_ids"):
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._tf_ops = self._encode_traced = None

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, T5SentencePieceVocabulary)
            and self._model_bytes == other._model_bytes
            and self.extra_ids == other.extra_ids
        )

    def __hash__(self) -> int:
        return hash((hashlib.sha1(self._model_bytes).hexdigest(), self.extra_ids))


def special_id_differences(config, vocab: T5SentencePieceVocabulary) -> list[str]:
    """Where a T5 config's pad / eos ids are not the vocabulary's, one phrase each.

    config: a `cmrcx.models.t5.T5Config` (any object with pad_token_id, eos_token_id).
    T5's default ids (pad 0, eos 1) against LongLM's spiece.model give
    ["pad_token_id 0, the vocabulary's '<pad>' is 5", "eos_token_id 1, ... '</s>' is 2"].
    """
    ids = {"pad_token_id": ("<pad>", vocab.pad_id), "eos_token_id": ("</s>", vocab.eos_id)}
    return [
        f"{name} {getattr(config, name)}, the vocabulary's {piece!r} is {token_id}"
        for name, (piece, token_id) in ids.items()
        if getattr(config, name) != token_id
    ]


def _with_special_ids(
    piece_ids: tf.RaggedTensor, is_special: tf.Tensor, special_ids: tf.Tensor
) -> tf.RaggedTensor:
    """Each special part's row (empty: its text was "") becomes its one id.

    piece_ids: int32 [parts, None]; is_special: bool [parts]; special_ids: int32 [parts].
    Gathers rather than concatenating ragged rows, whose kernel logs a oneDNN error
    line on CPUs without AVX-512.
    """
    lengths = tf.where(is_special, tf.ones_like(piece_ids.row_lengths()), piece_ids.row_lengths())
    part_of = tf.repeat(tf.range(tf.size(lengths, tf.int64)), lengths)  # [ids]
    at_special = tf.gather(is_special, part_of)
    piece_index = tf.cumsum(tf.cast(~at_special, tf.int64)) - 1
    pieces = tf.concat([piece_ids.flat_values, [0]], 0)  # index -1 -> 0 must exist
    values = tf.where(
        at_special,
        tf.gather(special_ids, part_of),
        tf.gather(pieces, tf.maximum(piece_index, 0)),
    )
    return tf.RaggedTensor.from_row_lengths(values, lengths)


class _T5Ops:
    """The TF resources and patterns of a `T5SentencePieceVocabulary`."""

    def __init__(self, vocab: T5SentencePieceVocabulary):
        special_ids = vocab.special_token_ids
        space = python_space_class()
        numbers = "|".join(str(k) for k in range(vocab.extra_ids))
        tokens = "|".join(
            [*T5_SPECIAL_PIECES, f"<extra_id_(?:{numbers})>"] if numbers else T5_SPECIAL_PIECES
        )
        # A special token with the white space around it: a cut, kept as a part.
        self.cut = f"{space}*(?:{tokens}){space}*"
        self.special_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(special_ids)), tf.constant(list(special_ids.values()), tf.int32)
            ),
            default_value=vocab.unk_id,
        )
        self.sentencepiece = tf_text.SentencepieceTokenizer(model=vocab._model_bytes)
        self.token_strings = tf.constant(list(vocab.tokens))
        self.piece_remap = _sentinel_like_pieces(vocab)


def _sentinel_like_pieces(vocab: T5SentencePieceVocabulary) -> tf.Tensor | None:
    """id -> id map of the model's pieces, or None if no piece begins with "<extra_id_".

    T5Tokenizer's `_convert_token_to_id` gives such a piece `vocab_size - 1 - k`, k
    read from its text; a piece it cannot read (it would raise, or give a negative id)
    keeps its own id.
    """
    remap = list(range(vocab.piece_size))
    for token_id, piece in enumerate(vocab.tokens[: vocab.piece_size]):
        match = re.match(r"<extra_id_(\d+)>", piece)
        if match and int(match.group(1)) < vocab.vocab_size:
            remap[token_id] = vocab.vocab_size - 1 - int(match.group(1))
    return None if remap == list(range(vocab.piece_size)) else tf.constant(remap, tf.int32)


# transformers' `clean_up_tokenization` (tokenization_utils_base.py), in its order.
_CLEAN_UP = [(" " + end, end) for end in ".?!,"] + [(" ' ", "'")]
_CLEAN_UP += [(" " + end, end) for end in ("n't", "'m", "'s", "'ve", "'re")]


def _clean_up_tokenization(text: str) -> str:
    for written, cleaned in _CLEAN_UP:
        text = text.replace(written, cleaned)
    return text


def _re2_literal(text: str) -> str:
    """An RE2 pattern matching `text` literally."""
    return "".join(rf"\x{{{ord(char):X}}}" for char in text)
