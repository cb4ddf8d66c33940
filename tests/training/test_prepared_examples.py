"""The prepared store: rows by index and blocks in order read back what was written;
a partial store of a process that died is removed, a live one's is left."""

import os
import subprocess
import sys

import numpy as np
import seqio
import tensorflow as tf

from cmrcx.training import prepared_examples


def _register(name: str) -> str:
    ids = np.arange(30, dtype=np.int32).reshape(10, 3)

    def examples(split, shuffle_files):
        del split, shuffle_files
        return tf.data.Dataset.from_tensor_slices(
            {"ids": ids, "id": [f"q{i}".encode() for i in range(10)]}
        )

    seqio.TaskRegistry.remove(name)
    seqio.TaskRegistry.add(
        name,
        source=seqio.FunctionDataSource(examples, splits=("train",)),
        preprocessors=[],
        output_features={},
    )
    return name


def test_rows_and_blocks_read_back(tmp_path):
    store = prepared_examples.PreparedStore(str(tmp_path), "fingerprint")
    name = _register("prepared_examples_test")
    assert store.holds(name)
    split = store.split(name, "train")
    assert len(split) == 10 and split.keys == ["ids", "id"]
    np.testing.assert_array_equal(
        split.rows([7, 2, 7], ["ids"])["ids"], [[21, 22, 23], [6, 7, 8], [21, 22, 23]]
    )
    block = split.block(8, 12, ["ids", "id"])  # the end: 2 rows
    np.testing.assert_array_equal(block["ids"], [[24, 25, 26], [27, 28, 29]])
    assert list(block["id"]) == [b"q8", b"q9"]
    other = prepared_examples.PreparedStore(str(tmp_path), "another fingerprint")
    assert other.directory(name, "train") != store.directory(name, "train")


def test_abandoned_partial_stores_are_removed(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    prefix = str(tmp_path / "store.partial-host-")
    os.makedirs(prefix + dead.stdout.strip())
    os.makedirs(prefix + str(os.getpid()))
    prepared_examples._remove_abandoned(prefix)
    assert os.listdir(tmp_path) == [f"store.partial-host-{os.getpid()}"]


def test_a_new_store_removes_the_splits_stores_unused_for_a_week(tmp_path):
    name = _register("prepared_examples_test")
    old = prepared_examples.PreparedStore(str(tmp_path), "old data")
    recent = prepared_examples.PreparedStore(str(tmp_path), "recent data")
    old_dir, recent_dir = old.directory(name, "train"), recent.directory(name, "train")
    old.split(name, "train"), recent.split(name, "train")
    week = 8 * 86400
    stamp = os.path.getmtime(os.path.join(old_dir, "features.json")) - week
    os.utime(os.path.join(old_dir, "features.json"), (stamp, stamp))
    prepared_examples.PreparedStore(str(tmp_path), "new data").split(name, "train")
    assert not os.path.exists(old_dir) and os.path.exists(recent_dir)
