"""Reading and writing the official CMRC 2019 JSON files.

Dataset files look like::

    {"data": [{"context_id": "TRIAL_800",
               "context": "...[BLANK1]...[BLANK2]...",
               "choices": ["...", ...],
               "answers": [3, 0, ...]}]}

and prediction files like ``{"TRIAL_800": [3, 0, -1, ...]}`` (one choice index per blank,
``-1`` meaning no prediction). Every reader validates strictly: a malformed record fails
with one `DataFormatError` naming the file, the record and the field, rather than
surfacing later as a shape error deep inside training or scoring.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cmrcx.benchmarks.records import FieldError, is_json_int, json_type
from cmrcx.common.errors import DataFormatError
from cmrcx.common.files import load_json, write_atomically

BLANK_PATTERN = re.compile(r"\[BLANK(\d+)\]")
# The authors' script (baseline/run_cmrc2019_baseline.py of ymcui/cmrc2019, commit
# 742f7c8, `read_squad_examples`) puts a space after every passage character outside
# the markers and WordPieces each character on its own (`convert_examples_to_features`):
# "100" is "1 0 0" and "Author" is "a u t h o r", never one word. Candidates are
# tokenized whole. A regex rewrite for tf.strings.regex_replace (RE2 "." is one code
# point; newlines are whitespace already).
CHARACTER_SPACING = (r"(\[BLANK\d+\]|.)", r"\1 ")
# The model sees [BLANKk] as the vocabulary's [unusedk] marker token (as in the
# authors' baseline).
BLANK_TO_MARKER = (r"\[BLANK(\d+)\]", r" [unused\1] ")
# What a passage goes through before WordPiece, in order; shared by the SeqIO pipeline
# and `python -m cmrcx.tokenize --cmrc2019_passage`.
PASSAGE_REWRITES = (CHARACTER_SPACING, BLANK_TO_MARKER)


@dataclasses.dataclass(frozen=True)
class ClozePassage:
    """One validated passage of the sentence-cloze task.

    Attributes:
      context_id: the official id, e.g. ``"DEV_812"``.
      context: the passage text with markers ``[BLANK1]``..``[BLANKn]``, each once, in any
        textual order (the official test file has one passage out of order).
      choices: candidate sentences, [num_choices]; includes the fake candidates.
      answers: [num_blanks] choice index for ``[BLANK1]``, ``[BLANK2]``, ... (by number, not
        by position in the text), or None for the unlabelled test split.
    """

    context_id: str
    context: str
    choices: tuple[str, ...]
    answers: tuple[int, ...] | None

    @property
    def num_blanks(self) -> int:
        """Number of ``[BLANKk]`` markers in the context."""
        return len(BLANK_PATTERN.findall(self.context))

    @property
    def blank_numbers_in_text(self) -> tuple[int, ...]:
        """Blank numbers in the order their markers appear, e.g. (1, 2, 4, 3)."""
        return tuple(int(m) for m in BLANK_PATTERN.findall(self.context))

    @property
    def fake_candidates(self) -> tuple[int, ...]:
        """Choice indices that no blank uses (distractors); empty when answers are unknown."""
        if self.answers is None:
            return ()
        used = set(self.answers)
        return tuple(c for c in range(len(self.choices)) if c not in used)


def _check_blank_markers(context: str) -> int:
    """Checks the markers are exactly [BLANK1]..[BLANKn], each once; returns n.

    Textual order is free: the official test file has QUALIFY_95 with
    "[BLANK9] [BLANK11] [BLANK10] [BLANK12]". A blank is identified by its number.
    """
    markers = BLANK_PATTERN.findall(context)
    if not markers:
        raise FieldError("context", "contains no [BLANKk] marker")
    # "[BLANK01]" or "[BLANK0]" would silently renumber blanks if parsed with int().
    odd = sorted({m for m in markers if m != str(int(m)) or int(m) == 0})
    if odd:
        names = ", ".join(f"[BLANK{m}]" for m in odd)
        raise FieldError("context", f"invalid blank marker(s) {names}")
    numbers = [int(m) for m in markers]
    n = max(numbers)
    missing = sorted(set(range(1, n + 1)) - set(numbers))
    duplicated = sorted(k for k, count in collections.Counter(numbers).items() if count > 1)
    if missing or duplicated:
        problems = []
        if missing:
            problems.append("missing " + ", ".join(f"[BLANK{k}]" for k in missing))
        if duplicated:
            problems.append("duplicated " + ", ".join(f"[BLANK{k}]" for k in duplicated))
        raise FieldError(
            "context",
            f"blank markers must be [BLANK1]..[BLANK{n}] once each: " + "; ".join(problems),
        )
    return n


def _check_choices(choices: Any) -> tuple[str, ...]:
    """Validates ``choices``: a non-empty list of non-blank strings."""
    if not isinstance(choices, list):
        raise FieldError("choices", f"expected an array of strings, got {json_type(choices)}")
    if not choices:
        raise FieldError("choices", "is empty")
    for i, choice in enumerate(choices):
        if not isinstance(choice, str):
            raise FieldError("choices", f"choice {i} is {json_type(choice)}, expected string")
        if not choice.strip():
            raise FieldError("choices", f"choice {i} is empty or whitespace-only")
    return tuple(choices)


def _check_answers(answers: Any, num_blanks: int, num_choices: int) -> tuple[int, ...]:
    """Validates ``answers``: one in-range, distinct choice index per blank."""
    if not isinstance(answers, list):
        raise FieldError("answers", f"expected an array of integers, got {json_type(answers)}")
    for k, index in enumerate(answers):
        if not is_json_int(index):
            raise FieldError("answers", f"answer {k} is {json_type(index)}, expected integer")
    if len(answers) != num_blanks:
        raise FieldError(
            "answers", f"has {len(answers)} answers but the context has {num_blanks} blanks"
        )
    first_blank: dict[int, int] = {}
    for k, index in enumerate(answers):
        if not 0 <= index < num_choices:
            raise FieldError("answers", f"index {index} is out of range for {num_choices} choices")
        if index in first_blank:
            raise FieldError(
                "answers",
                f"choice {index} is used for both [BLANK{first_blank[index] + 1}] "
                f"and [BLANK{k + 1}]",
            )
        first_blank[index] = k
    return tuple(answers)


def _parse_record(record: Any, require_answers: bool) -> ClozePassage:
    """Validates one element of ``data``; raises FieldError (field "" = the record itself)."""
    if not isinstance(record, dict):
        raise FieldError("", f"expected an object, got {json_type(record)}")
    required = ["context_id", "context", "choices"] + (["answers"] if require_answers else [])
    for key in required:
        if key not in record:
            raise FieldError(key, "missing")
    for key in ("context_id", "context"):
        if not isinstance(record[key], str):
            raise FieldError(key, f"expected a string, got {json_type(record[key])}")
    if not record["context_id"].strip():
        raise FieldError("context_id", "is empty or whitespace-only")
    if not record["context"].strip():
        raise FieldError("context", "is empty or whitespace-only")
    num_blanks = _check_blank_markers(record["context"])
    choices = _check_choices(record["choices"])
    # The unlabelled test split ships either "answers": [] or no key at all.
    raw_answers = record.get("answers", [])
    if raw_answers == []:
        if require_answers:
            raise FieldError(
                "answers", "is empty (unlabelled test split? read it with require_answers=False)"
            )
        answers = None
    else:
        answers = _check_answers(raw_answers, num_blanks, len(choices))
    return ClozePassage(record["context_id"], record["context"], choices, answers)


def _data_list(path: str | os.PathLike[str], document: Any) -> list[Any]:
    """Returns the top-level ``data`` list, or raises naming what was found instead."""
    if not isinstance(document, dict):
        raise DataFormatError(
            f"{path}: top level: expected an object with a 'data' array, got {json_type(document)}"
        )
    if "data" not in document:
        raise DataFormatError(f"{path}: top level: field 'data': missing")
    if not isinstance(document["data"], list):
        raise DataFormatError(
            f"{path}: top level: field 'data': expected an array, got {json_type(document['data'])}"
        )
    return document["data"]


def _record_label(index: int, record: Any) -> str:
    """``record 12 (context_id 'DEV_812')``, or just ``record 12`` when the id is unusable."""
    context_id = record.get("context_id") if isinstance(record, dict) else None
    if isinstance(context_id, str):
        return f"record {index} (context_id {context_id!r})"
    return f"record {index}"


def read_passages(path: str | os.PathLike[str], require_answers: bool = True) -> list[ClozePassage]:
    """Reads and validates an official CMRC 2019 dataset file.

    Args:
      path: the JSON file, e.g. ``cmrc2019_dev.json``.
      require_answers: if False (test split), a missing or empty ``answers`` gives
        ``answers=None``; present, non-empty answers are still validated.

    Returns:
      The passages in file order.

    Raises:
      DataFormatError: naming the file, record and field of the first problem found.
    """
    records = _data_list(path, load_json(path))
    passages: list[ClozePassage] = []
    first_index: dict[str, int] = {}
    for i, record in enumerate(records):
        try:
            passage = _parse_record(record, require_answers)
        except FieldError as e:
            field = f": field {e.field!r}" if e.field else ""
            raise DataFormatError(
                f"{path}: {_record_label(i, record)}{field}: {e.detail}"
            ) from None
        if passage.context_id in first_index:
            raise DataFormatError(
                f"{path}: {_record_label(i, record)}: field 'context_id': duplicate of "
                f"record {first_index[passage.context_id]}"
            )
        first_index[passage.context_id] = i
        passages.append(passage)
    return passages


def read_predictions(path: str | os.PathLike[str]) -> dict[str, list[int | str]]:
    """Reads an official predictions file ``{context_id: [choice index per blank]}``.

    Indices are JSON integers or strings: the official evaluator compares ``str(gold)``
    with ``str(pred)``, so ``"3"`` scores like ``3``. Anything else (a number with a
    fraction, a boolean, null, a nested array) is refused here rather than silently
    counted wrong.

    Raises:
      DataFormatError: naming the file and the offending context_id.
    """
    document = load_json(path)
    if not isinstance(document, dict):
        raise DataFormatError(
            f"{path}: top level: expected an object mapping context_id to an array of "
            f"integers, got {json_type(document)}"
        )
    predictions: dict[str, list[int | str]] = {}
    for context_id, value in document.items():
        where = f"{path}: context_id {context_id!r}"
        if not isinstance(value, list):
            raise DataFormatError(f"{where}: expected an array of integers, got {json_type(value)}")
        for k, index in enumerate(value):
            if not (is_json_int(index) or isinstance(index, str)):
                raise DataFormatError(
                    f"{where}: blank {k + 1}: expected an integer, got {json_type(index)}"
                )
        predictions[context_id] = value
    return predictions


def write_predictions(
    path: str | os.PathLike[str], predictions: Mapping[str, Sequence[int]]
) -> None:
    """Writes ``{context_id: [choice index per blank]}`` in the official format, atomically.

    The file is written to a temporary sibling and moved into place with `os.replace`, so a
    crash never leaves a truncated predictions file that the scorer would reject.
    """
    # int() also turns numpy integers (not JSON-serialisable) into plain ints.
    document = {cid: [int(i) for i in indices] for cid, indices in predictions.items()}
    write_atomically(path, json.dumps(document, ensure_ascii=False, indent=1) + "\n")
