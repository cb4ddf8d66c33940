"""Evaluate a run, or every run of a mixture.

One run: `python -m cmrcx.eval --model_dir=MODEL_DIR [--split test] [--step best|latest|N]`
takes the configuration the run saved (MODEL_DIR/run_config.json; no gin file, PRETRAINED
or DATA_DIR needed); gin files and `--gin.KEY=VALUE` override it (`--gin.DATA_DIR="'DIR'"`
for a test split kept elsewhere), and the older `--gin_file=NAME.gin --gin.MODEL_DIR=...`
form works too. It evaluates a training checkpoint of MODEL_DIR on a split: by default
the selected one (the best validation score) of a run with RunConfig.select_best, else
the latest; prints the task's metrics (none for `test`, which has no answers) and writes
MODEL_DIR/predictions/<task>_<split>.json in the official format; for a CLUE
task's `test` split also MODEL_DIR/submission/<official file name>. With `--step N` (a
number) those files go under MODEL_DIR/step_N/ instead, so the run's own are kept.

A mixture: `python -m cmrcx.eval --mixture=clue --runs_root=DIR [--split validation|test]
[--diagnostics_dir DIR]` evaluates every task that has a run under DIR/<task>/ (as
`cmrcx.train` leaves it; its selected checkpoint, or the latest), prints the paper's
table (Table 2's row, and under it the published row of the model the runs name,
RunConfig.paper_model) and writes DIR/clue_<split>_results.json; `--split test` also writes every
official submission file and DIR/clue_submission.zip. The diagnostics set is predicted
by the CMNLI run when --diagnostics_dir is given.
`--mixture=lot` prints LOT's Tables 10 and 11 (ClozeT, SenPos; PlotCom, OutGen) with the
paper's overall scores for the one model of the `lot` mixture at DIR/lot/ if there is one,
else for the runs under DIR/lot_<task>/ (each table's published row of the runs' model
under theirs), and writes DIR/lot_<split>_results.json. `--mixture=cmrc2019` prints the
CMRC 2019 paper's Table 3: a row per CMRC 2019 run under DIR (one folder per model, as
tools/reproduce_cmrc2019.sh leaves them) beside the published row of its model.
"""

from __future__ import annotations

import argparse
import json
import os

from cmrcx.cli import startup

if __name__ == "__main__":  # before JAX and TensorFlow load (see cmrcx.cli.startup)
    startup.start(keep_freed=True)  # reuse each batch's memory

from cmrcx.cli import launch, saved_run  # noqa: E402
from cmrcx.common import paths  # noqa: E402

FLAGS = (
    ("--split", {"default": None, "help": "split to score (default: the run's eval split)"}),
    (
        "--step",
        {
            "default": None,
            "help": "checkpoint: best, latest or a step number (default: best for a run "
            "with RunConfig.select_best, else latest)",
        },
    ),
)


def main_mixture(argv) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--mixture", required=True, help="clue, clue_classification, lot or cmrc2019"
    )
    parser.add_argument("--runs_root", required=True, help="holds one run per task: DIR/<task>/")
    parser.add_argument("--split", default="validation", choices=["validation", "test"])
    parser.add_argument("--diagnostics_dir", default=None, help="the unpacked diagnostics folder")
    args = parser.parse_args(argv)
    launch.prepare_process()
    from cmrcx.training.mixture_eval import evaluate_mixture

    evaluate_mixture(
        args.mixture,
        paths.resolve_path(args.runs_root),
        args.split,
        paths.resolve_path(args.diagnostics_dir),
    )


def main(argv) -> None:
    if any(arg.startswith("--mixture") for arg in argv):
        main_mixture(argv)
        return
    args, run = saved_run.start(argv, __doc__, FLAGS)
    from cmrcx.training.runner import Runner, require_trained

    require_trained(run.model_dir)
    runner = Runner(run, for_training=False)
    step, state = runner.restore(args.step)
    split = args.split or run.eval_split
    numbered = args.step is not None and str(args.step).isdigit()
    out_dir = os.path.join(run.model_dir, f"step_{step}") if numbered else None
    results = runner.evaluate(state, step, split, out_dir=out_dir)
    if results:
        print(runner.results_table(results, split))
    print(json.dumps({"step": step, "split": split, **results}))


if __name__ == "__main__":
    launch.main_guard(main)
