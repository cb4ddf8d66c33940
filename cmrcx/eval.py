"""`python -m cmrcx.eval --gin_file=NAME.gin --gin.MODEL_DIR=... [--split test] [--step N]`

Evaluates a training checkpoint of MODEL_DIR (the latest, or --step) on a split:
prints QAC/PAC for every decoding mode (none for `test`, which has no answers)
and writes MODEL_DIR/predictions/<task>_<split>.json in the official format.
"""

from __future__ import annotations

import json

from cmrcx import launch

FLAGS = (
    ("--split", {"default": None, "help": "split to score (default: the run's eval split)"}),
    ("--step", {"type": int, "default": None, "help": "checkpoint step (default: latest)"}),
)


def main(argv) -> None:
    args, run = launch.start(argv, __doc__, FLAGS)
    from cmrcx.benchmarks.cmrc2019 import evaluation
    from cmrcx.training.runner import Cmrc2019Runner

    runner = Cmrc2019Runner(run, for_training=False)
    step, state = runner.restore(args.step)
    split = args.split or run.eval_split
    results = runner.evaluate(state, step, split)
    if results:
        print(evaluation.results_table(results, split))
    print(json.dumps({"step": step, "split": split, **results}))


if __name__ == "__main__":
    launch.main_guard(main)
