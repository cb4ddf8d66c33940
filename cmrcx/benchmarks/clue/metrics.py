"""CLUE classification scores: accuracy, as the paper and the baselines report it.

Table 2 of the paper reports accuracy (in percent) for every classification task and the
baselines compute nothing else for them (CLUEbenchmark/CLUE
baselines/models_pytorch/classifier_pytorch/metrics/clue_compute_metrics.py @3d8e09a:
``simple_accuracy`` for tnews, iflytek, afqmc, cmnli, ocnli, wsc; the TF runner's
``tf.metrics.accuracy`` in run_classifier.py @29614fc). The leaderboard compares the
submitted labels with the gold ones line by line ([SUBMIT] in `tasks`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from cmrcx.benchmarks.clue.official_format import ClueSplit, DataFormatError, read_examples
from cmrcx.benchmarks.clue.submission import SubmissionLine, read_submission
from cmrcx.benchmarks.clue.tasks import ClueTask, get_task


def accuracy(targets: Sequence[Any], predictions: Sequence[Any]) -> dict[str, float]:
    """SeqIO-style metric: ``{"accuracy": percent of predictions equal to their target}``.

    Args:
      targets: [num_examples] gold labels (label strings or class indices).
      predictions: [num_examples] predicted labels of the same kind, parallel to targets.
    """
    if len(targets) != len(predictions):
        raise ValueError(f"accuracy: {len(targets)} targets but {len(predictions)} predictions")
    if not targets:
        raise ValueError("accuracy: no examples to score")
    correct = sum(t == p for t, p in zip(targets, predictions, strict=True))
    return {"accuracy": 100.0 * correct / len(targets)}


def _aligned_predictions(
    gold: ClueSplit, predictions: list[SubmissionLine], submission: str
) -> list[SubmissionLine]:
    """The predictions for ``gold.examples``, line by line, checked id against id.

    A submission may also carry lines for the rows skipped from the gold file (label
    "-"); those are dropped first. Ids compare as strings (``0`` matches ``"0"``), since
    the reference runner and others write either.
    """
    expected = len(gold.examples)
    if gold.skipped_ids and len(predictions) == expected + len(gold.skipped_ids):
        skipped = {str(i) for i in gold.skipped_ids}
        predictions = [p for p in predictions if str(p.id) not in skipped]
    if len(predictions) != expected:
        extra = f" (+{len(gold.skipped_ids)} skipped rows)" if gold.skipped_ids else ""
        raise DataFormatError(
            f"{submission}: has {len(predictions)} predictions but {gold.path} has {expected} "
            f"labelled examples{extra}; one line per example, in file order"
        )
    for prediction, example in zip(predictions, gold.examples, strict=True):
        if str(prediction.id) != str(example.id):
            raise DataFormatError(
                f"{submission}: line {prediction.line_number}: field 'id': {prediction.id!r}, "
                f"but the example it is compared with ({gold.path} line {example.line_number})"
                f" has id {example.id!r}; predictions must follow the dataset's line order"
            )
    return predictions


def score_submission(
    task: ClueTask | str,
    dataset_path: str | os.PathLike[str],
    submission_path: str | os.PathLike[str],
) -> dict[str, Any]:
    """Accuracy of a submission-format file against a labelled official file (e.g. dev.json).

    Returns:
      ``{"accuracy": percent, "correct": int, "total": int}``, plus ``"skipped"`` (rows of
      the dataset labelled "-", not scored) when there were any.

    Raises:
      DataFormatError: either file is malformed, the dataset has nothing to score, or the
        submission does not have one line per example in the dataset's order.
    """
    task = get_task(task) if isinstance(task, str) else task
    gold = read_examples(task, dataset_path, labelled=True)
    if not gold.examples:
        raise DataFormatError(f"{dataset_path}: no labelled examples; nothing to score")
    predictions = _aligned_predictions(
        gold, read_submission(task, submission_path), os.fspath(submission_path)
    )
    targets = [example.label for example in gold.examples]
    labels = [prediction.label for prediction in predictions]
    scores: dict[str, Any] = accuracy(targets, labels)
    scores["correct"] = sum(t == p for t, p in zip(targets, labels, strict=True))
    scores["total"] = len(targets)
    if gold.skipped_ids:
        scores["skipped"] = len(gold.skipped_ids)
    return scores
