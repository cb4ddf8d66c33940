"""Inside a worker child: one side's step, built by the family, timed here.

A family module gives `cmrcx_step(args, g)` and `torch_step(args, g)`, each returning
(step, extras): `step()` runs one step and waits for its result; `extras()` is called
after the timed steps and returns the side's own figures (a matmul reference, the
fewest new tokens a row got...). `run_worker` times the step and prints the result.
"""

from __future__ import annotations

import collections
import resource
import time

from . import harness

# ---------------------------------------------------------------- worker


def run_worker(args, family) -> None:
    """A worker subcommand: one side's timings as a JSON line on stdout."""
    g = family.worker_geometry(args)
    if args.side == "cmrcx":
        from cmrcx.cli import launch

        launch.prepare_process()  # as `python -m cmrcx.train` starts
        step, extras = family.cmrcx_step(args, g)
        compile_events, after_first = compile_recorder()  # after init: the first call compiles
        result = measured_steps(step, args.warmup, args.steps, after_first)
        result["compile_events"] = compile_events
    else:
        import torch

        torch.set_num_threads(len(args.cpus.split(",")))
        torch.manual_seed(args.seed)
        step, extras = family.torch_step(args, g)
        result = measured_steps(step, args.warmup, args.steps)
    harness.print_result({**result, **extras()})


# ---------------------------------------------------------------- timing


def measured_steps(step, warmup: int, steps: int, after_first=None) -> dict:
    """Per-step seconds of warmup + steps calls; kernel work over the timed steps.

    Page faults and system time show the cost of fresh buffers being mapped each
    step (see --glibc_tunables).
    """
    times = timed(step, 1)
    if after_first is not None:
        after_first()
    times += timed(step, warmup - 1)
    start = resource.getrusage(resource.RUSAGE_SELF)
    times += timed(step, steps)
    end = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "step_seconds": times,
        "minor_faults_per_step": (end.ru_minflt - start.ru_minflt) / steps,
        "system_seconds_per_step": (end.ru_stime - start.ru_stime) / steps,
        "user_seconds_per_step": (end.ru_utime - start.ru_utime) / steps,
    }


def timed(step, count: int) -> list[float]:
    """Wall-clock seconds of `count` calls of `step()` (which must synchronise)."""
    times = []
    for _ in range(count):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def compile_recorder():
    """(events, after_first): jax's compile-phase seconds, captured after the first call."""
    import jax

    events, compile_events = collections.defaultdict(float), {}
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **_: events.__setitem__(event, events[event] + seconds)
    )

    def after_first():
        compile_events.update(
            {k.rsplit("/", 1)[-1]: v for k, v in events.items() if "/compile/" in k}
        )

    return compile_events, after_first


# ---------------------------------------------------------------- cmrcx side


def one_device_trainer(model, optimizer, example_batch):
    """A cmrcx Trainer for `model` on one device (mesh 1 x 1)."""
    import jax

    from cmrcx import cpu
    from cmrcx.training import partitioning
    from cmrcx.training.trainer import Trainer

    cpu.enable()  # as the entry points' start-up does: dropout's threefry unrolled
    mesh = partitioning.make_mesh((1, 1), devices=jax.devices()[:1])
    return Trainer(model, optimizer, mesh, example_batch)


def cmrcx_train_step(trainer, batch):
    """The Trainer's jitted train step on a fresh state, repeated on `batch`."""
    import jax

    state = jax.block_until_ready(trainer.init_state())

    def step():
        nonlocal state
        state, metrics = trainer.train_step(state, batch)
        jax.block_until_ready((state, metrics))

    return step


# ---------------------------------------------------------------- torch side


def torch_batch(batch: dict) -> dict:
    """The same int32 numpy batch as int64 tensors."""
    import torch

    return {key: torch.from_numpy(value).long() for key, value in batch.items()}


def torch_train_step(model, loss, learning_rate: float, eps: float):
    """A torch step: AdamW (weight decay 0.01) on `loss()`, global-norm clipping at 1.0."""
    import torch

    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, eps=eps, weight_decay=0.01)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step
