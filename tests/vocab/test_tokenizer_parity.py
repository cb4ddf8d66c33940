"""Token-for-token parity of `WordPieceVocabulary` with Hugging Face's BERT tokenizers.

The reference is `transformers`' pure-Python BERT tokenizer (`BertTokenizerLegacy` in
transformers 5, `BertTokenizer` before), built with `do_lower_case=True,
tokenize_chinese_chars=True` and the `[unusedN]` markers as additional special tokens
so it keeps them whole, as our TF op does. The Rust-backed `BertTokenizer` (alias
`BertTokenizerFast`) is checked too. The vocabulary is laid out like
bert-base-chinese and the texts are seeded random mixes of the awkward cases
(full-width punctuation, control characters, exotic whitespace, case folding, long
words, markers), so a failure prints the exact string to reproduce it.
"""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path

import pytest
import tensorflow as tf

from cmrcx.vocab.wordpiece import WordPieceVocabulary

transformers = pytest.importorskip("transformers")
jieba = pytest.importorskip("jieba")

NUM_RANDOM_TEXTS = 2400
NUM_CJK_CHARS = 5000
NUM_UNUSED = 99

# ~300 common English words: whole-word entries of the vocabulary and the stems
# the random texts inflect (so `##s`, `##ing`, ... pieces get exercised).
ENGLISH_WORDS = """
the of and to in is was he for it with as his on be at by had not are but from or
have an they which one you were her all she there would their we him been has when
who will more no if out so said what up its about into than them can only other new
some could time these two may then do first any my now such like our over man me even
most made after also did many before must through back years where much your way well
down should because each just those people how too little state good very make world
still own see men work long get here between both life being under never day same
another know while last might us great old year off come since against go came right
used take three states himself few house use during without again place american around
however home small found thought went say part once general high upon school every
don does got united left number course war until always away something fact though water
less public put think almost hand enough far took head yet government system better set
told nothing night end why called didn find look going asked later knew point next city
business give group toward young let room president side social given present several
order national possible rather second face per among form important often things early
play run walk talk open close help start turn show hear follow stop read write learn
change move live believe hold bring happen sit stand lose pay meet include continue
book china beijing chinese english language model token piece unicode string test
""".split()
SUFFIXES = ["s", "es", "ed", "ing", "ly", "er", "est", "ion", "tion", "ness", "ment", "able"]
FULL_WIDTH_PUNCTUATION = (
    "，。！？；：、（）【】《》〈〉「」『』〔〕“”‘’…—～·．＂＇＃＄％＆＊＋－／＜＝＞＠＼＾＿｀｜"
)
ACCENTED = "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßðþœšžłıςσαβγδεζηθλμπρτφχψωабвгдежзийклмнопрстуфхцчшщыэюя"
EMOJI = ["😀", "😂", "👍", "❤", "✨", "🎉", "🐼", "🇨🇳"]
KANA = (
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
)
KATAKANA = (
    "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲン"
)
JAMO_LEAD = [chr(c) for c in range(0x1100, 0x1113)]
JAMO_VOWEL = [chr(c) for c in range(0x1161, 0x1176)]
JAMO_TAIL = [chr(c) for c in range(0x11A8, 0x11C3)]
CJK_EXTENSION = ["㐀", "㐁", "䶵", "𠀀", "𠀁", "𪚥", "𫝀", "𫠠", "𬺰", "豈", "更", "丽", "𠄢"]


def _read_jieba() -> tuple[list[str], list[str]]:
    """(CJK characters by frequency, frequent multi-character words) from jieba's dict.

    Each line is `word freq pos`; a character's frequency is summed over the words
    it occurs in.
    """
    counts: dict[str, int] = {}
    words: list[tuple[int, str]] = []
    with open(Path(jieba.__file__).parent / "dict.txt", encoding="utf-8") as f:
        for line in f:
            word, freq = line.split(" ")[:2]
            for char in word:
                if "\u4e00" <= char <= "\u9fff":
                    counts[char] = counts.get(char, 0) + int(freq)
            if len(word) > 1:
                words.append((int(freq), word))
    chars = sorted(counts, key=lambda char: (-counts[char], char))[:NUM_CJK_CHARS]
    words.sort(key=lambda pair: (-pair[0], pair[1]))
    return chars, [word for _, word in words[:3000]]


