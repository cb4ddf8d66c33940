"""input --gin_file / --all: the training input's examples/s at each paper gin file's batch and
shapes, read ahead (RunConfig.prefetch_batches) and not, against what an H100 step consumes.

What a run's loop reads at every step is the prepared store (`cmrcx.training.
prepared_examples`): fixed-shape rows gathered by `os.pread` in the epoch's permutation
(`input_pipeline.train_batches`), through `cmrcx.training.prefetch.Prefetched`. The rows'
contents do not change that cost, their shapes, dtypes and count do; so for each gin file
this writes a store of --rows random rows with exactly the arrays its model trains on (the
gin's batch and lengths, from the Model API's `example_batch`), in the store's own format
and narrowest integer types (token ids in [0, vocabulary), masks and segment ids in {0, 1}),
and reads it through the runner's path, with and without read-ahead alternated over
--rounds rounds (the median of each). The store just written sits in the page cache, as a
store does after its first epoch on any training host. (The one-time preparation from
the official files is `input --passages` and `firststep`.)

Consumption is an estimate until the device check measures a step: matmul FLOPs of the
train step (flops.py's counting: 3x the forward, embedding gathers, softmax, norms and
the optimizer left out; T5's cross-attention and decoder in the understanding tasks left
out too) over H100_BF16_PEAK x MFU. Every term left out makes the step look faster than it
is, so the consumption it implies is an upper bound and the ratio a lower one.

    .venv/bin/python tools/bench.py input --all
    .venv/bin/python tools/bench.py input --gin_file=clue_cmnli_bert.gin --json
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from . import flops, harness

# NVIDIA H100 SXM5 datasheet: 1,979 TFLOP/s bf16 tensor core with 2:4 sparsity, half dense.
H100_BF16_PEAK = 989.4e12
ASSUMED_MFU = 0.40  # an assumption until tools/device_check.sh measures the step
TARGET_RATIO = 10.0  # the target: input at least 10x what the step consumes
# One paper gin file per benchmark task: BERT-base for CMRC 2019 and CLUE (the papers'
# common baseline, and the fastest step among their main rows), LongLM-base for LOT.
CLUE_TASKS = (
    "afqmc tnews10 tnews11 iflytek cmnli ocnli cluewsc10 cluewsc11 csl cmrc2018 chid10 "
    "chid11 c310 c311"
).split()
ALL_GIN_FILES = (
    "cmrc2019_bert.gin",
    *[f"clue_{task}_bert.gin" for task in CLUE_TASKS],
    *[f"lot_{task}_longlm_base.gin" for task in ("clozet", "senpos", "plotcom", "outgen")],
)
BINARY_KEYS = ("mask", "type", "segment")  # key names holding 0/1 values


def run_of(gin_file: str, work: str):
    """(RunConfig, the Model API's training batch of zeros) of `gin_file` as written."""
    import gin

    from cmrcx.cli import launch
    from cmrcx.training.run_tasks import build_run_task

    gin.clear_config()
    argv = [
        f"--gin_file={gin_file}",
        f"--gin.MODEL_DIR='{os.path.join(work, 'run')}'",
        f"--gin.DATA_DIR='{os.path.join(work, 'data')}'",  # not read: the shapes are the gin's
        "--gin.VOCAB_FILE='cmrcx:tiny'",
        "--gin.RunConfig.require_pretrained=False",
        f"--gin.RunConfig.tfds_cache_dir='{os.path.join(work, 'tfds')}'",
    ]
    args = launch.parse_flags(argv, "bench")
    launch.parse_gin(args.gin_file, args.gin_bindings)
    run = launch.run_config_with_required_values().checked()
    return run, build_run_task(run).model.example_batch(run.batch_size)


def write_store(directory: str, example: dict, rows: int, vocab_size: int, seed: int) -> None:
    """A prepared store of `rows` random rows of `example`'s arrays (not example_mask)."""
    from cmrcx.training import prepared_examples

    os.makedirs(directory)
    rng = np.random.default_rng(seed)
    numeric, stored = {}, {}
    for key, value in example.items():
        if key == "example_mask":
            continue
        high = 2 if any(part in key for part in BINARY_KEYS) else vocab_size
        shape = value.shape[1:]
        dtype = prepared_examples.narrowest_dtype(np.array([0, high - 1], value.dtype))
        numeric[key], stored[key] = (value.dtype.str, list(shape)), dtype.str
        with open(os.path.join(directory, f"{key}.bin"), "wb") as f:
            for start in range(0, rows, 4096):
                size = (min(rows, start + 4096) - start, *shape)
                f.write(rng.integers(0, high, size, dtype=dtype).tobytes())
    meta = {"count": rows, "numeric": numeric, "stored": stored, "strings": []}
    with open(os.path.join(directory, prepared_examples.FEATURES_FILE), "w") as f:
        json.dump(meta, f)


def train_step_flops(config, example: dict) -> float:
    """Matmul FLOPs of one train step of `config` on `example` (the module docstring's
    counting: an estimate that leaves terms out, never adds any)."""
    layers = getattr(config, "num_layers", None) or config.n_layer
    hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None)
    hidden = hidden or config.n_embd
    inner = getattr(config, "intermediate_size", None) or getattr(config, "d_ff", None)
    inner = inner or getattr(config, "d_inner", None) or config.n_inner or 4 * hidden
    if "input_ids" in example:
        shape = example["input_ids"].shape
        rows, seq = math.prod(shape[:-1]), shape[-1]
        return 3 * layers * flops.layer_flops(rows, seq, hidden, inner)
    (rows, source), target = example["inputs"].shape, example["targets"].shape[1]
    lm_head = 2 * rows * target * hidden * config.vocab_size
    if hasattr(config, "num_decoder_layers"):  # T5: encoder on inputs, decoder on targets
        decoder = config.num_decoder_layers or layers
        body = layers * flops.layer_flops(rows, source, hidden, inner)
        body += decoder * flops.layer_flops(rows, target, hidden, inner)
    else:  # GPT-2: one stack over prompt and continuation
        body = layers * flops.layer_flops(rows, source + target, hidden, inner)
    return 3 * (body + lm_head)


