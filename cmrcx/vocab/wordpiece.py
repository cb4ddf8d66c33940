r"""seqio vocabulary for the BERT family: WordPiece from a `vocab.txt`.

(SentencePiece with T5 sentinels, for LongLM and mT5, is `cmrcx.vocab.sentencepiece`.)

Tokenization is a TensorFlow op (tf.strings and tensorflow-text's `regex_split` and
`WordpieceTokenizer`, the two halves of tf_text's `BertTokenizer`), so it runs
inside the SeqIO pipeline; the Python `encode` calls the same op eagerly, so the two
can never disagree. Chinese BERT vocabularies split every CJK character into its own
token and keep `[unusedN]` markers whole, which is how CMRC 2019 blanks reach the
model.

The ids are token-for-token those of Hugging Face's Python BERT tokenizer
(`do_lower_case=True, tokenize_chinese_chars=True`, the vocabulary's `[unusedN]` as
special tokens), on every code point and on thousands of mixed texts; see
tests/vocab/test_tokenizer_parity.py. tf_text's `BertTokenizer(lower_case=True)` does not
give them, so `normalize_text` redoes BERT's clean-up with TF ops:

* drop NUL, U+FFFD and every "other" character (Cc Cf Co Cs Cn, as this Python's
  `unicodedata` sees them) except tab/newline/CR, where tf_text turns Cc/Cf into
  spaces (so "ab\u200bc" is one word) and keeps unassigned code points;
* turn every Unicode space (Z*: U+3000, U+00A0, U+2028, ...) into " ": tf_text
  splits on RE2's `\s`, which is ASCII only;
* NFC, then lower-case like `str.lower()` (ICU `toLower`: "ß" stays "ß", final
  sigma becomes "ς"), then NFD and drop Mn marks. tf_text uses ICU NFKC case
  folding, which also turns full-width "，" into ",", "２０１９" into "2019",
  "ß" into "ss" and "①" into "1";
* keep a marker whole where HF does: `[unusedN]` written exactly so, anywhere, or
  a whole word that becomes one after clean-up and lower-casing ("[UNUSED3]"
  alone, but "a[UNUSED3]" is text);
* a word of more than 100 characters is one [UNK]: tf_text counts bytes, so a
  60-letter Cyrillic word (120 bytes) would have become [UNK].

Known differences, pinned by tests: literal `[CLS]`, `[SEP]`, `[MASK]`, `[PAD]`,
`[UNK]` in the text are text here (HF turns them into the special tokens), and a
marker the vocabulary lacks ("[unused100]") is one [UNK] (HF splits it).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import sys
import unicodedata
from collections.abc import Iterable, Sequence

import seqio
import tensorflow as tf
import tensorflow_text as tf_text

UNK_TOKEN = "[UNK]"
# BERT's `max_input_chars_per_word`: longer words become a single [UNK].
MAX_CHARS_PER_WORD = 100

# BERT maps Zs and tab/newline/CR to " ", then `str.split()` also splits on Zl/Zp.
_SPACE_CHARS = r"[\p{Z}\t\n\r]"
# A kept marker `[unusedN]` travels through normalization as \x01N\x02: BERT drops
# both control characters (so they are removed from the input first), and case
# mapping cannot produce the form, unlike "[unused3]" from "[UNUSED3]".
_OPEN, _CLOSE = "\x01", "\x02"
_MARKER = r"\[unused(\d+)\]"
_PROTECTED = _OPEN + r"\1" + _CLOSE
_PROTECTED_MARKER = _OPEN + r"(\d+)" + _CLOSE
# BERT's punctuation: all non-alphanumeric printable ASCII, plus Unicode P*.
_PUNCTUATION = r"[!-/:-@\[-`{-~\p{P}]"
# BERT's "Chinese character" blocks (CJK Unified Ideographs, extensions A-E,
# compatibility ideographs); each is a word of its own.
_CJK = (
    r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
    r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]"
)
_KEPT_DELIMITERS = rf"{_PROTECTED_MARKER}|{_PUNCTUATION}|{_CJK}"


@functools.cache
def dropped_chars_class(keep: str = "\t\n\r") -> str:
    r"""RE2 class of the characters BERT's `_clean_text` drops, per this Python.

    That is NUL, U+FFFD and every character whose `unicodedata` category is C*
    (Cc Cf Co Cs Cn) except those in `keep`. Taken from Python's tables rather than
    RE2's \p{C}: RE2 has no \p{Cn}, and TF's RE2 knows newer Unicode than Python
    3.11 (Unicode 14), so e.g. CJK Extension H (Unicode 15) would be letters to RE2
    but unassigned, hence dropped, to the reference tokenizer. ~0.3 s, once.
    """
    kept = {ord(char) for char in keep}
    categories = map(unicodedata.category, map(chr, range(sys.maxunicode + 1)))
    return _re2_class(
        (category[0] == "C" and code not in kept) or code == 0xFFFD
        for code, category in enumerate(categories)
    )


@functools.cache
def python_space_class() -> str:
    r"""RE2 class of the characters Python's `str.strip()` / `str.isspace()` take as space.

    RE2's `\s` is ASCII only; Python's also has U+3000, U+00A0, U+0085, U+001C-U+001F, ...
    """
    return _re2_class(chr(code).isspace() for code in range(sys.maxunicode + 1))


def _re2_class(flags: Iterable[bool]) -> str:
    """RE2 character class of the code points whose flag (one per code point, from 0) is set."""
    ranges, start = [], 0
    for is_member, run in itertools.groupby(flags):
        end = start + sum(1 for _ in run)
        if is_member:
            ranges.append(rf"\x{{{start:X}}}-\x{{{end - 1:X}}}")
        start = end
    return "[" + "".join(ranges) + "]"


def normalize_text(text: tf.Tensor, *, lower_case: bool) -> tf.Tensor:
    r"""BERT's text clean-up and case mapping as TF ops, elementwise on a string tensor.

    A marker `[unusedN]` comes out as `\x01N\x02` (see `split_words`) where Hugging
    Face's tokenizer keeps it whole: written exactly so anywhere (its added-token
    trie, on the raw text), or as a whole word after clean-up and case mapping (its
    `never_split` check), e.g. "[UNUSED3]" alone but not "a[UNUSED3]".
    """
    text = tf.strings.regex_replace(text, f"[{_OPEN}{_CLOSE}]", "")
    text = tf.strings.regex_replace(text, _MARKER, _PROTECTED)
    text = tf.strings.regex_replace(text, dropped_chars_class(f"\t\n\r{_OPEN}{_CLOSE}"), "")
    text = tf.strings.regex_replace(text, _SPACE_CHARS, " ")
    text = tf_text.normalize_utf8(text, "NFC")
    if lower_case:
        # ASCII first: ICU's `toLower` follows the process locale, and under a
        # Turkish locale would map "I" to dotless "ı"; Python's lower() never does.
        text = tf.strings.lower(text)
        text = tf.strings.lower(text, encoding="utf-8")
        text = tf_text.normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, r"\p{Mn}", "")
    # A whole word: between spaces, CJK characters (BERT puts spaces around them
    # first), kept markers or the ends. A match consumes the edge after it, which
    # the next marker may need as its edge before: hence twice.
    edge = f"[ {_OPEN}{_CLOSE}]|{_CJK}"
    whole_word = rf"(^|{edge}){_MARKER}({edge}|$)"
    for _ in range(2):
        text = tf.strings.regex_replace(text, whole_word, rf"\1{_OPEN}\2{_CLOSE}\3")
    return text


def split_words(text: tf.Tensor) -> tf.RaggedTensor:
    """`normalize_text` output -> words [..., words]: BERT's basic tokenization.

    Splits on whitespace, and around every punctuation character, CJK character and
    protected marker, which come out as words of their own (markers as `[unusedN]`).
    """
    words = tf_text.regex_split(text, rf"\s+|{_KEPT_DELIMITERS}", _KEPT_DELIMITERS)
    markers = tf.strings.regex_replace(words.flat_values, _PROTECTED_MARKER, r"[unused\1]")
    return words.with_flat_values(markers)


def read_vocab_file(path: str) -> list[str]:
    """Returns the tokens of a BERT `vocab.txt`, one per line (line number = id)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"vocabulary file not found: {path}")
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n").rstrip("\r") for line in f]
    while tokens and not tokens[-1]:
        tokens.pop()
    if not tokens:
        raise ValueError(f"{path}: the vocabulary is empty")
    first_line = {}
    for line, token in enumerate(tokens, start=1):
        if token in first_line:
            raise ValueError(
                f"{path}: line {line}: token {token!r} repeats line {first_line[token]}"
            )
        first_line[token] = line
    for name in ("[PAD]", "[UNK]", "[CLS]", "[SEP]"):
        if name not in tokens:
            raise ValueError(f"{path}: the vocabulary has no {name} token")
    return tokens


