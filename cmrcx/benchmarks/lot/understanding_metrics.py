"""ClozeT and SenPos accuracy, the key the LOT READMEs print (``{"accuracy": _}``,
thu-coai/LOT-LongLM datasets/clozet/README.md:50-54, datasets/senpos/README.md:32-36).

The understanding eval.py was never published (thu-coai/LOT-LongLM README.md links it on
THUCloud only, and that link is dead), so labels are compared as the README examples'
types require: equal when they are equal as strings. ClozeT's file writes its labels as
strings (``"0"``/``"1"``) and SenPos's as ints, so a prediction file that writes ``1`` for
a gold ``"1"`` is still right; a plain ``==`` would score it wrong without a word. Values
are fractions, as the official scripts print them (the paper's tables are x 100).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def labels_equal(gold: Any, predicted: Any) -> bool:
    """`predicted` is right: equal as strings (``1`` and ``"1"`` are; ``1.0`` and ``1``
    are not, as their strings differ)."""
    return str(predicted) == str(gold)


def count_type_mismatches(targets: Sequence[Any], predictions: Sequence[Any]) -> int:
    """How many predicted labels are of another type than their gold label."""
    return sum(type(t) is not type(p) for t, p in zip(targets, predictions, strict=True))


def accuracy(targets: Sequence[Any], predictions: Sequence[Any]) -> dict[str, float]:
    """{"accuracy": fraction of predictions equal to their target (`labels_equal`)}.

    targets, predictions: [N] labels, aligned (0-based ints from the task's records, or
    the files' own labels). A SeqIO metric function: ``metric_fns=[accuracy]``.
    """
    if len(targets) != len(predictions):
        raise ValueError(f"accuracy: {len(targets)} targets but {len(predictions)} predictions")
    if not targets:
        raise ValueError("accuracy: no examples to score")
    correct = sum(labels_equal(t, p) for t, p in zip(targets, predictions, strict=True))
    return {"accuracy": correct / len(targets)}


understanding_metrics = accuracy  # ClozeT and SenPos have the one metric
