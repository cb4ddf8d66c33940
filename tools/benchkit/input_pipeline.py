"""input: the CMRC 2019 input pipeline's windows/s against what a train step consumes;
with --gin_file or --all, what the training loop reads at every step instead (input_feed.py).

Without them, in this (pinned) process: generate a corpus (tools/make_cmrc2019_corpus.py), build
its TFDS split, then tokenize and window it through SeqIO; the rate is compared with
the windows/s of a BERT-base train step (a `bench.py train --json` output, a flag, or
the issue's reference figure).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from . import harness, input_feed

TINY_VOCAB = harness.REPO_ROOT / "cmrcx" / "data" / "tiny_vocab.txt"
# HF PyTorch BERT-base train step, seq 512 batch 2, SDPA, 2-core CPU: the issue's
# reference figure, used by `input` when no `bench train --json` output is given.
REFERENCE_TRAIN_STEP = {"seconds": 4.6, "batch": 2, "source": "issue reference (HF PyTorch)"}


def train_consumption(args) -> dict:
    """Windows/s a BERT-base train step consumes: from --train_json or a flag/reference."""
    if args.train_json:
        with open(args.train_json, encoding="utf-8") as f:
            report = json.load(f)
        seconds = report["cmrcx"]["median_step_seconds"]
        batch, source = report["geometry"]["batch"], f"cmrcx median in {args.train_json}"
    elif args.train_step_seconds:
        seconds, batch, source = args.train_step_seconds, args.train_batch, "--train_step_seconds"
    else:
        seconds, batch = REFERENCE_TRAIN_STEP["seconds"], REFERENCE_TRAIN_STEP["batch"]
        source = REFERENCE_TRAIN_STEP["source"]
    return {"step_seconds": seconds, "batch": batch, "windows_per_second": batch / seconds,
            "source": source}  # fmt: skip


def bench_input(args) -> dict:
    """Corpus generation, TFDS build and SeqIO windows/s, in this (pinned) process; with
    --gin_file or --all, the training input's read rates (input_feed.py)."""
    if args.gin_file or args.all:
        return input_feed.bench_feed(args)
    sys.path.insert(0, str(harness.TOOLS))
    import make_cmrc2019_corpus
    import seqio
    import tensorflow as tf
    import tensorflow_datasets as tfds

    from cmrcx.common import tf_iterators
    from cmrcx.datasets import cmrc2019 as cmrc2019_tfds
    from cmrcx.tasks import cmrc2019 as cmrc2019_tasks

    tf.config.set_visible_devices([], "GPU")
    tfds.disable_progress_bar()
    # TFDS prints its progress to stdout, which must stay one JSON object.
    with (
        tempfile.TemporaryDirectory(prefix="cmrcx_bench_input_") as workdir,
        contextlib.redirect_stdout(sys.stderr),
    ):
        data_dir, cache_dir = os.path.join(workdir, "data"), os.path.join(workdir, "tfds")
        start = time.perf_counter()
        make_cmrc2019_corpus.write_corpus(data_dir, args.passages, args.seed)
        generate = time.perf_counter() - start
        start = time.perf_counter()
        cmrc2019_tfds.prepare(data_dir, "train", cache_dir)
        build = time.perf_counter() - start
        task, _ = cmrc2019_tasks.register(
            "bench",
            str(args.vocab),
            {"cmrc2019": data_dir},
            max_length=args.seq,
            doc_stride=args.doc_stride,
            tfds_cache_dir=cache_dir,
        )
        dataset = seqio.get_mixture_or_task(task).get_dataset(
            sequence_length=None, split="train", shuffle=False, use_cached=False
        )
        start, windows = time.perf_counter(), 0
        for batch in tf_iterators.numpy_iterator(dataset.batch(args.batch)):
            windows += len(batch["input_ids"])
        preprocess = time.perf_counter() - start
    consumption = train_consumption(args)
    rate = windows / preprocess
    return {
        "benchmark": "input",
        "machine": harness.machine_info(args.cpus),
        "passages": args.passages,
        "vocab": str(args.vocab),
        "max_length": args.seq,
        "doc_stride": args.doc_stride,
        "generate_seconds": generate,
        "tfds_build_seconds": build,
        "tfds_passages_per_second": args.passages / build,
        "windows": windows,
        "windows_per_passage": windows / args.passages,
        "preprocess_seconds": preprocess,
        "windows_per_second": rate,
        "passages_per_second": args.passages / preprocess,
        "train_consumption": consumption,
        "ratio_to_train_step": rate / consumption["windows_per_second"],
    }


def print_input(report: dict) -> None:
    if report["benchmark"] == "input_feed":
        input_feed.print_feed(report)
        return
    harness.print_header(report)
    c = report["train_consumption"]
    print(f"corpus: {report['passages']} passages generated in {report['generate_seconds']:.1f} s")
    print(f"TFDS build: {report['tfds_build_seconds']:.1f} s "
          f"({report['tfds_passages_per_second']:.0f} passages/s)")  # fmt: skip
    print(
        f"SeqIO tokenize + windows (max_length {report['max_length']}, stride "
        f"{report['doc_stride']}): {report['windows']} windows "
        f"({report['windows_per_passage']:.1f}/passage) in {report['preprocess_seconds']:.1f} s"
        f" = {report['windows_per_second']:.0f} windows/s"
    )
    print(
        f"train step consumes {c['windows_per_second']:.3f} windows/s (batch {c['batch']} / "
        f"{c['step_seconds']:.2f} s, {c['source']})"
    )
    print(f"pipeline / train consumption: {report['ratio_to_train_step']:.0f}x")
    batch_24_ms = 24 / report["windows_per_second"] * 1000
    print(f"(the pipeline keeps up with a batch-24 step every {batch_24_ms:.0f} ms or slower)")


def add_command(commands) -> None:
    sub = commands.add_parser("input")
    input_feed.add_arguments(sub)
    sub.add_argument("--passages", type=int, default=10_000)
    sub.add_argument("--vocab", type=Path, default=TINY_VOCAB)
    sub.add_argument("--seq", type=int, default=512, help="max_length")
    sub.add_argument("--doc_stride", type=int, default=128)
    sub.add_argument("--batch", type=int, default=24, help="windows per dataset batch")
    sub.add_argument("--train_json", help="a `bench.py train --json` output file")
    sub.add_argument("--train_step_seconds", type=float)
    sub.add_argument("--train_batch", type=int, default=2)
