"""LOT's official files (thu-coai/LOT-LongLM `datasets/<task>/README.md`): one JSON object
per line in train.jsonl, val.jsonl, test.jsonl, read into the records below.

The tasks write the blank differently (ClozeT ``<mask>``, SenPos ``[MASK]`` - its README
prose says ``<MASK>``, both are read -, PlotCom ``<MASK>``): every record's ``story`` has
them normalised to `MASK`. Labels are kept 0-based in the records (ClozeT's file has
``"0"``/``"1"``, SenPos's 1-based ints); `official_label` gives them back in the file's
own type. ``raw`` is the line's JSON object as read, so a prediction file repeats the
inputs unchanged (`prediction_line`).

What the readers accept (`read_file`), and why:

- Fields, per task (thu-coai/LOT-LongLM datasets/<task>/README.md examples): ClozeT
  ``story``, ``plot0``, ``plot1``, ``label``; SenPos ``story``, ``sentence``, ``label``;
  PlotCom ``story``, ``plot``; OutGen ``outline``, ``title``, ``story``. Other keys are
  kept in ``raw`` and otherwise ignored. OutGen's ``title`` may be absent (read as ""):
  the organisers' competition files in OutGen's format have none (IndexFziQ/LongLM-Eyas
  datasets/chn/data/).
- Masks: any of ``<mask>``, ``[MASK]``, ``<MASK>`` in any task's ``story``; ClozeT and
  PlotCom need exactly one, SenPos at least one. Candidates, the removed sentence and the
  PlotCom target must hold none, and candidates and the sentence must not be empty or
  white space only (LOT deleted every space: thu-coai/LOT-LongLM appendix.pdf section 1).
  The OutGen ``story`` is a target written out whole: a mask there is refused too.
- Outlines: a non-empty list of phrases, none blank, neither they nor the title holding
  ``#``, which joins them in the authors' input (``TITLE#p1#...#pn``) and on which the
  organisers' eval.py splits ``"#".join(outline)`` (its `rouge` and `order`): it would
  read and score such a phrase as two (none of their 661 outlines has one), and ``[]`` as
  the phrase ``""``, order 1.0 whatever the story (not the ZeroDivisionError of its
  `order`).
- Labels: ClozeT ``"0"``/``"1"`` (the official type) or the integers 0/1 (a copy whose
  tool converted the type, e.g. a re-export of the HF copy ``Jiann/LOT``); SenPos an
  integer 1..number of masks (the official type) or that number as a decimal string.
  Booleans, floats, ``"01"`` and the like are refused. ``raw`` keeps the type read, and
  `official_label` / `prediction_line` write a prediction back in it.
- No label or target: the field is absent, or ``""`` (the organisers' OutGen test file
  has ``"story": ""``; a target of white space only alike), and the record's label /
  target is None. `read_split` requires them in train and val (``labelled``); a test
  file is read with or without them.
- Lines: split on "\\n" only (a story may hold U+2028); a final newline is fine and a
  leading UTF-8 BOM is skipped. A blank line is an error, not skipped: the public OutGen
  eval.py runs ``json.loads`` on every line of ``readlines()`` (its `compute`), so
  it would crash there, and prediction files are aligned with the gold file by line. An
  empty file is an error too (accuracy over no records is undefined). A key twice in
  one object is an error: JSON readers differ in which value they keep.

Every problem raises one `DataFormatError` naming the file, the 1-based line and the
field, e.g. ``val.jsonl: line 7: field 'label': 9 is not a mask number: the story has 6
masks (1..6)``.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import os
import re
from collections.abc import Sequence
from typing import Any

from cmrcx.benchmarks.records import FieldError, is_json_int, json_type, read_lines
from cmrcx.common.errors import DataFormatError
from cmrcx.common.files import write_atomically

TASKS = ("clozet", "senpos", "plotcom", "outgen")
SPLIT_FILES = {"train": "train.jsonl", "validation": "val.jsonl", "test": "test.jsonl"}
MASK = "<mask>"  # the blank of every record's story, whatever the file wrote
# Every spelling of the blank read (the datasets/<task>/README.md examples and prose):
# ClozeT's, SenPos's example, PlotCom's and SenPos's README prose.
MASK_SPELLINGS = ("<mask>", "[MASK]", "<MASK>")
TARGET_FIELDS = {"plotcom": "plot", "outgen": "story"}  # the generation tasks' targets
# Joins OutGen's title and phrases in the model input; the organisers' eval.py splits on it.
OUTLINE_SEPARATOR = "#"
TASK_NAMES = {"clozet": "ClozeT", "senpos": "SenPos", "plotcom": "PlotCom", "outgen": "OutGen"}
# The fields only one task's records have (datasets/<task>/README.md; a PlotCom test line: none).
OWN_FIELDS = {
    "outgen": ("outline", "title"),
    "clozet": ("plot0", "plot1"),
    "senpos": ("sentence",),
    "plotcom": ("plot",),
}


@dataclasses.dataclass(frozen=True)
class ClozeTRecord:
    line: int  # 1-based line of the file
    story: str  # exactly one MASK: where the removed sentence was
    candidates: tuple[str, str]  # plot0, plot1
    label: int | None  # 0-based index into candidates; None: no label (test file)
    raw: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class SenPosRecord:
    line: int
    story: str  # one MASK at every candidate position (n >= 1)
    sentence: str  # the removed sentence
    label: int | None  # 0-based index of the right MASK (the file's label - 1); None: none
    raw: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class PlotComRecord:
    line: int
    story: str  # exactly one MASK
    plot: str | None  # the missing sentence (the target); None: no target (test file)
    raw: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class OutGenRecord:
    line: int
    title: str
    outline: tuple[str, ...]  # the phrases, out of order, as the file lists them
    story: str | None  # the target; None: no target (test file)
    raw: dict[str, Any]


Record = ClozeTRecord | SenPosRecord | PlotComRecord | OutGenRecord


_MASK_PATTERN = re.compile("|".join(re.escape(m) for m in MASK_SPELLINGS))
_SPELLINGS = ", ".join(MASK_SPELLINGS)


# --- Fields -------------------------------------------------------------------------------


def _field(fields: dict[str, Any], name: str) -> Any:
    if name not in fields:
        raise FieldError(name, "missing")
    return fields[name]


def _string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise FieldError(name, f"expected a string, got {json_type(value)}")
    return value


def _blank(text: str) -> str:
    """What is wrong with an empty or white-space-only text ("" if nothing)."""
    if text.strip():
        return ""
    return "is empty" if not text else f"is white space only ({json.dumps(text)})"


def _sentence(fields: dict[str, Any], name: str) -> str:
    """A candidate or removed sentence: a string, not blank, without a mask."""
    text = _string(name, _field(fields, name))
    if _blank(text):
        raise FieldError(name, _blank(text))
    _no_mask(name, text)
    return text


def _no_mask(name: str, text: str, why: str = "only 'story' has masks") -> None:
    found = _MASK_PATTERN.search(text)
    if found:
        raise FieldError(name, f"holds a mask {found.group()!r}; {why}")


def _masked_story(fields: dict[str, Any], exactly_one: bool) -> tuple[str, int]:
    """The story with every mask spelling normalised to MASK, and its number of masks."""
    story = _string("story", _field(fields, "story"))
    count = len(_MASK_PATTERN.findall(story))
    if count == 0:
        expected = "exactly one" if exactly_one else "one at every candidate position"
        raise FieldError("story", f"has no mask ({_SPELLINGS}); expected {expected}")
    if exactly_one and count > 1:
        raise FieldError("story", f"has {count} masks; expected exactly one")
    return _MASK_PATTERN.sub(MASK, story), count


def _target(fields: dict[str, Any], name: str, why: str = "only 'story' has masks") -> str | None:
    """A generation target; None when absent, "" (a test file's) or white space only."""
    if name not in fields:
        return None
    text = _string(name, fields[name])
    _no_mask(name, text, why)
    return None if _blank(text) else text


def _clozet_label(fields: dict[str, Any]) -> int | None:
    """ClozeT's label, 0-based as in the file: "0"/"1" (official) or 0/1."""
    value = fields.get("label", "")
    if value == "":
        return None
    if value in ("0", "1") or (is_json_int(value) and value in (0, 1)):
        return int(value)
    raise FieldError(
        "label", f'expected "0" or "1" (the right candidate, 0-based), got {json.dumps(value)}'
    )


def _senpos_label(fields: dict[str, Any], masks: int) -> int | None:
    """SenPos's label made 0-based: the file's 1-based mask number (an int, officially)."""
    value = fields.get("label", "")
    if value == "":
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit() and value == str(int(value)):
        number = int(value)
    elif is_json_int(value):
        number = value
    else:
        raise FieldError(
            "label", f"expected the 1-based number of the right mask, got {json.dumps(value)}"
        )
    if not 1 <= number <= masks:
        raise FieldError(
            "label", f"{number} is not a mask number: the story has {masks} masks (1..{masks})"
        )
    return number - 1


def _outline(fields: dict[str, Any]) -> tuple[str, ...]:
    value = _field(fields, "outline")
    if not isinstance(value, list):
        raise FieldError("outline", f"expected an array of strings, got {json_type(value)}")
    if not value:
        raise FieldError(
            "outline",
            'is empty (the organisers\' eval.py would score it as the one phrase "": order '
            "1.0 whatever the story)",
        )
    for k, phrase in enumerate(value):
        if not isinstance(phrase, str):
            raise FieldError(f"outline[{k}]", f"expected a string, got {json_type(phrase)}")
        if _blank(phrase):
            raise FieldError(f"outline[{k}]", f"{_blank(phrase)}: not a phrase")
        _no_separator(f"outline[{k}]", phrase, "the model and the organisers' eval.py", "phrases")
    return tuple(value)


def _no_separator(name: str, text: str, readers: str, parts: str) -> None:
    """Refuses ``#`` in a phrase or the title (see OUTLINE_SEPARATOR)."""
    if OUTLINE_SEPARATOR in text:
        raise FieldError(
            name,
            "holds '#', which joins the title and phrases of the model input (TITLE#p1#...#pn):"
            f" {readers} would read it as {text.count(OUTLINE_SEPARATOR) + 1} {parts}",
        )


# --- Records ------------------------------------------------------------------------------


def _clozet(line: int, fields: dict[str, Any]) -> ClozeTRecord:
    story, _ = _masked_story(fields, exactly_one=True)
    candidates = (_sentence(fields, "plot0"), _sentence(fields, "plot1"))
    return ClozeTRecord(line, story, candidates, _clozet_label(fields), fields)


def _senpos(line: int, fields: dict[str, Any]) -> SenPosRecord:
    story, masks = _masked_story(fields, exactly_one=False)
    sentence = _sentence(fields, "sentence")
    return SenPosRecord(line, story, sentence, _senpos_label(fields, masks), fields)


def _plotcom(line: int, fields: dict[str, Any]) -> PlotComRecord:
    story, _ = _masked_story(fields, exactly_one=True)
    return PlotComRecord(line, story, _target(fields, "plot"), fields)


def _outgen(line: int, fields: dict[str, Any]) -> OutGenRecord:
    title = _string("title", fields.get("title", ""))
    _no_separator("title", title, "the model", "fields")
    outline = _outline(fields)
    story = _target(fields, "story", "an OutGen story is a target: the whole text, no blank")
    return OutGenRecord(line, title, outline, story, fields)


_READERS = {"clozet": _clozet, "senpos": _senpos, "plotcom": _plotcom, "outgen": _outgen}
_RECORD_TASKS = {
    ClozeTRecord: "clozet",
    SenPosRecord: "senpos",
    PlotComRecord: "plotcom",
    OutGenRecord: "outgen",
}


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown LOT task {task!r}; tasks: {', '.join(TASKS)}")


def task_of(record: Record) -> str:
    """The task a record belongs to: ``"clozet"``, ``"senpos"``, ``"plotcom"``, ``"outgen"``."""
    return _RECORD_TASKS[type(record)]


def task_of_fields(fields: dict[str, Any]) -> str | None:
    """The task whose records alone have one of ``fields``' keys (`OWN_FIELDS`), or None.

    >>> task_of_fields({"story": "甲<mask>", "plot0": "乙", "plot1": "丙"}), task_of_fields({})
    ('clozet', None)
    """
    for task, own in OWN_FIELDS.items():
        if any(name in fields for name in own):
            return task
    return None


def has_gold(record: Record) -> bool:
    """Whether the record has its label (ClozeT, SenPos) or target (PlotCom, OutGen)."""
    if isinstance(record, ClozeTRecord | SenPosRecord):
        return record.label is not None
    return (record.plot if isinstance(record, PlotComRecord) else record.story) is not None


# --- Files --------------------------------------------------------------------------------


def _read_lines(path: str | os.PathLike[str]) -> list[str]:
    """The lines of a UTF-8 file (a leading BOM skipped), as `records.read_lines` splits
    them; DataFormatError for an empty file."""
    lines = read_lines(path, encoding="utf-8-sig")
    if not lines:
        raise DataFormatError(f"{path}: empty file (one JSON object per line expected)")
    return lines


class _DuplicateKey(Exception):
    """A key given twice in one JSON object: args[0]."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads' object_pairs_hook: a dict, or _DuplicateKey for a key given twice."""
    fields = {}
    for key, value in pairs:
        if key in fields:
            raise _DuplicateKey(key)
        fields[key] = value
    return fields


def _parse_line(path: str | os.PathLike[str], line_number: int, line: str) -> dict[str, Any]:
    where = f"{path}: line {line_number}"
    if not line.strip():
        raise DataFormatError(
            f"{where}: blank line (one JSON object per line expected; prediction files are "
            "aligned with the gold file line by line)"
        )
    try:
        fields = json.loads(line, object_pairs_hook=_object)
    except json.JSONDecodeError as e:
        raise DataFormatError(f"{where}: malformed JSON at column {e.colno}: {e.msg}") from None
    except _DuplicateKey as e:
        raise DataFormatError(
            f"{where}: field {e.args[0]!r}: given twice in one object (JSON readers differ in "
            "which value they keep)"
        ) from None
    if not isinstance(fields, dict):
        raise DataFormatError(f"{where}: expected a JSON object, got {json_type(fields)}")
    return fields


def read_objects(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every line's JSON object, the lines read and parsed as `read_file` reads them (a
    leading BOM skipped, split on "\\n", no blank line, no key twice), no field checked:
    a prediction file's, whose label or target `cmrcx.score` reads. A problem raises
    `DataFormatError` naming the file and the line."""
    return [_parse_line(path, n, line) for n, line in enumerate(_read_lines(path), 1)]


def parse_record(task: str, line: int, fields: dict[str, Any], where: str = "") -> Record:
    """One line's JSON object as `read_file` reads it (no gold required): for code that
    carries the ``raw`` objects along, e.g. an evaluation rebuilding its prediction lines.
    A problem raises `DataFormatError` naming ``where`` (a file), the line and the field.

    >>> parse_record("plotcom", 3, {"story": "甲<MASK>丙", "plot": "乙"}).story
    '甲<mask>丙'
    """
    _check_task(task)
    try:
        return _READERS[task](line, fields)
    except FieldError as e:
        prefix = f"{where}: " if where else ""
        raise DataFormatError(f"{prefix}line {line}: field {e.field!r}: {e.detail}") from None


def _other_task_hint(task: str, fields: dict[str, Any]) -> str:
    """What a field error adds when the line has another task's fields, e.g. a SenPos
    file read as ClozeT's: " (the line has SenPos's fields: the wrong task or file?)"."""
    other = task_of_fields(fields)
    if other in (None, task):
        return ""
    return f" (the line has {TASK_NAMES[other]}'s fields: the wrong task or file?)"


