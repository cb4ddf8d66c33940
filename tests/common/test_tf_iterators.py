"""cmrcx.common.tf_iterators: the pipelines cmrcx reads to their end run without tf.data's
autotuning thread (whose join can wait out a sleep of tens of seconds when the iterator
is deleted), and give the same elements in the same order."""

from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from cmrcx.common import tf_iterators
from cmrcx.datasets import records
from cmrcx.training import input_pipeline, prepared_examples
from tests.support import REPO_ROOT, register_train_task


def _pipeline() -> tf.data.Dataset:
    dataset = tf.data.Dataset.range(1000).map(lambda x: x * 3, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(64).prefetch(tf.data.AUTOTUNE)


def test_the_same_elements_in_the_same_order_without_autotuning():
    assert _pipeline().options().autotune.enabled is not False  # tf.data's default: on
    quiet = tf_iterators.without_autotune(_pipeline())
    assert quiet.options().autotune.enabled is False
    assert quiet.batch(2).options().autotune.enabled is False  # kept downstream
    expected = list(_pipeline().as_numpy_iterator())
    got = list(tf_iterators.numpy_iterator(_pipeline()))
    assert len(got) == len(expected) == 16
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def _spy(monkeypatch) -> list[tf.data.Dataset]:
    seen = []
    without = tf_iterators.without_autotune

    def spy(dataset):
        quiet = without(dataset)
        seen.append(quiet)
        return quiet

    monkeypatch.setattr(tf_iterators, "without_autotune", spy)
    return seen


def test_the_store_build_records_reader_and_count_turn_autotuning_off(tmp_path, monkeypatch):
    seen = _spy(monkeypatch)
    rows = list(records.numpy_records(tf.data.Dataset.from_tensor_slices({"x": [1, 2, 3]})))
    assert [int(r["x"]) for r in rows] == [1, 2, 3]
    assert len(seen) == 1 and seen[0].options().autotune.enabled is False

    def examples(split, shuffle_files):
        del split, shuffle_files
        return tf.data.Dataset.from_tensor_slices({"ids": np.arange(12).reshape(4, 3)})

    name = register_train_task("tf_iterators_store_test", examples)
    store = prepared_examples.PreparedStore(str(tmp_path), "fingerprint")
    assert len(store.split(name, "train")) == 4
    assert len(seen) == 2 and seen[1].options().autotune.enabled is False
    # Without a store the count is a Dataset.reduce, which on a CPU autotunes too.
    assert input_pipeline.count_examples(name, "train") == 4
    assert len(seen) == 3 and seen[2].options().autotune.enabled is False


READS_PAST_THE_HELPER = (
    r"\.as_numpy_iterator\(|tfds\.as_numpy\("
    r"|(?<!functools)(?<!np\.add)(?<!tf_iterators)\.reduce\("  # Dataset.reduce
)


def test_no_pipeline_is_read_past_the_helper():
    """A new `as_numpy_iterator()`, `tfds.as_numpy` or `Dataset.reduce` in the package
    goes through tf_iterators instead (a plain `for ... in dataset` is not caught: route
    it too). `functools.reduce` and numpy's ufunc reductions are not datasets."""
    allowed = {"cmrcx/common/tf_iterators.py"}
    hits = []
    for root in ("cmrcx", "tasks", "tools"):
        for path in sorted((REPO_ROOT / root).rglob("*.py")):
            relative = path.relative_to(REPO_ROOT).as_posix()
            if relative in allowed or relative.startswith(("cmrcx/tasks/", "cmrcx/data/")):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(READS_PAST_THE_HELPER, line):
                    hits.append(f"{relative}:{number}: {line.strip()}")
    assert hits == []
