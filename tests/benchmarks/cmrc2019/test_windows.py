"""Tests for the stride windows and the max-context rule (`cmrcx.benchmarks.cmrc2019.windows`,
`cmrcx.benchmarks.windows`)."""

from __future__ import annotations

import numpy as np
import pytest

from cmrcx.benchmarks.cmrc2019.windows import (
    WINDOW_FEATURES,
    candidate_windows,
    find_blanks,
    scoring_examples,
    training_examples,
)
from cmrcx.benchmarks.windows import Span, SpecialIds, doc_spans, max_context_span

IDS = SpecialIds(cls_id=101, sep_id=102, pad_id=0, blank_markers=tuple(range(1, 33)))
MAX_BLANKS = len(IDS.blank_markers)
WINDOW_KEYS = WINDOW_FEATURES


def _passage(num_tokens: int, blanks: list[int], seed: int = 0) -> np.ndarray:
    """Synthetic passage: ids >= 200, with the marker of blank k at position blanks[k]."""
    ids = np.random.default_rng(seed).integers(200, 20_000, size=num_tokens)
    for k, position in enumerate(blanks):
        ids[position] = IDS.blank_markers[k]
    return ids


def _candidate(length: int, base: int = 30_000) -> np.ndarray:
    """A candidate whose ids (base, base+1, ...) appear nowhere in a passage."""
    return np.arange(base, base + length)


def _reference_max_context(spans: list[Span], position: int) -> int:
    """BERT's `_check_is_max_context`, written out independently of the module."""
    scores = []
    for span in spans:
        end = span.start + span.length - 1
        if span.start <= position <= end:
            scores.append(min(position - span.start, end - position) + 0.01 * span.length)
        else:
            scores.append(-np.inf)
    return int(np.argmax(scores))  # argmax returns the first of equal maxima


def _check_windows(out, passage, candidate, blanks, max_length, doc_stride):
    """Every structural invariant of `candidate_windows` output; returns the spans used."""
    c = len(candidate)
    spans = doc_spans(len(passage), max_length - c - 3, doc_stride)
    num_windows = len(spans)
    for key in WINDOW_KEYS:
        width = max_length if key in WINDOW_KEYS[:3] else MAX_BLANKS
        assert out[key].shape == (num_windows, width), key
        assert out[key].dtype == np.int32, key
    # The spans tile the whole passage: first at 0, last at the end, no gaps.
    assert spans[0].start == 0
    assert spans[-1].start + spans[-1].length == len(passage)
    for prev, span in zip(spans, spans[1:], strict=False):
        assert span.start <= prev.start + prev.length
    for w, span in enumerate(spans):
        ids, types, mask = out["input_ids"][w], out["token_type_ids"][w], out["input_mask"][w]
        real = c + 3 + span.length
        assert ids[0] == IDS.cls_id
        np.testing.assert_array_equal(ids[1 : 1 + c], candidate)
        assert ids[1 + c] == IDS.sep_id
        np.testing.assert_array_equal(
            ids[c + 2 : c + 2 + span.length], passage[span.start : span.start + span.length]
        )
        assert ids[real - 1] == IDS.sep_id
        assert (ids[real:] == IDS.pad_id).all()
        np.testing.assert_array_equal(mask, np.arange(max_length) < real)
        expected_types = np.zeros(max_length, np.int32)
        expected_types[c + 2 : real] = 1  # the passage slice and the final [SEP]
        np.testing.assert_array_equal(types, expected_types)
        for k, p in enumerate(blanks):
            inside = span.start <= p < span.start + span.length
            assert out["blank_in_window"][w, k] == inside
            if inside:
                assert out["blank_positions"][w, k] == p - span.start + c + 2
                assert ids[out["blank_positions"][w, k]] == IDS.blank_markers[k]
            else:
                assert out["blank_positions"][w, k] == 0
                assert out["blank_is_max_context"][w, k] == 0
        # Slots past the passage's blanks stay empty.
        for key in WINDOW_KEYS[3:]:
            assert (out[key][w, len(blanks) :] == 0).all(), key
    # Every blank is scored in exactly one window: the one BERT's rule picks.
    scored = out["blank_is_max_context"][:, : len(blanks)]
    np.testing.assert_array_equal(scored.sum(axis=0), np.ones(len(blanks)))
    for k, p in enumerate(blanks):
        assert int(np.argmax(scored[:, k])) == _reference_max_context(spans, p)
    return spans


# doc_spans