class WordPieceVocabulary(seqio.Vocabulary):
    """BERT WordPiece vocabulary (`vocab.txt`), lower-cased like the Chinese BERTs.

    `encode("我爱[unused1]")` gives the ids of `我`, `爱`, `[unused1]`. No EOS: BERT
    inputs are framed by the task (`[CLS] a [SEP] b [SEP]`), not the vocabulary.
    """

    def __init__(self, vocab_file: str, lower_case: bool = True):
        self._vocab_file = os.path.abspath(vocab_file)
        self._lower_case = lower_case
        self._tokens = read_vocab_file(self._vocab_file)
        self._token_ids = {token: i for i, token in enumerate(self._tokens)}
        super().__init__(extra_ids=0)

    @property
    def vocab_file(self) -> str:
        return self._vocab_file

    @property
    def tokens(self) -> Sequence[str]:
        return self._tokens

    def token_to_id(self, token: str) -> int:
        """The id of one vocabulary entry; KeyError naming the file if absent."""
        if token not in self._token_ids:
            raise KeyError(f"{self._vocab_file}: no token {token!r} in the vocabulary")
        return self._token_ids[token]

    @property
    def pad_id(self) -> int:
        return self._token_ids["[PAD]"]

    @property
    def cls_id(self) -> int:
        return self._token_ids["[CLS]"]

    @property
    def sep_id(self) -> int:
        return self._token_ids["[SEP]"]

    @property
    def unk_id(self) -> int:
        return self._token_ids["[UNK]"]

    @property
    def eos_id(self) -> int | None:
        return None

    @property
    def _base_vocab_size(self) -> int:
        return len(self._tokens)

    @functools.cached_property
    def _table(self) -> tf.lookup.StaticHashTable:
        # init_scope: the table is created eagerly even when first used inside a
        # tf.data map trace, so every pipeline shares one table.
        with tf.init_scope():
            return tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(self._tokens),
                    tf.range(len(self._tokens), dtype=tf.int64),
                ),
                default_value=self.unk_id,
            )

    @functools.cached_property
    def _wordpiece(self) -> tf_text.WordpieceTokenizer:
        # The limit is in characters (as in BERT), enforced in `_encode_tf`; tf_text
        # counts bytes, so give it room for 100 four-byte characters.
        return tf_text.WordpieceTokenizer(
            self._table,
            max_bytes_per_word=4 * MAX_CHARS_PER_WORD,
            token_out_type=tf.int32,
            unknown_token=UNK_TOKEN,
        )

    def _words_tf(self, s: tf.Tensor) -> tf.RaggedTensor:
        """str [...] -> ragged str [..., words]: the words WordPiece will split."""
        words = split_words(normalize_text(s, lower_case=self._lower_case))
        flat = words.flat_values
        # BERT maps a word of more than 100 characters to one [UNK]; a marker the
        # vocabulary lacks is one [UNK] too, not WordPiece pieces of "[unused100]".
        too_long = tf.strings.length(flat, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
        is_marker = tf.strings.regex_full_match(flat, _MARKER)
        unknown = too_long | (is_marker & tf.equal(self._table.lookup(flat), self.unk_id))
        return words.with_flat_values(tf.where(unknown, UNK_TOKEN, flat))

    def _encode_ops(self, s: tf.Tensor) -> tf.Tensor:
        """str [] -> int32 [num_tokens]; str [n] -> ragged int32 [n, None]."""
        tokens = self._wordpiece.tokenize(self._words_tf(s)).merge_dims(-2, -1)
        if s.shape.rank == 0:  # regex_split gives a scalar a batch of one
            return tokens.flat_values
        return tokens

    def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
        """`_encode_ops`; a scalar or a vector through its traced function (`_traced`)."""
        traced = self._traced.get(s.shape.rank)
        return self._encode_ops(s) if traced is None else traced(s)

    @functools.cached_property
    def _traced(self) -> dict[int, tf.types.experimental.GenericFunction]:
        """`_encode_ops` of one string and of a vector of strings as traced functions, one
        trace each per vocabulary. A Python caller (ChID's and C3's examples tokenize each
        text alone) pays one function call, not the ~40 eager ops' dispatch (about 20
        times slower on a CPU); a SeqIO pipeline calls the function instead of building
        its hundreds of ops again in every `map` it traces (about 1 s of CPU time a
        `get_dataset` of a CMRC 2019 task, which encodes twice)."""
        self._table, self._wordpiece  # noqa: B018 (made outside the trace)
        return {
            rank: tf.function(self._encode_ops, input_signature=[tf.TensorSpec(shape, tf.string)])
            for rank, shape in ((0, []), (1, [None]))
        }

    def _encode(self, s: str) -> list[int]:
        return self._encode_tf(tf.constant(s)).numpy().tolist()

    def _decode(self, ids: Sequence[int]) -> str:
        pieces = [self._tokens[i] for i in ids if 0 <= i < len(self._tokens)]
        return " ".join(pieces).replace(" ##", "")

    def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
        pieces = tf.gather(tf.constant(self._tokens), ids)
        joined = tf.strings.reduce_join(pieces, axis=-1, separator=" ")
        return tf.strings.regex_replace(joined, " ##", "")

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, WordPieceVocabulary)
            and self._fingerprint == other._fingerprint
            and self._lower_case == other._lower_case
        )

    def __hash__(self) -> int:
        return hash(self._fingerprint)

    @functools.cached_property
    def _fingerprint(self) -> str:
        return hashlib.sha1("\n".join(self._tokens).encode("utf-8")).hexdigest()
