"""seqio vocabulary for XLNet: SentencePiece with XLNet's text preprocessing.

The ids are those of the XLNet code the CLUE baseline runs (CLUEbenchmark/CLUE
baselines/models/xlnet/, zihangdai/xlnet's `prepro_utils.preprocess_text` and
`encode_ids`), which transformers' XLNetTokenizer reproduces:

* `preprocess_text`: white space runs become one space and the ends are stripped
  (remove_space), "``" and "''" become '"', NFKD then every combining mark dropped
  (keep_accents False), lower-cased only when asked (`lower_case`; the Chinese release
  is cased: CLUE's run scripts pass --uncased=False);
* SentencePiece pieces, except that a piece ending in a digit and a comma ("9,") is
  encoded again without the comma, then the comma follows (`encode_pieces`);
* each piece's id (a piece the model lacks is `<unk>`, 0).

Special pieces are looked up by name (`<cls>`, `<sep>`, `<pad>`, `<unk>`): Chinese XLNet's
spiece.model has XLNet's ids, `<unk>` 0, `<s>` 1, `</s>` 2, `<cls>` 3, `<sep>` 4, `<pad>` 5,
`<mask>` 6, `<eod>` 7, `<eop>` 8 (zihangdai/xlnet data_utils.py `special_symbols`). A
model without `<cls>`, `<sep>` or `<pad>` is a ValueError naming the file. The text is
never searched for special tokens: "<sep>" written in it is text.

Known difference from transformers 5's XLNetTokenizer (a `tokenizers` re-implementation):
it has no digit-comma rule, so a vocabulary with pieces such as "9," splits such
numbers differently there. tests/vocab/test_xlnet_vocab.py compares both on texts
without such pieces.
"""

from __future__ import annotations

import functools
import hashlib
import os
import unicodedata
from collections.abc import Sequence

import seqio
import tensorflow as tf

SPIECE_UNDERLINE = "\u2581"
SPECIAL_PIECES = ("<cls>", "<sep>", "<pad>", "<unk>")


def preprocess_text(text: str, lower_case: bool = False) -> str:
    """XLNet's `preprocess_text` (remove_space, keep_accents False).

    >>> preprocess_text("  Café  ``ok''  ，")
    'Cafe "ok" ,'
    """
    text = " ".join(text.strip().split())
    text = text.replace("``", '"').replace("''", '"')
    text = unicodedata.normalize("NFKD", text)
    text = "".join(char for char in text if not unicodedata.combining(char))
    return text.lower() if lower_case else text


def encode_pieces(encode_as_pieces, text: str) -> list[str]:
    """XLNet's `encode_pieces`: `encode_as_pieces(text)` with the digit-comma rule.

    A piece like "▁2019," becomes the pieces of "2019" (without the word-start mark the
    re-encoding adds where the piece had none) and then ",".
    """
    pieces = []
    for piece in encode_as_pieces(text):
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            again = encode_as_pieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
            if piece[0] != SPIECE_UNDERLINE and again and again[0][0] == SPIECE_UNDERLINE:
                again = again[1:] if len(again[0]) == 1 else [again[0][1:], *again[1:]]
            pieces.extend([*again, piece[-1]])
        else:
            pieces.append(piece)
    return pieces


def preprocess_with_origins(
    text: str, lower_case: bool = False
) -> tuple[str, list[int], list[int]]:
    """`preprocess_text` and, for each character of its result, the characters
    ``text[start:end]`` it comes from: a collapsed white space run, a '"' from "``" or
    "''" (two characters), the character an NFKD expansion comes from.

    >>> preprocess_with_origins("  a  ``b")
    ('a "b', [2, 3, 5, 7], [3, 5, 7, 8])
    """
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    space = -1  # where the pending white space run starts (-1: none)
    for i, char in enumerate(text):
        if char.isspace():
            space = i if space < 0 else space
            continue
        if space >= 0 and chars:
            chars.append(" ")
            starts.append(space)
            ends.append(i)
        space = -1
        if char in "`'" and chars and chars[-1] == char and ends[-1] == i:
            chars[-1], ends[-1] = '"', i + 1
            continue
        for part in unicodedata.normalize("NFKD", char):
            if not unicodedata.combining(part):
                chars.append(part)
                starts.append(i)
                ends.append(i + 1)
    if lower_case:
        lowered = "".join(chars).lower()
        if len(lowered) != len(chars):  # a character lower-cased to several
            counts = [len(char.lower()) for char in chars]
            starts = [s for s, n in zip(starts, counts, strict=True) for _ in range(n)]
            ends = [e for e, n in zip(ends, counts, strict=True) for _ in range(n)]
        chars = list(lowered)
    return "".join(chars), starts, ends


