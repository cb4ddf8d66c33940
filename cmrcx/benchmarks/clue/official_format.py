"""Strict readers of CLUE's official JSON-lines files (one JSON object per line, UTF-8).

Every line of a split file is one record, e.g. for AFQMC ([README] in `tasks`)::

    {"sentence1": "...", "sentence2": "...", "label": "0"}

and test files carry an id instead of a label: ``{"id": 0, "sentence1": ..., ...}``. A
malformed line raises one `DataFormatError` naming the file, the 1-based line number and
the field (bad JSON, not an object, missing field, wrong type, unknown label, a CLUEWSC2020
span that is not where its index says). The one documented skip: rows of OCNLI / CMNLI
whose label is ``"-"`` (no majority label) are dropped from labelled splits and counted,
as the baselines do ([OCNLI], [TF] CMNLIProcessor).

Files are split on ``"\\n"`` only: IFLYTEK's app descriptions contain U+2028 (LINE
SEPARATOR), which ``str.splitlines()`` would treat as a line break. The baselines read
with ``readlines()`` + ``json.loads`` ([TF] ``_read_json``), which also breaks on ``"\\n"``
only, so a blank line is an error here just as it is a crash there.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from cmrcx.benchmarks.clue.tasks import ClueTask, get_task
from cmrcx.benchmarks.records import FieldError, is_json_int, json_type, read_lines
from cmrcx.common.errors import DataFormatError


@dataclasses.dataclass(frozen=True)
class WscTarget:
    """CLUEWSC2020's ``target``: the candidate noun (span1) and the pronoun (span2).

    Indices are character offsets into ``text`` ([TF] WSCProcessor checks
    ``text[index:index + len(span_text)] == span_text`` for both spans).
    """

    span1_index: int
    span1_text: str
    span2_index: int
    span2_text: str


@dataclasses.dataclass(frozen=True)
class ClueExample:
    """One validated record.

    Attributes:
      id: the record's own id (``"id"``, ``"idx"`` or ``"index"`` per task, int or string
        exactly as in the file), else its 0-based line index.
      line_number: 1-based line of the record in its file.
      texts: the task's text fields (and optional ones when present): strings, CSL's
        ``keyword`` as a tuple of strings, CLUEWSC2020's ``target`` as a `WscTarget`.
      label: the official label string, or None for an unlabelled (test) record.
    """

    id: int | str
    line_number: int
    texts: Mapping[str, Any]
    label: str | None


@dataclasses.dataclass(frozen=True)
class ClueSplit:
    """The records of one file, in file order, and what was skipped.

    Attributes:
      task: versioned task name, e.g. ``"clue_ocnli"``.
      path: the file read.
      examples: the kept records, in file order.
      skipped_ids: ids of the rows dropped for having no majority label (``"-"``).
    """

    task: str
    path: str
    examples: tuple[ClueExample, ...]
    skipped_ids: tuple[int | str, ...] = ()

    @property
    def skipped_unlabelled(self) -> int:
        """How many ``"-"`` rows were skipped (0 for most tasks and every test split)."""
        return len(self.skipped_ids)

    @property
    def empty_text_ids(self) -> tuple[int | str, ...]:
        """Ids of records with an empty or whitespace-only text field (kept: the baselines
        read it as an empty sentence)."""
        return tuple(
            e.id
            for e in self.examples
            if any(isinstance(v, str) and not v.strip() for v in e.texts.values())
        )

    @property
    def repeated_ids(self) -> tuple[int | str, ...]:
        """Ids that an earlier record of the file already has (kept: CLUE's files are read
        and submitted line by line)."""
        seen, repeated = set(), []
        for example in self.examples:
            if example.id in seen:
                repeated.append(example.id)
            seen.add(example.id)
        return tuple(repeated)

    def notes(self) -> list[str]:
        """What the summary adds to the count: rows skipped, and rows kept that are worth
        knowing of (empty texts, repeated ids), with an example id each."""
        notes = []
        if self.skipped_ids:
            notes.append(f"{len(self.skipped_ids):,} skipped (label '-': no majority label)")
        for ids, what in (
            (self.empty_text_ids, "with an empty text (kept, read as an empty sentence)"),
            (self.repeated_ids, "repeating an earlier record's id (kept; lines are what count)"),
        ):
            if ids:
                notes.append(f"{len(ids):,} {what}, e.g. {ids[0]!r}")
        return notes

    def summary(self) -> str:
        """One line for a log, e.g. ``.../train.50k.json: 1,000 examples, 3 skipped (...)``."""
        return ", ".join([f"{self.path}: {len(self.examples):,} examples", *self.notes()])


def parse_object_line(path: str | os.PathLike[str], line_number: int, line: str) -> dict:
    """``json.loads`` of one line that must hold a JSON object, else DataFormatError."""
    where = f"{path}: line {line_number}"
    if not line.strip():
        raise DataFormatError(f"{where}: empty line (one JSON object per line expected)")
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise DataFormatError(f"{where}: malformed JSON at column {e.colno}: {e.msg}") from None
    if not isinstance(record, dict):
        raise DataFormatError(f"{where}: expected a JSON object, got {json_type(record)}")
    return record


def _string(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise FieldError(field, f"expected a string, got {json_type(value)}")
    return value


def _keyword_list(field: str, value: Any) -> tuple[str, ...]:
    """CSL's ``keyword``: an array of strings ([README] example). An empty one is read: [TF]
    CslProcessor joins it to the first segment "", and trains and predicts on it."""
    if not isinstance(value, list):
        raise FieldError(field, f"expected an array of strings, got {json_type(value)}")
    for i, keyword in enumerate(value):
        if not isinstance(keyword, str):
            raise FieldError(field, f"keyword {i} is {json_type(keyword)}, expected string")
    return tuple(value)


def _wsc_target(field: str, value: Any) -> WscTarget:
    """CLUEWSC2020's ``target`` object with its four span keys ([README] example).

    An empty span text is read: [TF] WSCProcessor's assertion holds for it and the markers
    go around nothing. A negative index is refused: the assertion could pass only through
    Python's negative slicing, and the ``list.insert`` calls would then mark other text.
    """
    if not isinstance(value, dict):
        raise FieldError(field, f"expected an object, got {json_type(value)}")
    spans: dict[str, Any] = {}
    for span in ("span1", "span2"):
        index_key, text_key = f"{span}_index", f"{span}_text"
        for key in (index_key, text_key):
            if key not in value:
                raise FieldError(f"{field}.{key}", "missing")
        index, text = value[index_key], value[text_key]
        if not is_json_int(index) or index < 0:
            raise FieldError(
                f"{field}.{index_key}", f"expected a non-negative integer, got {index!r}"
            )
        if not isinstance(text, str):
            raise FieldError(f"{field}.{text_key}", f"expected a string, got {json_type(text)}")
        spans[index_key], spans[text_key] = index, text
    return WscTarget(**spans)


def _check_spans(text: str, target: WscTarget) -> None:
    """The baselines' assertion: each span text stands at its index in ``text``."""
    for span, index, span_text in (
        ("span1", target.span1_index, target.span1_text),
        ("span2", target.span2_index, target.span2_text),
    ):
        found = text[index : index + len(span_text)]
        if found != span_text:
            raise FieldError(
                f"target.{span}_text",
                f"{span_text!r} is not at index {index} of 'text' (found {found!r})",
            )


