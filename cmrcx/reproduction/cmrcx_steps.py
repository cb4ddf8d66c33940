"""The cmrcx side of a comparison: N steps of a run's own Runner, dropout off.

The run is the gin's (its task, data pipeline, PRETRAINED export, optimizer and schedule),
with three changes that the comparison needs and that leave the arithmetic alone: every
dropout rate of the model config is 0; MODEL_DIR is a scratch folder (the user's run is
never touched); model selection is off (no evaluation during the N steps). The batches
are the run's own, in its seeded order; they are kept so that the reference recipe is
fed the same ones.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import numpy as np

from cmrcx.training import input_pipeline
from cmrcx.training.run_config import DROPOUT_FIELDS, RunConfig


class CmrcxSteps(NamedTuple):
    """What N steps of cmrcx gave."""

    runner: Any  # the cmrcx.training.runner.Runner of the modified run
    initial_params: dict  # numpy tree, before step 1 (PRETRAINED encoder + initial head)
    batches: list[dict[str, np.ndarray]]  # the host batches of steps 1..N
    learning_rates: list[float]  # the rate each step's update used
    losses: list[float]  # each step's mean loss over its real examples
    final_state: Any  # the TrainState after step N


def without_dropout(model_config):
    """The model config with every dropout rate 0."""
    fields = {f.name for f in dataclasses.fields(model_config)}
    return dataclasses.replace(model_config, **{f: 0.0 for f in DROPOUT_FIELDS if f in fields})


def comparison_run(run: RunConfig, model_dir: str) -> RunConfig:
    """The run as the comparison trains it: dropout off, MODEL_DIR `model_dir`, no
    selection, no periodic evaluation or save."""
    return dataclasses.replace(
        run,
        model=without_dropout(run.model),
        model_dir=model_dir,
        select_best=None,
        eval_every=0,
    )


def run_steps(run: RunConfig, steps: int) -> CmrcxSteps:
    """Steps 1..`steps` of `run` (a `comparison_run`), recording batches, rates and losses.

    The rate of step k is the run's schedule at update k - 1 (`Runner.learning_rate_at`,
    what the metric lines log); the loss is the step's summed loss over its example count, what
    `Runner.train` logs.
    """
    from cmrcx.training.runner import Runner

    runner = Runner(run)
    state = runner.initial_state()
    initial_params = jax.device_get(state.params)
    shard = input_pipeline.host_shard(runner.trainer.batch_sharding, run.batch_size)
    batches = input_pipeline.train_batches(
        runner.train_task,
        run.train_split,
        run.batch_size,
        runner.model.train_keys,
        run.seed,
        0,
        shard,
        runner.store,
    )
    kept, rates, losses = [], [], []
    for step in range(steps):
        batch = {key: np.array(value) for key, value in next(batches).items()}
        state, metrics = runner.trainer.train_step(state, batch)
        metrics = jax.device_get(metrics)
        kept.append(batch)
        rates.append(float(runner.learning_rate_at(step)))
        losses.append(float(metrics["loss_sum"] / metrics["examples"]))
    return CmrcxSteps(runner, initial_params, kept, rates, losses, state)