def build_vocab_tokens(cjk_chars: list[str]) -> list[str]:
    """A bert-base-chinese-like vocabulary: specials, punctuation, CJK, English pieces."""
    tokens = ["[PAD]", *(f"[unused{i}]" for i in range(1, NUM_UNUSED + 1))]
    tokens += ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    ascii_punct = [chr(c) for c in range(33, 127) if not chr(c).isalnum()]
    tokens += ascii_punct + list(FULL_WIDTH_PUNCTUATION) + list("0123456789")
    tokens += ["10", "100", "2019", "##0", "##00", *(f"##{d}" for d in range(10))]
    tokens += cjk_chars + CJK_EXTENSION[:6] + list(KANA) + list(KATAKANA)
    tokens += JAMO_LEAD + [f"##{c}" for c in JAMO_VOWEL + JAMO_TAIL]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens += letters + [f"##{c}" for c in letters]
    tokens += ENGLISH_WORDS + [f"##{s}" for s in SUFFIXES]
    tokens += list(ACCENTED) + [f"##{c}" for c in ACCENTED] + EMOJI
    tokens += ["ss", "##ss", "ﬁ", "①", "ａ", "ｂ", "１"]
    return list(dict.fromkeys(tokens))  # first occurrence wins, as in a real vocab.txt


CONTROL = [
    "\x00",
    "\x07",
    "\x1b",
    "\x7f",
    "\x85",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1f",
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\ufffd",
    "\xad",
    "\u061c",
    "\U000e0001",
    "\ue000",
    "\U000f0000",
    "\u0378",
    "\u2066",
]
WHITESPACE = [
    " ",
    "  ",
    "\t",
    "\r\n",
    "\n",
    "\u3000",
    "\xa0",
    "\u2003",
    "\u2000",
    "\u2009",
    "\u202f",
    "\u205f",
    "\u1680",
    "\u2028",
    "\u2029",
]
ACCENTED_WORDS = [
    "café",
    "naïve",
    "Über",
    "señor",
    "Ångström",
    "façade",
    "Ærø",
    "ÉCOLE",
    "cafe\u0301",
    "A\u030angstro\u0308m",
    "Tiếng Việt",
    "Dvořák",
    "Łódź",
    "crème brûlée",
    "MÜNCHEN",
    "ÑANDÚ",
    "Þórður",
]
CASE_FOLDING = [
    "ß",
    "STRASSE",
    "straße",
    "ẞ",
    "İstanbul",
    "İ",
    "ı",
    "I\u0307",
    "ΣΊΣΥΦΟΣ",
    "ὈΔΥΣΣΕΎΣ",
    "ΑΣ.Β",
    "Σ",
    "ſ",
    "ﬁne",
    "ﬀ",
    "Ⅻ",
    "ⓐⒶ",
    "ǅ",
    "Ǆ",
    "K",
    "Ω",
    "Å",
    "ᏣᎳᎩ",
    "ᲐᲑᲒ",
    "և",
    "ŉ",
    "ǰ",
    "ΐ",
    "ﬓ",
    "ＡＢＣ",
    "ｈｅｌｌｏ",
    "Ａ",
]
OTHER_SCRIPTS = [
    "ひらがな",
    "カタカナ",
    "ガギグゲゴ",
    "ｶﾞｷﾞ",
    "パピプ",
    "한국어",
    "안녕하세요",
    "ภาษาไทย",
    "العربية",
    "עברית",
    "हिन्दी",
    "Привет",
    "Ελληνικά",
    "©®™°±×÷",
    "∑∫√∞",
    "¥€£$",
    "─│┌",
    "①②③",
    "²³¹",
    "½¼",
    "№",
    "‰",
    "⁂",
    "†‡",
    "§¶",
    "\u0301",
    "e\u0301\u0301",
    "\u20dd",
    "a\u0489",
    "\ufe0f",
    "❤️",
    "👨‍👩‍👧",
    "👍🏽",
    "🏳️‍🌈",
    "\U0001f1e8\U0001f1f3",
]