def read_rate(batches, seconds: float) -> tuple[int, float]:
    """(batches, seconds) read from `batches` for at least `seconds` (after one warm-up)."""
    next(batches)
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds or count < 3:
        next(batches)
        count += 1
    return count, elapsed


def paced_wait(batches, step_seconds: float, steps: int) -> float:
    """Mean seconds the loop waits for a batch when each step takes `step_seconds`
    (a sleep, which releases the GIL as a device's step does)."""
    next(batches)
    waited = 0.0
    for _ in range(steps):
        time.sleep(step_seconds)
        start = time.perf_counter()
        next(batches)
        waited += time.perf_counter() - start
    return waited / steps


def bench_gin(gin_file: str, args) -> dict:
    """One gin file's row: its batch, its store, its rates with and without read-ahead."""
    from cmrcx.training import input_pipeline
    from cmrcx.training.prefetch import Prefetched
    from cmrcx.training.prepared_examples import PreparedSplit

    with tempfile.TemporaryDirectory(prefix="cmrcx_bench_input_feed_") as work:
        run, example = run_of(gin_file, work)
        directory = os.path.join(work, "store")
        write_store(directory, example, args.rows, run.model.vocab_size, args.seed)
        split = PreparedSplit(directory)

        class Store:  # the runner's store, holding this one split
            def split(self, task_name, split_name):
                return split

        step_seconds = train_step_flops(run.model, example) / (args.peak_flops * args.mfu)
        consumption = run.batch_size / step_seconds
        row = {
            "gin_file": gin_file,
            "task": run.task,
            "model": type(run.model).__name__,
            "batch_shapes": {key: list(value.shape) for key, value in example.items()},
            "store_bytes": sum(e.stat().st_size for e in os.scandir(directory)),
            "h100_step_seconds_estimate": step_seconds,
            "h100_examples_per_second_estimate": consumption,
            "reads": {},
        }
        depths = sorted({0, args.prefetch})
        rates = {depth: [] for depth in depths}
        waits = {}
        for _ in range(args.rounds):  # alternated: a loaded machine's drift hits both alike
            for depth in depths:
                reads = input_pipeline.train_batches(
                    "bench", "train", run.batch_size, list(example), args.seed, store=Store()
                )
                with Prefetched(reads, depth) as batches:
                    count, seconds = read_rate(batches, args.seconds)
                    waits[depth] = paced_wait(batches, step_seconds, args.paced_steps)
                rates[depth].append(count / seconds)
        for depth in depths:
            batches_per_second = statistics.median(rates[depth])
            examples_per_second = batches_per_second * run.batch_size
            row["reads"][str(depth)] = {
                "batches_per_second": batches_per_second,
                "batches_per_second_each_round": rates[depth],
                "examples_per_second": examples_per_second,
                "ratio_to_h100_step": examples_per_second / consumption,
                "wait_per_step_seconds_at_h100_pace": waits[depth],
            }
    row["meets_target"] = all(
        read["ratio_to_h100_step"] >= TARGET_RATIO for read in row["reads"].values()
    )
    return row