class XLNetVocabulary(seqio.Vocabulary):
    """A spiece.model read as XLNet reads it (see the module docstring); no EOS, no sentinels."""

    def __init__(self, sentencepiece_model_file: str, lower_case: bool = False):
        path = os.path.abspath(sentencepiece_model_file)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"SentencePiece model not found: {path}")
        with open(path, "rb") as f:
            self._model_bytes = f.read()
        self._path, self.lower_case = path, lower_case
        try:
            pieces = self._model.get_piece_size()
        except (RuntimeError, OSError) as error:
            raise ValueError(f"{path}: not a SentencePiece model ({error})") from error
        for piece in SPECIAL_PIECES:
            if self._model.id_to_piece(self._model.piece_to_id(piece)) != piece:
                raise ValueError(
                    f"{path}: expected the piece {piece!r} (XLNet's), found none in its "
                    f"{pieces} pieces"
                )
        super().__init__(extra_ids=0)

    @functools.cached_property
    def _model(self):
        import sentencepiece

        try:
            return sentencepiece.SentencePieceProcessor(model_proto=self._model_bytes)
        except (RuntimeError, OSError) as error:
            raise ValueError(f"{self._path}: not a SentencePiece model ({error})") from error

    @property
    def sentencepiece_model_file(self) -> str:
        return self._path

    @functools.cached_property
    def tokens(self) -> Sequence[str]:
        """The piece of every id."""
        return [self._model.id_to_piece(i) for i in range(self._model.get_piece_size())]

    def _special(self, piece: str) -> int:
        return self._model.piece_to_id(piece)

    @property
    def cls_id(self) -> int:
        return self._special("<cls>")

    @property
    def sep_id(self) -> int:
        return self._special("<sep>")

    @property
    def pad_id(self) -> int:
        return self._special("<pad>")

    @property
    def unk_id(self) -> int:
        return self._special("<unk>")

    @property
    def mask_id(self) -> int:
        """`<mask>` (6 in XLNet's models); the model's `<unk>` if it has none."""
        return self._special("<mask>")

    @property
    def eos_id(self) -> int | None:
        return None  # sequences end with <sep> <cls>, which the task layouts add

    @property
    def _base_vocab_size(self) -> int:
        return self._model.get_piece_size()

    def pieces(self, text: str) -> list[str]:
        """The pieces of `text` (preprocessed first)."""
        text = preprocess_text(text, self.lower_case)
        return encode_pieces(functools.partial(self._model.encode, out_type=str), text)

    def pieces_with_offsets(self, text: str) -> list[tuple[int, int, int]]:
        """(id, start, end) of each piece of `text`: the piece covers ``text[start:end]``,
        the original characters (before `preprocess_text`) its characters come from.

        The ids are `encode`'s. A piece without characters of its own (a lone "▁" at
        the start) has start == end, at the next piece's start. From SentencePiece's
        byte offsets on the preprocessed text (`preprocess_with_origins` maps them back);
        the pieces of a digit-comma split (`encode_pieces`) share their piece's range,
        the comma has its own.
        """
        clean, starts, ends = preprocess_with_origins(text, self.lower_case)
        if clean != preprocess_text(text, self.lower_case):
            raise ValueError(f"preprocess_with_origins differs from preprocess_text on {text!r}")
        proto = self._model.encode(clean, out_type="proto")
        byte_to_char = [i for i, char in enumerate(clean) for _ in char.encode("utf-8")]
        byte_to_char.append(len(clean))
        ranges = []  # (piece, start, end) in `clean`'s characters
        for piece in proto.pieces:
            begin, end = byte_to_char[piece.begin], byte_to_char[piece.end]
            name = piece.piece
            # `encode_pieces`' digit-comma rule on this one piece: its parts, then ",".
            parts = encode_pieces(
                lambda t, name=name: [name] if t == name else self._model.encode(t, out_type=str),
                name,
            )
            if len(parts) == 1:
                ranges.append((name, begin, end))
            else:
                comma = max(begin, end - 1)
                ranges.extend((part, begin, comma) for part in parts[:-1])
                ranges.append((parts[-1], comma, end))

        def original(begin: int, end: int) -> tuple[int, int]:
            if begin >= end:
                at = starts[begin] if begin < len(starts) else len(text)
                return at, at
            return starts[begin], ends[end - 1]

        out = []
        for piece, begin, end in ranges:
            out.append((self._model.piece_to_id(piece), *original(begin, end)))
        return out

    def _encode(self, s: str) -> list[int]:
        return [self._model.piece_to_id(piece) for piece in self.pieces(s)]

    def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
        """str [] -> int32 [num_tokens]; str [n] -> ragged int32 [n, None] (Python inside)."""

        def encode_all(texts):
            ids = [self._encode(t.decode("utf-8")) for t in texts.numpy().reshape(-1)]
            lengths = [len(row) for row in ids]
            return tf.constant(sum(ids, []), tf.int32), tf.constant(lengths, tf.int64)

        flat, lengths = tf.py_function(encode_all, [tf.reshape(s, [-1])], (tf.int32, tf.int64))
        flat.set_shape([None])
        lengths.set_shape([None])
        ragged = tf.RaggedTensor.from_row_lengths(flat, lengths)
        return ragged.flat_values if s.shape.rank == 0 else ragged

    def _decode(self, ids: Sequence[int]) -> str:
        specials = {self.cls_id, self.sep_id, self.pad_id}
        return self._model.decode([int(i) for i in ids if int(i) not in specials])

    def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
        def decode_all(rows):
            return tf.constant([self._decode(row) for row in rows.numpy().tolist()])

        rank = ids.shape.rank
        rows = ids[None] if rank == 1 else ids
        text = tf.py_function(decode_all, [rows], tf.string)
        return text[0] if rank == 1 else text

    def __getstate__(self):
        state = dict(self.__dict__)
        for name in ("_model", "tokens"):
            state.pop(name, None)
        return state

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, XLNetVocabulary)
            and self._model_bytes == other._model_bytes
            and self.lower_case == other.lower_case
        )

    def __hash__(self) -> int:
        return hash((hashlib.sha1(self._model_bytes).hexdigest(), self.lower_case))
