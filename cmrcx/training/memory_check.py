"""The training step compiled before the first step, and its memory checked against what
the host has: a run that cannot fit stops with a message that says what to change, instead
of being killed by the kernel (a bare "Killed") once XLA allocates the step's buffers.

    compiling the training step (once per run) ...
    training step compiled in 3.8 s: it needs about 9.1 GiB of memory, 22.3 GiB are available

BERT-base at the paper's batch 24 x 512 needs 21.2 GiB in float32 (docs/performance.md,
Memory): more than a 24 GiB laptop has. The figure is XLA's own memory analysis of the
compiled step (arguments + outputs - donated + temporaries, per device), summed over this
process's CPU devices; the step's first call reuses that compilation. A step that does
not fit is compiled again with more micro-batches until one fits, so the advice is sized
by XLA too. GPUs and TPUs report an out-of-memory error of their own: the check runs on
CPU hosts only. In a multi-host run the hosts agree: if one cannot fit, all stop; several
processes of one run on one host share what that host has.
"""

from __future__ import annotations

import os
import socket
import time
import zlib

import jax
import numpy as np

from cmrcx.common.errors import ConfigError

GIB = 2**30
# A run's peak over the RSS it had at the check: XLA's figure for the step, plus later
# steps' fresh buffers and the input pipeline. BERT-base at 24 x 512 on 2 cores of Zen 5
# (accumulating over 2 and 3): 1.03x XLA's figure after one step, 1.18x to 1.25x after
# 2 to 6 steps, or 2 steps and an evaluation. A run stops if HEADROOM x the figure is over
# what is available, and is told its margin is thin above TIGHT x what is available.
HEADROOM = 1.3
TIGHT = 0.9
_UNLIMITED = 2**60  # cgroup v1 writes a huge number for "no limit"


def step_bytes(compiled, devices: int = 1) -> dict[str, int] | None:
    """Bytes `devices` devices need for the compiled step: `state` (the arguments: the
    state and the batch), `temporaries` and `total` (outputs aliased to the donated state
    need no buffer of their own); None where the backend gives no analysis."""
    try:
        stats = compiled.memory_analysis()
    except (NotImplementedError, RuntimeError):
        return None
    if stats is None:
        return None
    arguments, temporaries = stats.argument_size_in_bytes, stats.temp_size_in_bytes
    outputs = max(stats.output_size_in_bytes - stats.alias_size_in_bytes, 0)
    return {
        "state": arguments * devices,
        "temporaries": temporaries * devices,
        "total": (arguments + outputs + temporaries) * devices,
    }


def available_host_bytes(proc="/proc", cgroup="/sys/fs/cgroup") -> tuple[int, str] | None:
    """(bytes this process can still take, where the figure comes from): the kernel's
    MemAvailable, or the smallest room left under a memory limit of this process's cgroup
    or one of its ancestors (limit - usage + inactive file cache, which the kernel drops
    first), cgroup v1 or v2; None where nothing can be read."""
    found = []
    meminfo = _read_fields(os.path.join(proc, "meminfo"), scale=1024)  # kB
    if "MemAvailable" in meminfo:
        found.append((meminfo["MemAvailable"], "MemAvailable in /proc/meminfo"))
    for folder, files in _memory_cgroups(proc, cgroup):
        limit_file, usage_file, stat_file, inactive_key = files
        limit = _read_int(os.path.join(folder, limit_file))
        usage = _read_int(os.path.join(folder, usage_file))
        if limit is None or usage is None or limit >= _UNLIMITED:
            continue
        inactive = _read_fields(os.path.join(folder, stat_file)).get(inactive_key, 0)
        where = os.path.join(folder, limit_file)
        found.append((max(limit - usage + inactive, 0), f"the memory cgroup limit {where}"))
    return min(found) if found else None


_V2_FILES = ("memory.max", "memory.current", "memory.stat", "inactive_file")
_V1_FILES = (
    "memory.limit_in_bytes",
    "memory.usage_in_bytes",
    "memory.stat",
    "total_inactive_file",
)


