"""Tests for the WordPiece vocabulary (`cmrcx.vocab.wordpiece.WordPieceVocabulary`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from cmrcx.vocab.wordpiece import WordPieceVocabulary, read_vocab_file

TOKENS = [
    "[PAD]",
    "[unused1]",
    "[unused2]",
    "[unused3]",
    "[unused4]",
    "[unused5]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "我",
    "爱",
    "你",
    "他",
    "笑",
    "了",
    "。",
    "，",
    ",",
    "!",
    "hello",
    "##llo",
    "he",
    "world",
]
ID = {token: i for i, token in enumerate(TOKENS)}
TEXTS = [
    "我爱你。",
    "HÉLLO, world!",
    "他[unused3]笑了",
    "hellollo 猫 xyz",
    "",
    "[unused1][unused2]",
]


def _write_vocab(path: Path, tokens: list[str] = TOKENS) -> str:
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


# One file and one vocabulary for the module: its TF table and traced encoder are built
# once (a test that needs a fresh vocabulary makes its own).
@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _write_vocab(tmp_path_factory.mktemp("wordpiece") / "vocab.txt")


@pytest.fixture(scope="module")
def vocab(vocab_file: str) -> WordPieceVocabulary:
    return WordPieceVocabulary(vocab_file)


def test_special_ids(vocab: WordPieceVocabulary, vocab_file: str) -> None:
    """Special ids come from the file's line numbers; no EOS; size = number of lines."""
    assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id) == (0, 6, 7, 8)
    assert vocab.eos_id is None
    assert vocab.vocab_size == len(TOKENS)
    assert list(vocab.tokens) == TOKENS
    assert vocab.token_to_id("[unused3]") == 3
    assert vocab.vocab_file == vocab_file


def test_cjk_split_per_character(vocab: WordPieceVocabulary) -> None:
    """Every CJK character (and CJK punctuation) is its own token, with or without spaces."""
    expected = [ID["我"], ID["爱"], ID["你"], ID["。"]]
    assert vocab.encode("我爱你。") == expected
    assert vocab.encode("我 爱  你。") == expected


def test_lower_case_and_accent_stripping(vocab: WordPieceVocabulary) -> None:
    """Upper case and accents are folded away, then WordPiece splits greedily."""
    assert vocab.encode("HÉLLO") == [ID["hello"]]
    assert vocab.encode("HÉLLOLLO") == [ID["hello"], ID["##llo"]]
    assert vocab.encode("Héllo, World!") == [ID["hello"], ID[","], ID["world"], ID["!"]]


def test_lower_case_false_keeps_case(vocab_file: str) -> None:
    """lower_case=False leaves "HELLO" unknown (the vocab is lower-case)."""
    cased = WordPieceVocabulary(vocab_file, lower_case=False)
    assert cased.encode("HELLO") == [cased.unk_id]
    assert cased.encode("hello") == [ID["hello"]]


def test_unused_markers_kept_whole(vocab: WordPieceVocabulary) -> None:
    """`[unusedN]` stays one token even glued to Chinese text or to another marker."""
    assert vocab.encode("他[unused3]笑了") == [ID["他"], ID["[unused3]"], ID["笑"], ID["了"]]
    assert vocab.encode("我[unused1]") == [ID["我"], ID["[unused1]"]]
    assert vocab.encode("[unused1][unused2]。") == [ID["[unused1]"], ID["[unused2]"], ID["。"]]


def test_unknown_maps_to_unk(vocab: WordPieceVocabulary) -> None:
    """Out-of-vocabulary characters and words become [UNK], one per word or CJK char."""
    unk = vocab.unk_id
    assert vocab.encode("猫") == [unk]
    assert vocab.encode("xyz") == [unk]
    assert vocab.encode("我猫你") == [ID["我"], unk, ID["你"]]
    assert vocab.encode("[unused9]") == [unk]  # not in this vocabulary


def test_python_encode_equals_encode_tf_eagerly(vocab: WordPieceVocabulary) -> None:
    """`encode` and eager `encode_tf` give the same int32 ids."""
    for text in TEXTS:
        ids = vocab.encode_tf(tf.constant(text))
        assert ids.dtype == tf.int32
        assert ids.shape.rank == 1
        assert ids.numpy().tolist() == vocab.encode(text), text


