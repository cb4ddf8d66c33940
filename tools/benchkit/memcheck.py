"""memcheck: what the memory check before a run's first step says of gin files as written.

For each gin file, a child process builds the run `python -m cmrcx.train` would build
(the gin file, its paper batch and length; random weights; the family's bundled tiny
vocabulary, while the model keeps the gin file's own size, vocabulary rows included) over
small synthetic files in the task's official format (synthetic.py; LOT's generation tasks
read the bundled sample), compiles its training step and reports what
`cmrcx.training.memory_check` would: XLA's figure for the step, what this host has
available, whether the run would start, and if not the advice (the fewest micro-batches
that fit, sized by compiling them) and the error a user would read.

    .venv/bin/python tools/bench.py memcheck
    .venv/bin/python tools/bench.py memcheck --gin_files cmrc2019_bert.gin \
        --bindings "cmrcx.BertConfig.remat_policy='dots'"

Compile only: nothing is trained and no state is allocated, so the figures do not
depend on the machine's load; they depend on the CPU compiler (jax and jaxlib's
version) and, for the verdict, on the memory this host has at the time.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from . import harness, synthetic

RESULT = "MEMCHECK_RESULT "
# The paper gin files of docs/performance.md's memory-check table: the largest steps of
# each benchmark.
GIN_FILES = (
    "cmrc2019_bert.gin",
    "clue_cmrc2018_bert.gin",
    "clue_c311_bert.gin",
    "clue_chid11_bert.gin",
    "clue_cmnli_bert.gin",
    "clue_cmnli_roberta_wwm_ext_large.gin",
    "clue_cmnli_albert_xxlarge.gin",
    "clue_cmrc2018_roberta_wwm_ext_large.gin",
    "clue_chid11_roberta_wwm_ext_large.gin",
    "lot_outgen_longlm_base.gin",
    "lot_outgen_gpt2.gin",
    "lot_outgen_longlm_large.gin",
)
SCALE = 0.002  # of the official sizes: the files only need to exist and parse
LOT_SAMPLE = harness.REPO_ROOT / "cmrcx" / "data" / "lot_sample"


def _data_for(task: str, data_dir: str) -> None:
    """Puts files of `task` in the official format at data_dir."""
    if task in synthetic.SIZES:
        synthetic.write(task, data_dir, SCALE)
    elif task.startswith("lot_") and (LOT_SAMPLE / task[len("lot_") :]).is_dir():
        os.symlink(LOT_SAMPLE / task[len("lot_") :], data_dir)
    else:
        lot = [f"lot_{path.name}" for path in sorted(LOT_SAMPLE.iterdir()) if path.is_dir()]
        known = ", ".join([*synthetic.SIZES, *lot])
        raise SystemExit(f"memcheck has no files for task {task!r} (it has: {known})")


def build_run(gin_files: list[str], work: str, bindings: list[str]):
    """(RunConfig, Runner) of the gin files as `cmrcx.train` builds them, over synthetic
    files of the task at work/data, with random weights and the family's tiny vocabulary."""
    from cmrcx import cpu
    from cmrcx.cli import launch
    from cmrcx.training.runner import Runner

    data_dir = os.path.join(work, "data")
    argv = [
        *[f"--gin_file={gin_file}" for gin_file in gin_files],
        f"--gin.MODEL_DIR='{os.path.join(work, 'run')}'",
        f"--gin.DATA_DIR='{data_dir}'",
        "--gin.VOCAB_FILE='cmrcx:tiny'",
        "--gin.RunConfig.require_pretrained=False",
        f"--gin.RunConfig.tfds_cache_dir='{os.path.join(work, 'tfds')}'",
        *[f"--gin.{binding}" for binding in bindings],
    ]
    args = launch.parse_flags(argv, "memcheck")
    launch.parse_gin(args.gin_file, args.gin_bindings)
    unchecked = launch.run_config_with_required_values()
    _data_for(unchecked.task, data_dir)
    run = unchecked.checked()
    cpu.enable()  # as the entry points' start-up does: the train step's plan is theirs
    return run, Runner(run)


