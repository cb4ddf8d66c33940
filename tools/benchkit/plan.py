"""plan: what a gin file's train step sends between N devices, and holds on each.

A child process with N simulated CPU devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=N`, set before jax is imported)
builds the run `python -m cmrcx.train` would build from the gin files (random weights,
synthetic files, as memcheck does), compiles its train step from shapes alone (nothing
allocated: `jax.eval_shape` state with its shardings) and reads the optimized HLO:

- collectives: every all-reduce, all-gather, reduce-scatter, all-to-all and
  collective-permute (sync or async `-start`), counted per step: an op inside a loop
  body counts its trip count times (the layers' `nn.scan`, gradient accumulation);
  bytes are per device per execution, the larger of the op's operands and results
  (the whole gathered or reduced tensor, not one shard);
- memory per device: `compiled.memory_analysis()` of the SPMD program (one device's
  share): arguments + outputs not aliased to the donated state + temporaries.

    .venv/bin/python tools/bench.py plan --gin_file=cmrc2019_bert.gin --devices 8
    .venv/bin/python tools/bench.py plan --gin_file=cmrc2019_bert.gin \
        --gin_file=partitioning/fsdp.gin --devices 8 --json

XLA:CPU's partitioner and scheduler: GPU and TPU compilers fuse and combine collectives
differently (the combiner thresholds), so counts may differ there; the bytes of the
plan (what the shardings imply) do not.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time

from . import harness, memcheck

RESULT = "PLAN_RESULT "
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
DTYPE_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
    "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
    "f8e4m3fn": 1, "f8e5m2": 1, "s4": 1, "u4": 1,
}  # fmt: skip
_SHAPE = re.compile(r"\b([a-z]+[0-9]*[a-z0-9]*)\[([0-9,]*)\]")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s([a-z][a-z\-]*)\(([^)]*)\)")
_OPERAND = re.compile(r"%([\w.\-]+)")
_CALLED = re.compile(r"\b(body|condition|to_apply|calls)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP_COUNT = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')


def shape_bytes(text: str) -> int:
    """Bytes of every array shape written in `text` ("(f32[8,4]{1,0}, bf16[2])" -> 132)."""
    total = 0
    for dtype, dims in _SHAPE.findall(text):
        if dtype in DTYPE_BYTES:
            total += DTYPE_BYTES[dtype] * math.prod(int(d) for d in dims.split(",") if d)
    return total


def _computations(hlo_text: str) -> tuple[dict[str, list[str]], str]:
    """{computation name: its instruction lines}, and the ENTRY computation's name.

    A computation starts at an unindented line ending in "{" ("ENTRY %main (p: f32[2])
    -> f32[2] {") and ends at an unindented "}"; its instructions are indented.
    """
    computations, entry, current = {}, None, None
    for line in hlo_text.splitlines():
        if line[:1] not in ("", " ") and line.rstrip().endswith("{"):
            words = line.split()
            is_entry = words[0] == "ENTRY"
            current = words[1 if is_entry else 0].lstrip("%")
            computations[current] = []
            entry = current if is_entry else entry
        elif line.startswith("}"):
            current = None
        elif current is not None:
            computations[current].append(line)
    if entry is None:
        raise ValueError("HLO text without an ENTRY computation")
    return computations, entry


def _executions(computations: dict[str, list[str]], entry: str) -> dict[str, int]:
    """How often each computation runs per call of `entry`: a while body its known trip
    count times per execution of the while (1 where XLA does not know it)."""
    runs = {entry: 1}
    pending = [entry]
    while pending:
        caller = pending.pop()
        for line in computations[caller]:
            trips = _TRIP_COUNT.search(line)
            called = _CALLED.findall(line)
            for branches in _BRANCHES.findall(line):
                called += [("branch", n.strip().lstrip("%")) for n in branches.split(",")]
            for kind, name in called:
                if name not in computations:
                    continue
                times = int(trips.group(1)) if kind == "body" and trips else 1
                runs[name] = runs.get(name, 0) + runs[caller] * times
                pending.append(name)
    return runs


def collectives(hlo_text: str) -> list[dict]:
    """[{"kind", "count", "bytes"}] of an optimized HLO module's collectives per call:
    count = executions, bytes = per device, summed over executions."""
    computations, entry = _computations(hlo_text)
    runs = _executions(computations, entry)
    instructions = [
        (name, match.groups())
        for name, lines in computations.items()
        for match in map(_INSTRUCTION.match, lines)
        if match
    ]
    result_bytes = {result: shape_bytes(shape) for _, (result, shape, _, _) in instructions}
    found = {kind: {"kind": kind, "count": 0, "bytes": 0} for kind in COLLECTIVES}
    for name, (_, shape, op, operands) in instructions:
        kind = op.removesuffix("-start")
        if kind not in found or runs.get(name, 0) == 0:
            continue
        sent = sum(result_bytes.get(operand, 0) for operand in _OPERAND.findall(operands))
        received = shape_bytes(shape)
        if op.endswith("-start"):  # its result is (operands, results[, context])
            received -= sent
        found[kind]["count"] += runs[name]
        found[kind]["bytes"] += runs[name] * max(sent, received)
    return [row for row in found.values() if row["count"]]


def trainer_plan(trainer) -> dict:
    """The plan of a `cmrcx.training.trainer.Trainer`'s train step, compiled from shapes:
    {"devices", "mesh", "parameters", "parameter_bytes", "state_bytes_per_device",
    "memory_per_device_bytes", "collectives", "compile_seconds"}."""
    import jax

    from cmrcx.training import memory_check, partitioning

    start = time.perf_counter()
    compiled = trainer.compile_train_step()
    seconds = time.perf_counter() - start
    params = jax.tree.leaves(trainer.abstract_state.params)
    return {
        "devices": int(trainer.mesh.devices.size),
        "mesh": {axis: int(size) for axis, size in trainer.mesh.shape.items()},
        "parameters": sum(p.size for p in params),
        "parameter_bytes": sum(p.size * p.dtype.itemsize for p in params),
        # The state's arrays alone (parameters and AdamW's moments), one device's share.
        "state_bytes_per_device": partitioning.bytes_per_device(trainer.abstract_state),
        "memory_per_device_bytes": memory_check.step_bytes(compiled)["total"],
        "collectives": collectives(compiled.as_text()),
        "compile_seconds": seconds,
    }


def child(gin_files: list[str], work: str, bindings: list[str]) -> None:
    """Builds the run on this process's (simulated) devices, compiles, prints the plan."""
    import json

    from cmrcx.training import memory_check

    run, runner = memcheck.build_run(gin_files, work, bindings)
    report = {
        "gin_files": gin_files,
        "bindings": bindings,
        "partitioning": run.partitioning,
        "batch_shape": list(memory_check.batch_shape(runner.trainer)),
        "grad_accum_steps": run.grad_accum_steps,
        **trainer_plan(runner.trainer),
    }
    print(RESULT + json.dumps(report), flush=True)


def bench_plan(args) -> dict:
    """plan: one child with --devices simulated devices; its report."""
    flags = os.environ.get("XLA_FLAGS", "")
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", flags)
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={args.devices}"
    os.environ["JAX_PLATFORMS"] = "cpu"  # simulated devices are CPU devices
    with tempfile.TemporaryDirectory(prefix="cmrcx_bench_plan_") as work:
        call = (list(args.gin_file), work, list(args.bindings))
        code = f"from benchkit import plan; plan.child{call!r}"
        report = harness.spawn_code(code, RESULT, args.json)
    report.pop("log")
    return report


def print_plan(report: dict) -> None:
    gib = 2**30
    files = " ".join(report["gin_files"] + report["bindings"])
    mesh = " x ".join(f"{axis} {size}" for axis, size in report["mesh"].items())
    batch = " x ".join(map(str, report["batch_shape"]))
    print(files)
    print(f"{report['devices']} simulated devices, mesh {mesh}, "
          f"partitioning {report['partitioning']}, batch {batch}")  # fmt: skip
    print(f"parameters: {report['parameters'] / 1e6:.1f} M, "
          f"{report['parameter_bytes'] / gib:.3f} GiB")  # fmt: skip
    print(f"state per device: {report['state_bytes_per_device'] / gib:.3f} GiB; step memory "
          f"per device (XLA:CPU): {report['memory_per_device_bytes'] / gib:.3f} GiB")  # fmt: skip
    print(f"\n{'collective':20}{'count/step':>12}{'MiB/step/device':>18}")
    for row in report["collectives"] or [{"kind": "(none)", "count": 0, "bytes": 0}]:
        print(f"{row['kind']:20}{row['count']:>12}{row['bytes'] / 2**20:>18.2f}")
    print(f"\ncompiled in {report['compile_seconds']:.1f} s")


def add_command(commands) -> None:
    sub = commands.add_parser("plan", help="collectives and per-device memory on N devices")
    sub.add_argument("--gin_file", action="append", required=True, help="repeatable")
    sub.add_argument("--devices", type=int, default=8, help="simulated CPU devices")
    sub.add_argument(
        "--bindings", action="append", default=[], help="a gin binding (repeatable), e.g. "
        "\"RunConfig.mesh_shape=(-1, 2)\""
    )  # fmt: skip
