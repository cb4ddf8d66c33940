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

The LOT tasks (``lot_clozet``, ``lot_senpos``, ``lot_plotcom``, ``lot_outgen``; the paper's
``ClozeT``, ``SenPos``, ``PlotCom``, ``OutGen``): GOLD is the task's official jsonl with
labels or targets, PREDICTIONS the same schema, aligned by line (note: the official
``eval.py`` takes PREDICTIONS first). ClozeT/SenPos print ``{"accuracy", "correct",
"total"}``; PlotCom/OutGen the organisers' eval.py keys and a few more
(`cmrcx.benchmarks.lot.scoring`).

Bad input files print ``error: <message>`` (naming the file and the record) on stderr and
exit with status 2.

Only the standard library and the scorers' own modules are imported (the reading-
comprehension ones, which need numpy, only for their tasks), never jax or tensorflow, so
scoring starts in well under a second.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cmrcx.benchmarks import task_names
from cmrcx.benchmarks.clue import scoring as clue_scoring
from cmrcx.benchmarks.cmrc2019 import scoring as cmrc2019_scoring
from cmrcx.benchmarks.lot import scoring as lot_scoring
from cmrcx.common.errors import DataFormatError

# registered task name -> fn(dataset_path, predictions_path) -> JSON-serialisable scores,
# from each benchmark's scoring module. The names people type (``cmrc2018``,
# ``CLUEWSC2020``, ``chid``...) resolve to these through `cmrcx.benchmarks.task_names`.
SCORERS: dict[str, Callable[[str, str], dict[str, Any]]] = {
    **cmrc2019_scoring.SCORERS,
    **clue_scoring.SCORERS,
    **lot_scoring.SCORERS,
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

LOT (GOLD first; the official eval.py takes PRED first). Both files are the task's jsonl,
aligned by line:
  lot_clozet, lot_senpos        the "label" fields: {"accuracy", "correct", "total"}.
  lot_plotcom, lot_outgen       the "plot" / "story" fields: the organisers' eval.py keys
                                (bleu-n, distinct-n; OutGen coverage, order), then
                                repetition-n, word-distinct-n (the paper's D-n) and for
                                OutGen organisers-weighted-score. Fractions, as there.
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
