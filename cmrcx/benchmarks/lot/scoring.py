"""The LOT file scorers `python -m cmrcx.score lot_<task> GOLD PREDICTIONS` calls.

Both files are the task's official jsonl (one JSON object per line, aligned by line), as
the LOT READMEs' ``python eval.py prediction_file test.jsonl`` reads them. Note the order:
the official CLI takes the predictions first (``eval.py PRED GOLD``), `cmrcx.score` takes
the gold file first, as for every benchmark.

* ClozeT, SenPos: the ``label`` fields -> ``{"accuracy", "correct", "total"}`` (accuracy a
  fraction, as the official README prints it). A predicted label of another type than
  the gold one (``1`` for ``"1"``) is compared as a string (LOT-SPEC.md section 2.2) and a
  note on stderr says how many lines did so.
* PlotCom (``plot``), OutGen (``story``, gold ``outline``): the organisers' eval.py keys
  first (``bleu-n``, ``distinct-n``; OutGen ``coverage``, ``order``), then
  ``repetition-n``, ``word-distinct-n`` (the paper's Table 11 D-n), and for OutGen
  ``organisers-weighted-score``, their 加权总得分 with their validation weights, which
  their script prints by default too (`cmrcx.benchmarks.lot.overall`).

A line-count mismatch is the official script's ``RuntimeError("Wrong Predictions")``,
here an error with both counts. A line that is not JSON, not an object, or lacks the
field is an error naming the file, the line and the field (the official script stops at
the first with a traceback). Nothing here imports jax or tensorflow; jieba and nltk are
imported by the generation scorers only.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from cmrcx.common.errors import DataFormatError

# The text field a PlotCom / OutGen prediction line carries (the official records' target).
PREDICTED_TEXT = {"lot_plotcom": "plot", "lot_outgen": "story"}


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """One JSON object per line, as the official eval.py's `load_file` (every line is
    parsed, so a blank line is an error there and here)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except FileNotFoundError:
        raise DataFormatError(f"{path}: file not found") from None
    except UnicodeDecodeError as e:
        raise DataFormatError(f"{path}: not valid UTF-8 (byte offset {e.start})") from None
    except OSError as e:
        raise DataFormatError(f"{path}: cannot read file: {e.strerror}") from None
    records = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            what = "a blank line" if not line.strip() else f"not JSON ({e.msg})"
            raise DataFormatError(f"{path}: line {number}: {what}") from None
        if not isinstance(record, dict):
            raise DataFormatError(f"{path}: line {number}: not a JSON object")
        records.append(record)
    if not records:
        raise DataFormatError(f"{path}: no lines; nothing to score")
    return records


def _aligned(gold_path: str, predictions_path: str) -> tuple[list[dict], list[dict]]:
    golds, predictions = read_jsonl(gold_path), read_jsonl(predictions_path)
    if len(golds) != len(predictions):
        raise DataFormatError(
            f"Wrong Predictions (the official eval.py's error): {predictions_path} has "
            f"{len(predictions)} lines but {gold_path} has {len(golds)}; the lines must "
            "be aligned"
        )
    return golds, predictions


def _field(record: dict[str, Any], field: str, path: str, line: int, types: tuple) -> Any:
    if field not in record:
        raise DataFormatError(f"{path}: line {line}: field '{field}' is missing")
    value = record[field]
    if not isinstance(value, types) or isinstance(value, bool):  # JSON true is no int here
        kinds = " or ".join(t.__name__ for t in types)
        raise DataFormatError(
            f"{path}: line {line}: field '{field}' must be {kinds}, not {type(value).__name__}"
        )
    return value


def score_understanding(gold_path: str, predictions_path: str) -> dict[str, Any]:
    """ClozeT / SenPos accuracy of a prediction file: ``{"accuracy", "correct", "total"}``."""
    from cmrcx.benchmarks.lot.understanding_metrics import count_type_mismatches, labels_equal

    golds, predictions = _aligned(gold_path, predictions_path)
    label_types = (str, int, float)
    targets = [_field(r, "label", gold_path, i, label_types) for i, r in enumerate(golds, 1)]
    labels = [
        _field(r, "label", predictions_path, i, label_types) for i, r in enumerate(predictions, 1)
    ]
    mismatched = count_type_mismatches(targets, labels)
    if mismatched:
        print(
            f"note: {mismatched} of {len(labels)} labels in {predictions_path} are not of "
            f'the gold label\'s type (e.g. 1 for "1"); compared as strings (1 and "1" '
            "are equal, 1.0 and 1 are not)",
            file=sys.stderr,
        )
    correct = sum(labels_equal(t, p) for t, p in zip(targets, labels, strict=True))
    return {"accuracy": correct / len(targets), "correct": correct, "total": len(targets)}


def _gold_record(task: str, record: dict[str, Any], path: str, line: int) -> dict[str, Any]:
    if task == "lot_plotcom":
        return {"plot": _field(record, "plot", path, line, (str,))}
    outline = _field(record, "outline", path, line, (list,))
    if not all(isinstance(phrase, str) for phrase in outline):
        raise DataFormatError(f"{path}: line {line}: field 'outline' must be a list of strings")
    return {"story": _field(record, "story", path, line, (str,)), "outline": outline}


def score_generation(task: str, gold_path: str, predictions_path: str) -> dict[str, Any]:
    """PlotCom / OutGen metrics of a prediction file (module docstring for the keys).
    A NaN (coverage when rouge scores no phrase, e.g. every story is empty: the
    official script prints nan) is written as null, with a note on stderr."""
    from cmrcx.benchmarks.lot.generation_metrics import generation_metrics
    from cmrcx.benchmarks.lot.overall import organisers_weighted_score

    golds, predictions = _aligned(gold_path, predictions_path)
    field = PREDICTED_TEXT[task]
    gold_records = [_gold_record(task, r, gold_path, i) for i, r in enumerate(golds, 1)]
    texts = [_field(r, field, predictions_path, i, (str,)) for i, r in enumerate(predictions, 1)]
    scores: dict[str, Any] = generation_metrics(task, gold_records, texts)
    if task == "lot_outgen":
        scores["organisers-weighted-score"] = organisers_weighted_score(scores)
    for key, value in scores.items():
        if math.isnan(value):
            scores[key] = None
            print(
                f"note: {key} is undefined (NaN: no outline phrase could be scored, e.g. "
                "every story is empty); written as null",
                file=sys.stderr,
            )
    return scores


SCORERS = {  # task name -> fn(GOLD, PREDICTIONS) -> scores
    "lot_clozet": score_understanding,
    "lot_senpos": score_understanding,
    "lot_plotcom": lambda gold, predictions: score_generation("lot_plotcom", gold, predictions),
    "lot_outgen": lambda gold, predictions: score_generation("lot_outgen", gold, predictions),
}
