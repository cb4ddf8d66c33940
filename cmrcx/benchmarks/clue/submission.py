"""CLUE leaderboard submission files: ``<task>_predict.json``, one JSON object per line.

Format ([SUBMIT], [RUN] in `cmrcx.benchmarks.clue.tasks`)::

    {"id": 0, "label": "1"}
    {"id": 1, "label": "0"}

one line per test record, in the test file's line order, the label as the official label
string. The leaderboard reads only "label" and compares line by line ([SUBMIT]); the
reference runner writes the line index as id ([RUN]). Here the id is the test record's own
id, exactly as in the file (CSL's test ids, for one, start at 2415), which equals the line
index wherever the file has no id. The runner's TNEWS lines also carry ``"label_desc": ""``;
readers here accept such extra keys.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cmrcx.benchmarks.clue.official_format import DataFormatError, parse_object_line, read_lines
from cmrcx.benchmarks.clue.tasks import ClueTask, get_task
from cmrcx.benchmarks.records import is_json_int, json_type
from cmrcx.common.files import write_atomically


@dataclasses.dataclass(frozen=True)
class SubmissionLine:
    """One validated prediction: the record id, the label string, its 1-based line."""

    id: int | str
    label: str
    line_number: int


def _is_integer(value: Any) -> bool:
    """Python or NumPy integer, not a boolean."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def labels_from_indices(task: ClueTask | str, indices: Sequence[Any]) -> list[str]:
    """Class indices (argmax over the head's logits) -> official label strings.

    The head's class order is the task's ``labels`` order ([TF] ``get_labels()``), e.g.
    TNEWS index 5 is ``"106"`` because 105 does not exist.

    Args:
      indices: [num_examples] integers (Python or NumPy) in ``[0, num_classes)``.
    """
    task = get_task(task) if isinstance(task, str) else task
    labels = []
    for k, index in enumerate(indices):
        if not _is_integer(index) or not 0 <= index < task.num_classes:
            raise ValueError(
                f"{task.name}: prediction {k}: class index {index!r} is not in "
                f"[0, {task.num_classes})"
            )
        labels.append(task.labels[int(index)])
    return labels


def submission_path(task: ClueTask | str, output_dir: str | os.PathLike[str]) -> Path:
    """Where the official file of ``task`` goes, e.g. ``output_dir/tnews11_predict.json``."""
    task = get_task(task) if isinstance(task, str) else task
    return Path(output_dir) / task.submission_file


def write_submission(
    task: ClueTask | str,
    output_dir: str | os.PathLike[str],
    ids: Sequence[Any],
    labels: Sequence[str],
    file_name: str | None = None,
) -> Path:
    """Writes the official submission file of ``task`` into ``output_dir``, atomically.

    Args:
      ids: [num_examples] record ids in test-file order (`ClueExample.id`: int or str;
        NumPy integers are written as plain integers).
      labels: [num_examples] official label strings (see `labels_from_indices`).
      file_name: the file's name; None: the official name (e.g. ``afqmc_predict.json``).

    Returns:
      The path written, named by the table (e.g. ``afqmc_predict.json``).

    Raises:
      ValueError: lengths differ, an id is not an int/str, or a label is not official.
    """
    task = get_task(task) if isinstance(task, str) else task
    if len(ids) != len(labels):
        raise ValueError(f"{task.name}: {len(ids)} ids but {len(labels)} labels")
    lines = []
    for k, (example_id, label) in enumerate(zip(ids, labels, strict=True)):
        if not isinstance(example_id, str):
            if not _is_integer(example_id):
                raise ValueError(
                    f"{task.name}: prediction {k}: id {example_id!r} is not an integer or string"
                )
            example_id = int(example_id)
        if label not in task.labels:
            raise ValueError(f"{task.name}: prediction {k}: {label!r} is not an official label")
        lines.append(json.dumps({"id": example_id, "label": label}, ensure_ascii=False) + "\n")
    path = Path(output_dir) / file_name if file_name else submission_path(task, output_dir)
    write_atomically(path, "".join(lines))
    return path


def read_submission(task: ClueTask | str, path: str | os.PathLike[str]) -> list[SubmissionLine]:
    """Reads and validates a submission file of ``task``.

    Every line must be a JSON object with an integer or string "id" and a "label" that is
    one of the task's official label strings (``"1"``, not ``1``). Other keys are ignored.

    Raises:
      DataFormatError: naming the file, line and field of the first problem found.
    """
    task = get_task(task) if isinstance(task, str) else task
    predictions = []
    for index, line in enumerate(read_lines(path)):
        record = parse_object_line(path, index + 1, line)
        where = f"{path}: line {index + 1}"
        for key in ("id", "label"):
            if key not in record:
                raise DataFormatError(f"{where}: field {key!r}: missing")
        example_id, label = record["id"], record["label"]
        if not (is_json_int(example_id) or isinstance(example_id, str)):
            raise DataFormatError(
                f"{where}: field 'id': expected an integer or string, got {json_type(example_id)}"
            )
        if not isinstance(label, str):
            raise DataFormatError(
                f"{where}: field 'label': expected a label string such as {task.labels[0]!r}, "
                f"got {json_type(label)} {label!r}"
            )
        if label not in task.labels:
            raise DataFormatError(f"{where}: field 'label': {label!r} is not a {task.name} label")
        predictions.append(SubmissionLine(example_id, label, index + 1))
    return predictions
