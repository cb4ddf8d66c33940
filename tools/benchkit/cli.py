"""tools/bench.py's command line: the subcommands of every family, input and memory.

The compared subcommands and their workers come from the families' table
(families.py); input and memory run in this process, pinned to --cpus.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from cmrcx.cpu import hugepages

from . import (
    families,
    firststep,
    harness,
    input_pipeline,
    layerops,
    memcheck,
    memory,
    plan,
    refault,
    steps,
    suite,
)

DESCRIPTION = (
    "Benchmarks: cmrcx's BERT cloze and classification steps against Hugging Face's "
    "PyTorch BERT, T5 / LongLM sampling and training and LOT OutGen generation against "
    "transformers' T5, the input pipeline, and the train step's compiled memory."
)
IN_PROCESS = {  # subcommand: (run, print)
    "input": (input_pipeline.bench_input, input_pipeline.print_input),
    "memory": (memory.bench_memory, memory.print_memory),
    "memcheck": (memcheck.bench_memcheck, memcheck.print_memcheck),
    "firststep": (firststep.bench_firststep, firststep.print_firststep),
    "evalpath": (firststep.bench_evalpath, firststep.print_evalpath),
    "layerops": (layerops.bench_layerops, layerops.print_layerops),
    "refault": (refault.bench_refault, refault.print_refault),
    "plan": (plan.bench_plan, plan.print_plan),
    "suite": (suite.bench_suite, suite.print_suite),
}


ORCHESTRATORS = ("suite",)  # run other bench.py commands as children


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True)
    for family in families.FAMILIES:
        family.add_commands(commands)
    input_pipeline.add_command(commands)
    memory.add_command(commands)
    memcheck.add_command(commands)
    firststep.add_command(commands)
    layerops.add_command(commands)
    refault.add_command(commands)
    plan.add_command(commands)
    suite.add_command(commands)
    default_cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))[:2]))
    for sub in commands.choices.values():
        sub.add_argument("--cpus", default=default_cpus, help="CPU list for taskset")
        sub.add_argument("--seed", type=int, default=0)
        sub.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    if getattr(args, "warmup", 1) < 1:
        parser.error("--warmup must be at least 1 (the first step compiles)")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is imported
    family = families.of_command(args.command)
    if family is not None and args.command == family.WORKER:
        if hasattr(family, "run_worker"):
            family.run_worker(args)
        else:
            steps.run_worker(args, family)
        return
    if family is None:
        # In this process, as `python -m cmrcx.train` runs: with glibc's huge-page tunable;
        # not the suite, whose children set their sides' environments themselves (a
        # restarted suite would hand the tunable to PyTorch's side too).
        if args.command not in ORCHESTRATORS:
            hugepages.restart_with_hugepages()
        os.sched_setaffinity(0, [int(cpu) for cpu in args.cpus.split(",")])
        sys.path.insert(0, str(harness.REPO_ROOT))
        run, show = IN_PROCESS[args.command]
    else:
        run, show = family.compare, family.print_report
    report = run(args)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        show(report)
    check_finite(report)


def check_finite(report) -> None:
    """Every figure of the report is finite (else the command fails)."""
    if not all(math.isfinite(v) for v in _numbers(report)):
        raise SystemExit("non-finite figure in the report")


def _numbers(tree):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _numbers(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _numbers(value)
    elif isinstance(tree, float):
        yield tree