def bench_feed(args) -> dict:
    gin_files = ALL_GIN_FILES if args.all else args.gin_file
    rows = []
    for gin_file in gin_files:
        if not args.json:
            print(f"{gin_file} ...", file=sys.stderr, flush=True)
        rows.append(bench_gin(gin_file, args))
    return {
        "benchmark": "input_feed",
        "machine": harness.machine_info(args.cpus),
        "rows_per_store": args.rows,
        "rounds": args.rounds,
        "prefetch_batches": args.prefetch,
        "h100_estimate": {
            "peak_flops": args.peak_flops,
            "mfu": args.mfu,
            "note": "matmul FLOPs / (peak x MFU): an estimate until the device check measures "
            "the step; the FLOPs leave terms out, so the step it gives is fast, the ratio low",
        },
        "target_ratio": TARGET_RATIO,
        "all_meet_target": all(row["meets_target"] for row in rows),
        "rows": rows,
    }


def print_feed(report: dict) -> None:
    harness.print_header(report)
    estimate = report["h100_estimate"]
    depth = str(report["prefetch_batches"])
    print(
        f"{report['rows_per_store']:,} rows per store; H100 step = matmul FLOPs / "
        f"({estimate['peak_flops'] / 1e12:.0f} TFLOP/s x MFU {estimate['mfu']:.0%}), an estimate"
    )
    print(f"\n{'gin file':34}{'batch':>14}{'H100 ms':>9}{'H100 ex/s':>10}"
          f"{'read ex/s':>11}{'x':>6}{'ahead ex/s':>11}{'x':>6}{'wait ms':>9}")  # fmt: skip
    for row in report["rows"]:
        shape = "x".join(map(str, max(row["batch_shapes"].values(), key=len)))
        synchronous, ahead = row["reads"]["0"], row["reads"][depth]
        print(f"{row['gin_file']:34}{shape:>14}{row['h100_step_seconds_estimate'] * 1e3:>9.1f}"
              f"{row['h100_examples_per_second_estimate']:>10,.0f}"
              f"{synchronous['examples_per_second']:>11,.0f}"
              f"{synchronous['ratio_to_h100_step']:>6.1f}"
              f"{ahead['examples_per_second']:>11,.0f}{ahead['ratio_to_h100_step']:>6.1f}"
              f"{ahead['wait_per_step_seconds_at_h100_pace'] * 1e3:>9.2f}")  # fmt: skip
    verdict = "every row" if report["all_meet_target"] else "NOT every row"
    print(f"\n{verdict} reads at least {report['target_ratio']:.0f}x what the step consumes "
          f"(read: in the loop; ahead: {depth} batches on a thread; wait: the loop's wait "
          "per step with read-ahead at the H100 pace)")  # fmt: skip


def add_arguments(sub) -> None:
    sub.add_argument("--gin_file", action="append", default=[], help="a paper gin (repeatable)")
    sub.add_argument("--all", action="store_true", help="one paper gin per benchmark task")
    sub.add_argument("--rows", type=int, default=50_000, help="rows of each synthetic store")
    sub.add_argument("--seconds", type=float, default=2.0, help="reading time per rate")
    sub.add_argument("--rounds", type=int, default=3, help="alternated rounds (median)")
    sub.add_argument("--prefetch", type=int, default=2, help="batches read ahead")
    sub.add_argument("--paced_steps", type=int, default=20)
    sub.add_argument("--peak_flops", type=float, default=H100_BF16_PEAK)
    sub.add_argument("--mfu", type=float, default=ASSUMED_MFU)
