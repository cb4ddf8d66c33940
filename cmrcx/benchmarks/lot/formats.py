"""LOT's official files (thu-coai/LOT-LongLM `datasets/<task>/README.md`): one JSON object
per line in train.jsonl, val.jsonl, test.jsonl, read into the records below.

The tasks write the blank differently (ClozeT ``<mask>``, SenPos ``[MASK]`` - its README
prose says ``<MASK>``, both are read -, PlotCom ``<MASK>``): every record's ``story`` has
them normalised to `MASK`. Labels are kept 0-based in the records (ClozeT's file has
``"0"``/``"1"``, SenPos's 1-based ints); `official_label` gives them back in the file's
own type. ``raw`` is the line's JSON object as read, so a prediction file repeats the
inputs unchanged (`prediction_line`).

Interface fixed for the LOT issues; the readers are filled in by the data-layer work.
"""

from __future__ import annotations

import dataclasses
from typing import Any

TASKS = ("clozet", "senpos", "plotcom", "outgen")
SPLIT_FILES = {"train": "train.jsonl", "validation": "val.jsonl", "test": "test.jsonl"}
MASK = "<mask>"  # the blank of every record's story, whatever the file wrote


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
