"""The CMRC 2019 file scorer `python -m cmrcx.score cmrc2019 GOLD PREDICTIONS` calls."""

from __future__ import annotations

import sys
from typing import Any

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


SCORERS = {"cmrc2019": score_cmrc2019}  # task name -> fn(GOLD, PREDICTIONS) -> scores
