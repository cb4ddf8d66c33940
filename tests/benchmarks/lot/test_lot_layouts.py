"""LOT understanding layouts (`cmrcx.benchmarks.lot.understanding`): the docstrings'
examples, positions pointing at the markers, the candidates and the removed sentence never
cut when a story passes max_length (the story trimmed around its markers), the special ids
from the vocabularies, the LongLM authors' source and target, and the errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

from cmrcx.benchmarks.lot import understanding
from cmrcx.benchmarks.lot.formats import ClozeTRecord, SenPosRecord
from cmrcx.benchmarks.lot.understanding import describe, trim_story
from cmrcx.benchmarks.windows import SpecialIds
from cmrcx.common.errors import DataFormatError
from cmrcx.common.paths import package_path
from cmrcx.models import registry
from cmrcx.vocab import layouts

WORDPIECE = SpecialIds(cls_id=101, sep_id=102, blank_id=1, end_id=2)
SENTENCEPIECE = SpecialIds(
    cls_id=None, sep_id=4, mask_id=6, eos_id=1, sentinels=tuple(499 - k for k in range(100))
)
WORDPIECE_NAMES = {101: "[CLS]", 102: "[SEP]", 1: "[unused1]", 2: "[unused2]"}
SENTENCEPIECE_NAMES = {499 - k: f"<extra_id_{k}>" for k in range(100)} | {
    1: "</s>",
    4: "<sep>",
    6: "<mask>",
}
LAYOUTS = {
    "clozet_wordpiece": (understanding.clozet_wordpiece, WORDPIECE),
    "clozet_wordpiece_causal": (understanding.clozet_wordpiece_causal, WORDPIECE),
    "clozet_sentencepiece": (understanding.clozet_sentencepiece, SENTENCEPIECE),
    "senpos_wordpiece": (understanding.senpos_wordpiece, WORDPIECE),
    "senpos_sentencepiece": (understanding.senpos_sentencepiece, SENTENCEPIECE),
}


def tokenize(text: str) -> list[int]:
    """One token per character, its code point (CJK: far above every special id)."""
    return [ord(char) for char in text]


def names(ids) -> dict[int, str]:
    """Text of every id the examples hold: CJK characters and the special ids."""
    cjk = {code: chr(code) for code in range(0x4E00, 0x9FFF)}
    return cjk | (WORDPIECE_NAMES if ids == WORDPIECE else SENTENCEPIECE_NAMES)


CLOZET = ClozeTRecord(4, "甲乙<mask>丙", ("丁", "戊己"), 1, {})
SENPOS = SenPosRecord(5, "甲<mask>乙<mask>丙", "丁", 1, {})
# The docstrings' examples (CLOZET or SENPOS): layout -> (shown, candidate positions,
# context).
EXAMPLES = {
    "clozet_wordpiece": (
        "[CLS] 甲 乙 [unused1]⟨context⟩ 丙 [SEP] 丁 [unused2]⟨0⟩ 戊 己 [unused2]⟨1*⟩ [SEP]",
        [7, 10], 3,
    ),
    "clozet_wordpiece_causal": (
        "[CLS] 丁 [unused2]⟨0⟩ 戊 己 [unused2]⟨1*⟩ 甲 乙 [unused1] 丙 [SEP]⟨context⟩",
        [2, 5], 10,
    ),
    "senpos_wordpiece": (
        "[CLS] 甲 [unused1]⟨0⟩ 乙 [unused1]⟨1*⟩ 丙 [SEP] 丁 [unused2]⟨context⟩ [SEP]",
        [2, 4], 8,
    ),
    "clozet_sentencepiece": (
        "丁 <extra_id_1>⟨0⟩ 戊 己 <extra_id_2>⟨1*⟩ 甲 乙 <sep> 丙 <mask>⟨context⟩ </s>",
        [1, 4], 9,
    ),
    "senpos_sentencepiece": (
        "甲 <extra_id_1>⟨0⟩ 乙 <extra_id_2>⟨1*⟩ 丙 <sep> 丁 <mask>⟨context⟩ </s>",
        [1, 3], 7,
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def wordpiece(tiny_vocab):
    """The repository's tiny WordPiece vocabulary, one for the module (its encoder traced
    once)."""
    from cmrcx.vocab.wordpiece import WordPieceVocabulary

    return WordPieceVocabulary(tiny_vocab)


@pytest.fixture(scope="module")
def sentencepiece():
    """The repository's tiny SentencePiece model (T5's layout, 400 pieces), one for the
    module."""
    from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary

    return T5SentencePieceVocabulary(package_path("data/longlm_tiny/spiece.model"))


@pytest.mark.parametrize("layout", list(EXAMPLES))
def test_docstring_examples(layout):
    function, ids = LAYOUTS[layout]
    example = function(CLOZET if "clozet" in layout else SENPOS, tokenize, ids, 512)
    shown, candidates, context = EXAMPLES[layout]
    assert describe(example, [], names(ids)) == shown
    np.testing.assert_array_equal(example["candidate_positions"], candidates)
    assert example["context_position"] == context and example["label"] == 1
    assert {k: v.dtype for k, v in example.items()} == dict.fromkeys(example, np.int32)
    assert example["input_mask"].all() and example["candidate_mask"].all()
    if ids == WORDPIECE:  # segment 1 from the first [SEP] on, exclusive
        first_sep = list(example["input_ids"]).index(ids.sep_id)
        want = (np.arange(example["input_ids"].size) > first_sep).astype(np.int32)
        np.testing.assert_array_equal(example["token_type_ids"], want)
    else:
        assert not example["token_type_ids"].any()


def test_authors_example():
    example = understanding.clozet_longlm_authors(CLOZET, tokenize, SENTENCEPIECE, 512)
    source = understanding.clozet_sentencepiece(CLOZET, tokenize, SENTENCEPIECE, 512)
    np.testing.assert_array_equal(example["inputs"], source["input_ids"])
    gold = SENTENCEPIECE.sentinels[2]  # label 1: <extra_id_2>
    np.testing.assert_array_equal(example["targets"], [*source["input_ids"][:-1], gold, 1])
    shown = "⟨start⟩ 丁 <extra_id_1>⟨0⟩ 戊 己 <extra_id_2>⟨1*⟩ 甲 乙 <sep> 丙 <mask>⟨context⟩"
    assert describe(example, [], names(SENTENCEPIECE)) == f"{shown} <extra_id_2>"
    np.testing.assert_array_equal(example["candidate_positions"], [2, 5])
    assert example["context_position"] == 10 and example["label"] == 1
    # The decoder input at the positions: the sentinels and <mask>, as their masks find them.
    decoder_input = np.concatenate([[0], example["targets"][:-1]])
    assert list(decoder_input[example["candidate_positions"]]) == [499 - 1, 499 - 2]
    assert decoder_input[example["context_position"]] == SENTENCEPIECE.mask_id
    unlabelled = ClozeTRecord(4, CLOZET.story, CLOZET.candidates, None, {})
    example = understanding.clozet_longlm_authors(unlabelled, tokenize, SENTENCEPIECE, 512)
    np.testing.assert_array_equal(example["targets"], example["inputs"])
    assert example["label"] == -1


# --- Stories longer than max_length --------------------------------------------------


def cjk(start: int, count: int) -> str:
    """`count` distinct CJK characters (distinct tokens) from U+4E00 + start."""
    return "".join(chr(0x4E00 + start + i) for i in range(count))


LONG_CLOZET = ClozeTRecord(
    7, cjk(0, 400) + "<mask>" + cjk(1000, 300), (cjk(2000, 30), cjk(3000, 25)), 0, {}
)
LONG_SENPOS = SenPosRecord(
    8, "<mask>".join(cjk(1000 * k, 100) for k in range(9)), cjk(9000, 40), 7, {}
)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_long_stories_keep_candidates_and_markers(layout):
    function, ids = LAYOUTS[layout]
    record = LONG_CLOZET if layout.startswith("clozet") else LONG_SENPOS
    assert len(record.story) - 6 * record.story.count("<mask>") > 512  # story tokens
    example = function(record, tokenize, ids, 512)
    tokens = list(example["input_ids"])
    assert len(tokens) == 512  # trimmed to exactly the budget
    if layout.startswith("clozet"):
        check_long_clozet(example, tokens, ids)
    else:
        check_long_senpos(example, tokens, ids)


def check_long_clozet(example, tokens, ids):
    # Each candidate whole, right before its end marker.
    for k, plot in enumerate(LONG_CLOZET.candidates):
        end = int(example["candidate_positions"][k])
        assert tokens[end - len(plot) : end] == tokenize(plot)
    # The story: as much left as right context around the removed sentence's marker.
    left, right = (tokenize(part) for part in LONG_CLOZET.story.split("<mask>"))
    gap = tokens.index(ids.blank_id if ids == WORDPIECE else ids.sep_id)
    kept_left = [t for t in tokens[:gap] if t in left]
    kept_right = [t for t in tokens[gap:] if t in right]
    assert (
        kept_left == left[len(left) - len(kept_left) :] and kept_right == right[: len(kept_right)]
    )
    assert abs(len(kept_left) - len(kept_right)) <= 1


def check_long_senpos(example, tokens, ids):
    segments = [tokenize(part) for part in LONG_SENPOS.story.split("<mask>")]
    positions = list(example["candidate_positions"])
    assert len(positions) == 8 and positions == sorted(positions)
    markers = [tokens[p] for p in positions]
    if ids == WORDPIECE:
        assert markers == [ids.blank_id] * 8
    else:
        assert markers == [ids.sentinels[k + 1] for k in range(8)]
    context = int(example["context_position"])
    sentence = tokenize(LONG_SENPOS.sentence)
    assert tokens[context - len(sentence) : context] == sentence
    # First segment: its end kept; last: its start; inner ones: both ends, the middle cut.
    bounds = [-1, *positions, context]
    for k, segment in enumerate(segments):
        kept = [t for t in tokens[bounds[k] + 1 : bounds[k + 1]] if t in segment]
        assert 0 < len(kept) < len(segment)
        if k == 0:
            assert kept == segment[len(segment) - len(kept) :]
        elif k == len(segments) - 1:
            assert kept == segment[: len(kept)]
        else:
            head = (len(kept) + 1) // 2
            assert kept == segment[:head] + segment[len(segment) - (len(kept) - head) :]


def test_long_stories_with_the_real_vocabularies(wordpiece, sentencepiece):
    """The tiny WordPiece and SentencePiece vocabularies of the repository, stories of
    over 1,000 characters: 512 tokens, every marker kept."""
    story = "从前有一只小狐狸，它住在森林里。" * 40
    clozet = ClozeTRecord(1, story + "<mask>" + story, ("它很高兴。", "它哭了。"), 0, {})
    senpos = SenPosRecord(2, "<mask>".join([story] * 4), "小狐狸回家了。", 2, {})
    for vocabulary, ids in (
        (wordpiece, layouts.BERT.special_ids(wordpiece)),
        (sentencepiece, layouts.T5.special_ids(sentencepiece)),
    ):
        kind = "wordpiece" if vocabulary is wordpiece else "sentencepiece"
        layout = layouts.BERT if kind == "wordpiece" else layouts.T5
        for task, record in (("clozet", clozet), ("senpos", senpos)):
            example = layout.pointer(task)(record, vocabulary.encode, ids, 512)
            tokens = example["input_ids"]
            assert tokens.size == 512, (task, kind)
            assert len(example["candidate_positions"]) == (2 if task == "clozet" else 3)
            marks = tokens[example["candidate_positions"]]
            if kind == "wordpiece":
                assert set(marks) == {ids.end_id if task == "clozet" else ids.blank_id}
            else:
                assert list(marks) == list(ids.sentinels[1 : len(marks) + 1])
            context = {"wordpiece": {"clozet": "blank_id", "senpos": "end_id"}}.get(kind)
            want = getattr(ids, context[task]) if context else ids.mask_id
            assert tokens[example["context_position"]] == want


# --- Special ids and tokenization -----------------------------------------------------


class FakeSentencePiece:
    """A vocabulary with the attributes `T5Layout.special_ids` reads."""

    def __init__(self, pieces):
        self.tokens = [*pieces, *(f"<extra_id_{k}>" for k in reversed(range(100)))]
        self.piece_size, self.vocab_size, self.extra_ids, self.eos_id, self.pad_id = (
            len(pieces),
            len(pieces) + 100,
            100,
            2,
            5,
        )

    def sentinel_id(self, k):
        return self.vocab_size - 1 - k


def max_id(ids) -> int:
    """The highest id of a SentencePiece layout's markers."""
    return max(ids.eos_id, ids.sep_id, ids.mask_id, *ids.sentinels)


