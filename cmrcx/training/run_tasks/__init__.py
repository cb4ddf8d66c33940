"""Run tasks: what the generic runner needs of each benchmark's tasks (`base`), one module
per benchmark. Importing this package registers them all; `build_run_task(run)` returns
the one `RunConfig.task` names."""

from cmrcx.training.run_tasks import (  # noqa: F401 (each registers its tasks)
    clue,
    cmrc2019,
    longlm,
    lot,
    lot_mixture,
)
from cmrcx.training.run_tasks.base import REGISTRY, Evaluation, RunTask, build_run_task

__all__ = ["REGISTRY", "Evaluation", "RunTask", "build_run_task"]
