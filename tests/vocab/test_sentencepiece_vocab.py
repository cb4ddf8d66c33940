"""`T5SentencePieceVocabulary` (LongLM / mT5) against transformers 4.6's slow T5Tokenizer.

LongLM's authors tokenize with transformers 4.6's SentencePiece `T5Tokenizer`
(thu-coai/LOT-LongLM README "Model Loading" and baselines/generation/gen.py). The
installed transformers 5 has only the `tokenizers`-backed T5Tokenizer, so the
reference here, `T5Tokenizer46`, transcribes the code of the 4.6.0 wheel that the
LongLM paths run through (line numbers of that wheel's files below). It was checked
once against the 4.6.0 code itself, imported from the unpacked wheel: same ids and
decode on these texts and 3,000 more. transformers 5's T5Tokenizer differs on 23 of
these 418 texts: it finds sentinels after NFKC ("＜extra_id_2＞" is one) and treats
U+0085 and U+001C next to text otherwise; on plain Chinese text it agrees.

The SentencePiece models are trained here (unigram, 500 pieces) on the project's own
sample stories, cmrcx/data/longlm_sample/, in two layouts (`LAYOUTS`): T5's (pad, eos,
unk = 0, 1, 2) and Chinese XLNet's, which LongLM's spiece.model most likely is (unk 0,
<s> 1, </s> 2, <pad> 5); every parity test runs on both. A failure prints the text to
reproduce it. With CMRCX_LONGLM_SPIECE set to a LongLM release's spiece.model, the
parity tests also run on that file (`test_released_longlm_model`).
"""

from __future__ import annotations

import os
import pickle
import random
import re
from pathlib import Path

import pytest
import sentencepiece as spm
import seqio
import tensorflow as tf

from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary
from tests.support import REPO_ROOT

SAMPLE_DIR = REPO_ROOT / "cmrcx" / "data" / "longlm_sample"
NUM_RANDOM_TEXTS = 400
EXTRA_IDS = 100


