"""Mixture evaluation: every task of a benchmark that has a run, one table, one upload.

`python -m cmrcx.eval --mixture=clue --runs_root=DIR [--split validation|test]` looks for
`DIR/<task>/run_config.json` (written by `cmrcx.train`) for each task of the mixture,
evaluates each run's model with that run's own settings (its selected checkpoint if it
selects by a validation metric, RunConfig.select_best; else its latest) and prints the
paper's table registered as the mixture (`cmrcx.training.tables`; each benchmark's in
`cmrcx.benchmarks.<name>.tables`): `clue` and `clue_classification` Table 2 of the CLUE
paper (one row, the average over the tasks present, the missing ones named; under it the
published Table 2 row of each model the runs name, RunConfig.paper_model), writing
`DIR/<mixture>_<split>_results.json` and, for `test`, every task's official submission
file under `DIR/submission/` packed into `DIR/<mixture>_submission.zip`; `lot` LOT's
Tables 10 and 11 of the one model of the `lot` mixture at DIR/lot/ if there is one, else
of the per-task runs; `cmrc2019` the CMRC 2019 paper's Table 3 for every CMRC 2019 run
under DIR.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import NamedTuple

from cmrcx.common import errors
from cmrcx.training import run_config, tables


@dataclasses.dataclass(frozen=True)
class RunsUnder:
    """The runs under runs_root, as a paper table sees them (`cmrcx.training.tables.Runs`)."""

    root: str
    # (run, split) -> (step, metrics); None: restore and evaluate the run's model.
    evaluate_run: Callable | None = None

    def find(self, tasks: tuple[str, ...]) -> tuple[str, str] | None:
        return _find_run(self.root, tasks)

    def every(self) -> list[tuple[str, str]]:
        names = sorted(os.listdir(self.root))
        found = [(name, os.path.join(self.root, name)) for name in names]
        return [(name, d) for name, d in found if os.path.isfile(_config_file(d))]

    def read(self, run_dir: str) -> run_config.RunConfig:
        return dataclasses.replace(run_config.read_run_config(run_dir), model_dir=run_dir)

    def evaluate(self, run: run_config.RunConfig, split: str) -> tuple[int, dict[str, float]]:
        return (self.evaluate_run or _evaluate_run)(run, split)

    def evaluate_columns(self, columns, split: str) -> tuple[list[ColumnRun], list[str]]:
        """Each column's run (`find`), read, named (`--- column: task (run dir)`) and
        evaluated on `split`, in the columns' order; and the columns without a run."""
        found, missing = [], []
        for column, tasks in columns:
            task_run = self.find(tasks)
            if task_run is None:
                missing.append(column)
                continue
            task, run_dir = task_run
            run = self.read(run_dir)
            print(f"--- {column}: {task} ({run_dir})", flush=True)
            found.append(ColumnRun(column, task, run, *self.evaluate(run, split)))
        return found, missing


class ColumnRun(NamedTuple):
    """A table column's run and its evaluation (`RunsUnder.evaluate_columns`)."""

    column: str
    task: str  # the run's task, the first of the column's tasks with a run
    run: run_config.RunConfig  # model_dir: its folder
    step: int
    metrics: dict[str, float]


def _config_file(run_dir: str) -> str:
    return os.path.join(run_dir, run_config.RUN_CONFIG_FILE)


def _find_run(runs_root: str, tasks: tuple[str, ...]) -> tuple[str, str] | None:
    """(task, run dir) of the first of `tasks` (a column's, in preference order: CLUE 1.1
    before 1.0) with a run under runs_root; a line names the runs it leaves out."""
    found = [
        (task, os.path.join(runs_root, task))
        for task in tasks
        if os.path.isfile(_config_file(os.path.join(runs_root, task)))
    ]
    if len(found) > 1:
        others = ", ".join(task for task, _ in found[1:])
        print(f"note: {runs_root} also has {others}; the table takes {found[0][0]}", flush=True)
    return found[0] if found else None


def _evaluate_run(run: run_config.RunConfig, split: str) -> tuple[int, dict[str, float]]:
    from cmrcx.training.runner import Runner

    runner = Runner(run.checked(), for_training=False)
    step, state = runner.restore()
    return step, runner.evaluate(state, step, split)


def evaluate_mixture(
    mixture: str, runs_root: str, split: str = "validation", diagnostics_dir: str | None = None
) -> dict:
    """Evaluates every run of the mixture under runs_root; returns the results JSON data."""
    if mixture not in tables.TABLES:
        raise errors.ConfigError(f"--mixture {mixture!r}: use one of {', '.join(tables.TABLES)}")
    if not os.path.isdir(runs_root):
        raise errors.ConfigError(f"--runs_root {runs_root} is not a directory")
    return tables.TABLES[mixture](RunsUnder(runs_root), split, diagnostics_dir)
