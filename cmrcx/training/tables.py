"""Paper tables, the registry beside the run tasks': `python -m cmrcx.eval --mixture=NAME
--runs_root=DIR` prints the table registered as NAME (`register_table`).

A paper table is its benchmark's (`cmrcx.benchmarks.<name>.tables`, pure Python): given
the runs under DIR (`Runs`: a task's run, every run folder, a run's saved configuration
and its evaluation of a split), a split and CLUE's diagnostics folder, it evaluates the
runs it has columns for, prints the paper's table, writes DIR/<mixture>_<split>_results.json
and returns that data. `cmrcx.training.mixture_eval.RunsUnder` is the `Runs` the CLI
passes. Adding a benchmark's table is a module under its benchmarks/ package and one
`register_table` line below.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Protocol

from cmrcx.benchmarks.clue import tables as clue_tables
from cmrcx.benchmarks.cmrc2019 import tables as cmrc2019_tables
from cmrcx.benchmarks.lot import tables as lot_tables


class Runs(Protocol):
    """The runs under `--runs_root`, one folder per run holding its run_config.json."""

    root: str

    def find(self, tasks: tuple[str, ...]) -> tuple[str, str] | None:
        """(task, run dir) of the first of `tasks` with a run at root/<task>/, or None."""
        ...

    def every(self) -> list[tuple[str, str]]:
        """(folder name, run dir) of every run under root, by name."""
        ...

    def read(self, run_dir: str):
        """The run's saved RunConfig, its model_dir set to run_dir."""
        ...

    def evaluate(self, run, split: str) -> tuple[int, dict[str, float]]:
        """(step, metrics) of the run's model (its selected checkpoint, else its latest)
        on `split`, its official prediction file written as a run's evaluation writes it."""
        ...

    def evaluate_columns(self, columns: Iterable[tuple[str, tuple[str, ...]]], split: str):
        """For (column, its tasks in preference order) pairs: ([(column, task, run, step,
        metrics)] of the columns with a run, each named as it starts, evaluated on `split`),
        [the columns without one])."""
        ...


# (runs, split, diagnostics_dir) -> the results JSON data, after printing the table.
PaperTable = Callable[[Runs, str, "str | None"], dict]
TABLES: dict[str, PaperTable] = {}


def register_table(mixture: str, table: PaperTable) -> None:
    """Makes `table` what `cmrcx.eval --mixture=mixture` prints."""
    if mixture in TABLES and TABLES[mixture] is not table:
        raise ValueError(f"paper table {mixture!r} is registered twice")
    TABLES[mixture] = table


register_table("clue", functools.partial(clue_tables.evaluate, "clue"))  # Table 2
register_table(
    "clue_classification", functools.partial(clue_tables.evaluate, "clue_classification")
)
register_table("lot", lot_tables.evaluate)  # Tables 10 and 11
register_table("cmrc2019", cmrc2019_tables.evaluate)  # Table 3
