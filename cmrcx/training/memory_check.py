"""The training step compiled before the first step, and its memory checked against what
the host has: a run that cannot fit stops with a message that says what to change, instead
of being killed by the kernel (a bare "Killed") once XLA allocates the step's buffers.

    compiling the training step (once per run) ...
    training step compiled in 9.8 s: it needs about 8.2 GiB of memory, 21.3 GiB are available

BERT-base at the paper's batch 24 x 512 needs 22.8 GiB in float32 (README, Compiled
memory): more than a 24 GiB laptop has. The figure is XLA's own memory analysis of the
compiled step (arguments + outputs - donated + temporaries), taken on every CPU device of
this process; the step's first call reuses that compilation. GPUs and TPUs report an
out-of-memory error of their own, so the check runs on CPU hosts only.
"""

from __future__ import annotations

import os
import time

import jax

from cmrcx.common.errors import ConfigError

GIB = 2**30
# A run's peak over the RSS it had at the check: XLA's figure for the step, plus later
# steps' fresh buffers and the input pipeline. BERT-base at 24 x 512 on 2 cores of Zen 5
# (accumulating over 2 and 3): 1.03x XLA's figure after one step, 1.18x to 1.25x after
# 2 to 6 steps, or 2 steps and an evaluation. A run stops if HEADROOM x the figure is over
# what is available, and is told its margin is thin above TIGHT x what is available.
HEADROOM = 1.25
TIGHT = 0.9
_UNLIMITED = 2**60  # cgroup v1 writes a huge number for "no limit"


def step_bytes(compiled) -> dict[str, int] | None:
    """Bytes one device needs for the compiled step: `state` (the arguments, the state
    and the batch), `temporaries` and `total` (outputs aliased to the donated state need
    no buffer of their own); None where the backend gives no analysis."""
    try:
        stats = compiled.memory_analysis()
    except (NotImplementedError, RuntimeError):
        return None
    if stats is None:
        return None
    arguments, temporaries = stats.argument_size_in_bytes, stats.temp_size_in_bytes
    outputs = stats.output_size_in_bytes - stats.alias_size_in_bytes
    total = arguments + max(outputs, 0) + temporaries
    return {"state": arguments, "temporaries": temporaries, "total": total}


def available_host_bytes(proc="/proc", cgroup="/sys/fs/cgroup") -> tuple[int, str] | None:
    """(bytes this process can still take, where the figure comes from): the kernel's
    MemAvailable, or the memory cgroup's limit less its usage if that is smaller (page
    cache the kernel can drop counts as available); None where neither can be read."""
    found = []
    meminfo = _read_fields(os.path.join(proc, "meminfo"), scale=1024)  # kB
    if "MemAvailable" in meminfo:
        found.append((meminfo["MemAvailable"], "MemAvailable in /proc/meminfo"))
    for limit_file, usage_file, stat_file, inactive_key in (
        ("memory.max", "memory.current", "memory.stat", "inactive_file"),  # cgroup v2
        (
            "memory/memory.limit_in_bytes",
            "memory/memory.usage_in_bytes",
            "memory/memory.stat",
            "total_inactive_file",
        ),  # cgroup v1
    ):
        limit = _read_int(os.path.join(cgroup, limit_file))
        usage = _read_int(os.path.join(cgroup, usage_file))
        if limit is None or usage is None or limit >= _UNLIMITED:
            continue
        inactive = _read_fields(os.path.join(cgroup, stat_file)).get(inactive_key, 0)
        found.append((max(limit - usage + inactive, 0), f"the cgroup limit {limit_file}"))
        break
    return min(found) if found else None


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):  # absent, "max" (no limit), unreadable
        return None


def _read_fields(path: str, scale: int = 1) -> dict[str, int]:
    """`name value` or `Name: value kB` lines -> {name: value * scale}."""
    fields = {}
    try:
        with open(path) as f:
            for line in f:
                name, _, rest = line.partition(":") if ":" in line else line.partition(" ")
                try:
                    fields[name.strip()] = int(rest.split()[0]) * scale
                except (ValueError, IndexError):
                    continue
    except OSError:
        pass
    return fields


