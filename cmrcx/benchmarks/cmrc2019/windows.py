"""Stride windows over long CMRC 2019 passages, with the max-context rule.

Passages reach 731 tokens, more than BERT's 512. As in the authors' baseline
(run_cmrc2019_baseline.py, itself BERT's SQuAD code), each (candidate, passage)
pair becomes windows `[CLS] candidate [SEP] passage[start:start+n] [SEP]`, the
starts `doc_stride` apart, and a blank that falls in several windows is scored
only in the window where it has the most context on its scarcer side. Every
blank lies in at least one window, so every blank is scored exactly once.

These are plain numpy functions over token ids, called from the SeqIO
preprocessors; they are tested on their own (`tests/benchmarks/cmrc2019/test_windows.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cmrcx.benchmarks.windows import SpecialIds, doc_spans, max_context_span

# The arrays one window carries: token features are [max_length] each, the blank
# features [max_blanks] each (see `candidate_windows`).
TOKEN_FEATURES = ("input_ids", "token_type_ids", "input_mask")
WINDOW_FEATURES = (*TOKEN_FEATURES, "blank_positions", "blank_in_window", "blank_is_max_context")


def find_blanks(passage_ids: np.ndarray, blank_markers: Sequence[int], num_blanks: int):
    """Token positions of `[BLANK1]`..`[BLANKn]` in the tokenized passage.

    Returns int [num_blanks]. Raises ValueError when a marker is missing or repeated:
    the passage was validated, so that means the vocabulary lacks the marker token.
    """
    if num_blanks > len(blank_markers):
        raise ValueError(
            f"{num_blanks} blanks, but only {len(blank_markers)} blank markers "
            "are configured (raise max_blanks)"
        )
    positions = np.zeros([num_blanks], np.int32)
    for k in range(num_blanks):
        found = np.flatnonzero(passage_ids == blank_markers[k])
        if len(found) != 1:
            raise ValueError(
                f"[BLANK{k + 1}] became {len(found)} marker tokens (id "
                f"{blank_markers[k]}); is [unused{k + 1}] in the vocabulary?"
            )
        positions[k] = found[0]
    return positions


def _window(candidate_ids, passage_ids, span, max_length, ids: SpecialIds):
    """input_ids, token_type_ids, input_mask: int32 [max_length] for one window."""
    tokens = np.concatenate(
        [
            [ids.cls_id],
            candidate_ids,
            [ids.sep_id],
            passage_ids[span.start : span.start + span.length],
            [ids.sep_id],
        ]
    ).astype(np.int32)
    input_ids = np.full([max_length], ids.pad_id, np.int32)
    input_ids[: len(tokens)] = tokens
    token_type_ids = np.zeros([max_length], np.int32)
    token_type_ids[len(candidate_ids) + 2 : len(tokens)] = 1
    input_mask = np.zeros([max_length], np.int32)
    input_mask[: len(tokens)] = 1
    return input_ids, token_type_ids, input_mask


def candidate_windows(
    passage_ids: np.ndarray,
    candidate_ids: np.ndarray,
    num_blanks: int,
    ids: SpecialIds,
    max_length: int = 512,
    doc_stride: int = 128,
) -> dict[str, np.ndarray]:
    """All windows of one (candidate, passage) pair.

    Args:
      passage_ids: int [passage_tokens], blanks already as marker tokens.
      candidate_ids: int [candidate_tokens], already capped (64 in the paper setup).
      num_blanks: blanks in the passage.
    Returns arrays with a leading [num_windows] axis:
      input_ids, token_type_ids, input_mask: int32 [W, max_length];
      blank_positions: int32 [W, max_blanks], the token position of blank k in the
        window (0, the [CLS] slot, when the window does not hold it);
      blank_in_window: int32 [W, max_blanks], 1 where the window holds blank k;
      blank_is_max_context: int32 [W, max_blanks], 1 in the one window that scores
        blank k.
    """
    max_blanks = len(ids.blank_markers)
    blank_tokens = find_blanks(passage_ids, ids.blank_markers, num_blanks)
    doc_offset = len(candidate_ids) + 2  # [CLS] candidate [SEP]
    spans = doc_spans(len(passage_ids), max_length - doc_offset - 1, doc_stride)
    scoring_span = [max_context_span(spans, int(p)) for p in blank_tokens]
    out = {key: [] for key in WINDOW_FEATURES}
    for index, span in enumerate(spans):
        input_ids, token_type_ids, input_mask = _window(
            candidate_ids, passage_ids, span, max_length, ids
        )
        positions = np.zeros([max_blanks], np.int32)
        in_window = np.zeros([max_blanks], np.int32)
        max_context = np.zeros([max_blanks], np.int32)
        for k, token in enumerate(blank_tokens):
            if span.start <= token < span.start + span.length:
                positions[k] = token - span.start + doc_offset
                in_window[k] = 1
                max_context[k] = scoring_span[k] == index
        for key, value in zip(
            out,
            (input_ids, token_type_ids, input_mask, positions, in_window, max_context),
            strict=True,
        ):
            out[key].append(value)
    return {key: np.stack(values) for key, values in out.items()}


def training_examples(
    passage_ids: np.ndarray,
    choice_ids: list[np.ndarray],
    answers: np.ndarray,
    ids: SpecialIds,
    max_length: int,
    doc_stride: int,
) -> dict[str, np.ndarray]:
    """Training windows: the gold candidate of each blank, in windows holding it.

    As in the authors' baseline, fake candidates are not trained on and a window
    that does not hold the candidate's blank is dropped (nothing to predict).
    Adds `target_blank`: int32 [N], the blank index (0-based) to point at.
    """
    if len(answers) == 0:
        raise ValueError("a passage without answers cannot be trained on (the test split?)")
    parts = []
    for blank, choice in enumerate(answers):
        windows = candidate_windows(
            passage_ids, choice_ids[choice], len(answers), ids, max_length, doc_stride
        )
        keep = windows["blank_in_window"][:, blank] == 1
        windows = {key: value[keep] for key, value in windows.items()}
        windows["target_blank"] = np.full([int(keep.sum())], blank, np.int32)
        parts.append(windows)
    return _concatenate(parts)


def scoring_examples(
    passage_ids: np.ndarray,
    choice_ids: list[np.ndarray],
    num_blanks: int,
    ids: SpecialIds,
    max_length: int,
    doc_stride: int,
) -> dict[str, np.ndarray]:
    """Evaluation windows: every candidate (fakes included) in every window.

    Adds `choice_index`: int32 [N], the candidate each window scores.
    """
    parts = []
    for choice, candidate_ids in enumerate(choice_ids):
        windows = candidate_windows(
            passage_ids, candidate_ids, num_blanks, ids, max_length, doc_stride
        )
        windows["choice_index"] = np.full([len(windows["input_ids"])], choice, np.int32)
        parts.append(windows)
    return _concatenate(parts)


def _concatenate(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