def read_file(task: str, path: str | os.PathLike[str], *, labelled: bool = False) -> list[Record]:
    """Reads and validates one official LOT file (see the module docstring).

    Args:
      task: ``"clozet"``, ``"senpos"``, ``"plotcom"`` or ``"outgen"``.
      path: a jsonl file, e.g. ``clozet/val.jsonl``.
      labelled: every record needs its label or target (train and val files); else
        records without one are read with label / target None.

    Returns:
      The task's records, one per line, in file order.

    Raises:
      DataFormatError: naming the file, the line and the field of the first problem.
    """
    _check_task(task)
    gold_field = TARGET_FIELDS.get(task, "label")
    records = []
    for index, line in enumerate(_read_lines(path)):
        fields = _parse_line(path, index + 1, line)
        try:
            record = _READERS[task](index + 1, fields)
            if labelled and not has_gold(record):
                detail = "missing" if gold_field not in fields else _blank(fields[gold_field])
                raise FieldError(
                    gold_field, f"{detail} (a train or val file, or a gold file to score, needs it)"
                )
        except FieldError as e:
            raise DataFormatError(
                f"{path}: line {index + 1}: field {e.field!r}: {e.detail}"
                + _other_task_hint(task, fields)
            ) from None
        records.append(record)
    return records


