"""CLUE's file scorers, which `python -m cmrcx.score` calls: classification submissions
(accuracy), CMRC 2018 (the official evaluator), ChID and C3 (accuracy). The
reading-comprehension modules (numpy) are imported only for their tasks, so scoring a
classification file starts in well under a second."""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

from cmrcx.benchmarks.clue.metrics import score_submission as score_clue_submission
from cmrcx.benchmarks.clue.tasks import TASKS as CLASSIFICATION_TASKS
from cmrcx.common.errors import DataFormatError


def score_clue(task_name: str, dataset_path: str, predictions_path: str) -> dict[str, Any]:
    """Accuracy of a CLUE submission-format file against a labelled official file.

    Returns:
      ``{"accuracy", "correct", "total"}`` plus ``"skipped"`` only when it is non-zero.
    """
    scores = score_clue_submission(task_name, dataset_path, predictions_path)
    if scores.get("skipped"):
        print(
            f"note: {scores['skipped']} rows of {dataset_path} have label '-' (no majority "
            "label) and are not scored, as in CLUE's baselines",
            file=sys.stderr,
        )
    return scores


def score_cmrc2018(dataset_path: str, predictions_path: str) -> dict[str, Any]:
    """The official CMRC 2018 evaluator on a ``{question id: answer text}`` file.

    Returns:
      ``{"AVERAGE", "F1", "EM", "TOTAL", "SKIP"}``, percentages rounded as the script prints.
    """
    from cmrcx.benchmarks.clue.cmrc2018_evaluate import evaluate, read_predictions
    from cmrcx.benchmarks.clue.cmrc2018_format import read_questions

    split = read_questions(dataset_path, labelled=True)
    if not split.questions:
        raise DataFormatError(f"{dataset_path}: top level: field 'data' has no questions")
    gold = {question.qid: question.answers for question in split.questions}
    predictions = read_predictions(predictions_path)
    extra = [qid for qid in predictions if qid not in gold]
    if predictions and len(extra) == len(predictions):
        # The script would print zeros; a file for other questions is a mistake, not a score.
        raise DataFormatError(
            f"{predictions_path}: question id {extra[0]!r}: not a question of {dataset_path} "
            "(no id matches: the predictions of another file?)"
        )
    scores = evaluate(gold, predictions)
    if scores["SKIP"]:
        missing = next(qid for qid in gold if qid not in predictions)
        print(
            f"warning: {scores['SKIP']} of {scores['TOTAL']} questions in {dataset_path} have "
            f"no prediction in {predictions_path} (e.g. {missing!r}); scored as 0",
            file=sys.stderr,
        )
    if extra:
        print(
            f"note: {len(extra)} predictions in {predictions_path} are for questions not in "
            f"{dataset_path} (e.g. {extra[0]!r}); ignored, as by the official evaluator",
            file=sys.stderr,
        )
    return scores


def _chid_answer_file_near(path: str) -> str | None:
    """The answer file a mistaken ChID GOLD (the folder or a data file) points to, if any."""
    if os.path.isdir(path):
        answer_file = os.path.join(path, "dev_answer.json")
    elif path.endswith(".json") and not path.endswith("_answer.json"):
        answer_file = path[: -len(".json")] + "_answer.json"
    else:
        return None
    return answer_file if os.path.isfile(answer_file) else None


def score_chid(answers_path: str, predictions_path: str) -> dict[str, Any]:
    """ChID accuracy of a ``{tag: index}`` file against the answer file ``{tag: index}``.

    Returns:
      ``{"accuracy", "correct", "total"}`` over the answer file's blanks.
    """
    from cmrcx.benchmarks.clue import chid_decoding

    # The answer file has the submission's format, so the same reader validates it.
    try:
        answers = chid_decoding.read_submission(answers_path)
    except DataFormatError as error:
        hint = _chid_answer_file_near(answers_path)
        if hint:
            raise DataFormatError(f"{error} (GOLD is the answer file, e.g. {hint})") from None
        raise
    if not answers:
        raise DataFormatError(f"{answers_path}: no answers; nothing to score")
    predictions = chid_decoding.read_submission(predictions_path)
    missing = [tag for tag in answers if tag not in predictions]
    if missing:
        raise DataFormatError(
            f"{predictions_path}: no prediction for {len(missing)} of the {len(answers)} "
            f"blanks of {answers_path}, e.g. {missing[0]}"
        )
    extra = [tag for tag in predictions if tag not in answers]
    if extra:
        raise DataFormatError(
            f"{predictions_path}: key {extra[0]!r}: not a blank of {answers_path}"
        )
    scores: dict[str, Any] = chid_decoding.accuracy(answers, predictions)
    scores["correct"] = sum(predictions[tag] == index for tag, index in answers.items())
    scores["total"] = len(answers)
    return scores


def score_c3(data_dir: str, predictions_path: str) -> dict[str, Any]:
    """C3 accuracy of a submission-format file on the dev split of ``data_dir``.

    Returns:
      ``{"accuracy", "correct", "total"}`` over the questions of d-dev.json and m-dev.json.
    """
    from cmrcx.benchmarks.clue import c3

    if not os.path.isdir(data_dir):
        names = " and ".join(c3.split_files("validation"))
        raise DataFormatError(
            f"{data_dir}: not a folder; GOLD for C3 is the unpacked official folder holding "
            f"{names} (e.g. c3_public/)"
        )
    return c3.score_submission(data_dir, "validation", predictions_path)


# registered task name -> fn(GOLD, PREDICTIONS) -> JSON-serialisable scores.
SCORERS = {
    **{name: functools.partial(score_clue, name) for name in CLASSIFICATION_TASKS},
    "clue_cmrc2018": score_cmrc2018,
    **dict.fromkeys(("clue_chid11", "clue_chid10"), score_chid),
    **dict.fromkeys(("clue_c311", "clue_c310"), score_c3),
}
