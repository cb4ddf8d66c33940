"""Model selection by a validation metric (RunConfig.select_best), as the papers did. CLUE:
"We also use early stopping to select the best checkpoint" (Xu et al., COLING 2020,
section 6, "Fine-tuning"), and its run scripts keep the model of the best dev score;
CMRC 2019's paper evaluates the final model (no selection, the default).

`Selection` is the rule, pure; `cmrcx.training.checkpoints` saves each evaluated step's
metrics inside its checkpoint and keeps the selected step through keep-N rotation; the
runner evaluates on the cadence `eval_every` gives and checks the metric name.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

from cmrcx.common.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Selection:
    """The checkpoint a run keeps as its model: the evaluated step with the best `metric`
    ("max": highest, "min": lowest). Of equal scores the earliest step stays, as CLUE's
    run_mrc.py and run_multichoice_mrc.py (@5c44cc2) replace their best model only on a
    strictly better score (run_c3.py's `>=` would keep the latest). A non-finite score is
    never selected."""

    metric: str  # a name the task's evaluation reports, e.g. "accuracy", "AVERAGE"
    mode: str = "max"  # "max" | "min"

    @classmethod
    def of_run(cls, run) -> Selection | None:
        return cls(run.select_best, run.select_mode) if run.select_best else None

    def score(self, metrics: Mapping | None) -> float | None:
        """The step's score, or None if it has none (not evaluated, or not finite)."""
        value = None if metrics is None else metrics.get(self.metric)
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return float(value)

    def best(self, scored: Iterable[tuple[int, Mapping | None]]) -> int | None:
        """The selected step of (step, metrics) pairs; None if none has a score."""
        best_step, best_score = None, None
        for step, metrics in sorted(scored, key=lambda pair: pair[0]):
            score = self.score(metrics)
            if score is None:
                continue
            if best_score is None or (
                score > best_score if self.mode == "max" else score < best_score
            ):
                best_step, best_score = step, score
        return best_step

    def describe(self, step: int, metrics: Mapping | None, split: str) -> str:
        """`step 8: the best validation accuracy of the run (56.25)`."""
        word = "highest" if self.mode == "max" else "lowest"
        score = self.score(metrics)
        value = "?" if score is None else f"{score:.4g}"
        return f"step {step}: the {word} {split} {self.metric} of the run ({value})"


def check_metric(selection: Selection, reported: dict[str, str] | None, task: str) -> None:
    """ConfigError at start-up if the task's evaluation does not report the metric, or
    reports it the other way round (`reported`: RunTask.metrics_reported())."""
    if reported is None:
        return  # checked on the first evaluation's results
    if selection.metric not in reported:
        raise ConfigError(
            f"RunConfig.select_best {selection.metric!r}: {task}'s evaluation reports "
            f"{', '.join(sorted(reported))}"
        )
    if reported[selection.metric] != selection.mode:
        raise ConfigError(
            f"RunConfig.select_mode {selection.mode!r}: {task}'s {selection.metric} is "
            f"better when {'higher' if reported[selection.metric] == 'max' else 'lower'}: "
            f"set RunConfig.select_mode = {reported[selection.metric]!r}"
        )


def check_results(selection: Selection, results: Mapping, split: str, step: int) -> None:
    """ConfigError if an evaluation's results lack the metric (a task that could not
    say its metric names before evaluating)."""
    if selection.metric not in results:
        reported = ", ".join(sorted(results)) or "nothing (no answers)"
        raise ConfigError(
            f"RunConfig.select_best {selection.metric!r}: the {split} evaluation of step "
            f"{step} reports {reported}"
        )


def prepare(run, task, num_train_steps: int, training_examples) -> int:
    """Start-up of a selecting training run: the metric and the eval split checked (now,
    not at the first evaluation); returns the steps between evaluations."""
    check_metric(Selection.of_run(run), task.metrics_reported(), run.task)
    task.require_split(run.eval_split)
    return eval_every(run, num_train_steps, training_examples)


def eval_every(run, num_train_steps: int, training_examples) -> int:
    """Steps between a selecting run's evaluations: RunConfig.eval_every, or if None
    RunConfig.eval_every_epochs epochs of steps (rounded down, at least 1).
    `training_examples()` counts the training split (called only when needed)."""
    if run.eval_every:
        return run.eval_every
    steps_per_epoch = math.ceil(training_examples() / run.batch_size)
    every = max(1, int(steps_per_epoch * run.eval_every_epochs))
    print(
        f"model selection by validation {run.select_best}: an evaluation every {every} "
        f"steps ({run.eval_every_epochs:g} epoch(s) of {steps_per_epoch} steps) and at "
        f"step {num_train_steps}",
        flush=True,
    )
    return every
