"""Scores an official predictions file: ``python -m cmrcx.score NAME GOLD PREDICTIONS``.

NAME is ``cmrc2019``, a versioned CLUE classification task name (``clue_afqmc``,
``clue_tnews10``, ``clue_tnews11``, ``clue_iflytek``, ``clue_ocnli``, ``clue_cmnli``,
``clue_cluewsc10``, ``clue_cluewsc11``, ``clue_csl``, ``clue_diagnostics``; the table is
`cmrcx.benchmarks.clue.tasks.TASKS`) or a CLUE reading-comprehension task (below). The
papers' names work too, case and spaces aside, for the current CLUE version (1.1):
``cluewsc2020`` is ``clue_cluewsc11``, ``chid`` ``clue_chid11``, ``c3`` ``clue_c311``,
``cmrc2018`` ``clue_cmrc2018``, ``tnews`` ``clue_tnews11`` (`cmrcx.benchmarks.task_names`).

Prints exactly one JSON object on stdout, e.g. for CMRC 2019
``{"qac": 71.2, "pac": 20.5, "total": 1234, "skip": 0}``, plus ``"missing": [...]`` when
some passages have no prediction (a warning goes to stderr). For a CLUE classification
task, GOLD is a labelled official file (e.g. ``afqmc_public/dev.json``) and PREDICTIONS a
file in the leaderboard's submission format (one ``{"id", "label"}`` object per line, in
GOLD's line order): ``{"accuracy": 74.2, "correct": 3203, "total": 4316}``, plus
``"skipped"`` when GOLD has rows without a majority label (a note goes to stderr).

The reading-comprehension tasks (CLUE 1.1 and 1.0 share train and dev, so both versions
score the same way):

* ``cmrc2018`` / ``clue_cmrc2018``: GOLD is the official SQuAD-style file with answers
  (``cmrc2018_public/dev.json``), PREDICTIONS ``{question id: answer text}``; prints the
  official evaluator's ``{"AVERAGE", "F1", "EM", "TOTAL", "SKIP"}`` (a question without a
  prediction counts 0 and in SKIP, as there; a warning goes to stderr). Ids not in GOLD are
  ignored, as there, unless no id matches at all: then it is an error (the wrong file).
* ``chid`` / ``clue_chid11`` / ``clue_chid10``: GOLD is the answer file
  (``chid_public/dev_answer.json``, ``{tag: index}``: what CLUE's ``CHID_preprocess.py``
  ``evaluate`` reads), PREDICTIONS ``{tag: index}`` (``chid11_predict.json``'s format) with
  exactly GOLD's tags: ``{"accuracy", "correct", "total"}``.
* ``c3`` / ``clue_c311`` / ``clue_c310``: GOLD is the unpacked folder (``c3_public/``); its
  dev split, ``d-dev.json`` then ``m-dev.json`` as CLUE's ``run_c3.py`` concatenates them,
  is scored. PREDICTIONS has one ``{"id", "label"}`` line per question in that order (``id``
  the question's index in the split, as the files carry no ids; ``label`` the choice 0..3;
  ``c311_predict.json``'s format): ``{"accuracy", "correct", "total"}``.

Bad input files print ``error: <message>`` (naming the file and the record) on stderr and
exit with status 2.

Only the standard library and the scorers' own modules are imported (the reading-
comprehension ones, which need numpy, only for their tasks), never jax or tensorflow, so
scoring starts in well under a second.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cmrcx.benchmarks import task_names
from cmrcx.benchmarks.clue.metrics import score_submission as score_clue_submission
from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_TASKS
from cmrcx.benchmarks.cmrc2019.metrics import cloze_scores
from cmrcx.benchmarks.cmrc2019.official_format import read_passages, read_predictions
from cmrcx.common.errors import DataFormatError


def score_cmrc2019(dataset_path: str, predictions_path: str) -> dict[str, Any]:
    """QAC/PAC of a CMRC 2019 predictions file against a labelled dataset file.

    Returns:
      ``{"qac", "pac", "total", "skip"}`` plus ``"missing"`` only when it is non-empty.
    """
    passages = read_passages(dataset_path, require_answers=True)
    if not passages:
        raise DataFormatError(f"{dataset_path}: top level: field 'data' is empty; nothing to score")
    scores = cloze_scores(passages, read_predictions(predictions_path))
    if not scores["missing"]:
        del scores["missing"]
    else:
        print(
            f"warning: {len(scores['missing'])} of {len(passages)} passages in "
            f"{dataset_path} have no prediction in {predictions_path}; scored as 0",
            file=sys.stderr,
        )
    return scores


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


# registered task name -> fn(dataset_path, predictions_path) -> JSON-serialisable scores.
# The names people type (``cmrc2018``, ``CLUEWSC2020``, ``chid``...) resolve to these
# through `cmrcx.benchmarks.task_names`.
SCORERS: dict[str, Callable[[str, str], dict[str, Any]]] = {
    "cmrc2019": score_cmrc2019,
    **{name: functools.partial(score_clue, name) for name in CLUE_TASKS},
    "clue_cmrc2018": score_cmrc2018,
    **dict.fromkeys(("clue_chid11", "clue_chid10"), score_chid),
    **dict.fromkeys(("clue_c311", "clue_c310"), score_c3),
}

# The --help epilog: GOLD and PREDICTIONS of the reading-comprehension tasks.
MRC_HELP = """\
reading-comprehension tasks (CLUE 1.1 and 1.0 share dev; both versions score alike):
  cmrc2018, clue_cmrc2018       GOLD the official file with answers, e.g.
                                cmrc2018_public/dev.json; PREDICTIONS {question id: text}.
                                Prints the official evaluator's AVERAGE, F1, EM, TOTAL, SKIP.
  chid, clue_chid11, clue_chid10
                                GOLD the answer file, e.g. chid_public/dev_answer.json
                                ({tag: index}); PREDICTIONS {tag: index}, the same tags.
  c3, clue_c311, clue_c310      GOLD the unpacked folder, e.g. c3_public/: its dev split,
                                d-dev.json then m-dev.json, is scored; PREDICTIONS one
                                {"id", "label"} line per question in that order.
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m cmrcx.score",
        description="Score an official-format predictions file against a dataset file.",
        epilog=MRC_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "benchmark",
        help=f"one of: {', '.join(sorted(SCORERS))}; or a paper's name of a task "
        f"(the current CLUE version): {task_names.paper_names_text()}",
        metavar="NAME",
    )
    parser.add_argument(
        "dataset",
        help="official dataset file with answers, e.g. the dev set (see below for MRC tasks)",
        metavar="GOLD",
    )
    parser.add_argument(
        "predictions", help="official predictions / submission file", metavar="PREDICTIONS"
    )
    args = parser.parse_args(argv)
    task = task_names.find(args.benchmark)
    if task not in SCORERS:
        parser.error(
            f"argument NAME: unknown task {args.benchmark!r}; accepted: "
            f"{', '.join(sorted(SCORERS))}; or a paper's name: {task_names.paper_names_text()}"
        )
    try:
        scores = SCORERS[task](args.dataset, args.predictions)
    except DataFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(scores, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