def check(needed: dict[str, int], available: tuple[int, str] | None, run, data_size=1) -> str:
    """What the step needs against what the host has, for the compile line; ConfigError if
    it needs more (unless RunConfig.check_memory is False). `needed`: host bytes
    (`step_bytes` summed over this process's devices); `run`: the RunConfig."""
    need = needed["total"]
    said = f"it needs about {_size(need)} of memory"
    if available is None:
        return said
    free, source = available
    if HEADROOM * need > free and run.check_memory:
        raise ConfigError(_too_big_message(needed, free, source, run, data_size))
    said += f", {_size(free)} are available"
    if HEADROOM * need > free:
        return said + " (RunConfig.check_memory is False: running anyway)"
    if HEADROOM * need > TIGHT * free:
        return said + " (little margin: other programs' memory could get the run killed)"
    return said


def _too_big_message(needed: dict[str, int], free: int, source: str, run, data_size=1) -> str:
    need, temporaries = needed["total"], needed["temporaries"]
    options = []
    k = _accumulation_that_fits(needed, free, run, data_size)
    if k is not None:
        options.append(
            f"--gin.RunConfig.grad_accum_steps={k} (micro-batches of {run.batch_size // k}: "
            f"the same examples per update, about {run.grad_accum_steps}/{k} of the temporaries)"
        )
    if getattr(run.model, "remat_policy", None) == "none":
        name = type(run.model).__name__
        options.append(
            (
                "--gin_file=precision/remat.gin"
                if name == "BertConfig"
                else f"--gin.cmrcx.{name}.remat_policy=\"'dots'\""
            )
            + " (the backward pass recomputes each layer's activations: BERT-base at 24 x "
            "512 needs 8.2 GiB instead of 22.8)"
        )
    options.append("a smaller RunConfig.batch_size (a different run from the paper's)")
    return (
        f"the training step needs about {_size(need)} of memory (XLA's analysis of "
        f"the compiled step: {_size(needed['state'])} of state and batch, "
        f"{_size(temporaries)} of temporaries for batch {run.batch_size} x "
        f"{run.max_length}; a run takes about {HEADROOM}x that at its peak), but "
        f"{_size(free)} are available ({source}): the kernel would kill the run. Lower it with "
        + "; or ".join(options)
        + ". "
        "RunConfig.check_memory = False runs it anyway (a host with swap)."
    )


def _size(count: int) -> str:
    return f"{count / GIB:.1f} GiB" if count >= GIB / 10 else f"{count / 2**20:.0f} MiB"


def _accumulation_that_fits(needed: dict[str, int], free: int, run, data_size: int) -> int | None:
    """The fewest micro-batches (more than now) whose temporaries, which scale with the
    micro-batch, fit without a thin margin; None if none does."""
    now = run.grad_accum_steps
    for k in range(now + 1, run.batch_size // data_size + 1):
        if run.batch_size % (k * data_size):
            continue
        if HEADROOM * (needed["state"] + needed["temporaries"] * now / k) <= TIGHT * free:
            return k
    return None


def compile_and_check(trainer, run, shown=True):
    """Compiles the training step (a line before and after: tens of seconds for BERT-base
    on 2 cores) and checks its memory on a CPU host; returns the compiled step."""
    if shown:
        print("compiling the training step (once per run) ...", flush=True)
    start = time.perf_counter()
    compiled = trainer.compile_train_step()
    said = f"training step compiled in {time.perf_counter() - start:.1f} s"
    per_device = step_bytes(compiled)
    local = [
        d
        for d in trainer.mesh.devices.flat
        if d.platform == "cpu" and d.process_index == jax.process_index()
    ]
    if per_device is not None and local:
        needed = {key: value * len(local) for key, value in per_device.items()}
        said += ": " + check(needed, available_host_bytes(), run, trainer.mesh.shape["data"])
    if shown:
        print(said, flush=True)
    return compiled