class T5Tokenizer46:
    """transformers 4.6.0's slow `T5Tokenizer`, as `from_pretrained` builds it.

    Special tokens are plain strings (T5's special_tokens_map.json), so the default
    white-space stripping around them applies; `from_pretrained` calls
    `sanitize_special_tokens` (tokenization_utils_base.py 1844, 813-823), which puts
    every special token in `unique_no_split_tokens`, sorted (tokenization_utils.py
    213-219). gen.py's `add_special_tokens` of the 100 sentinels changes nothing more.
    """

    def __init__(self, model_file: str, extra_ids: int = EXTRA_IDS):
        self.sp_model = spm.SentencePieceProcessor(model_file=model_file)
        self._extra_ids = extra_ids
        sentinels = [f"<extra_id_{i}>" for i in range(extra_ids)]  # tokenization_t5.py 106-107
        self.all_special_tokens = ["</s>", "<unk>", "<pad>", *sentinels]
        self.unique_no_split_tokens = sorted(set(self.all_special_tokens))

    @property
    def vocab_size(self) -> int:  # tokenization_t5.py 132-134
        return self.sp_model.get_piece_size() + self._extra_ids

    def tokenize(self, text: str) -> list[str]:
        """tokenization_utils.py 249-363, the branch for special tokens that are strings."""

        def split_on_token(tok, text):  # 282-333
            result = []
            split_text = text.split(tok)
            for i, sub_text in enumerate(split_text):
                # "We strip left and right by default" (316-320)
                if i < len(split_text) - 1:
                    sub_text = sub_text.rstrip()
                if i > 0:
                    sub_text = sub_text.lstrip()
                if i == 0 and not sub_text:
                    result.append(tok)
                elif i == len(split_text) - 1:
                    if sub_text:
                        result.append(sub_text)
                else:
                    if sub_text:
                        result.append(sub_text)
                    result.append(tok)
            return result

        def split_on_tokens(tok_list, text):  # 335-359
            if not text.strip():
                return []
            tokenized_text, text_list = [], [text]
            for tok in tok_list:
                tokenized_text = []
                for sub_text in text_list:
                    if sub_text not in self.unique_no_split_tokens:
                        tokenized_text.extend(split_on_token(tok, sub_text))
                    else:
                        tokenized_text.append(sub_text)
                text_list = tokenized_text
            tokens = []
            for token in tokenized_text:
                no_split = token in self.unique_no_split_tokens
                tokens.extend([token] if no_split else self._tokenize(token))
            return tokens

        return split_on_tokens(self.unique_no_split_tokens, text)

    def _tokenize(self, text: str) -> list[str]:  # tokenization_t5.py 237-243
        return self.sp_model.EncodeAsPieces(text)

    def _convert_token_to_id(self, token: str) -> int:  # tokenization_t5.py 245-251
        if token.startswith("<extra_id_"):
            match = re.match(r"<extra_id_(\d+)>", token)
            num = int(match.group(1))
            return self.vocab_size - num - 1
        return self.sp_model.piece_to_id(token)

    def _convert_id_to_token(self, index: int) -> str:  # tokenization_t5.py 253-259
        if index < self.sp_model.get_piece_size():
            return self.sp_model.IdToPiece(index)
        return f"<extra_id_{self.vocab_size - 1 - index}>"

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """`tokenizer(text).input_ids`: get_input_ids (tokenization_utils.py 428-431), then
        `_add_eos_if_not_present` (tokenization_t5.py 169-177, 220)."""
        ids = [self._convert_token_to_id(token) for token in self.tokenize(text)]
        eos = self._convert_token_to_id("</s>")
        if add_special_tokens and not (ids and ids[-1] == eos):
            ids.append(eos)
        return ids

    def decode(self, ids: list[int]) -> str:
        """`_decode` (tokenization_utils.py 733-772; no added tokens, so one sub-text),
        `convert_tokens_to_string` (tokenization_t5.py 261-273), `clean_up_tokenization`
        (tokenization_utils_base.py 3133-3155)."""
        tokens = [self._convert_id_to_token(i) for i in ids]
        current_sub_tokens, out_string = [], ""
        for token in tokens:
            if token in self.all_special_tokens:
                out_string += self.sp_model.decode_pieces(current_sub_tokens) + token + " "
                current_sub_tokens = []
            else:
                current_sub_tokens.append(token)
        out_string += self.sp_model.decode_pieces(current_sub_tokens)
        text = out_string.strip()
        for written, cleaned in [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'")]:
            text = text.replace(written, cleaned)
        for suffix in ("n't", "'m", "'s", "'ve", "'re"):
            text = text.replace(" " + suffix, suffix)
        return text


def train_sample_model(prefix: Path, vocab_size: int = 500, **options) -> str:
    """A unigram model of the sample stories, T5's special ids unless `options` say; ~0.1 s."""
    spm.SentencePieceTrainer.train(
        input=",".join(str(path) for path in sorted(SAMPLE_DIR.glob("*.txt"))),
        model_prefix=str(prefix),
        model_type="unigram",
        vocab_size=vocab_size,
        character_coverage=0.9995,
        **{"pad_id": 0, "eos_id": 1, "unk_id": 2, "bos_id": -1, **options},
        minloglevel=2,
    )
    return f"{prefix}.model"


# Chinese XLNet's spiece.model, which LongLM's most likely is (32,000 pieces, 691,427 bytes
# like LongLM's): sentencepiece's default ids (unk 0, bos "<s>" 1, eos "</s>" 2, no pad
# id) plus XLNet's symbols, ymcui/Chinese-XLNet README "Generate Vocabulary" (zihangdai/
# xlnet's recipe): control <cls> 3, <sep> 4, <pad> 5, <mask> 6, <eod> 7; user-defined
# <eop> 8 and some punctuation. The recipe's '"' is left out: sentencepiece reads the
# flag as CSV, where it opens a quote.
XLNET_LAYOUT = {
    "unk_id": 0,
    "bos_id": 1,
    "eos_id": 2,
    "pad_id": -1,
    "control_symbols": "<cls>,<sep>,<pad>,<mask>,<eod>",
    "user_defined_symbols": "<eop>,.,(,),-,–,£,€",
}
# layout -> (trainer options, T5Tokenizer's pad, eos and unk ids on it).
LAYOUTS = {"t5": ({}, (0, 1, 2)), "xlnet": (XLNET_LAYOUT, (5, 2, 0))}


def train_xlnet_layout_model(prefix: Path, vocab_size: int = 500) -> str:
    """A model of the sample stories laid out as Chinese XLNet's (LongLM's) spiece.model."""
    return train_sample_model(prefix, vocab_size, **XLNET_LAYOUT)


# --- random texts: the awkward cases of LongLM inputs, mixed ---------------------------

SENTINEL_LIKE = [
    "<extra_id_100>",  # beyond extra_ids: text
    "<extra_id_01>",
    "<extra_id_>",
    "<extra_id_1",
    "extra_id_1>",
    "＜extra_id_2＞",  # full-width: NFKC makes it "<extra_id_2>" inside SentencePiece
    "<EXTRA_ID_3>",
    "<s>",
    "<mask>",
    "<sep>",
]
FULL_WIDTH = list("，。！？；：“”‘’《》（）【】、…—～＃％＆＋－／０１２３ＡＢｃ")
ASCII = ["Tom", "OK", "hello", "A-B", "No.7", "3.14", "2021", "100%", "x", "#", "##", "<", ">"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\u3000", "\xa0", "\u2028", "\x1c", "\x85", " \n "]
OTHER = ["\u200b", "😀", "鑫", "龘", "饕餮", "é", "ﬁ", "①", "\x00"]


def _random_text(rng: random.Random, story: str) -> str:
    chunks = []
    for _ in range(rng.randint(0, 12)):
        kind = rng.random()
        if kind < 0.3:
            start = rng.randrange(len(story))
            chunks.append(story[start : start + rng.randint(1, 8)])
        elif kind < 0.5:
            k = rng.choice([0, 1, 2, 9, 10, 11, 42, 98, 99, rng.randrange(EXTRA_IDS)])
            chunks.append(f"<extra_id_{k}>")
        elif kind < 0.55:
            chunks.append(rng.choice(["</s>", "<pad>", "<unk>"]))
        elif kind < 0.6:
            chunks.append(rng.choice(SENTINEL_LIKE))
        elif kind < 0.7:
            chunks.append(rng.choice(FULL_WIDTH))
        elif kind < 0.8:
            chunks.append(rng.choice(ASCII))
        elif kind < 0.93:
            chunks.append(rng.choice(SPACES) * rng.choice([1, 1, 2]))
        else:
            chunks.append(rng.choice(OTHER))
    return "".join(chunks)


EDGE_TEXTS = [
    "",
    " ",
    "\u3000\n\t",
    "<extra_id_0>",
    "<extra_id_99>",
    "<extra_id_1><extra_id_2>",
    " <extra_id_1> \u3000 <extra_id_2> ",
    "森林<extra_id_1>小熊",
    "森林 <extra_id_1> 小熊",
    "<extra_id_1>从前，山脚下住着一个老木匠。",
    "老木匠#会唱歌的椅子#孩子们都不相信#秋天<extra_id_1>",  # OutGen input (gen.py's test.source)
    "小狐狸想了想。<extra_id_1>小狐狸哭了。<extra_id_2>从前有一只小狐狸。<sep>它回家了。<mask>",
    "第1章  第10章\n\n2021年",
    "结尾</s>",
    "</s></s>",
    "a<pad>b<unk>c",
    "鑫鑫鑫",
    "<extra_id_100><extra_id_10>",
]


@pytest.fixture(scope="module", params=list(LAYOUTS))
def layout(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def model_file(layout: str, tmp_path_factory) -> str:
    return train_sample_model(tmp_path_factory.mktemp("spm") / "spiece", **LAYOUTS[layout][0])


@pytest.fixture(scope="module")
def vocab(model_file: str) -> T5SentencePieceVocabulary:
    return T5SentencePieceVocabulary(model_file)


@pytest.fixture(scope="module")
def reference(model_file: str) -> T5Tokenizer46:
    return T5Tokenizer46(model_file)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    story = (SAMPLE_DIR / "stories.txt").read_text(encoding="utf-8")
    rng = random.Random(2019)
    return EDGE_TEXTS + [_random_text(rng, story) for _ in range(NUM_RANDOM_TEXTS)]


def test_special_ids(
    vocab: T5SentencePieceVocabulary, reference: T5Tokenizer46, model_file, layout
) -> None:
    """pad/eos/unk are T5Tokenizer's, the ids of the pieces "<pad>", "</s>", "<unk>";
    sentinels count down from the end."""
    sp = spm.SentencePieceProcessor(model_file=model_file)
    expected = LAYOUTS[layout][1]
    assert (vocab.pad_id, vocab.eos_id, vocab.unk_id) == expected
    assert tuple(reference._convert_token_to_id(t) for t in ("<pad>", "</s>", "<unk>")) == expected
    assert tuple(sp.id_to_piece(i) for i in expected) == ("<pad>", "</s>", "<unk>")
    assert (vocab.bos_id, sp.bos_id()) == ((None, -1) if layout == "t5" else (1, 1))
    assert vocab.piece_size == sp.get_piece_size() == 500
    assert vocab.vocab_size == reference.vocab_size == 600
    assert vocab.sentinel_id(0) == 599 and vocab.sentinel_id(99) == 500
    assert vocab.encode("<extra_id_1>") == [598] == reference.encode("<extra_id_1>", False)
    assert vocab.tokens[598] == "<extra_id_1>" and vocab.tokens[7] == sp.id_to_piece(7)
    assert len(vocab.tokens) == 600
    with pytest.raises(ValueError, match="extra_id_100"):
        vocab.sentinel_id(100)


def test_xlnet_layout_pieces(tmp_path: Path) -> None:
    """The trained XLNet-layout model has the ids LongLM's authors' code relies on."""
    sp = spm.SentencePieceProcessor(model_file=train_xlnet_layout_model(tmp_path / "xlnet"))
    pieces = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]
    assert [sp.id_to_piece(i) for i in range(9)] == pieces
    assert [sp.is_control(i) for i in range(9)] == [False] + [True] * 7 + [False]


def test_ids_equal_reference(vocab, reference, texts: list[str]) -> None:
    """`encode` is T5Tokenizer's ids without EOS, on every text; `+ [eos]` is `tokenizer(text)`."""
    for text in texts:
        ids = vocab.encode(text)
        assert ids == reference.encode(text, add_special_tokens=False), repr(text)
        if ids[-1:] != [vocab.eos_id]:
            assert ids + [vocab.eos_id] == reference.encode(text), repr(text)
    # T5Tokenizer does not append a second </s> after a written one; append_eos would.
    assert reference.encode("结尾</s>") == reference.encode("结尾</s>", add_special_tokens=False)


def test_batched_and_in_a_seqio_pipeline(vocab, reference, texts: list[str]) -> None:
    """`encode_tf` on a batch, and seqio's tokenize + append_eos preprocessors (graph
    mode, in tf.data), give T5Tokenizer's ids: `tokenizer(text).input_ids`."""
    expected = [reference.encode(text, add_special_tokens=False) for text in texts]
    assert vocab.encode_tf(tf.constant(texts)).to_list() == expected
    features = {"inputs": seqio.Feature(vocab, add_eos=True)}
    dataset = tf.data.Dataset.from_tensor_slices({"inputs": texts})
    dataset = seqio.preprocessors.tokenize(dataset, features, copy_pretokenized=False)
    dataset = seqio.preprocessors.append_eos(dataset, features)
    got = [example["inputs"].tolist() for example in dataset.as_numpy_iterator()]
    for text, ids in zip(texts, got, strict=True):
        if not text.rstrip().endswith("</s>"):  # T5Tokenizer adds no second </s>
            assert ids == reference.encode(text), repr(text)


def test_decode_equals_reference(vocab, reference, texts: list[str]) -> None:
    """`decode` is T5Tokenizer's `decode` of the ids before the first EOS, padding dropped;
    `decode_tf` gives the same on a padded batch."""
    rows = [reference.encode(text) for text in texts]
    for ids in rows:
        kept = [i for i in ids[: ids.index(vocab.eos_id)] if i != vocab.pad_id]
        assert vocab.decode(ids + [vocab.pad_id] * 3) == reference.decode(kept), repr(ids)
    width = max(map(len, rows))
    batch = tf.constant([ids + [vocab.pad_id] * (width - len(ids)) for ids in rows])
    decoded = [text.decode("utf-8") for text in vocab.decode_tf(batch).numpy().tolist()]
    assert decoded == [vocab.decode(ids) for ids in rows]
    single = vocab.decode_tf(tf.constant(rows[10])).numpy().decode("utf-8")
    assert single == "老木匠#会唱歌的椅子#孩子们都不相信#秋天<extra_id_1>" == vocab.decode(rows[10])


def test_decode_sentinels_and_unknown(vocab) -> None:
    """Sentinels and unk come back as their strings, a space after each, as T5Tokenizer."""
    ids = vocab.encode("<extra_id_1>小熊<extra_id_2>鑫") + [vocab.eos_id, 7, 8]
    assert vocab.decode(ids) == "<extra_id_1> 小熊<extra_id_2> <unk>"
    assert vocab.decode([]) == "" == vocab.decode_tf(tf.constant([], tf.int32)).numpy().decode()


def test_decode_control_and_user_defined_pieces(vocab, reference) -> None:
    """Every low id (control pieces such as <s> and XLNet's <cls>, <sep>, <mask>; the
    user-defined <eop>) decodes as T5Tokenizer's `decode` does, pad dropped."""
    ids = [i for i in range(40) if i != vocab.eos_id] + [vocab.sentinel_id(3), vocab.unk_id, 45]
    kept = [i for i in ids if i != vocab.pad_id]
    assert vocab.decode(ids) == reference.decode(kept)
    assert vocab.decode_tf(tf.constant(ids)).numpy().decode("utf-8") == vocab.decode(ids)


def test_seqio_vocabulary_differs(vocab, model_file) -> None:
    """seqio's own class finds a sentinel only at a word start and encodes across it."""
    seqio_vocab = seqio.SentencePieceVocabulary(model_file, extra_ids=EXTRA_IDS)
    text = "森林<extra_id_1>小熊"
    assert vocab.sentinel_id(1) in vocab.encode(text)
    assert vocab.sentinel_id(1) not in seqio_vocab.encode(text)
    assert seqio_vocab.vocab_size == vocab.vocab_size
    assert vocab != seqio_vocab and vocab == T5SentencePieceVocabulary(model_file)


def test_sentinel_like_piece(tmp_path: Path) -> None:
    """A piece of the model that reads "<extra_id_k>" gets T5Tokenizer's sentinel id.

    Full-width "＜extra_id_7＞" is text to the split but NFKC-normalised to the piece.
    """
    symbols = "<extra_id_7>,<extra_id_x>"
    model = train_sample_model(tmp_path / "spiece", user_defined_symbols=symbols)
    vocab, reference = T5SentencePieceVocabulary(model), T5Tokenizer46(model)
    text = "熊＜extra_id_7＞熊"
    assert vocab.encode(text) == reference.encode(text, add_special_tokens=False)
    assert vocab.sentinel_id(7) in vocab.encode(text)
    # T5Tokenizer cannot read "<extra_id_x>" (AttributeError); it keeps its piece id.
    sp = spm.SentencePieceProcessor(model_file=model)
    assert sp.piece_to_id("<extra_id_x>") in vocab.encode("＜extra_id_x＞")


def test_pickle(vocab: T5SentencePieceVocabulary) -> None:
    text = "森林<extra_id_1>小熊"
    vocab.encode(text)  # TF resources built: they must not travel
    copy = pickle.loads(pickle.dumps(vocab))
    assert copy == vocab and hash(copy) == hash(vocab)
    assert copy.encode(text) == vocab.encode(text)


def test_any_special_ids_load(tmp_path: Path) -> None:
    """pad, eos and unk may be any ids: a pad id of 3 (seqio would want 0) loads."""
    model = train_sample_model(tmp_path / "pad3", pad_id=3)
    vocab, reference = T5SentencePieceVocabulary(model), T5Tokenizer46(model)
    assert (vocab.pad_id, vocab.eos_id, vocab.unk_id) == (3, 1, 2)
    text = "<pad>森林<extra_id_1>小熊</s>"
    assert vocab.encode(text) == reference.encode(text, add_special_tokens=False)


def test_bad_model_files(tmp_path: Path) -> None:
    """A model without one of T5Tokenizer's "<pad>", "</s>", "<unk>" pieces, or not a
    model: ValueError naming the file and the piece."""
    default_ids = train_sample_model(
        tmp_path / "bert_style", pad_id=-1, unk_id=0, bos_id=1, eos_id=2
    )
    with pytest.raises(ValueError, match="bert_style.model: expected the piece '<pad>'"):
        T5SentencePieceVocabulary(default_ids)
    no_eos = train_sample_model(tmp_path / "no_eos", eos_id=-1)
    with pytest.raises(ValueError, match="no_eos.model: expected the piece '</s>'"):
        T5SentencePieceVocabulary(no_eos)
    renamed_unk = train_sample_model(tmp_path / "unk", unk_piece="[UNK]")
    with pytest.raises(ValueError, match="unk.model: expected the piece '<unk>'"):
        T5SentencePieceVocabulary(renamed_unk)
    garbage = tmp_path / "garbage.model"
    garbage.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="garbage.model: not a SentencePiece model"):
        T5SentencePieceVocabulary(str(garbage))
    with pytest.raises(FileNotFoundError, match="nowhere.model"):
        T5SentencePieceVocabulary(str(tmp_path / "nowhere.model"))


@pytest.mark.skipif(
    not os.environ.get("CMRCX_LONGLM_SPIECE"),
    reason="set CMRCX_LONGLM_SPIECE to the spiece.model of a LongLM release",
)
def test_released_longlm_model(texts: list[str]) -> None:
    """The released file, when given: Chinese XLNet's layout, and T5Tokenizer's ids."""
    path = os.environ["CMRCX_LONGLM_SPIECE"]
    vocab, reference = T5SentencePieceVocabulary(path), T5Tokenizer46(path)
    assert (vocab.pad_id, vocab.eos_id, vocab.unk_id) == (5, 2, 0)
    assert vocab.piece_size == 32000 and vocab.sentinel_id(0) == 32099
    for text in texts:
        ids = reference.encode(text)
        assert vocab.encode(text) == reference.encode(text, add_special_tokens=False), repr(text)
        kept = [i for i in ids[: ids.index(vocab.eos_id)] if i != vocab.pad_id]
        assert vocab.decode(ids) == reference.decode(kept), repr(text)


def test_sample_is_packaged() -> None:
    """The corpus is plain UTF-8 text under cmrcx/data, a few KB."""
    files = sorted(SAMPLE_DIR.glob("*.txt"))
    assert files and sum(path.stat().st_size for path in files) < 20_000
