"""firststep: time to a run's first training step, fresh and resumed; evalpath: scoring
throughput of the real evaluation path against the jitted forward pass alone.

firststep writes a task's train and validation files in the official formats at the
real sizes times --scale (synthetic.py), then runs `cmrcx.train`'s path (the task's tiny
gin, DATA_DIR the synthetic folder) in a child process to its first step, and again in a
new child to the step after (a resume from the first step's checkpoint). Each child
reports its phases (TFDS preparation, preparing the examples, first step), its peak
RSS, and, in the fresh child, the examples/s the input pipeline yields against the
examples/s the train step consumes.

    .venv/bin/python tools/bench.py firststep --task clue_chid11 --scale 1.0
    .venv/bin/python tools/bench.py evalpath --task clue_c311 --scale 1.0
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import tempfile
import time

from cmrcx.common import tf_iterators

from . import harness, synthetic

RESULT = "FIRSTSTEP_RESULT "
TASKS = tuple(synthetic.SIZES)
EVAL_TASKS = ("clue_c311", "clue_chid11", "clue_cmrc2018", "cmrc2019")


def _runner(task: str, data_dir: str, model_dir: str, cache: str, steps: int, extra=()):
    from cmrcx import cpu
    from cmrcx.cli import launch
    from cmrcx.training.runner import Runner

    gin_file, *bindings = synthetic.GIN_FILES[task]
    argv = [
        f"--gin_file={gin_file}",
        f"--gin.MODEL_DIR='{model_dir}'",
        f"--gin.DATA_DIR='{data_dir}'",
        f"--gin.RunConfig.num_train_steps={steps}",
        f"--gin.RunConfig.tfds_cache_dir='{cache}'",
        "--gin.RunConfig.eval_every=None",
        "--gin.RunConfig.select_best=None",
        *[f"--gin.{b.replace(' ', '')}" for b in bindings],
        *extra,
    ]
    args = launch.parse_flags(argv, "bench")
    launch.parse_gin(args.gin_file, args.gin_bindings)
    cpu.enable()  # as the entry points' start-up does
    return Runner(launch.run_config_from_gin())


def child(task: str, data_dir: str, model_dir: str, cache: str, resume: bool) -> None:
    """One process of the bench: fresh (TFDS, examples, first step, throughputs) or resume."""
    started = time.perf_counter()
    import jax
    import seqio

    from cmrcx.training import input_pipeline

    report = {"imports_seconds": time.perf_counter() - started}
    t = time.perf_counter()
    runner = _runner(task, data_dir, model_dir, cache, steps=1000)
    report["runner_seconds"] = time.perf_counter() - t
    split = runner.run.train_split
    if not resume:
        t = time.perf_counter()  # TFDS preparation (and the source's records), no examples
        dataset = seqio.get_mixture_or_task(runner.train_task).get_dataset(
            sequence_length=None, split=split, shuffle=False, use_cached=False
        )
        next(tf_iterators.numpy_iterator(dataset.take(1)))
        report["tfds_seconds"] = time.perf_counter() - t
        t = time.perf_counter()
        report["examples"] = input_pipeline.count_examples(runner.train_task, split, runner.store)
        report["prepare_examples_seconds"] = time.perf_counter() - t
        store = runner.store.directory(runner.train_task, split)
        if os.path.isdir(store):  # a SeqIO mixture has no store of its own
            report["store_bytes"] = sum(entry.stat().st_size for entry in os.scandir(store))
    stop = 2 if resume else 1
    t = time.perf_counter()
    runner.train(stop_at=stop)
    report["train_to_step_seconds"] = time.perf_counter() - t
    report["process_to_step_seconds"] = time.perf_counter() - started
    report["step"] = stop
    if not resume:
        batch = runner.run.batch_size
        batches = runner._batches(100)
        next(batches)
        t, n = time.perf_counter(), 50
        for _ in range(n):
            example = next(batches)
        report["input_examples_per_second"] = n * batch / (time.perf_counter() - t)
        state = runner.trainer.init_state()
        state, _ = runner.trainer.train_step(state, example)  # compiled already; warm
        jax.block_until_ready(state)
        t, n = time.perf_counter(), 5
        for _ in range(n):
            state, _ = runner.trainer.train_step(state, example)
        jax.block_until_ready(state)
        report["train_examples_per_second"] = n * batch / (time.perf_counter() - t)
        report["batch_size"] = batch
    report["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(RESULT + json.dumps(report), flush=True)


def bench_firststep(args) -> dict:
    log = sys.stderr
    with tempfile.TemporaryDirectory(prefix="cmrcx_bench_firststep_") as work:
        data_dir = os.path.join(work, "data")
        t = time.perf_counter()
        synthetic.write(args.task, data_dir, args.scale, args.seed)
        write_seconds = time.perf_counter() - t
        print(f"synthetic {args.task} files (scale {args.scale}) in {write_seconds:.0f} s",
              file=log)  # fmt: skip
        call = "from benchkit import firststep; firststep.child({!r}, {!r}, {!r}, {!r}, {})".format(
            args.task,
            data_dir,
            os.path.join(work, "run"),
            os.path.join(work, "tfds"),
            "{}",
        )
        load_before = os.getloadavg()
        fresh = harness.spawn_code(call.format("False"), RESULT, args.json, log)
        resumed = harness.spawn_code(call.format("True"), RESULT, args.json, log)
        load_after = os.getloadavg()
    store_line = [line for line in fresh.pop("log") if re.search(r"examples: [\d,]+ in", line)]
    resumed.pop("log")
    return {
        "benchmark": "firststep",
        "machine": harness.machine_info(args.cpus),
        "load_average_before_after": [load_before, load_after],
        "task": args.task,
        "scale": args.scale,
        "official_units": synthetic.count(args.task, "train", args.scale),
        "write_seconds": write_seconds,
        "fresh": fresh,
        "resume": resumed,
        "store_line": store_line[-1].strip() if store_line else "",
    }


def print_firststep(report: dict) -> None:
    harness.print_header(report)
    fresh, resumed = report["fresh"], report["resume"]
    print(f"load average (1, 5, 15 min) before / after: {report['load_average_before_after']}")
    print(f"{report['task']} x {report['scale']}: {report['official_units']} official units, "
          f"{fresh['examples']} training examples")  # fmt: skip
    # The SeqIO source reads the TFDS records when its dataset is made; CMRC 2018's builds
    # all its windows then too (they are what decoding reads), so they count here.
    print(f"TFDS preparation + the source's records: {fresh['tfds_seconds']:.1f} s")
    print(f"preparing the examples (store, once): {fresh['prepare_examples_seconds']:.1f} s")
    print(f"  {report['store_line']}")
    if "store_bytes" in fresh:
        print(f"  the store on disk: {fresh['store_bytes'] / 1e9:.2f} GB")
    print(f"fresh run: first step {fresh['train_to_step_seconds']:.1f} s after preparation "
          f"(process start to step 1: {fresh['process_to_step_seconds']:.1f} s)")  # fmt: skip
    print(f"resume: process start to step 2: {resumed['process_to_step_seconds']:.1f} s")
    print(f"peak RSS: fresh {fresh['peak_rss_gib']:.2f} GiB, resume "
          f"{resumed['peak_rss_gib']:.2f} GiB")  # fmt: skip
    rate, step = fresh["input_examples_per_second"], fresh["train_examples_per_second"]
    print(f"input pipeline {rate:,.0f} examples/s vs train step {step:,.0f} examples/s "
          f"(batch {fresh['batch_size']}, tiny model): {rate / step:.1f}x")  # fmt: skip


def bench_evalpath(args) -> dict:
    """In this process: the real evaluation (Runner.evaluate: reading, scoring, decoding,
    writing) against the jitted scoring forward alone on the same batches."""
    import jax

    from cmrcx.training import input_pipeline

    with tempfile.TemporaryDirectory(prefix="cmrcx_bench_evalpath_") as work:
        data_dir = synthetic.write(args.task, os.path.join(work, "data"), args.scale, args.seed)
        runner = _runner(args.task, data_dir, os.path.join(work, "run"), f"{work}/tfds", 1)
        split = runner.run.eval_split
        t = time.perf_counter()
        examples = input_pipeline.count_examples(runner.score_task, split, runner.store)
        prepare = time.perf_counter() - t
        state = runner.trainer.init_state()
        shard = input_pipeline.host_shard(runner.trainer.batch_sharding, runner.eval_batch_size)
        batches = [
            device
            for device, _ in input_pipeline.eval_batches(
                runner.score_task, split, runner.eval_batch_size, runner.model.score_keys,
                shard, runner.store,
            )
        ]  # fmt: skip
        jax.block_until_ready(runner.trainer.score(state.params, batches[0]))  # compile
        load_before = os.getloadavg()
        t = time.perf_counter()
        for batch in batches:
            jax.block_until_ready(runner.trainer.score(state.params, batch))
        forward = time.perf_counter() - t
        t = time.perf_counter()
        runner.evaluate(state, 0, split, record=False)
        evaluation = time.perf_counter() - t
        load_after = os.getloadavg()
    return {
        "benchmark": "evalpath",
        "machine": harness.machine_info(args.cpus),
        "load_average_before_after": [load_before, load_after],
        "task": args.task,
        "scale": args.scale,
        "examples": examples,
        "batches": len(batches),
        "prepare_examples_seconds": prepare,
        "forward_seconds": forward,
        "evaluate_seconds": evaluation,
        "ratio": evaluation / forward,
    }


def print_evalpath(report: dict) -> None:
    harness.print_header(report)
    print(f"load average (1, 5, 15 min) before / after: {report['load_average_before_after']}")
    n = report["examples"]
    print(f"{report['task']} x {report['scale']} validation: {n} examples, "
          f"{report['batches']} batches; examples prepared in "
          f"{report['prepare_examples_seconds']:.1f} s (once)")  # fmt: skip
    print(f"jitted scoring forward alone: {report['forward_seconds']:.2f} s "
          f"({n / report['forward_seconds']:,.0f} examples/s)")  # fmt: skip
    print(f"Runner.evaluate (read, score, decode, write): {report['evaluate_seconds']:.2f} s "
          f"({n / report['evaluate_seconds']:,.0f} examples/s)")  # fmt: skip
    print(f"evaluation / forward: {report['ratio']:.2f}x (target: <= 1.5x)")


COMMANDS = (  # name, tasks, default task, help
    ("firststep", TASKS, "clue_chid11",
     "time to a run's first step on full-size synthetic official files"),
    ("evalpath", EVAL_TASKS, "clue_c311",
     "scoring throughput of the real eval path vs the jitted forward alone"),
)  # fmt: skip


def add_command(commands) -> None:
    for name, tasks, default, help_text in COMMANDS:
        sub = commands.add_parser(name, help=help_text, description=__doc__)
        sub.add_argument("--task", choices=tasks, default=default)
        sub.add_argument("--scale", type=float, default=1.0, help="fraction of the official size")