def _memory_cgroups(proc: str, cgroup: str) -> list[tuple[str, tuple[str, ...]]]:
    """(folder, its file names) of this process's memory cgroup and every ancestor up to
    the mount's root, from /proc/self/cgroup (v2 line `0::/path`, v1 `N:memory:/path`);
    just the roots where that file cannot be read."""
    mounts = []
    try:
        with open(os.path.join(proc, "self", "cgroup")) as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers == "":
                    mounts.append((cgroup, path, _V2_FILES))
                elif "memory" in controllers.split(","):
                    mounts.append((os.path.join(cgroup, "memory"), path, _V1_FILES))
    except (OSError, ValueError):
        pass
    if not mounts:
        mounts = [(cgroup, "/", _V2_FILES), (os.path.join(cgroup, "memory"), "/", _V1_FILES)]
    folders = []
    for root, path, files in mounts:
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            folder = os.path.join(root, *parts[:depth])
            if os.path.isdir(folder):
                folders.append((folder, files))
    return folders


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


def fits(needed: dict[str, int], available: tuple[int, str] | None) -> bool:
    return available is None or HEADROOM * needed["total"] <= available[0]


def describe(needed: dict[str, int], available: tuple[int, str] | None) -> str:
    """What the step needs against what the host has, for the compile line."""
    said = f"it needs about {_size(needed['total'])} of memory"
    if available is None:
        return said
    said += f", {_size(available[0])} are available"
    if not fits(needed, available):
        return said + " (RunConfig.check_memory is False: running anyway)"
    if HEADROOM * needed["total"] > TIGHT * available[0]:
        return said + " (little margin: other programs' memory could get the run killed)"
    return said


def too_big_message(
    needed: dict[str, int],
    available: tuple[int, str],
    run,
    shape: tuple[int, ...],
    accumulation: tuple[int, int] | None,
) -> str:
    """The ConfigError's text: the figures, and what to change (`accumulation`: the
    fewest micro-batches that fit and that step's bytes, or None)."""
    free, source = available
    need = needed["total"]
    options = []
    if accumulation is not None:
        k, bytes_k = accumulation
        options.append(
            f"--gin.RunConfig.grad_accum_steps={k} (micro-batches of {run.batch_size // k}, "
            f"the same examples per update; XLA's figure for it: {_size(bytes_k)})"
        )
    if getattr(run.model, "remat_policy", None) == "none":
        name = type(run.model).__name__
        flag = (
            "--gin_file=precision/remat.gin"
            if name == "BertConfig"
            else f"--gin.cmrcx.{name}.remat_policy=\"'dots'\""
        )
        options.append(f"{flag} (the backward pass recomputes each layer's activations)")
    options.append("a smaller RunConfig.batch_size (not the gin file's run any more)")
    return (
        f"the training step needs about {_size(need)} of memory (XLA's analysis of the "
        f"compiled step: {_size(needed['state'])} of state and batch, "
        f"{_size(needed['temporaries'])} of temporaries for batch "
        f"{' x '.join(map(str, shape))}); a run peaks near {HEADROOM}x that, "
        f"{_size(HEADROOM * need)}, and {_size(free)} are available ({source}): the kernel "
        "would kill the run. Lower it with "
        + "; or ".join(options)
        + ". RunConfig.check_memory = False runs it anyway (a host with swap)."
    )


def _size(count: float) -> str:
    return f"{count / GIB:.1f} GiB" if count >= GIB / 10 else f"{count / 2**20:.0f} MiB"


