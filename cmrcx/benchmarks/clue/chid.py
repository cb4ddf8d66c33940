"""ChID (CLUE's idiom cloze): official files, the baseline's inputs and decoding, submissions.

Sources (cited by tag; a commit is the stored version that was read):

  [PRE]    CLUEbenchmark/CLUE baselines/models_pytorch/mrc_pytorch/preprocess/CHID_preprocess.py
           @959c3c9: reading, the per-blank window, the features, `logits_matrix_to_array`
           (global greedy decoding), `write_predictions` ({tag: index}, indent 2) and
           `evaluate` (accuracy in percent over the answer file's tags). @74d6506 is the same
           code with CSV answer/prediction files.
  [RUN]    .../mrc_pytorch/run_multichoice_mrc.py and test_multichoice_mrc.py @0964517:
           max_seq_length 64, max_num_choices 10, `get_final_predictions(g=True)`; the choice
           masks are built but never given to the model ([MODEL] pytorch_modeling.py
           @0964517 `BertForMultipleChoice`: plain softmax over all 10 choices).
  [SH]     .../mrc_pytorch/run_mrc_chid.sh @65dae35: 3 epochs, batch 24, lr 2e-5, warmup 0.06,
           length 64 (= Table 7 of the paper: CHID, All*, 24, 64, 3, 2e-5).
  [README] CLUEbenchmark/CLUE README.md @21ef108: one JSON object per line, ``content`` (a
           list of passages with ``#idiomNNNNNN#`` blanks) and ``candidates`` (10 idioms).
  [HF]     huggingface/datasets datasets/clue/clue.py @02bb18c: ``{split}_answer.json`` is one
           JSON object ``{"#idiom000378#": 0, ...}`` next to train.json / dev.json.
  [B4K]    bojone/CLUE-bert4keras src/chid.py @cc3c17e: the CLUE 1.1 zip's test files
           test1.0.json / test1.1.json -> chid10_predict.json / chid11_predict.json, written
           as ``{tag: index}``; every line has exactly 10 candidates (asserted); the optimal
           one-to-one assignment per line (`linear_sum_assignment` over raw logits).
  [SUBMIT] CLUE "任务提交说明" (2021-09-04): chid11_predict.json for 1.1, chid10 for 1.0.

Every blank of every passage of a line is one multiple-choice example over the line's
candidates. A line's passages share the candidates, and the baseline decodes a line's blanks
together (`decode_line`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cmrcx.benchmarks.clue.official_format import parse_object_line, read_lines
from cmrcx.benchmarks.records import FieldError, is_json_int, json_type, versioned_split_files
from cmrcx.benchmarks.windows import Frame, SpecialIds
from cmrcx.common.errors import DataFormatError
from cmrcx.common.files import load_json

TAG_PATTERN = re.compile(r"#idiom\d{6}#")
TAG_PREFIX = "#idiom"  # [PRE] `_tokenize_chinese_chars`: a blank starts at "#idiom" ...
TAG_LENGTH = 13  # ... and ends 12 characters later (its closing "#")
MAX_SEQ_LENGTH = 64  # [SH], [RUN]; Table 7 of the paper
MAX_NUM_CHOICES = 10  # [RUN]; [B4K] asserts every line has exactly 10 candidates
OTHER_BLANK_MASKS = 4  # [PRE]: another blank in the window becomes 4 [MASK] (an idiom's length)
FRAME_TOKENS = 3  # [PRE] "- 3": [CLS] idiom [SEP] window [SEP] (XLNet: <sep> <sep> <cls>)
UNFILLED = -1
VERSIONS = ("1.1", "1.0")
SPLIT_FILES = {
    "train": ("train.json", "train_answer.json"),
    "validation": ("dev.json", "dev_answer.json"),
}
# The test file of each version, the preferred name first: the current zip's test.json
# (huggingface/datasets datasets/clue/clue.py @02bb18c reads test.json from the zip, and its
# dataset card's test sizes are CLUE 1.1's, not README's 1.0 ones), or the test1.1.json /
# test1.0.json names of the CLUE 1.1 release that [B4K] reads.
TEST_FILES = {"1.1": ("test.json", "test1.1.json"), "1.0": ("test1.0.json",)}
SUBMISSION_FILES = {"1.1": "chid11_predict.json", "1.0": "chid10_predict.json"}  # [SUBMIT]


@dataclasses.dataclass(frozen=True)
class ChidBlank:
    """One blank: a multiple-choice example over its line's candidates.

    Attributes:
      line_index: 0-based line of the data file (the baseline's ``example_id``).
      line_number: the same line, 1-based, for messages.
      passage_index: which passage of the line's ``content`` holds the blank.
      tag: the blank, e.g. ``"#idiom000378#"`` (the answer and submission key).
      passage: that passage, unchanged.
      candidates: the line's candidate idioms.
      label: index of the answer in ``candidates``; None in a test file.
    """

    line_index: int
    line_number: int
    passage_index: int
    tag: str
    passage: str
    candidates: tuple[str, ...]
    label: int | None


@dataclasses.dataclass(frozen=True)
class ChidSplit:
    """The blanks of one data file (with its answer file), in file order."""

    path: str
    answer_path: str | None
    blanks: tuple[ChidBlank, ...]
    num_lines: int

    def answers(self) -> dict[str, int]:
        """``{tag: answer index}`` of a labelled split (the answer file's content)."""
        return {b.tag: b.label for b in self.blanks if b.label is not None}


def split_files(split: str, version: str = "1.1", data_dir: str | None = None) -> tuple[str, ...]:
    """The official files a split reads (in this order). The test split's file is the first
    of its version's names present in ``data_dir`` (the preferred name without one)."""
    return versioned_split_files("ChID", SPLIT_FILES, TEST_FILES, split, version, data_dir)


# --- Reading ------------------------------------------------------------------------------


def _passages(value: Any) -> tuple[str, ...]:
    # [PRE] loops over ``content``: an empty one gives the line no examples (as a passage
    # without blanks does), and is read as such.
    if not isinstance(value, list):
        raise FieldError("content", f"expected an array of passages, got {json_type(value)}")
    for k, passage in enumerate(value):
        field = f"content[{k}]"
        if not isinstance(passage, str):
            raise FieldError(field, f"expected a string, got {json_type(passage)}")
        # [PRE] takes any "#idiom" as the start of a 13-character blank: a malformed tag
        # would silently swallow the text after it.
        if passage.count(TAG_PREFIX) != len(TAG_PATTERN.findall(passage)):
            raise FieldError(field, "has an '#idiom' that is not a whole #idiomNNNNNN# blank")
    return tuple(value)


def _candidates(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise FieldError("candidates", f"expected an array of idioms, got {json_type(value)}")
    # [PRE] pads to max_num_choices and asserts it has no more: a longer list fails there.
    if len(value) > MAX_NUM_CHOICES:
        raise FieldError(
            "candidates",
            f"has {len(value)} candidates; the baseline's input holds at most {MAX_NUM_CHOICES}",
        )
    for k, idiom in enumerate(value):
        # An empty idiom is tokenized by [PRE] to no pieces ("[CLS] [SEP] context [SEP]"),
        # not refused: it is read as such.
        if not isinstance(idiom, str):
            raise FieldError(f"candidates[{k}]", f"expected a string, got {json_type(idiom)}")
    return tuple(value)


def _check_fillable(blanks: int, candidates: tuple[str, ...]) -> None:
    """A line's blanks share its candidates, each filling at most one blank ([PRE]
    `logits_matrix_to_array`): with more blanks than candidates some blank gets no
    prediction, [PRE] writes none for it and its `evaluate` fails (as would a submission)."""
    if blanks > len(candidates):
        raise FieldError(
            "candidates",
            f"the line has {blanks} blanks but {len(candidates)} candidates; each candidate "
            "fills at most one blank, so a blank would be left without a prediction",
        )


def _read_answers(path: str, blanks: list[tuple[str, int, int]], data_path: str) -> list[int]:
    """Answer index of each (tag, line_number, num_candidates), from the answer file."""
    answers = load_json(path)
    if not isinstance(answers, dict):
        raise DataFormatError(
            f"{path}: expected one JSON object {{tag: index}}, got {json_type(answers)}"
        )
    labels = []
    for tag, line_number, num_candidates in blanks:
        if tag not in answers:
            raise DataFormatError(f"{path}: no answer for {tag} ({data_path} line {line_number})")
        index = answers[tag]
        if not is_json_int(index) or not 0 <= index < num_candidates:
            raise DataFormatError(
                f"{path}: key {tag!r}: expected a candidate index in [0, {num_candidates}), "
                f"got {index!r}"
            )
        labels.append(index)
    extra = sorted(set(answers) - {tag for tag, _, _ in blanks})
    if extra:
        raise DataFormatError(f"{path}: key {extra[0]!r}: no blank of {data_path} has this tag")
    return labels


def read_examples(path: str | os.PathLike[str], answer_path: str | None = None) -> ChidSplit:
    """Reads and validates a ChID data file (and its answer file, for train/dev).

    Args:
      path: JSON lines, ``{"content": [passage, ...], "candidates": [idiom, ...]}`` each.
      answer_path: the ``*_answer.json`` object ``{tag: index}``; None for a test file.

    Raises:
      DataFormatError: naming the file, the line (or answer key) and the field: bad JSON,
        a malformed or repeated tag, more than `MAX_NUM_CHOICES` candidates, more blanks in
        a line than candidates, a missing, extra or out-of-range answer. These are checked
        here, before any training, rather than where the features or the decoding need them.
    """
    path = os.fspath(path)
    rows: list[tuple[int, int, int, str, str, tuple[str, ...]]] = []
    seen: dict[str, int] = {}
    lines = read_lines(path)
    for index, line in enumerate(lines):
        record = parse_object_line(path, index + 1, line)
        try:
            for field in ("content", "candidates"):
                if field not in record:
                    raise FieldError(field, "missing")
            passages = _passages(record["content"])
            candidates = _candidates(record["candidates"])
            line_rows = []
            for k, passage in enumerate(passages):
                for tag in TAG_PATTERN.findall(passage):
                    if tag in seen:
                        raise FieldError(f"content[{k}]", f"{tag} already at line {seen[tag]}")
                    seen[tag] = index + 1
                    line_rows.append((index, index + 1, k, tag, passage, candidates))
            _check_fillable(len(line_rows), candidates)
            rows.extend(line_rows)
        except FieldError as e:
            raise DataFormatError(
                f"{path}: line {index + 1}: field {e.field!r}: {e.detail}"
            ) from None
    labels: list[int | None] = [None] * len(rows)
    if answer_path is not None:
        answer_path = os.fspath(answer_path)
        labels = _read_answers(answer_path, [(r[3], r[1], len(r[5])) for r in rows], path)
    blanks = tuple(ChidBlank(*row, label) for row, label in zip(rows, labels, strict=True))
    return ChidSplit(path, answer_path, blanks, len(lines))


def read_split(data_dir: str | os.PathLike[str], split: str, version: str = "1.1") -> ChidSplit:
    """Reads ``split`` ("train", "validation", "test") from the unpacked ``chid_public/``."""
    names = [os.path.join(data_dir, name) for name in split_files(split, version, data_dir)]
    return read_examples(names[0], names[1] if len(names) > 1 else None)


# --- The baseline's input ([PRE] read_chid_examples, convert_examples_to_features) ---------

# fmt: off
# [PRE] `context.replace(...)`, in this order ("——" before "—").
_REPLACEMENTS = (("“", '"'), ("”", '"'), ("——", "--"), ("—", "-"), ("―", "-"), ("…", "..."),
                 ("‘", "'"), ("’", "'"))
# fmt: on
# [PRE] `is_fuhao`: punctuation that stands alone like a CJK character.
_PUNCTUATION = frozenset('。，！？；、：（）－~「《》,」"“”$『』—;()-～‘’')
# [PRE] `is_whitespace` (U+2581 is the underline it uses as a separator).
_WHITESPACE = frozenset(" \t\r\n\u202f\u2581")
# [PRE] `_is_chinese_char` (BERT's CJK blocks).
_CJK = re.compile(
    "[\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\U0002a700-\U0002b73f"
    "\U0002b740-\U0002b81f\U0002b820-\U0002ceaf\uf900-\ufaff\U0002f800-\U0002fa1f]"
)


def _character_class(chars) -> str:
    return "".join(re.escape(char) for char in sorted(chars))


_STANDALONE = _character_class(_PUNCTUATION) + _CJK.pattern[1:-1]
# One doc token, as the baseline's character loop ([PRE] `_tokenize_chinese_chars`, then
# the split on `is_whitespace`) forms them, where a blank starts at "#idiom" anywhere and
# takes the 13 characters from there: a blank; else one CJK / listed punctuation
# character; else a run of other characters up to whitespace, such a character or a
# blank's start. Whitespace is no token. (A regular expression: 3x the speed of the loop
# over characters it replaces; tests/benchmarks/clue/test_chid.py compares them.)
_DOC_TOKEN = re.compile(
    rf"{TAG_PREFIX}.{{0,{TAG_LENGTH - len(TAG_PREFIX)}}}"
    rf"|[{_STANDALONE}]"
    rf"|(?:(?!{TAG_PREFIX})[^{_STANDALONE}{_character_class(_WHITESPACE)}])+",
    re.DOTALL,
)


def normalize_passage(passage: str) -> str:
    """[PRE]'s quote and dash rewrite: ``“好”——…`` -> ``"好"--...``."""
    for old, new in _REPLACEMENTS:
        passage = passage.replace(old, new)
    return passage


def passage_tokens(passage: str) -> list[str]:
    """The baseline's doc tokens: blanks, single CJK / listed punctuation characters, and runs
    of other non-space characters ([PRE] `_tokenize_chinese_chars` + whitespace split).

    >>> passage_tokens("他在NBA打球，#idiom000001#。")
    ['他', '在', 'NBA', '打', '球', '，', '#idiom000001#', '。']
    """
    return list(_doc_tokens(passage)[0])


# The last 1024 passages' tokens are kept: `tasks/clue/reading.py` splits a chunk of 256
# blanks' passages once to collect the texts to tokenize, then again to build each
# blank's features, and the second time finds them here.
@functools.lru_cache(maxsize=1024)
def _doc_tokens(passage: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(the passage's doc tokens, the positions of those that are blanks)."""
    tokens = tuple(_DOC_TOKEN.findall(normalize_passage(passage)))
    blanks = tuple(
        i for i, token in enumerate(tokens) if token[0] == "#" and TAG_PATTERN.fullmatch(token)
    )
    return tokens, blanks


def blank_window(pieces: Sequence[Any], position: int, num_tokens: int) -> tuple[list, list]:
    """[PRE] `add_tokens_for_around`: up to ``num_tokens`` pieces around ``pieces[position]``,
    half on each side, the other side filling in near a passage end.

    Kept exactly, quirk included: when the passage has at most ``num_tokens`` pieces and
    the blank is past the middle, the left slice starts at a negative index, which Python
    wraps: the left side starts at piece ``2 * len(pieces) - 1 - num_tokens`` (when that is
    positive) instead of piece 0, and may even come out empty.

    >>> blank_window(list(range(20)), 10, 8)
    ([6, 7, 8, 9], [11, 12, 13, 14])
    >>> blank_window(list(range(8)), 6, 8)  # the quirk: pieces 0..5 are all lost
    ([], [7])
    """
    num_left = num_tokens // 2
    num_right = num_tokens - num_left
    after = len(pieces) - 1 - position
    if position >= num_left and after >= num_right:
        return list(pieces[position - num_left : position]), list(
            pieces[position + 1 : position + 1 + num_right]
        )
    if position <= num_left:
        left = list(pieces[:position])
        return left, list(pieces[position + 1 : position + 1 + num_tokens - len(left)])
    right = list(pieces[position + 1 :])
    return list(pieces[position - (num_tokens - len(right)) : position]), right


def _masked(pieces: list, tag: str, other_blank_id: int) -> list[int]:
    """Other blanks -> 4 ``other_blank_id`` each ([PRE]: [MASK]); the caller cuts back to
    the window's size."""
    out: list[int] = []
    for piece in pieces:
        if isinstance(piece, str):
            if piece == tag:
                raise ValueError(f"{tag} occurs twice in its passage")
            out.extend([other_blank_id] * OTHER_BLANK_MASKS)
        else:
            out.append(piece)
    return out


def context_ids(
    blank: ChidBlank,
    tokenize: Callable[[str], Sequence[int]],
    num_tokens: int,
    *,
    blank_id: int,
    other_blank_id: int,
) -> list[int]:
    """``left <blank_id> right``: the window of ``num_tokens`` pieces around the blank
    ([PRE]: ``[unused1]`` marks it; `SpecialIds.blank_id`).

    Each doc token (see `passage_tokens`) is tokenized on its own, as [PRE] does; another
    blank in the window counts as one piece, then becomes 4 ``other_blank_id`` ([PRE]:
    [MASK]) and the sides are cut back to their length (left from its start, right from
    its end).
    """
    tokens, blanks = _doc_tokens(blank.passage)
    pieces: list[Any] = []
    start = 0
    for position in blanks:  # a blank is one piece: itself
        pieces.extend(itertools.chain.from_iterable(map(tokenize, tokens[start:position])))
        pieces.append(tokens[position])
        start = position + 1
    pieces.extend(itertools.chain.from_iterable(map(tokenize, tokens[start:])))
    left, right = blank_window(pieces, pieces.index(blank.tag), num_tokens)
    num_left, num_right = len(left), len(right)
    left = _masked(left, blank.tag, other_blank_id)
    left = left[len(left) - num_left :]
    right = _masked(right, blank.tag, other_blank_id)[:num_right]
    return [*left, blank_id, *right]


def blank_features(
    blank: ChidBlank,
    tokenize: Callable[[str], Sequence[int]],
    ids: SpecialIds,
    frame: Frame,
    max_seq_length: int = MAX_SEQ_LENGTH,
    max_num_choices: int = MAX_NUM_CHOICES,
) -> dict[str, np.ndarray]:
    """One blank in the multiple-choice layout of `cmrcx.model_api.base`.

    Per candidate the pieces (idiom, ``left <blank> right``), framed by the input layout's
    `frame` ([PRE]: ``[CLS] idiom [SEP] left [unused1] right [SEP]``, every segment id 0,
    ``one_segment``); the window ``max_seq_length - 8`` pieces ([PRE]: "- 3" for
    [CLS]/[SEP]/[SEP], "- 5" for [unused1] and the 4-character idiom). ``ids``: the blank
    markers (`SpecialIds.blank_id`, ``other_blank_id``). Padded choices are all padding
    with choice_mask 0.

    Returns:
      input_ids, token_type_ids, input_mask: int32 [max_num_choices, max_seq_length];
      choice_mask: int32 [max_num_choices]; label: int32 [] (-1 without an answer).

    Raises:
      ValueError: more candidates than max_num_choices, or a candidate so long that the
        sequence exceeds max_seq_length (where [PRE]'s assertion fails).
    """
    if len(blank.candidates) > max_num_choices:
        raise ValueError(f"{blank.tag}: {len(blank.candidates)} candidates > {max_num_choices}")
    if ids.blank_id is None or ids.other_blank_id is None:
        raise ValueError(f"ChID marks its blanks, and the vocabulary has no marker: {ids}")
    num_tokens = max_seq_length - 8
    context = context_ids(
        blank, tokenize, num_tokens, blank_id=ids.blank_id, other_blank_id=ids.other_blank_id
    )
    choices = []
    for c, idiom in enumerate(blank.candidates):
        idiom_ids = list(tokenize(idiom))
        length = len(idiom_ids) + len(context) + FRAME_TOKENS
        if length > max_seq_length:
            raise ValueError(
                f"{blank.tag}: candidate {c} ({idiom!r}) makes {length} tokens > "
                f"max_seq_length {max_seq_length}"
            )
        choices.append((idiom_ids, context))
    input_ids, token_type_ids, input_mask = frame(
        choices, max_seq_length, rows=max_num_choices, one_segment=True
    )
    choice_mask = np.zeros(max_num_choices, np.int32)
    choice_mask[: len(blank.candidates)] = 1
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "input_mask": input_mask,
        "choice_mask": choice_mask,
        "label": np.int32(UNFILLED if blank.label is None else blank.label),
    }


def encode_blanks(
    blanks: Sequence[ChidBlank],
    tokenize: Callable[[str], Sequence[int]],
    ids: SpecialIds,
    frame: Frame,
    max_seq_length: int = MAX_SEQ_LENGTH,
    max_num_choices: int = MAX_NUM_CHOICES,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """`blank_features` of many blanks, stacked: arrays [num_blanks, ...], plus metadata
    ``{"line_index": int32 [num_blanks], "tag": [num_blanks] strings}`` for decoding."""
    if not blanks:
        raise ValueError("encode_blanks: no blanks")
    features = [
        blank_features(b, tokenize, ids, frame, max_seq_length, max_num_choices) for b in blanks
    ]
    batch = {key: np.stack([f[key] for f in features]) for key in features[0]}
    metadata = {
        "line_index": np.array([b.line_index for b in blanks], np.int32),
        "tag": [b.tag for b in blanks],
    }
    return batch, metadata
