"""`python -m cmrcx.train --gin_file=NAME.gin [--gin.KEY=VALUE ...]`

Trains RunConfig.task (resuming from MODEL_DIR's latest checkpoint if there is
one), then evaluates the eval split: prints the task's metrics (CMRC 2019: QAC/PAC
for every decoding mode; CLUE: accuracy) and writes
MODEL_DIR/predictions/<task>_<split>.json in the official format. The model evaluated
is the final one, or with RunConfig.select_best the checkpoint of the best validation
score (the step is printed, and is the "step" of the last line's JSON).
"""

from __future__ import annotations

import json

from cmrcx.cli import startup

if __name__ == "__main__":  # before JAX and TensorFlow load (see cmrcx.cli.startup)
    startup.start()

from cmrcx.cli import launch  # noqa: E402


def main(argv) -> None:
    _, run = launch.start(argv, __doc__)
    from cmrcx.training.runner import Runner  # after gin: jax/tf start here

    runner = Runner(run)
    state, _ = runner.train()
    step, results = runner.final_evaluation(state)
    if results:
        print(runner.results_table(results, run.eval_split))
    print(json.dumps({"step": step, "split": run.eval_split, **results}))


if __name__ == "__main__":
    launch.main_guard(main)