# Fields whose value is not a plain string; every other text field is one.
_FIELD_PARSERS = {"keyword": _keyword_list, "target": _wsc_target}


def _texts(task: ClueTask, record: dict) -> dict[str, Any]:
    texts: dict[str, Any] = {}
    for field in task.text_fields:
        if field not in record:
            raise FieldError(field, "missing")
        texts[field] = _FIELD_PARSERS.get(field, _string)(field, record[field])
    for field in task.optional_text_fields:
        if field in record:
            texts[field] = _string(field, record[field])
    if "target" in texts:
        _check_spans(texts["text"], texts["target"])
    return texts


def _record_id(task: ClueTask, record: dict, line_index: int) -> int | str:
    for field in task.id_fields:
        if field in record:
            value = record[field]
            if not (is_json_int(value) or isinstance(value, str)):
                raise FieldError(field, f"expected an integer or string id, got {value!r}")
            return value
    return line_index


def _label(task: ClueTask, record: dict, labelled: bool) -> str | None:
    """The label string; None when absent from an unlabelled split (or "-" there)."""
    field = task.label_field
    if field not in record:
        if labelled:
            raise FieldError(field, "missing (unlabelled file? read it with labelled=False)")
        return None
    label = record[field]
    if not isinstance(label, str):
        raise FieldError(
            field,
            f"expected a label string such as {task.labels[0]!r}, got {json_type(label)} {label!r}",
        )
    if label == task.unlabelled_marker:
        return None
    if label not in task.labels:
        shown = ", ".join(repr(x) for x in task.labels[:16])
        more = f", ... ({len(task.labels)} labels)" if len(task.labels) > 16 else ""
        raise FieldError(field, f"unknown label {label!r}; expected one of {shown}{more}")
    return label


def read_examples(
    task: ClueTask | str, path: str | os.PathLike[str], *, labelled: bool
) -> ClueSplit:
    """Reads and validates one official CLUE file.

    Args:
      task: a `ClueTask` or its name, e.g. ``"clue_afqmc"``.
      path: a JSON-lines file, e.g. ``afqmc_public/dev.json``.
      labelled: True for train/dev files (every record needs a known label; ``"-"`` rows
        of OCNLI/CMNLI are skipped and counted); False for test files (a label is optional
        and, when present, still validated).

    Returns:
      A `ClueSplit` with the examples in file order.

    Raises:
      DataFormatError: naming the file, line and field of the first problem found.
    """
    task = get_task(task) if isinstance(task, str) else task
    examples: list[ClueExample] = []
    skipped: list[int | str] = []
    for index, line in enumerate(read_lines(path)):
        record = parse_object_line(path, index + 1, line)
        try:
            example_id = _record_id(task, record, index)
            texts = _texts(task, record)
            label = _label(task, record, labelled)
        except FieldError as e:
            raise DataFormatError(
                f"{path}: line {index + 1}: field {e.field!r}: {e.detail}"
            ) from None
        if labelled and label is None:  # the "-" marker: no majority label
            skipped.append(example_id)
            continue
        examples.append(ClueExample(example_id, index + 1, texts, label))
    return ClueSplit(task.name, os.fspath(path), tuple(examples), tuple(skipped))


def read_split(task: ClueTask | str, data_dir: str | os.PathLike[str], split: str) -> ClueSplit:
    """Reads ``split`` ("train", "validation" or "test") of ``task`` from its official folder.

    ``data_dir`` is the unpacked ``<dataset>_public`` folder; the file name comes from
    the table (e.g. OCNLI's train split is ``train.50k.json``, TNEWS 1.0's test split
    ``test1.0.json``). Test files are read unlabelled, the others labelled.
    """
    task = get_task(task) if isinstance(task, str) else task
    if split not in task.split_files:
        raise DataFormatError(
            f"{task.name} has no {split!r} split; it has {', '.join(task.split_files)}"
        )
    path = os.path.join(data_dir, task.split_files[split])
    return read_examples(task, path, labelled=split != "test")
