"""The LOT file scorers `python -m cmrcx.score lot_<task> GOLD PREDICTIONS` calls.

Both files are the task's official jsonl (one JSON object per line, aligned by line), as
the LOT READMEs' ``python eval.py prediction_file test.jsonl`` reads them. Note the order:
the official CLI takes the predictions first (``eval.py PRED GOLD``), `cmrcx.score` takes
the gold file first, as for every benchmark.

* ClozeT, SenPos: the ``label`` fields -> ``{"accuracy", "correct", "total"}`` (accuracy a
  fraction, as the official README prints it). A predicted label of another type than
  the gold one (``1`` for ``"1"``) is compared as a string (the README examples' types) and a
  note on stderr says how many lines did so.
* PlotCom (``plot``), OutGen (``story``, gold ``outline``): the organisers' eval.py keys
  first (``bleu-n``, ``distinct-n``; OutGen ``coverage``, ``order``), then
  ``repetition-n``, ``word-distinct-n`` (the paper's Table 11 D-n), and for OutGen
  ``organisers-weighted-score``, their 加权总得分 with their validation weights, which
  their script prints by default too (`cmrcx.benchmarks.lot.overall`).

GOLD is read as a training run reads a labelled file (`formats.read_file` with
``labelled=True``): every field is checked and each record needs its label or target, so a
file training would refuse (a ``"story": ""`` test file, a SenPos file given as ClozeT) is
an error here too, not a score. PREDICTIONS' lines are read as the reader reads lines
(`formats.read_objects`: a leading UTF-8 BOM skipped, in both files alike; no blank line;
no key twice in an object) and only their ``label`` / target field is checked, for its
type; the official eval.py likewise reads only that field of a prediction line.

A line-count mismatch is the official script's ``RuntimeError("Wrong Predictions")``,
here an error with both counts. Every problem is one `DataFormatError` naming the file,
the line and the field (the official script stops at the first with a traceback).
Nothing here imports jax or tensorflow; jieba and nltk are imported by the generation
scorers only.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from cmrcx.benchmarks.lot import formats
from cmrcx.common.errors import DataFormatError

# The text field a PlotCom / OutGen prediction line carries (the official records' target).
PREDICTED_TEXT = {"lot_plotcom": "plot", "lot_outgen": "story"}


def _aligned(
    task: str, gold_path: str, predictions_path: str
) -> tuple[list[formats.Record], list[dict[str, Any]]]:
    """GOLD's records (``task``, e.g. "lot_clozet", read as a labelled file) and
    PREDICTIONS' JSON objects, as many of each."""
    golds = formats.read_file(task.removeprefix("lot_"), gold_path, labelled=True)
    predictions = formats.read_objects(predictions_path)
    if len(golds) != len(predictions):
        raise DataFormatError(
            f"Wrong Predictions (the official eval.py's error): {predictions_path} has "
            f"{len(predictions)} lines but {gold_path} has {len(golds)}; the lines must "
            "be aligned"
        )
    return golds, predictions


def _field(record: dict[str, Any], field: str, path: str, line: int, types: tuple) -> Any:
    """A prediction line's ``field``, of one of ``types``."""
    if field not in record:
        raise DataFormatError(f"{path}: line {line}: field '{field}' is missing")
    value = record[field]
    if not isinstance(value, types) or isinstance(value, bool):  # JSON true is no int here
        kinds = " or ".join(t.__name__ for t in types)
        raise DataFormatError(
            f"{path}: line {line}: field '{field}' must be {kinds}, not {type(value).__name__}"
        )
    return value


def score_understanding(task: str, gold_path: str, predictions_path: str) -> dict[str, Any]:
    """ClozeT / SenPos (``task`` "lot_clozet" / "lot_senpos") accuracy of a prediction
    file: ``{"accuracy", "correct", "total"}``; the gold labels as the file writes them."""
    from cmrcx.benchmarks.lot.understanding_metrics import count_type_mismatches, labels_equal

    golds, predictions = _aligned(task, gold_path, predictions_path)
    label_types = (str, int, float)
    targets = [record.raw["label"] for record in golds]
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


def _gold_record(record: formats.Record) -> dict[str, Any]:
    """The metrics' gold: PlotCom ``{"plot"}``, OutGen ``{"story", "outline"}``."""
    if isinstance(record, formats.PlotComRecord):
        return {"plot": record.plot}
    return {"story": record.story, "outline": list(record.outline)}


def score_generation(task: str, gold_path: str, predictions_path: str) -> dict[str, Any]:
    """PlotCom / OutGen metrics of a prediction file (module docstring for the keys).
    A NaN (coverage when rouge scores no phrase, e.g. every story is empty: the
    official script prints nan) is written as null, with a note on stderr."""
    from cmrcx.benchmarks.lot.generation_metrics import generation_metrics
    from cmrcx.benchmarks.lot.overall import organisers_weighted_score

    golds, predictions = _aligned(task, gold_path, predictions_path)
    field = PREDICTED_TEXT[task]
    gold_records = [_gold_record(record) for record in golds]
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
    "lot_clozet": lambda gold, predictions: score_understanding("lot_clozet", gold, predictions),
    "lot_senpos": lambda gold, predictions: score_understanding("lot_senpos", gold, predictions),
    "lot_plotcom": lambda gold, predictions: score_generation("lot_plotcom", gold, predictions),
    "lot_outgen": lambda gold, predictions: score_generation("lot_outgen", gold, predictions),
}