def test_encode_tf_inside_tf_data_map_first(vocab_file: str) -> None:
    """First use inside a tf.data map trace works, and later eager use shares the table."""
    vocab = WordPieceVocabulary(vocab_file)  # fresh: no table yet
    dataset = tf.data.Dataset.from_tensor_slices(TEXTS).map(vocab.encode_tf)
    from_map = [ids.tolist() for ids in dataset.as_numpy_iterator()]
    assert from_map == [vocab.encode(text) for text in TEXTS]
    # A second pipeline with the same vocabulary, then a tf.function.
    again = tf.data.Dataset.from_tensor_slices(TEXTS).map(vocab.encode_tf)
    assert [ids.tolist() for ids in again.as_numpy_iterator()] == from_map
    traced = tf.function(vocab.encode_tf)
    assert [traced(tf.constant(t)).numpy().tolist() for t in TEXTS] == from_map


def test_encode_tf_batched_is_ragged(vocab: WordPieceVocabulary) -> None:
    """A 1-D string tensor gives a RaggedTensor [batch, None] of int32 ids."""
    ids = vocab.encode_tf(tf.constant(TEXTS))
    assert isinstance(ids, tf.RaggedTensor)
    assert ids.dtype == tf.int32
    assert ids.shape.rank == 2
    assert ids.to_list() == [vocab.encode(text) for text in TEXTS]
    # Slicing candidates to a cap, as the task does, keeps the rows aligned.
    assert ids[:, :2].to_list() == [vocab.encode(text)[:2] for text in TEXTS]


def test_decode_round_trip_cjk(vocab: WordPieceVocabulary) -> None:
    """Decoding joins tokens with spaces and glues `##` pieces; ids survive a round trip."""
    ids = vocab.encode("他[unused3]笑了。")
    text = vocab.decode(ids)
    assert text == "他 [unused3] 笑 了 。"
    assert vocab.encode(text) == ids
    assert vocab.decode(vocab.encode("HÉLLOLLO")) == "hellollo"
    assert vocab.decode_tf(tf.constant(ids)).numpy().decode("utf-8") == text
    batch = vocab.decode_tf(tf.constant([vocab.encode("我爱你"), vocab.encode("他笑了")]))
    assert [t.decode("utf-8") for t in batch.numpy()] == ["我 爱 你", "他 笑 了"]


def test_missing_vocab_file_names_it(tmp_path: Path) -> None:
    """A missing file: FileNotFoundError naming the path."""
    path = str(tmp_path / "nowhere" / "vocab.txt")
    with pytest.raises(FileNotFoundError, match="nowhere/vocab.txt"):
        WordPieceVocabulary(path)


@pytest.mark.parametrize("missing", ["[CLS]", "[SEP]", "[PAD]", "[UNK]"])
def test_missing_special_token_names_file(tmp_path: Path, missing: str) -> None:
    """A vocabulary without a special token: ValueError naming the file and the token."""
    path = _write_vocab(tmp_path / "bad_vocab.txt", [t for t in TOKENS if t != missing])
    with pytest.raises(ValueError, match=r"bad_vocab\.txt.*no \[" + missing[1:-1] + r"\] token"):
        WordPieceVocabulary(path)


def test_empty_vocab_file(tmp_path: Path) -> None:
    """An empty (or blank-lines-only) file is rejected, naming the file."""
    path = tmp_path / "empty_vocab.txt"
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty_vocab\.txt: the vocabulary is empty"):
        read_vocab_file(str(path))


def test_token_to_id_unknown_names_file(vocab: WordPieceVocabulary) -> None:
    """Asking for a token the file lacks: KeyError naming the file and token."""
    with pytest.raises(KeyError, match=r"vocab\.txt.*\[unused6\]"):
        vocab.token_to_id("[unused6]")


def test_crlf_vocab_file(tmp_path: Path) -> None:
    """Windows line endings do not leak into the tokens."""
    path = tmp_path / "crlf.txt"
    path.write_bytes(("\r\n".join(TOKENS) + "\r\n").encode("utf-8"))
    assert read_vocab_file(str(path)) == TOKENS


def test_equality_and_hash_by_content(tmp_path: Path, vocab: WordPieceVocabulary) -> None:
    """Same tokens (any path) -> equal, same hash; other tokens or casing -> not equal."""
    copy = WordPieceVocabulary(_write_vocab(tmp_path / "copy.txt"))
    assert copy == vocab
    assert hash(copy) == hash(vocab)
    assert len({vocab, copy}) == 1
    other = WordPieceVocabulary(_write_vocab(tmp_path / "other.txt", [*TOKENS, "猫"]))
    assert other != vocab
    assert WordPieceVocabulary(vocab.vocab_file, lower_case=False) != vocab
    assert vocab != "not a vocabulary"


def test_duplicate_token_names_file_and_lines(tmp_path: Path) -> None:
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n我\n你\n我\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt: line 7: token '我' repeats line 5"):
        WordPieceVocabulary(str(path))
