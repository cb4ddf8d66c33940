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
    def eos_id(self) -> int | None:
        return None  # sequences end with <sep> <cls>, which the task layouts add

    @property
    def _base_vocab_size(self) -> int:
        return self._model.get_piece_size()

    def pieces(self, text: str) -> list[str]:
        """The pieces of `text` (preprocessed first)."""
        text = preprocess_text(text, self.lower_case)
        return encode_pieces(functools.partial(self._model.encode, out_type=str), text)

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