def test_sentencepiece_ids_from_the_vocabulary(sentencepiece):
    # Chinese XLNet's layout, LongLM's: <sep> 4 and <mask> 6 are pieces.
    xlnet = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "的"]
    ids = layouts.T5.special_ids(FakeSentencePiece(xlnet))
    assert (ids.eos_id, ids.sep_id, ids.mask_id, ids.pad_id, ids.cls_id) == (2, 4, 6, 5, None)
    assert ids.sentinels[0] == 108 and ids.sentinels[1] == 107 and max_id(ids) == 108
    # The repository's tiny model (T5's layout, 400 pieces): appended after the 500 ids.
    ids = layouts.T5.special_ids(sentencepiece)
    want = (1, 500, 501, 498, 501)
    assert (ids.eos_id, ids.sep_id, ids.mask_id, ids.sentinels[1], max_id(ids)) == want


def test_layouts_tokenize_as_the_whole_text(wordpiece, sentencepiece):
    """The story tokenized piece by piece between the markers gives the ids of the whole
    text with the markers written in it: WordPiece keeps `[unusedN]` whole; T5Tokenizer
    (so the authors' source) cuts at each sentinel and encodes the stretches alone."""
    left, right = "一只猫望着窗外飞翔的鸟儿。", "鸟儿一进来，猫就关上了门。"
    record = ClozeTRecord(1, f"{left}<mask>{right}", ("可是没有鸟儿来。", "有些鸟儿来了。"), 1, {})
    ids = layouts.BERT.special_ids(wordpiece)
    example = understanding.clozet_wordpiece(record, wordpiece.encode, ids, 512)
    plot0, plot1 = record.candidates
    whole = wordpiece.encode(f"{left}[unused1]{right}")
    tail = wordpiece.encode(f"{plot0}[unused2]{plot1}[unused2]")
    assert list(example["input_ids"]) == [ids.cls_id, *whole, ids.sep_id, *tail, ids.sep_id]
    ids = layouts.T5.special_ids(sentencepiece)
    example = understanding.clozet_longlm_authors(record, sentencepiece.encode, ids, 512)
    head = sentencepiece.encode(f"{plot0}<extra_id_1>{plot1}<extra_id_2>{left}")
    want = [*head, ids.sep_id, *sentencepiece.encode(right), ids.mask_id, ids.eos_id]
    assert list(example["inputs"]) == want


