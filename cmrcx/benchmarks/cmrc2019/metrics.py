"""CMRC 2019 scores with the official evaluator's semantics.

Mirrors ``eval/cmrc2019_evaluate.py`` of ymcui/cmrc2019 at its latest commit, eae5c10
("fix bugs and add stderr output"), the version the authors' leaderboard used:

* QAC (question-level accuracy): blanks filled correctly / all blanks, in percent.
* PAC (passage-level accuracy): passages with every blank correct / all passages, in percent.

Per passage the official ``compare_list`` counts positions where ``str(gold) == str(pred)``
over the common prefix, subtracts one point for every blank the prediction is too short
to cover, and floors the result at 0 (``if final_right_count < 0: final_right_count = 0``).
A passage whose context_id is not in the predictions scores 0 and its blanks count as
skipped. Extra predicted entries are ignored (but make ``skip`` negative), and so are
predicted context_ids that are not in the dataset.

The first release (commit c498b32) had no floor, so a short list could push a passage
below zero, and it added the previous passage's count again for a missing context_id;
both were fixed in eae5c10, and neither is reproduced here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cmrcx.benchmarks.cmrc2019.official_format import ClozePassage


def _compare_list(answers: Sequence[Any], prediction: Sequence[Any]) -> int:
    """The official ``compare_list`` (eae5c10): right count minus one per uncovered blank,
    floored at 0.

    Args:
      answers: [num_blanks] gold choice indices.
      prediction: [any length] predicted choice indices (-1 = no prediction).

    Returns:
      An integer in [0, num_blanks].
    """
    min_len = min(len(answers), len(prediction))
    # str() on both sides, as the official script does, so "3" and 3 compare equal.
    right = sum(str(answers[k]) == str(prediction[k]) for k in range(min_len))
    return max(0, right - (len(answers) - min_len))


def _percent(numerator: int, denominator: int, what: str) -> float:
    """100 * numerator / denominator, refusing an empty denominator instead of dividing by 0."""
    if denominator == 0:
        raise ValueError(f"cannot score: no {what}")
    return 100.0 * numerator / denominator


def cloze_scores(
    passages: Sequence[ClozePassage], predictions: Mapping[str, Sequence[int]]
) -> dict[str, Any]:
    """Scores official-format predictions against gold passages.

    Args:
      passages: gold passages; every one must have answers.
      predictions: context_id -> [num_blanks] predicted choice indices.

    Returns:
      ``{"qac": float, "pac": float, "total": int, "skip": int, "missing": [context_id]}``;
      qac and pac are percentages, ``total`` counts blanks, ``skip`` is the official
      sum of ``len(answers) - len(prediction)`` and ``missing`` lists the context_ids
      with no prediction at all (in dataset order). Prediction ids not in ``passages``
      are ignored, as in the official script.
    """
    qac = pac = total = skip = 0
    missing: list[str] = []
    for passage in passages:
        if passage.answers is None:
            raise ValueError(f"passage {passage.context_id!r} has no answers to score against")
        answers = passage.answers
        if passage.context_id in predictions:
            prediction: Sequence[int] = predictions[passage.context_id]
            right = _compare_list(answers, prediction)
        else:
            # As in eae5c10: 0 right, and all its blanks count as skipped.
            missing.append(passage.context_id)
            prediction = []
            right = 0
        qac += right
        pac += right == len(answers)
        total += len(answers)
        skip += len(answers) - len(prediction)
    return {
        "qac": _percent(qac, total, "blanks"),
        "pac": _percent(pac, len(passages), "passages"),
        "total": total,
        "skip": skip,
        "missing": missing,
    }


def qac_pac(
    targets: Sequence[Sequence[int]], predictions: Sequence[Sequence[int]]
) -> dict[str, float]:
    """SeqIO-style metric: ``(targets, predictions) -> {"qac": %, "pac": %}``.

    Args:
      targets: [num_passages] lists of gold choice indices, one per blank.
      predictions: [num_passages] lists of predicted choice indices, parallel to targets.
    """
    if len(targets) != len(predictions):
        raise ValueError(f"qac_pac: {len(targets)} targets but {len(predictions)} predictions")
    qac = pac = total = 0
    for answers, prediction in zip(targets, predictions, strict=True):
        right = _compare_list(answers, prediction)
        qac += right
        pac += right == len(answers)
        total += len(answers)
    return {
        "qac": _percent(qac, total, "blanks"),
        "pac": _percent(pac, len(targets), "passages"),
    }
