"""The model families tools/bench.py compares: one module each, registered here.

A family module gives
    COMMANDS, WORKER                 its compared subcommands and their worker subcommand
    add_commands(commands)           those subparsers and their flags
    Geometry, PRESETS                its shape dataclass (a `batch` field) and named sizes
    worker_geometry(args)            the worker's Geometry from its flags
    cmrcx_step(args, g), torch_step(args, g)
                                     (step, extras) of each side (steps.py)
    compare(args), print_report(report)
                                     the parent: harness.alternate, harness.side_summary
    MEMORY_MODELS, memory_geometry(name, args), memory_trainer(g, dtype, remat_policy),
    describe(geometry dict)          what `memory --models` compiles (memory.py)
A family whose worker is not steps.py's repeated steps (outgen.py: a prepare child,
then one pass over a data set) gives `run_worker(args)` and neither steps nor geometry.
"""

from __future__ import annotations

from . import bert, gpt2, outgen, t5

FAMILIES = (bert, t5, gpt2, outgen)


def of_command(command: str):
    """The family whose compared or worker subcommand `command` is; None for others."""
    for family in FAMILIES:
        if command in (*family.COMMANDS, family.WORKER):
            return family
    return None


def of_model(name: str):
    """The family of a `memory --models` name."""
    for family in FAMILIES:
        if name in family.MEMORY_MODELS:
            return family
    known = ", ".join(name for family in FAMILIES for name in family.MEMORY_MODELS)
    raise SystemExit(f"memory: unknown model {name!r}; known: {known}")