def _word(rng: random.Random) -> str:
    """An English word, maybe inflected, in a random case."""
    word = rng.choice(ENGLISH_WORDS) + rng.choice(["", "", *SUFFIXES])
    if rng.random() < 0.2:  # a made-up word: splits into letter pieces
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
    return rng.choice([word, word, word.title(), word.upper()])


def _number(rng: random.Random) -> str:
    digits = str(rng.randint(0, 10 ** rng.randint(1, 12)))
    return rng.choice([digits, digits + ".5", "1,000", "3.14", "２０１９", "No." + digits])


def _long_word(rng: random.Random) -> str:
    """Words around the 100-character WordPiece limit, in 1-, 2-, 3- and 4-byte letters."""
    letter = rng.choice(["a", "é", "б", "ω", "あ", "한", "😀", "𝒜"])
    return letter * rng.choice([50, 99, 100, 101, 150])


def _marker(rng: random.Random) -> str:
    """A blank, a marker, or a lookalike that HF keeps whole only as a whole word.

    No `[unusedN]` the vocabulary lacks: see `test_marker_missing_from_vocabulary`.
    """
    k = rng.randint(1, 40)
    exact = [f"[BLANK{k}]", f"[unused{k}]", f" [unused{k}] ", f"[unused{rng.randint(1, 99)}]"]
    lookalike = [
        f"[UNUSED{k}]",
        f"[Unused{k}]",
        f"[unu\u200bsed{k}]",
        f"[unused{k}\u0301]",
        f"[ùnused{k}]",
        f"[unused{k}",
        f"[ unused{k} ]",
        f"[unused{k}]\u0301",
        f"[unused{k}]{k}",
    ]
    return rng.choice(exact + exact + lookalike)


def _snippet(rng: random.Random, words: list[str], chars: list[str]) -> str:
    """One random piece of text from one of the awkward classes."""
    kind = rng.randrange(13)
    if kind <= 2:
        return "".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
    if kind == 3:
        return rng.choice(chars) + rng.choice(FULL_WIDTH_PUNCTUATION + ",.!?;:()[]\"'-")
    if kind == 4:
        return _word(rng)
    if kind == 5:
        return _number(rng)
    if kind == 6:
        return rng.choice(ACCENTED_WORDS)
    if kind == 7:
        return rng.choice(CONTROL)
    if kind == 8:
        return rng.choice(CASE_FOLDING)
    if kind == 9:
        return rng.choice(OTHER_SCRIPTS + EMOJI + CJK_EXTENSION)
    if kind == 10:
        return _marker(rng)
    if kind == 11:
        return _long_word(rng) if rng.random() < 0.3 else rng.choice(WHITESPACE)
    return rng.choice(WHITESPACE)