def split_path(data_dir: str | os.PathLike[str], split: str) -> str:
    """The official file of ``split``: ``(DATA_DIR, "validation")`` -> ``DATA_DIR/val.jsonl``."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown LOT split {split!r}; splits: {', '.join(SPLIT_FILES)}")
    return os.path.join(data_dir, SPLIT_FILES[split])


def read_split(task: str, data_dir: str | os.PathLike[str], split: str) -> list[Record]:
    """Reads ``split`` ("train", "validation", "test") of ``task`` from its DATA_DIR (the
    folder of train.jsonl, val.jsonl, test.jsonl); train and val must be labelled."""
    return read_file(task, split_path(data_dir, split), labelled=split != "test")


# --- Predictions --------------------------------------------------------------------------


def official_label(task: str, index: int, gold_label: Any = None) -> str | int:
    """A predicted 0-based candidate index as the task's file writes its label.

    ClozeT: ``"0"``/``"1"`` (an int if the gold file's label, ``gold_label``, is one);
    SenPos: the 1-based mask number as an int (a string if the gold label is one). Without
    a gold label (a test file) the official type is used.

    >>> official_label("clozet", 1), official_label("senpos", 7), official_label("senpos", 0, "3")
    ('1', 8, '1')
    """
    if task not in ("clozet", "senpos"):
        raise ValueError(f"{task!r} has no label; official_label is for clozet and senpos")
    index = operator.index(index)
    if index < 0 or (task == "clozet" and index > 1):
        raise ValueError(f"{task}: {index} is not a candidate index")
    if task == "clozet":
        return index if is_json_int(gold_label) else str(index)
    return str(index + 1) if isinstance(gold_label, str) else index + 1


def prediction_line(record: Record, prediction: int | str) -> str:
    """The record's line of a prediction file, as the official eval.py reads it: ``raw``
    (key order kept, non-ASCII unescaped) with the label (ClozeT, SenPos: ``prediction`` is
    a 0-based candidate index) or the target (PlotCom ``plot``, OutGen ``story``:
    ``prediction`` is the text) replaced, or appended if the file had none.

    >>> record = ClozeTRecord(1, "甲<mask>", ("乙", "丙"), 0, {"story": "甲<mask>",
    ...     "plot0": "乙", "plot1": "丙", "label": "0"})
    >>> prediction_line(record, 1)
    '{"story": "甲<mask>", "plot0": "乙", "plot1": "丙", "label": "1"}'
    """
    task = task_of(record)
    fields = dict(record.raw)
    if task in TARGET_FIELDS:
        if not isinstance(prediction, str):
            raise TypeError(f"a {task} prediction is text, got {type(prediction).__name__}")
        fields[TARGET_FIELDS[task]] = prediction
    else:
        candidates = 2 if task == "clozet" else record.story.count(MASK)
        index = operator.index(prediction)
        if not 0 <= index < candidates:
            raise ValueError(
                f"line {record.line}: prediction {index} is not one of the {candidates} "
                "candidates (0-based)"
            )
        gold = fields.get("label") if record.label is not None else None
        fields["label"] = official_label(task, index, gold)
    return json.dumps(fields, ensure_ascii=False)


def write_predictions(
    path: str | os.PathLike[str], records: Sequence[Record], predictions: Sequence[int | str]
) -> None:
    """Writes one `prediction_line` per record, in order, atomically: the prediction file
    ``python eval.py PREDICTIONS test.jsonl`` reads, aligned with the gold file by line."""
    if len(records) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions for {len(records)} records")
    lines = [prediction_line(r, p) for r, p in zip(records, predictions, strict=True)]
    write_atomically(path, "".join(line + "\n" for line in lines))
