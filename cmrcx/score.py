"""Scores an official predictions file: ``python -m cmrcx.score NAME DATASET PREDICTIONS``.

NAME is ``cmrc2019`` or a versioned CLUE task name (``clue_afqmc``, ``clue_tnews10``,
``clue_tnews11``, ``clue_iflytek``, ``clue_ocnli``, ``clue_cmnli``, ``clue_cluewsc10``,
``clue_cluewsc11``, ``clue_csl``, ``clue_diagnostics``; the table is
`cmrcx.benchmarks.clue.tasks.TASKS`).

Prints exactly one JSON object on stdout, e.g. for CMRC 2019
``{"qac": 71.2, "pac": 20.5, "total": 1234, "skip": 0}``, plus ``"missing": [...]`` when
some passages have no prediction (a warning goes to stderr). For a CLUE task, DATASET is a
labelled official file (e.g. ``afqmc_public/dev.json``) and PREDICTIONS a file in the
leaderboard's submission format (one ``{"id", "label"}`` object per line, in DATASET's
line order): ``{"accuracy": 74.2, "correct": 3203, "total": 4316}``, plus ``"skipped"``
when DATASET has rows without a majority label (a note goes to stderr). Bad input files
print ``error: <message>`` on stderr and exit with status 2.

Only the standard library and the scorers' own modules are imported, never jax or
tensorflow, so scoring starts in well under a second.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cmrcx.benchmarks.clue.metrics import score_submission as score_clue_submission
from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_TASKS
from cmrcx.benchmarks.cmrc2019.metrics import cloze_scores
from cmrcx.benchmarks.cmrc2019.official_format import read_passages, read_predictions
from cmrcx.benchmarks.records import DataFormatError


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


# benchmark or task name -> fn(dataset_path, predictions_path) -> JSON-serialisable scores.
SCORERS: dict[str, Callable[[str, str], dict[str, Any]]] = {
    "cmrc2019": score_cmrc2019,
    **{name: functools.partial(score_clue, name) for name in CLUE_TASKS},
}


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m cmrcx.score",
        description="Score an official-format predictions file against a dataset file.",
    )
    parser.add_argument(
        "benchmark", choices=sorted(SCORERS), help="cmrc2019 or a CLUE task such as clue_afqmc"
    )
    parser.add_argument("dataset", help="official dataset file with answers, e.g. the dev set")
    parser.add_argument("predictions", help="official predictions / submission file")
    args = parser.parse_args(argv)
    try:
        scores = SCORERS[args.benchmark](args.dataset, args.predictions)
    except DataFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(scores, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