# --- Trimming, padding, errors ----------------------------------------------------------


def test_trim_story():
    assert trim_story([[1, 2, 3], [4, 5, 6]], 3) == [[2, 3], [4]]
    assert trim_story([[1, 2], [3, 4, 5, 6, 7], [8, 9]], 6) == [[1, 2], [3, 4, 7], [8]]
    assert trim_story([[1, 2], [3]], 3) == [[1, 2], [3]]
    assert trim_story([[], [1, 2, 3, 4]], 2) == [[], [1, 2]]
    assert trim_story([[1, 2], [3, 4]], 0) == [[], []]


def test_pad_example():
    example = understanding.senpos_wordpiece(SENPOS, tokenize, WORDPIECE, 512)
    padded = understanding.pad_example(example, 16, 4)
    assert padded["input_ids"].shape == (16,) and padded["input_mask"].sum() == 10
    np.testing.assert_array_equal(padded["candidate_mask"], [1, 1, 0, 0])
    assert padded["context_position"] == 8
    with pytest.raises(ValueError, match="input_ids: 10 entries, more than 8"):
        understanding.pad_example(example, 8, 4)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_errors_name_the_record(layout):
    function, ids = LAYOUTS[layout]
    if layout.startswith("clozet"):
        for story, blanks in (("甲乙丙", 0), ("甲<mask>乙<mask>丙", 2)):
            with pytest.raises(DataFormatError, match=f"line 9, field 'story': {blanks} blanks"):
                function(ClozeTRecord(9, story, ("丁", "戊"), 0, {}), tokenize, ids, 512)
        record = ClozeTRecord(9, "甲<mask>乙", (cjk(0, 300), cjk(300, 300)), 0, {})
    else:
        with pytest.raises(DataFormatError, match="line 9, field 'story': 0 blanks"):
            function(SenPosRecord(9, "甲乙丙", "丁", 0, {}), tokenize, ids, 512)
        record = SenPosRecord(9, "甲<mask>乙", cjk(0, 600), 0, {})
    with pytest.raises(DataFormatError, match="line 9: .* more than max_length 512"):
        function(record, tokenize, ids, 512)


