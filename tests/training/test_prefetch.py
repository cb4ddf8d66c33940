"""Batches read ahead on a thread: the same batches in the same order as reading them in the
loop, an exact resume, the reader's errors raised in the loop's thread naming the file and
record, and no thread left once the loop ends, breaks or fails."""

import os
import shutil
import threading

import numpy as np
import pytest
import tensorflow as tf

from cmrcx.training import input_pipeline, prepared_examples
from cmrcx.training.prefetch import Prefetched
from tests.support import register_train_task

TRAIN_KEYS = ("input_ids", "label", "example_mask")


def prefetch_threads():
    return [t for t in threading.enumerate() if t.name.startswith("cmrcx-prefetch")]


@pytest.fixture(scope="module")
def training(tmp_path_factory):
    """A prepared split of 40 distinct examples (batches of 4: an epoch is 10 steps)."""
    rng = np.random.default_rng(0)
    features = {
        "input_ids": rng.integers(0, 21128, (40, 16), dtype=np.int32),
        "label": np.arange(40, dtype=np.int32),
    }

    def examples(split, shuffle_files):
        del split, shuffle_files
        return tf.data.Dataset.from_tensor_slices(features)

    task = register_train_task("prefetch_test", examples)
    store = prepared_examples.PreparedStore(str(tmp_path_factory.mktemp("store")), "test")
    assert input_pipeline.count_examples(task, "train", store) == 40
    return task, store


def batches(training, start=0, store=None):
    task, own_store = training
    return input_pipeline.train_batches(
        task, "train", 4, TRAIN_KEYS, 0, start, None, store or own_store
    )


def take(iterator, n):
    return [next(iterator) for _ in range(n)]


def assert_same(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("depth", [1, 3])
def test_read_ahead_gives_the_batches_in_the_loops_order(training, depth):
    synchronous = take(batches(training), 24)
    with Prefetched(batches(training), depth) as ahead:
        assert_same(take(ahead, 24), synchronous)
    assert not prefetch_threads()
    # Not trivially equal: the batches differ from one another.
    assert not np.array_equal(synchronous[0]["input_ids"], synchronous[1]["input_ids"])


def test_resume_after_read_ahead_is_exact(training):
    """Stopped after 5 consumed batches, with 3 more read ahead and dropped: the resumed
    reader starts at batch 5, as the uninterrupted one goes on."""
    uninterrupted = take(batches(training), 10)
    with Prefetched(batches(training), 3) as ahead:
        take(ahead, 5)
    with Prefetched(batches(training, start=5), 3) as resumed:
        assert_same(take(resumed, 5), uninterrupted[5:])


def test_a_reader_error_is_raised_in_the_loop_naming_file_and_record(training, tmp_path):
    task, store = training
    source = store.split(task, "train")
    damaged = tmp_path / "damaged"
    shutil.copytree(source.directory, damaged)
    ids = damaged / "input_ids.bin"
    row = os.path.getsize(ids) // len(source)
    os.truncate(ids, row * 2 + row // 2)  # records 0, 1 whole, 2 cut short, the rest gone

    class Damaged:  # the store, its files cut short on disk
        def split(self, task_name, split):
            return prepared_examples.PreparedSplit(str(damaged))

    with Prefetched(batches(training, store=Damaged()), 2) as ahead:
        with pytest.raises(ValueError, match=r"input_ids\.bin: record \d+ of feature") as raised:
            take(ahead, len(source))  # a whole epoch reads every record
    assert threading.current_thread() is threading.main_thread()
    assert any("prefetch thread" in note for note in raised.value.__notes__)
    assert not prefetch_threads()


def test_no_thread_is_left_when_the_loop_breaks_or_fails(training):
    with Prefetched(batches(training), 2) as ahead:
        for step, _ in enumerate(ahead):
            if step == 3:
                break  # SIGTERM's way out of the training loop
    assert not prefetch_threads()
    with pytest.raises(RuntimeError, match="step failed"):
        with Prefetched(batches(training), 2) as ahead:
            next(ahead)
            raise RuntimeError("step failed")
    assert not prefetch_threads()


def test_a_finite_source_ends_and_depth_zero_reads_in_the_loop():
    with Prefetched(iter(range(7)), 2) as ahead:
        assert list(ahead) == list(range(7))
    assert not prefetch_threads()
    synchronous = Prefetched(iter(range(3)), 0)
    assert synchronous.thread is None and list(synchronous) == [0, 1, 2]
    with pytest.raises(ValueError, match="prefetch depth -1"):
        Prefetched(iter(()), -1)


def test_the_store_is_prepared_in_the_callers_thread(training, tmp_path):
    """A split not yet prepared is built when the batches are asked for, before the
    read-ahead thread starts: its minutes of preprocessing are not stranded in a thread
    that Ctrl-C cannot stop."""
    task, _ = training
    store = prepared_examples.PreparedStore(str(tmp_path), "fresh")
    reads = input_pipeline.train_batches(task, "train", 4, TRAIN_KEYS, 0, 0, None, store)
    assert os.path.isfile(os.path.join(store.directory(task, "train"), "features.json"))
    with Prefetched(reads, 2) as ahead:
        assert next(ahead)["input_ids"].shape == (4, 16)


def test_a_negative_read_ahead_is_refused(tmp_path):
    from cmrcx.common.errors import ConfigError
    from cmrcx.common.paths import package_path
    from cmrcx.training.run_config import RunConfig

    run = RunConfig(
        model_dir=str(tmp_path),
        data_dir=package_path("data/cmrc2019_sample"),
        vocab_file=package_path("data/tiny_vocab.txt"),
        prefetch_batches=-1,
    )
    with pytest.raises(ConfigError, match=r"RunConfig.prefetch_batches -1: use 0"):
        run.checked()