def generate_texts(count: int, seed: int, words: list[str], chars: list[str]) -> list[str]:
    """`count` deterministic random mixes of snippets, glued or separated by whitespace."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = [_snippet(rng, words, chars) for _ in range(rng.randint(1, 10))]
        glue = rng.choice(["", "", " ", rng.choice(WHITESPACE)])
        texts.append(glue.join(parts))
    return texts


# Hand-written edge cases, compared on top of the random mixes.
EDGE_CASES = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "a\u200bb",
    "a\xadb",
    "\ufeff他\ufffd",
    "\u3000中\u3000",
    "他说：“你好！”（笑）……",
    '他说:"你好!"(笑)...',
    "２０１９年３月，ＡＢＣ公司。",
    "hello, WORLD! unaffable greatest",
    "Ab\tc\rd\ne\x0bf\x0cg\x1ch\x85i\u2028j\u2029k",
    "[BLANK1]",
    "他[BLANK12]了",
    " [unused1] [unused2] ",
    "他[unused3]了",
    "a[unused3]b",
    "[unused3][unused4]",
    "[[unused3]]",
    "##[unused3]",
    "[UNUSED3]",
    "a[UNUSED3]b",
    "中[UNUSED3]中",
    "[unused3] [UNUSED4] [Unused5]",
    "[unu\u200bsed3]",
    "a[unu\u200bsed3]",
    "[unused3\u0301]",
    "a[unused3\u0301]",
    "[unused3]\u0301",
    "[cls] [sep]",
    "ΑΣ[unused3]Β",
    "ΟΔΟΣ ΑΣ.Β ΑΣ中 ΑΣ'Β ΑΣ\u0301 Β ΑΣ\u200bΒ",
    "İ I\u0307 İstanbul ı",
    "ß ẞ STRASSE straße ſ ﬁ ﬀ ǅ Ǆ K Ω Å",
    "x" * 100,
    "x" * 101,
    "é" * 50,
    "é" * 100,
    "é" * 101,
    "e\u0301" * 60,
    "😀" * 100,
    "😀" * 101,
    "한" * 40,
    "a" * 99 + "\u0301" * 5,
    "👨\u200d👩\u200d👧 ❤️ 👍🏽 🇨🇳",
    "𠀀𪚥𫝀 㐀 豈 丽",
    "\U00031350\U00031351",  # CJK Extension H: Unicode 15, unassigned in Python 3.11
]


@pytest.fixture(scope="module")
def jieba_data() -> tuple[list[str], list[str]]:
    return _read_jieba()


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory, jieba_data) -> str:
    chars, _ = jieba_data
    path = tmp_path_factory.mktemp("parity") / "vocab.txt"
    path.write_text("\n".join(build_vocab_tokens(chars)) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def texts(jieba_data) -> list[str]:
    chars, words = jieba_data
    return generate_texts(NUM_RANDOM_TEXTS, seed=2019, words=words, chars=chars) + EDGE_CASES


def _markers(vocab_file: str) -> list[str]:
    tokens = Path(vocab_file).read_text(encoding="utf-8").split("\n")
    return [token for token in tokens if token.startswith("[unused")]


def _python_tokenizer(vocab_file: str, lower_case: bool = True):
    """HF's pure-Python BERT tokenizer, keeping the vocabulary's markers whole."""
    cls = getattr(transformers, "BertTokenizerLegacy", None) or transformers.BertTokenizer
    return cls(
        vocab_file,
        do_lower_case=lower_case,
        tokenize_chinese_chars=True,
        additional_special_tokens=_markers(vocab_file),
    )


def _python_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) for text in texts]


def _our_ids(vocab: WordPieceVocabulary, texts: list[str]) -> list[list[int]]:
    return vocab.encode_tf(tf.constant(texts)).to_list()


def _assert_same_ids(texts, ours, theirs, tokens, name: str) -> None:
    """Fails listing the first few texts whose ids differ, as tokens."""
    diffs = [(t, a, b) for t, a, b in zip(texts, ours, theirs, strict=True) if a != b]
    shown = "\n".join(
        f"{t!r}\n  ours: {[tokens[i] for i in a]}\n  {name}: {[tokens[i] for i in b]}"
        for t, a, b in diffs[:5]
    )
    assert not diffs, f"{len(diffs)} of {len(texts)} texts differ:\n{shown}"


@pytest.mark.parametrize("lower_case", [True, False])
def test_ids_match_python_tokenizer(vocab_file: str, texts: list[str], lower_case: bool) -> None:
    """The requirement: token-for-token HF's Python BertTokenizer, on every text."""
    assert len(texts) >= 2000
    vocab = WordPieceVocabulary(vocab_file, lower_case=lower_case)
    ours = _our_ids(vocab, texts)
    theirs = _python_ids(_python_tokenizer(vocab_file, lower_case), texts)
    _assert_same_ids(texts, ours, theirs, vocab.tokens, "python")
    # Not vacuous: the texts reach markers, ##-pieces, [UNK] and full-width punctuation.
    used = {i for ids in ours for i in ids}
    for token in ("[unused3]", "##ing", "[UNK]", "，", "ß", "##ς", "##ω"):
        assert vocab.token_to_id(token) in used or not lower_case, token


def test_every_code_point_matches(vocab_file: str) -> None:
    """Each code point alone, glued and repeated (a stride through all of Unicode).

    The dense part covers Latin, Greek, Cyrillic, ..., general and CJK punctuation
    and the half/full-width forms; the stride samples every other block, including
    the unassigned planes.
    """
    dense = [*range(0, 0x3100), *range(0xFE00, 0x10000)]
    sparse = range(0x3100, 0x110000, 101)
    codes = [c for c in (*dense, *sparse) if not 0xD800 <= c <= 0xDFFF]
    texts = [f"Ab{chr(c)}c{chr(c)}{chr(c)} {chr(c)}" for c in codes]
    vocab = WordPieceVocabulary(vocab_file)
    theirs = _python_ids(_python_tokenizer(vocab_file), texts)
    _assert_same_ids(texts, _our_ids(vocab, texts), theirs, vocab.tokens, "python")


