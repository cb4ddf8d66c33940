"""What the generic runner needs of a benchmark task, declared: `RunTask` and `Evaluation`,
and the registry that `RunConfig.task` names are looked up in.

One module per benchmark (`cmrc2019`, `clue`, `lot`) defines its run tasks and registers
them by name (`register`); importing `cmrcx.training.run_tasks` loads them all, and
`build_run_task(run)` returns the run task of `run.task` with its SeqIO tasks registered
for the run's vocabulary and data. Adding a task of an existing problem type is a row
in its benchmark's table; adding a problem type is a Model API and a RunTask class.

A run task's own settings (CMRC 2019's `decoding`, LOT generation's sampling) are its
`options_class`, a `cmrcx.training.task_options` dataclass that checks them;
`RunConfig.options` holds the run's (`run_task_options`).

An evaluation takes the scores of every scoring batch (`add`), then `finish` decodes
them, writes the official-format prediction file and returns the metrics of the task's
own metric functions, with the targets the SeqIO task carries (never re-read from the
official files).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Protocol

import jax
import numpy as np

from cmrcx.model_api.base import ModelApi
from cmrcx.training import task_options
from cmrcx.training.task_options import TaskOptions


class Evaluation(Protocol):
    """The scores of one split, batch by batch, then the official files and metrics."""

    def add(self, scores: np.ndarray, examples: dict[str, np.ndarray]) -> None:
        """scores: the Model API's `score_batch` rows for the first len(scores) (real)
        rows of `examples`, in split order."""
        ...

    def finish(self, model_dir: str) -> dict[str, float]:
        """Decodes, writes MODEL_DIR/predictions/ (and submission/ for test); returns the
        metrics, or {} for a split without answers."""
        ...


def run_task_options(run) -> TaskOptions:
    """`run.options` as the options of `run.task`'s run task (`task_options.task_options`:
    from flat values, another class's, or None for the defaults)."""
    return task_options.task_options(REGISTRY[run.task].options_class, run.options, run.task)


class RunTask(Protocol):
    """One `RunConfig.task`: its SeqIO tasks, its Model API, and how a split is scored.

    Subclasses get the optional abilities' defaults below; a task that can do better
    overrides them (no `hasattr` probing in the runner).
    """

    name: str  # the registered name, e.g. "clue_afqmc"
    options_class: type[TaskOptions] = TaskOptions  # its own options (RunConfig.options)
    train_task: str  # SeqIO task the runner trains on
    score_task: str  # SeqIO task the runner scores (often the same)
    model: ModelApi

    def require_split(self, split: str) -> None:
        """MissingSplitError naming the official file(s) `split` needs, if absent."""
        ...

    def check_split(self, split: str) -> None:
        """Reads `split`'s official file(s) through the benchmark's reader: MissingSplitError
        if absent, DataFormatError naming the file, record and field of the first bad
        record. The runner checks its eval split before the first training step, so a bad
        validation file stops the run at once, not at the first evaluation hours later.
        Default: presence only (for tasks whose evaluation reads nothing official)."""
        self.require_split(split)

    def evaluation(self, split: str) -> Evaluation: ...

    def results_table(self, results: dict[str, float], split: str) -> str:
        """What the run prints after an evaluation."""
        return metric_lines(self.name, results, split)

    def metrics_reported(self) -> dict[str, str] | None:
        """{metric: "max" or "min" (which way is better)} of what `evaluation(...).finish`
        returns for a labelled split (RunConfig.select_best must name one); None: not
        known before an evaluation (the runner then checks the first one's results)."""
        return None

    def count_examples(self, split: str) -> int | None:
        """Training examples of `split` when known without running the input pipeline;
        None: the runner counts them through the pipeline."""
        return None

    def count_training_blanks(self) -> int | None:
        """Blanks of the training split, for the released script's schedule (CMRC 2019);
        None: the task has no released-script optimizer."""
        return None


RunTaskFactory = Callable[[object], RunTask]  # RunConfig -> RunTask
REGISTRY: dict[str, RunTaskFactory] = {}


def register(names: Iterable[str], factory: RunTaskFactory) -> None:
    """Makes `factory(run)` the run task of every name in `names`."""
    for name in names:
        if name in REGISTRY and REGISTRY[name] is not factory:
            raise ValueError(f"run task {name!r} is registered twice")
        REGISTRY[name] = factory


def build_run_task(run) -> RunTask:
    """The RunTask of `run.task` (its SeqIO tasks registered for this run), given the
    run with its options as the task's `options_class` (`task_options`)."""
    if run.task not in REGISTRY:
        raise ValueError(
            f"RunConfig.task {run.task!r}: no run task for it; registered: {', '.join(REGISTRY)}"
        )
    return REGISTRY[run.task](dataclasses.replace(run, options=run_task_options(run)))


def announce(path: str, what: str, detail: str = "") -> None:
    """`predictions: PATH (16 records)`: one line per file written, from process 0."""
    if jax.process_index() == 0:
        print(f"{what}: {path}" + (f" ({detail})" if detail else ""), flush=True)


# How figures are printed for reading (the lines train and eval print after an evaluation,
# cmrcx.eval's tables): percentages with two decimals, as the three papers' tables and the
# CLUE and CMRC official evaluators print them ("56.25" is 56.25 %). JSON (metrics.jsonl,
# the results files, the last line of train/eval, cmrcx.score) keeps each official
# scorer's own scale: percentages for CMRC 2019 and CLUE, fractions for LOT (its eval.py).
PRINTED_FIGURES = (
    "scores are percentages with two decimals (56.25 = 56.25 %), as the papers' tables print "
    "them; JSON output keeps each official scorer's scale (CMRC 2019, CLUE: percentages; "
    "LOT: fractions, 0.5625)"
)
COUNT_KEYS = frozenset({"TOTAL", "SKIP", "total", "skip", "correct", "skipped"})  # not scores


def metric_lines(task: str, results: dict[str, float], split: str, fractions: bool = False) -> str:
    """One line per metric: ``clue_afqmc validation accuracy: 56.25`` (PRINTED_FIGURES).
    fractions: the results are fractions (LOT's), printed x 100. Counts print as integers."""

    def figure(key: str, value: float) -> str:
        if key in COUNT_KEYS:
            return f"{value:.0f}"
        return f"{100 * value if fractions else value:.2f}"

    return "\n".join(f"{task} {split} {k}: {figure(k, v)}" for k, v in results.items())