@pytest.mark.parametrize(
    "num_tokens, max_tokens_for_doc, doc_stride, expected",
    [
        # Short passage: one span, however small the stride.
        (5, 10, 3, [(0, 5)]),
        # Exact fit: one span, no empty tail span.
        (10, 10, 3, [(0, 10)]),
        (445, 445, 128, [(0, 445)]),
        # One token too many: a second span, `doc_stride` further, runs to the end.
        (11, 10, 3, [(0, 10), (3, 8)]),
        (446, 445, 128, [(0, 445), (128, 318)]),
        # Stride steps, the last span ending exactly on the last token.
        (10, 4, 2, [(0, 4), (2, 4), (4, 4), (6, 4)]),
        (12, 6, 3, [(0, 6), (3, 6), (6, 6)]),
        # A stride longer than the span is capped at the span length: no token skipped.
        (10, 3, 5, [(0, 3), (3, 3), (6, 3), (9, 1)]),
        # The paper setup: 731 tokens, 64-token candidate, 512 - 66 - 1 = 445 per window.
        (731, 445, 128, [(0, 445), (128, 445), (256, 445), (384, 347)]),
        # Empty passage: one empty span (the baseline would give none).
        (0, 4, 2, [(0, 0)]),
    ],
)
def test_doc_spans_matches_authors_loop(num_tokens, max_tokens_for_doc, doc_stride, expected):
    """doc_spans reproduces the baseline's while-loop, worked out by hand."""
    spans = doc_spans(num_tokens, max_tokens_for_doc, doc_stride)
    assert spans == [Span(start, length) for start, length in expected]


@pytest.mark.parametrize("max_tokens_for_doc", [0, -3])
def test_doc_spans_rejects_no_room(max_tokens_for_doc):
    """A candidate too long for max_length leaves no room: an error, not an endless loop."""
    with pytest.raises(ValueError, match="no room for the passage"):
        doc_spans(100, max_tokens_for_doc, 32)


# max_context_span


@pytest.mark.parametrize(
    "spans, position, expected",
    [
        # spans 0..3, 2..5, 4..7, 6..9: position 3 has min(1, 2) in span 1, min(3, 0) in span 0.
        ([(0, 4), (2, 4), (4, 4), (6, 4)], 3, 1),
        ([(0, 4), (2, 4), (4, 4), (6, 4)], 4, 1),  # span 1: min(2, 1)=1; span 2: min(0, 3)=0
        ([(0, 4), (2, 4), (4, 4), (6, 4)], 5, 2),  # span 1: min(3, 0)=0; span 2: min(1, 2)=1
        ([(0, 4), (2, 4), (4, 4), (6, 4)], 0, 0),  # only span 0 holds it
        ([(0, 4), (2, 4), (4, 4), (6, 4)], 9, 3),  # only span 3 holds it
        # Equal min-context: the longer span wins by 0.01 * length (2.07 < 2.09).
        ([(0, 7), (2, 9)], 4, 1),
        # Exact tie (same min-context, same length): the first span wins.
        ([(0, 5), (2, 5)], 3, 0),
        ([(0, 5), (2, 5), (4, 5)], 4, 1),  # 0: min(4,0); 1: min(2,2); 2: min(0,4)
        # Position outside every span.
        ([(0, 4), (2, 4)], 6, -1),
        ([], 0, -1),
    ],
)
def test_max_context_span(spans, position, expected):
    """Most min(left, right) + 0.01 * length context wins; first span on ties; -1 if none."""
    assert max_context_span([Span(*s) for s in spans], position) == expected


# candidate_windows: the key test


PAPER_BLANKS = [0, 57, 128, 300, 384, 444, 445, 572, 573, 730]


