"""ChID decoding, accuracy and submission files: a line's blanks decoded together (the
baseline's global greedy assignment, or the optimal one-to-one assignment) and
``chid11_predict.json`` / ``chid10_predict.json`` (``{"#idiomNNNNNN#": index}``).

Sources are cited by the tags of `cmrcx.benchmarks.clue.chid` ([PRE], [RUN], [B4K],
[SUBMIT]).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.optimize

from cmrcx.benchmarks.clue.chid import (
    MAX_NUM_CHOICES,
    SUBMISSION_FILES,
    TAG_PATTERN,
    UNFILLED,
    VERSIONS,
    ChidSplit,
)
from cmrcx.benchmarks.records import is_json_int, json_type
from cmrcx.common.errors import DataFormatError
from cmrcx.common.files import load_json, write_atomically

# --- Decoding: one line's blanks share its candidates -------------------------------------


def _as_logits(logits: Any) -> np.ndarray:
    array = np.asarray(logits, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] == 0:
        raise ValueError(f"logits must be [num_blanks, num_choices], got {array.shape}")
    if np.isnan(array).any():
        raise ValueError("logits contain NaN")
    return array


def decode_baseline(logits: Any) -> list[int]:
    """[PRE] `logits_matrix_to_array` (used with g=True by [RUN]): a global greedy assignment.

    Every (choice, blank) pair is ranked by its raw logit, highest first (ties in choice-major
    order: the script's stable sort of its choice-major list); a pair is taken when both its
    blank and its choice are still free. Each choice fills at most one blank.

    Args:
      logits: [num_blanks, num_choices], the blanks of one line in file order.

    Returns:
      [num_blanks] choice indices (-1 for blanks left over when choices run out).
    """
    array = _as_logits(logits)
    num_blanks = array.shape[0]
    order = np.argsort(-array.T.ravel(), kind="stable")
    prediction, used = [UNFILLED] * num_blanks, set()
    for flat in order:
        choice, blank = divmod(int(flat), num_blanks)
        if prediction[blank] == UNFILLED and choice not in used:
            prediction[blank] = choice
            used.add(choice)
    return prediction


def decode_assignment(logits: Any) -> list[int]:
    """The one-to-one assignment of choices to blanks with the highest summed logit ([B4K]).

    Each blank takes exactly one choice, so this also maximises the summed log-softmax over
    choices (each blank's log-normaliser is a constant of the sum).

    Args:
      logits: [num_blanks, num_choices].

    Returns:
      [num_blanks] distinct choice indices (-1 where blanks outnumber choices).
    """
    array = np.nan_to_num(_as_logits(logits), neginf=-1e30, posinf=1e30)
    blanks, choices = scipy.optimize.linear_sum_assignment(-array)
    prediction = [UNFILLED] * array.shape[0]
    for blank, choice in zip(blanks, choices, strict=True):
        prediction[int(blank)] = int(choice)
    return prediction


def decode_argmax(logits: Any) -> list[int]:
    """Each blank on its own: its highest-logit choice ([PRE] `logits_matrix_max_array`, the
    script's g=False path). Choices may repeat. [num_blanks, num_choices] -> [num_blanks]."""
    return [int(c) for c in np.argmax(_as_logits(logits), axis=1)]


DECODERS: dict[str, Callable[[Any], list[int]]] = {
    "baseline": decode_baseline,
    "assignment": decode_assignment,
    "argmax": decode_argmax,
}


def decode_line(mode: str, logits: Any) -> list[int]:
    """Decodes one line's [num_blanks, num_choices] logits with a mode of `DECODERS`."""
    if mode not in DECODERS:
        raise ValueError(f"unknown ChID decoding mode {mode!r}; modes: {', '.join(DECODERS)}")
    return DECODERS[mode](logits)


def decode_predictions(
    mode: str,
    line_indices: Sequence[int],
    tags: Sequence[str],
    logits: Any,
    choice_mask: Any | None = None,
) -> dict[str, int]:
    """``{tag: choice index}`` for every blank, the blanks grouped by line as [PRE] does.

    Args:
      line_indices, tags: [num_blanks] metadata (see `encode_blanks`).
      logits: [num_blanks, max_num_choices] choice logits.
      choice_mask: optional [num_blanks, max_num_choices]; padded choices (0) are left out.
        None keeps every column, as the baseline does (its lines all have 10 candidates).
    """
    logits = _as_logits(logits)
    if not len(line_indices) == len(tags) == len(logits):
        raise ValueError(f"{len(line_indices)} lines, {len(tags)} tags, {len(logits)} logit rows")
    rows: dict[int, list[int]] = {}
    for row, line in enumerate(line_indices):
        rows.setdefault(int(line), []).append(row)
    predictions: dict[str, int] = {}
    for members in rows.values():
        columns = slice(None)
        if choice_mask is not None:
            columns = np.flatnonzero(np.asarray(choice_mask)[members[0]])
        for row, choice in zip(
            members, decode_line(mode, logits[members][:, columns]), strict=True
        ):
            predictions[tags[row]] = choice
    return predictions


def accuracy(answers: Mapping[str, int], predictions: Mapping[str, int]) -> dict[str, float]:
    """[PRE] `evaluate`: percent of the answer file's blanks whose prediction is right.

    Every tag of ``answers`` needs a prediction (the script raises otherwise); extra
    predictions are ignored.
    """
    if not answers:
        raise ValueError("accuracy: no answers to score")
    missing = [tag for tag in answers if tag not in predictions]
    if missing:
        raise ValueError(f"accuracy: no prediction for {len(missing)} blanks, e.g. {missing[0]}")
    correct = sum(predictions[tag] == index for tag, index in answers.items())
    return {"accuracy": 100.0 * correct / len(answers)}


# --- Submission files ---------------------------------------------------------------------


def submission_path(output_dir: str | os.PathLike[str], version: str = "1.1") -> Path:
    """``output_dir/chid11_predict.json`` (``chid10_predict.json`` for version "1.0")."""
    if version not in SUBMISSION_FILES:
        raise ValueError(f"unknown ChID version {version!r}; versions: {', '.join(VERSIONS)}")
    return Path(output_dir) / SUBMISSION_FILES[version]


def write_submission(
    output_dir: str | os.PathLike[str],
    predictions: Mapping[str, Any],
    version: str = "1.1",
    file_name: str | None = None,
) -> Path:
    """Writes ``{"#idiomNNNNNN#": index, ...}`` as [PRE] `write_predictions` does (indent 2),
    atomically. Returns the path (official name unless ``file_name`` is given).

    Raises:
      ValueError: a key is not a tag or an index is not a non-negative integer (-1, a blank
        left unfilled, has no place in the format).
    """
    document = {}
    for tag, index in predictions.items():
        if not isinstance(tag, str) or not TAG_PATTERN.fullmatch(tag):
            raise ValueError(f"ChID submission: {tag!r} is not a #idiomNNNNNN# tag")
        if isinstance(index, bool) or not isinstance(index, int | np.integer) or index < 0:
            raise ValueError(f"ChID submission: {tag}: {index!r} is not a candidate index")
        document[tag] = int(index)
    path = Path(output_dir) / file_name if file_name else submission_path(output_dir, version)
    write_atomically(path, json.dumps(document, indent=2) + "\n")
    return path


def read_submission(path: str | os.PathLike[str], split: ChidSplit | None = None) -> dict[str, int]:
    """Reads and validates a ``{tag: index}`` submission (or [PRE]-format prediction) file.

    With ``split``, every blank of the split must be there, nothing else, and each index
    must be below its line's number of candidates; without it, below `MAX_NUM_CHOICES`.

    Raises:
      DataFormatError: naming the file and the key (tag) at fault.
    """
    document = load_json(path)
    if not isinstance(document, dict):
        raise DataFormatError(
            f"{path}: expected one JSON object {{tag: index}}, got {json_type(document)}"
        )
    limits = {b.tag: len(b.candidates) for b in split.blanks} if split else {}
    for tag, index in document.items():
        if not TAG_PATTERN.fullmatch(tag):
            raise DataFormatError(f"{path}: key {tag!r}: not a #idiomNNNNNN# tag")
        if split is not None and tag not in limits:
            raise DataFormatError(f"{path}: key {tag!r}: no blank of {split.path} has this tag")
        limit = limits.get(tag, MAX_NUM_CHOICES)
        if not is_json_int(index) or not 0 <= index < limit:
            raise DataFormatError(
                f"{path}: key {tag!r}: expected a candidate index in [0, {limit}), got {index!r}"
            )
    if split is not None:
        missing = [b for b in split.blanks if b.tag not in document]
        if missing:
            raise DataFormatError(
                f"{path}: no prediction for {len(missing)} blanks of {split.path}, e.g. "
                f"{missing[0].tag} (line {missing[0].line_number})"
            )
    return dict(document)