@pytest.mark.parametrize("layout", [name for name in LAYOUTS if "wordpiece" in name])
@pytest.mark.parametrize("missing", ["blank_id", "end_id"])
def test_a_vocabulary_without_a_marker_names_it(layout, missing):
    """A BERT vocabulary without [unused1] or [unused2] (`BertLayout.special_ids` holds
    None) fails with the token's name, never a None in the ids."""
    function, ids = LAYOUTS[layout]
    token = {"blank_id": "[unused1]", "end_id": "[unused2]"}[missing]
    record = CLOZET if layout.startswith("clozet") else SENPOS
    with pytest.raises(ValueError, match=f"no {re.escape(token)} token, which this layout"):
        function(record, tokenize, ids._replace(**{missing: None}), 512)


def test_senpos_sentinels_run_out():
    record = SenPosRecord(3, "<mask>".join("甲" * 101), "乙", 0, {})
    with pytest.raises(DataFormatError, match="100 candidate positions, more than the 99"):
        understanding.senpos_sentencepiece(record, tokenize, SENTENCEPIECE, 1024)


def test_causal_layouts_put_the_context_last():
    """A decoder-only family (GPT-2) reads a layout whose context state has read every
    candidate and the whole story: the context is the last marker."""
    assert registry.family("gpt2").layout is layouts.GPT2 and layouts.GPT2.causal
    assert registry.family("t5").layout is layouts.T5 and not layouts.BERT.causal
    assert layouts.GPT2.pointer("clozet") is understanding.clozet_wordpiece_causal
    assert layouts.BERT.pointer("clozet") is understanding.clozet_wordpiece
    for task, record in (("clozet", CLOZET), ("senpos", SENPOS)):
        example = layouts.GPT2.pointer(task)(record, tokenize, WORDPIECE)
        assert example["context_position"] > example["candidate_positions"].max()
        ids = list(example["input_ids"])
        assert example["context_position"] >= len(ids) - 2