def child(gin_file: str, work: str, bindings: list[str]) -> None:
    """One gin file: its run built as `cmrcx.train` builds it, the step compiled, checked."""
    from cmrcx.training import memory_check

    run, runner = build_run([gin_file], work, bindings)
    trainer = runner.trainer
    shape = memory_check.batch_shape(trainer)
    start = time.perf_counter()
    compiled = trainer.compile_train_step()
    report = {
        "gin_file": gin_file,
        "bindings": bindings,
        "task": run.task,
        "model": type(run.model).__name__,
        "batch_shape": list(shape),
        "grad_accum_steps": run.grad_accum_steps,
        "compile_seconds": time.perf_counter() - start,
    }
    needed = memory_check.needed_bytes(trainer, compiled)
    if needed is None:
        raise SystemExit("memcheck: the memory check runs on CPU hosts only (no CPU device here)")
    available = memory_check.available_host_bytes()
    report["needed_gib"] = {k: v / memory_check.GIB for k, v in needed.items()}
    report["available_gib"] = available[0] / memory_check.GIB if available else None
    report["available_from"] = available[1] if available else None
    # RunConfig.check_memory=False (a binding) starts the run whatever the figures say.
    report["check_memory"] = run.check_memory
    report["runs"] = memory_check.fits(needed, available) or not run.check_memory
    report["advice"] = None
    if not report["runs"]:
        advice, report["error"] = memory_check.advise(trainer, run, needed, available, True)
        if advice is not None:
            report["advice"] = {"grad_accum_steps": advice[0], "gib": advice[1] / memory_check.GIB}
    print(RESULT + json.dumps(report), flush=True)


def bench_memcheck(args) -> dict:
    rows = []
    for gin_file in args.gin_files.split(","):
        if not args.json:
            print(f"{gin_file} ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="cmrcx_bench_memcheck_") as work:
            call = (gin_file, work, list(args.bindings))
            code = f"from benchkit import memcheck; memcheck.child{call!r}"
            row = harness.spawn_code(code, RESULT, args.json)
            row.pop("log")
            rows.append(row)
    return {
        "benchmark": "memcheck",
        "machine": harness.machine_info(args.cpus),
        "rows": rows,
        "note": "XLA:CPU's analysis of each gin file's compiled training step; a run starts "
        "when 1.3x the figure is within what is available (cmrcx.training.memory_check).",
    }


def print_memcheck(report: dict) -> None:
    harness.print_header(report)
    print(report["note"])
    print(f"\n{'gin file':42}{'batch':>16}{'XLA GiB':>9}{'avail.':>8}  verdict (its figure)")
    for row in report["rows"]:
        name = row["gin_file"] + "".join(f" {b}" for b in row["bindings"])
        shape = " x ".join(map(str, row["batch_shape"]))
        available = row["available_gib"]
        if row["runs"]:
            verdict = "runs" if row.get("check_memory", True) else "runs (check_memory off)"
        elif row["advice"]:
            advice = row["advice"]
            verdict = f"stops: grad_accum_steps={advice['grad_accum_steps']} ({advice['gib']:.1f})"
        else:
            verdict = "stops: no accumulation fits"
        print(f"{name:42}{shape:>16}{row['needed_gib']['total']:>9.1f}"
              f"{'-' if available is None else f'{available:.1f}':>8}  {verdict}")  # fmt: skip
    for row in report["rows"]:
        if row.get("error"):
            print(f"\n{row['gin_file']}: error: {row['error']}")


def add_command(commands) -> None:
    sub = commands.add_parser("memcheck", help="the memory check's verdict on paper gin files")
    sub.add_argument("--gin_files", default=",".join(GIN_FILES), help="comma-separated")
    sub.add_argument(
        "--bindings", action="append", default=[], help="a gin binding for every file "
        "(repeatable), e.g. \"cmrcx.T5Config.remat_policy='full'\""
    )  # fmt: skip