def test_candidate_windows_long_passage_paper_setup():
    """731 tokens, 10 blanks (first, last, window edges), 64-token candidate, 512 / 128."""
    passage = _passage(731, PAPER_BLANKS)
    candidate = _candidate(64)
    out = candidate_windows(passage, candidate, len(PAPER_BLANKS), IDS, 512, 128)
    spans = _check_windows(out, passage, candidate, PAPER_BLANKS, 512, 128)
    assert spans == [Span(0, 445), Span(128, 445), Span(256, 445), Span(384, 347)]
    # Worked out by hand: windows 0..444, 128..572, 256..700, 384..730.
    expected_in_window = [
        [1, 0, 0, 0],  # 0
        [1, 0, 0, 0],  # 57
        [1, 1, 0, 0],  # 128: first token of window 1
        [1, 1, 1, 0],  # 300
        [1, 1, 1, 1],  # 384: first token of window 3
        [1, 1, 1, 1],  # 444: last token of window 0
        [0, 1, 1, 1],  # 445: just past window 0
        [0, 1, 1, 1],  # 572: last token of window 1
        [0, 0, 1, 1],  # 573
        [0, 0, 0, 1],  # 730: last token of the passage
    ]
    np.testing.assert_array_equal(
        out["blank_in_window"][:, : len(PAPER_BLANKS)].T, expected_in_window
    )
    # 128: min(128, 316) in w0 beats 0 in w1; 444: min(188, 256) in w2; 572: min(188, 158) in w3.
    expected_scoring_window = [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    scored = out["blank_is_max_context"][:, : len(PAPER_BLANKS)]
    assert [int(np.flatnonzero(scored[:, k])[0]) for k in range(10)] == expected_scoring_window
    for k, w in enumerate(expected_scoring_window):
        assert out["input_ids"][w, out["blank_positions"][w, k]] == k + 1  # [unused k+1]


@pytest.mark.parametrize(
    "max_length, doc_stride, candidate_length, blanks, num_windows",
    [
        # 128 - 66 - 1 = 61 tokens a window, stride 64 capped to 61: 12 adjacent windows;
        # blanks on both sides of the 60|61 and 121|122 boundaries.
        (128, 64, 64, [0, 60, 61, 121, 122, 300, 365, 366, 671, 730], 12),
        # 16-token candidate: 109 tokens a window, stride 64, overlapping windows.
        (128, 64, 16, [0, 63, 64, 108, 109, 400, 639, 640, 700, 730], 11),
        # Paper lengths with a short candidate: 504 tokens a window.
        (512, 128, 5, PAPER_BLANKS, 3),
    ],
)
def test_candidate_windows_many_windows(
    max_length, doc_stride, candidate_length, blanks, num_windows
):
    """Small windows: many of them, blanks on window boundaries, every blank scored once."""
    passage = _passage(731, blanks, seed=candidate_length)
    candidate = _candidate(candidate_length)
    out = candidate_windows(passage, candidate, len(blanks), IDS, max_length, doc_stride)
    spans = _check_windows(out, passage, candidate, blanks, max_length, doc_stride)
    assert len(spans) == num_windows


def test_candidate_windows_exact_fit_has_no_padding():
    """Candidate + passage filling max_length exactly: one window, mask all ones."""
    blanks = [0, 9]
    passage = _passage(10, blanks)
    candidate = _candidate(3)
    out = candidate_windows(passage, candidate, 2, IDS, max_length=16, doc_stride=4)
    _check_windows(out, passage, candidate, blanks, 16, 4)
    assert len(out["input_ids"]) == 1
    assert out["input_mask"].all()
    np.testing.assert_array_equal(
        out["input_ids"][0],
        [101, *candidate, 102, *passage, 102],
    )


def test_candidate_windows_short_passage_single_window():
    """A passage that fits: one window, every blank scored there."""
    blanks = [2, 5, 7]
    passage = _passage(8, blanks)
    candidate = _candidate(4)
    out = candidate_windows(passage, candidate, 3, IDS, max_length=32, doc_stride=8)
    _check_windows(out, passage, candidate, blanks, 32, 8)
    np.testing.assert_array_equal(out["blank_positions"][0, :4], [8, 11, 13, 0])
    np.testing.assert_array_equal(out["blank_is_max_context"][0, :4], [1, 1, 1, 0])


def test_candidate_windows_candidate_too_long():
    """A candidate leaving no room for the passage fails loudly."""
    passage = _passage(20, [3])
    with pytest.raises(ValueError, match="no room"):
        candidate_windows(passage, _candidate(61), 1, IDS, max_length=64, doc_stride=32)


# training_examples and scoring_examples

EXAMPLE_BLANKS = [0, 100, 250, 251, 400, 600, 730]
EXAMPLE_ANSWERS = np.array([4, 0, 6, 2, 1, 7, 3])  # choices 5 and 8 are fakes


def _choices() -> list[np.ndarray]:
    """9 candidates of different lengths, each with its own id range."""
    return [_candidate(4 + 5 * i, base=30_000 + 1000 * i) for i in range(9)]


def _candidate_of(example_ids: np.ndarray) -> np.ndarray:
    """The candidate tokens of one window: between [CLS] and the first [SEP]."""
    first_sep = int(np.flatnonzero(example_ids == IDS.sep_id)[0])
    return example_ids[1:first_sep]


def test_training_examples_gold_candidate_per_blank():
    """One example per (blank, window holding it), gold candidate only, target_blank right."""
    passage = _passage(731, EXAMPLE_BLANKS)
    choices = _choices()
    out = training_examples(passage, choices, EXAMPLE_ANSWERS, IDS, 128, 64)
    expected_count = 0
    for k, p in enumerate(EXAMPLE_BLANKS):
        spans = doc_spans(731, 128 - len(choices[EXAMPLE_ANSWERS[k]]) - 3, 64)
        expected_count += sum(s.start <= p < s.start + s.length for s in spans)
    assert len(out["target_blank"]) == expected_count
    assert set(out) == {*WINDOW_KEYS, "target_blank"}
    for key in out:
        assert len(out[key]) == expected_count, key
        assert out[key].dtype == np.int32, key
    # Grouped by blank, in blank order; every blank has at least one example.
    np.testing.assert_array_equal(out["target_blank"], np.sort(out["target_blank"]))
    assert set(out["target_blank"].tolist()) == set(range(len(EXAMPLE_BLANKS)))
    fakes = {5, 8}
    for row, target in enumerate(out["target_blank"]):
        ids = out["input_ids"][row]
        candidate = _candidate_of(ids)
        np.testing.assert_array_equal(candidate, choices[EXAMPLE_ANSWERS[target]])
        assert not any(
            len(candidate) == len(choices[f]) and (candidate == choices[f]).all() for f in fakes
        )
        assert out["blank_in_window"][row, target] == 1
        assert ids[out["blank_positions"][row, target]] == IDS.blank_markers[target]


def test_training_examples_short_passage():
    """Short passage: exactly one example per blank, each with its gold candidate."""
    blanks = [1, 4]
    passage = _passage(6, blanks)
    choices = [_candidate(2, 30_000), _candidate(3, 31_000), _candidate(2, 32_000)]
    out = training_examples(passage, choices, np.array([2, 0]), IDS, 32, 8)
    np.testing.assert_array_equal(out["target_blank"], [0, 1])
    np.testing.assert_array_equal(_candidate_of(out["input_ids"][0]), choices[2])
    np.testing.assert_array_equal(_candidate_of(out["input_ids"][1]), choices[0])
    np.testing.assert_array_equal(out["blank_positions"][:, :2], [[5, 8], [5, 8]])


def test_scoring_examples_every_candidate_every_window():
    """Every candidate (fakes too) in every window; each blank scored once per candidate."""
    passage = _passage(731, EXAMPLE_BLANKS)
    choices = _choices()
    out = scoring_examples(passage, choices, len(EXAMPLE_BLANKS), IDS, 128, 64)
    assert set(out) == {*WINDOW_KEYS, "choice_index"}
    windows_per_choice = [len(doc_spans(731, 128 - len(c) - 3, 64)) for c in choices]
    expected_index = np.repeat(np.arange(len(choices)), windows_per_choice)
    np.testing.assert_array_equal(out["choice_index"], expected_index)
    for key in out:
        assert len(out[key]) == sum(windows_per_choice), key
    for row, choice in enumerate(out["choice_index"]):
        np.testing.assert_array_equal(_candidate_of(out["input_ids"][row]), choices[choice])
    for choice in range(len(choices)):
        rows = out["choice_index"] == choice
        scored = out["blank_is_max_context"][rows]
        np.testing.assert_array_equal(
            scored[:, : len(EXAMPLE_BLANKS)].sum(axis=0), np.ones(len(EXAMPLE_BLANKS))
        )
        assert (scored[:, len(EXAMPLE_BLANKS) :] == 0).all()
        # Same content as candidate_windows for that candidate alone.
        alone = candidate_windows(passage, choices[choice], len(EXAMPLE_BLANKS), IDS, 128, 64)
        for key in WINDOW_KEYS:
            np.testing.assert_array_equal(out[key][rows], alone[key], key)


# find_blanks


def test_find_blanks_positions():
    """Positions of [unused1]..[unusedN], in blank order."""
    passage = _passage(50, [3, 10, 49])
    np.testing.assert_array_equal(find_blanks(passage, IDS.blank_markers, 3), [3, 10, 49])


def test_find_blanks_missing_marker_names_it():
    """A marker the tokenizer did not produce: ValueError naming `[unusedK]`."""
    passage = _passage(50, [3, 10])
    with pytest.raises(ValueError, match=r"\[BLANK3\] became 0 marker tokens.*\[unused3\]"):
        find_blanks(passage, IDS.blank_markers, 3)
    with pytest.raises(ValueError, match=r"\[unused3\]"):
        candidate_windows(passage, _candidate(4), 3, IDS, 64, 32)


def test_find_blanks_repeated_marker():
    """A marker appearing twice is an error too."""
    passage = _passage(50, [3, 10])
    passage[20] = IDS.blank_markers[1]
    with pytest.raises(ValueError, match=r"\[BLANK2\] became 2 marker tokens.*\[unused2\]"):
        find_blanks(passage, IDS.blank_markers, 2)


def test_find_blanks_more_blanks_than_markers():
    """More blanks than configured markers: ValueError with both counts."""
    passage = _passage(100, list(range(0, 64, 2)))
    with pytest.raises(ValueError, match=r"33 blanks, but only 32 blank markers"):
        find_blanks(passage, IDS.blank_markers, 33)


def test_training_on_a_passage_without_answers_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="without answers"):
        training_examples(
            np.array([200, 1, 201], np.int32),
            [np.array([300], np.int32)],
            np.array([], np.int32),
            IDS,
            16,
            8,
        )
