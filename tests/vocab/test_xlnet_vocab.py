"""XLNet's SentencePiece vocabulary and the CLUE classification layout against transformers'
XLNetTokenizer: the same ids, and `a <sep> b <sep> <cls>` with token types 0/1/2, padded on
the left, as `tokenizer(a, b, padding="max_length")` gives them.

The SentencePiece model is the bundled cmrcx/data/xlnet_tiny/spiece.model (XLNet's
special pieces at XLNet's ids); XLNetTokenizer reads the same file.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tensorflow as tf

from cmrcx.benchmarks.windows import XLNET_TYPE_PAD
from cmrcx.common.paths import package_path
from cmrcx.tasks.clue import classification as clue_tasks
from cmrcx.vocab import layouts
from cmrcx.vocab.xlnet import XLNetVocabulary, encode_pieces, preprocess_text

SPIECE = package_path("data/xlnet_tiny/spiece.model")
# Corpus sentences (real pieces), white space, accents, full-width forms, quotes, digits.
TEXTS = [
    "雪狐在林子里等了一夜，天亮时它看见了灯笼。",
    "  钟表店的老板  说：“明天再来吧。”  ",
    "Café ``quoted'' text, ＡＢＣ１２３ and 2019,5",
    "渡船\t慢慢地\n靠岸了",
    "",
]


@pytest.fixture(scope="module")
def vocab() -> XLNetVocabulary:
    return XLNetVocabulary(SPIECE)


@pytest.fixture(scope="module")
def hf_tokenizer(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    directory = tmp_path_factory.mktemp("xlnet_tokenizer")
    shutil.copyfile(SPIECE, directory / "spiece.model")
    return transformers.XLNetTokenizer.from_pretrained(str(directory))


def test_special_ids_are_xlnets(vocab):
    assert (vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.pad_id) == (0, 3, 4, 5)
    assert vocab.vocab_size == 500 and vocab.eos_id is None
    assert layouts.vocabulary("xlnet", SPIECE, False) == vocab


def test_preprocess_text_is_xlnets():
    assert preprocess_text("  Café  ``ok''  ，") == 'Cafe "ok" ,'
    assert preprocess_text("ÀB", lower_case=True) == "ab"


def test_digit_comma_pieces_are_split_as_xlnet_splits_them():
    """zihangdai/xlnet prepro_utils.encode_pieces: "▁2019," -> "▁2019" ","; a piece
    without the word-start mark loses the one the re-encoding adds."""
    table = {"a 2019,": ["▁a", "▁2019,"], "2019": ["▁2019"]}
    assert encode_pieces(table.get, "a 2019,") == ["▁a", "▁2019", ","]
    table = {"xq9,": ["▁x", "q9,"], "q9": ["▁q", "9"]}
    assert encode_pieces(table.get, "xq9,") == ["▁x", "q", "9", ","]
    table = {"xq9,": ["▁x", "q9,"], "q9": ["▁", "q9"]}
    assert encode_pieces(table.get, "xq9,") == ["▁x", "q9", ","]


def test_ids_match_xlnet_tokenizer(vocab, hf_tokenizer):
    for text in TEXTS:
        want = hf_tokenizer.encode(text, add_special_tokens=False)
        assert vocab.encode(text) == want, text
        assert vocab.encode_tf(tf.constant(text)).numpy().tolist() == want, text
    batch = vocab.encode_tf(tf.constant(TEXTS)).to_list()
    assert batch == [hf_tokenizer.encode(t, add_special_tokens=False) for t in TEXTS]


def test_a_model_without_xlnets_pieces_is_refused():
    with pytest.raises(ValueError, match="expected the piece '<cls>'"):
        XLNetVocabulary(package_path("data/longlm_tiny/spiece.model"))


def _frame(vocab, pairs, max_length):
    dataset = tf.data.Dataset.from_tensor_slices(
        {
            "text_a": [a for a, _ in pairs],
            "text_b": [b for _, b in pairs],
            "label_index": np.zeros(len(pairs), np.int32),
            "id": [""] * len(pairs),
            "line_number": np.zeros(len(pairs), np.int32),
        }
    )
    dataset = clue_tasks.tokenize_pair(dataset, vocab)
    dataset = clue_tasks.classification_inputs(
        dataset, layout=layouts.XLNET, max_length=max_length,
        ids=layouts.XLNET.special_ids(vocab),
    )  # fmt: skip
    return list(dataset.as_numpy_iterator())


def test_pair_layout_matches_xlnet_tokenizer(vocab, hf_tokenizer):
    """Pairs, a single text (empty b), and a pair cut to fit (a much longer than b)."""
    pairs = [(TEXTS[0], TEXTS[1]), (TEXTS[3], ""), (TEXTS[0] * 3, "渡船")]
    for (a, b), framed in zip(pairs, _frame(vocab, pairs, 40), strict=True):
        want = hf_tokenizer(
            a,
            b or None,
            padding="max_length",
            truncation="longest_first",
            max_length=40,
            return_token_type_ids=True,
        )
        assert framed["input_ids"].tolist() == want["input_ids"], (a, b)
        assert framed["input_mask"].tolist() == want["attention_mask"], (a, b)
        # Padding's token type: 3 here (XLNetTokenizer's pad_token_type_id in transformers
        # 4), 0 in transformers 5, 4 in the CLUE baseline; the encoder ignores it.
        real = framed["input_mask"] == 1
        types = np.asarray(want["token_type_ids"])
        np.testing.assert_array_equal(framed["token_type_ids"][real], types[real])
        assert set(framed["token_type_ids"][~real]) <= {XLNET_TYPE_PAD}


def test_hand_written_layout(vocab):
    (framed,) = _frame(vocab, [("灯笼", "渡船")], 10)
    a, b = vocab.encode("灯笼"), vocab.encode("渡船")
    real = [*a, 4, *b, 4, 3]
    pad = 10 - len(real)
    assert framed["input_ids"].tolist() == [5] * pad + real
    assert framed["token_type_ids"].tolist() == [3] * pad + [0] * (len(a) + 1) + [1] * (
        len(b) + 1
    ) + [2]
    assert framed["input_mask"].tolist() == [0] * pad + [1] * len(real)