def _rust_known_difference(text: str) -> str | None:
    """Why HF's Rust tokenizer (tokenizers 0.2x) may differ from its Python one here.

    Found by comparing the two on every code point: it keeps unassigned code points
    (as [UNK]) instead of dropping them, lower-cases character by character (no
    final sigma), starts CJK Extension E at U+2B920 instead of U+2B820, and matches
    special tokens in the raw text only, not after clean-up and case mapping.
    """
    if any(unicodedata.category(char) == "Cn" for char in text):
        return "unassigned"
    if "Σ" in text:
        return "final sigma"
    if any("\U0002b820" <= char <= "\U0002b91f" for char in text):
        return "CJK extension E"
    if "nused" in re.sub(r"\[unused\d+\]", "", text).lower().replace("\u200b", ""):
        return "marker lookalike"
    return None


def test_rust_tokenizer_agrees_but_for_known_differences(vocab_file, texts) -> None:
    """HF's `BertTokenizerFast` gives our ids, except on texts with a known cause."""
    vocab = WordPieceVocabulary(vocab_file)
    fast = transformers.BertTokenizerFast(
        vocab_file, do_lower_case=True, additional_special_tokens=_markers(vocab_file)
    )
    theirs = fast(texts, add_special_tokens=False)["input_ids"]
    ours = _our_ids(vocab, texts)
    unexplained = [
        (t, a, b)
        for t, a, b in zip(texts, ours, theirs, strict=True)
        if a != b and _rust_known_difference(t) is None
    ]
    left = [list(column) for column in zip(*unexplained, strict=True)] or [[], [], []]
    _assert_same_ids(*left, vocab.tokens, "rust")
    assert sum(_rust_known_difference(t) is None for t in texts) > 1500  # most texts compared


@pytest.mark.parametrize("special", ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]"])
def test_literal_special_tokens_are_text(vocab_file: str, special: str) -> None:
    """Known, deliberate difference: "[SEP]" typed in a passage is text, not a separator.

    HF's tokenizer turns the literal strings into the special tokens; we split them
    like any bracketed word (as Google's original BERT does), so input text can never
    forge the `[CLS] a [SEP] b [SEP]` framing. The random texts never contain them.
    """
    vocab = WordPieceVocabulary(vocab_file)
    text = f"他{special}了"
    inner = special[1:-1].lower()
    ours = vocab.encode(text)
    assert vocab.token_to_id(special) not in ours
    assert vocab.decode(ours) == f"他 [ {inner} ] 了"
    hf = _python_tokenizer(vocab_file).tokenize(text)
    assert hf == ["他", special, "了"]


@pytest.mark.parametrize("marker", ["[unused100]", "[unused03]", "[unused0]", "[UNUSED100]"])
def test_marker_missing_from_vocabulary(vocab_file: str, marker: str) -> None:
    """Known difference: a marker the vocabulary lacks is one [UNK] (tf_text's rule).

    HF keeps only the markers it was given as special tokens and splits the rest
    into pieces. One [UNK] per marker keeps a passage's blanks countable even with
    a vocabulary short of markers. The random texts never contain such markers.
    """
    vocab = WordPieceVocabulary(vocab_file)
    assert vocab.encode(f"他{marker}了") == [
        vocab.token_to_id("他"),
        vocab.unk_id,
        vocab.token_to_id("了"),
    ]
    hf = _python_tokenizer(vocab_file).tokenize(f"他{marker}了")
    assert hf[:2] == ["他", "["] and len(hf) > 4


def test_decode_matches_convert_tokens_to_string(vocab_file: str, texts: list[str]) -> None:
    """`decode` is HF's `convert_tokens_to_string`: join with spaces, glue `##` pieces."""
    vocab = WordPieceVocabulary(vocab_file)
    hf = _python_tokenizer(vocab_file)
    for text, ids in zip(texts, _our_ids(vocab, texts), strict=True):
        assert vocab.decode(ids) == hf.convert_tokens_to_string(hf.tokenize(text)), text


