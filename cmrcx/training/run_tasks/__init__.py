"""Run tasks: what the generic runner needs of each benchmark's tasks (`base`), one module
per benchmark. Importing this package registers them all; `build_run_task(run)` returns
the one `RunConfig.task` names. The registry's order (cmrc2019, CLUE, LongLM, LOT, the LOT
mixture) is the order RunConfig.task's error lists them in."""

# isort: off
from cmrcx.training.run_tasks import cmrc2019  # noqa: F401 (each registers its tasks)
from cmrcx.training.run_tasks import clue, longlm, lot, lot_mixture  # noqa: F401

# isort: on
from cmrcx.training.run_tasks.base import REGISTRY, Evaluation, RunTask, build_run_task

__all__ = ["REGISTRY", "Evaluation", "RunTask", "build_run_task"]