def fewest_micro_batches(trainer, run, needed, available, devices: int, shown: bool):
    """(k, bytes) of the fewest micro-batches over `run.grad_accum_steps` whose compiled
    step fits, or None. A k whose temporaries alone, shrunk k-fold, would not fit is
    skipped without compiling (the parameter-sized gradient buffers do not shrink)."""
    now, data = run.grad_accum_steps, trainer.mesh.shape["data"]
    floor = needed["state"]
    for k in range(now + 1, run.batch_size // data + 1):
        if run.batch_size % (k * data):
            continue
        if HEADROOM * (floor + needed["temporaries"] * now / k) > TIGHT * available[0]:
            continue
        if shown:
            print(f"sizing the step with grad_accum_steps={k} ...", flush=True)
        smaller = step_bytes(trainer.with_grad_accum_steps(k).compile_train_step(), devices)
        if smaller is not None and HEADROOM * smaller["total"] <= TIGHT * available[0]:
            return k, smaller["total"]
    return None


def compile_and_check(trainer, run, shown=True):
    """Compiles the training step (a line before and after: it takes seconds to minutes)
    and, on a CPU host, stops the run with a ConfigError if its memory cannot fit."""
    if shown:
        print("compiling the training step (once per run) ...", flush=True)
    start = time.perf_counter()
    compiled = trainer.compile_train_step()
    said = f"training step compiled in {time.perf_counter() - start:.1f} s"
    needed = needed_bytes(trainer, compiled)
    if needed is None:
        if shown:
            print(said, flush=True)
        return compiled
    available = available_host_bytes()
    if run.check_memory:
        available = share_of_host(available)
    fitting = fits(needed, available)
    if run.check_memory and not _on_every_host(fitting):
        if fitting:
            raise ConfigError(
                "another host's training step cannot fit its memory; its error says what to change"
            )
        raise ConfigError(advise(trainer, run, needed, available, shown)[1])
    if shown:
        print(f"{said}: {describe(needed, available)}", flush=True)
    return compiled


def needed_bytes(trainer, compiled) -> dict[str, int] | None:
    """XLA's figures for this process's share of the compiled step (step_bytes over its
    CPU devices), or None off CPU."""
    devices = _local_cpu_devices(trainer)
    return step_bytes(compiled, devices) if devices else None


def advise(trainer, run, needed, available, shown: bool) -> tuple[tuple[int, int] | None, str]:
    """When the step cannot fit: the fewest micro-batches that would (k and that step's
    bytes, or None), and the error's text naming what to change."""
    devices = _local_cpu_devices(trainer)
    accumulation = fewest_micro_batches(trainer, run, needed, available, devices, shown)
    return accumulation, too_big_message(needed, available, run, batch_shape(trainer), accumulation)


def batch_shape(trainer) -> tuple[int, ...]:
    """The shape of the step's largest batch array: [examples, (choices,) tokens]."""
    return max((v.shape for v in trainer.example_shapes().values()), key=len)


def _local_cpu_devices(trainer) -> int:
    return sum(
        1
        for d in trainer.mesh.devices.flat
        if d.platform == "cpu" and d.process_index == jax.process_index()
    )


def share_of_host(available: tuple[int, str] | None) -> tuple[int, str] | None:
    """`available` split evenly over the processes of this run on this host (hostname and
    boot id alike): each runs the same step, and MemAvailable or a cgroup's room is the
    whole host's. With one process per host, the usual multi-host job, it stays whole.
    Every process of the run calls this (a collective when there are several). Processes
    in containers of their own (other hostnames) are not merged; co-hosted processes that
    each have a memory cgroup limit of their own are told less than they have."""
    if jax.process_count() == 1:
        return available
    from jax.experimental import multihost_utils

    key = np.int32(zlib.crc32(_machine_name().encode()) & 0x7FFFFFFF)
    keys = np.asarray(multihost_utils.process_allgather(key))
    sharing = int(np.sum(keys == key))
    if available is None or sharing == 1:
        return available
    free, source = available
    return free // sharing, f"{source}, shared by the {sharing} processes of this run on this host"


def _machine_name() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()} {boot}"


def _on_every_host(ok: bool) -> bool:
    """Whether `ok` holds on every host (each host runs the check; all must agree)."""
    if jax.process_count() == 1:
        return ok
    from jax.experimental import multihost_utils

    return bool(np.all(multihost_utils.process_allgather(np.int32(ok))))