def test_encode_decode_round_trip(vocab_file: str, texts: list[str]) -> None:
    """`encode(decode(ids)) == ids` whenever the ids have no [UNK]."""
    vocab = WordPieceVocabulary(vocab_file)
    known = [ids for ids in _our_ids(vocab, texts) if vocab.unk_id not in ids]
    assert len(known) > 500
    decoded = [vocab.decode(ids) for ids in known]
    assert _our_ids(vocab, decoded) == known


# CMRC 2019 passages: the authors' script tokenizes them one character at a time.


def script_passage_tokens(context: str, tokenize) -> list[str]:
    """Port of the passage path of the authors' script, run_cmrc2019_baseline.py (ymcui/cmrc2019,
    commit 742f7c8): `read_squad_examples` rewrites [BLANK1..15] to [unused1..15] and puts a
    space after every character outside a marker; `convert_examples_to_features` keeps a
    token holding "unused" whole and WordPieces every other one (`tokenize`) on its own.
    """
    text = context
    for k in range(1, 16):
        text = text.replace(f"[BLANK{k}]", f"[unused{k}]", 1)
    spaced, is_blank = "", False
    for index, word in enumerate(text):
        if text[index : index + 7] == "[unused":
            is_blank = True
        if word.strip() == "]":
            is_blank = False
        spaced += word.strip() + ("" if is_blank else " ")
    doc_tokens, prev_is_whitespace = [], True
    for char in spaced.strip():
        if char in " \t\r\n" or ord(char) == 0x202F:
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(char)
            else:
                doc_tokens[-1] += char
            prev_is_whitespace = False
    tokens = []
    for token in doc_tokens:
        tokens += [token] if "unused" in token else tokenize(token)
    return tokens


def _passages(texts: list[str], seed: int) -> list[str]:
    """Random texts with [BLANK1..n] spliced in, in shuffled textual order."""
    rng = random.Random(seed)
    usable = [t for t in texts if "unused" not in t.lower() and "blank" not in t.lower()]
    passages = []
    for _ in range(300):
        pieces = rng.sample(usable, rng.randint(2, 8))
        numbers = list(range(1, len(pieces) + 1))
        rng.shuffle(numbers)
        passages.append("".join(f"{p}[BLANK{k}]" for p, k in zip(pieces, numbers, strict=True)))
    return passages + ["他说100次Author是ｶﾅ的，[BLANK2]２０１９年[BLANK1]。café Ünïcode[BLANK3]"]


def test_passages_tokenized_one_character_at_a_time_like_the_script(
    vocab_file: str, texts: list[str]
) -> None:
    """`tokenize_passage` gives the ids of the script's per-character procedure, and the
    candidates the ids of whole-text tokenization (the script's `tokenizer.tokenize(choice)`).
    """
    from cmrcx.tasks.cmrc2019 import tokenize_passage

    vocab = WordPieceVocabulary(vocab_file)
    tokenizer = _python_tokenizer(vocab_file)
    passages = _passages(texts, seed=95)
    choices = [texts[i : i + 3] for i in range(len(passages))]
    examples = tf.data.Dataset.from_tensor_slices(
        {"context": passages, "choices": tf.ragged.constant(choices)}
    )
    out = list(tokenize_passage(examples, vocab, max_candidate_tokens=10_000).as_numpy_iterator())
    ours = [ex["passage_ids"].tolist() for ex in out]
    theirs = [
        tokenizer.convert_tokens_to_ids(script_passage_tokens(p, tokenizer.tokenize))
        for p in passages
    ]
    _assert_same_ids(passages, ours, theirs, vocab.tokens, "script")
    whole = [_python_ids(tokenizer, c) for c in choices]
    assert [[row.tolist() for row in ex["choice_ids"]] for ex in out] == whole
    # The hand-written passage: "100", "Author" and "２０１９" become single characters.
    pieces = [vocab.tokens[i] for i in ours[-1]]
    assert pieces[2:5] == ["1", "0", "0"] and pieces[6:12] == list("author")
    assert "100" in vocab.tokens and "100" not in pieces
