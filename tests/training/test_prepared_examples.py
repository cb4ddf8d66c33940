"""The prepared store: rows by index and blocks in order read back what was written, in
each feature's own dtype from files of the narrowest integer type (widened when a later
chunk needs it); a partial store of a process that died is removed, a live one's is
left; a build that waits long for its next examples says it is still working."""

import functools
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from cmrcx.common import progress
from cmrcx.training import prepared_examples
from tests.support import register_train_task


def _register(name: str, features=None) -> str:
    ids = np.arange(30, dtype=np.int32).reshape(10, 3)
    features = features or {"ids": ids, "id": [f"q{i}".encode() for i in range(10)]}

    def examples(split, shuffle_files):
        del split, shuffle_files
        return tf.data.Dataset.from_tensor_slices(features)

    return register_train_task(name, examples)


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


def test_gathered_rows_are_the_batchs_own_and_an_index_past_the_end_is_named(tmp_path):
    """`rows` gathers from the mapped file into a new array (writable, not the file's);
    an index the store does not hold names the file and the record, as a short read does."""
    store = prepared_examples.PreparedStore(str(tmp_path), "fingerprint")
    split = store.split(_register("prepared_examples_rows_test"), "train")
    rows = split.rows(np.array([9, 0]), ["ids"])["ids"]
    rows[:] = -1  # the batch's own memory
    np.testing.assert_array_equal(split.rows([9, 0], ["ids"])["ids"], [[27, 28, 29], [0, 1, 2]])
    assert split.rows([], ["ids"])["ids"].shape == (0, 3)
    with pytest.raises(ValueError, match=r"ids\.bin: record 10 of feature 'ids' is 0 of its"):
        split.rows([3, 10, 12], ["ids"])


def test_another_version_of_a_text_library_makes_another_store(tmp_path, monkeypatch):
    store = prepared_examples.PreparedStore(str(tmp_path), "fingerprint")
    versions = prepared_examples.library_versions()
    assert any(v.startswith("seqio==") for v in versions), versions
    before = store.directory("task", "train")
    upgraded = tuple(v.replace("seqio==", "seqio==9.") for v in versions)
    monkeypatch.setattr(prepared_examples, "library_versions", lambda: upgraded)
    assert store.directory("task", "train") != before


def test_abandoned_partial_stores_are_removed(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        timeout=60,
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


def test_integer_files_are_narrow_and_read_back_in_their_own_dtype(tmp_path):
    count = 3 * prepared_examples.CHUNK + 5
    rng = np.random.default_rng(0)
    features = {
        "token_ids": rng.integers(0, 21128, (count, 2, 4)).astype(np.int32),
        "mask": rng.integers(0, 2, (count, 4)).astype(np.int32),
        "label": np.where(np.arange(count) % 3 == 0, -1, 1).astype(np.int32),
        "big": np.arange(count, dtype=np.int64) * 10**10,
        "unsigned": np.arange(count, dtype=np.uint32),
        "score": rng.standard_normal(count).astype(np.float32),
        # fits int8 in the first chunk, int16 from the second, int32 in the last
        "widened": np.concatenate(
            [
                np.full(prepared_examples.CHUNK, -7),
                np.full(prepared_examples.CHUNK, 300),
                np.full(count - 2 * prepared_examples.CHUNK, 70_000),
            ]
        ).astype(np.int32),
    }
    name = _register("prepared_examples_narrow_test", features)
    split = prepared_examples.PreparedStore(str(tmp_path), "fingerprint").split(name, "train")
    stored = {key: dtype.str for key, dtype in split.stored.items()}
    assert stored == {
        "token_ids": "<i2",
        "mask": "|i1",
        "label": "|i1",
        "big": "<i8",
        "unsigned": "<u2",
        "score": "<f4",
        "widened": "<i4",
    }
    assert os.path.getsize(os.path.join(split.directory, "mask.bin")) == count * 4
    indices = [count - 1, 0, 300, 300, 700]
    rows = split.rows(indices, list(features))
    block = split.block(250, 800, list(features))
    for key, values in features.items():
        assert rows[key].dtype == values.dtype and block[key].dtype == values.dtype, key
        np.testing.assert_array_equal(rows[key], values[indices])
        np.testing.assert_array_equal(block[key], values[250:800])
    block["mask"][0] = 5  # a block is the caller's to change


def test_narrowest_dtype():
    narrowest = prepared_examples.narrowest_dtype
    assert narrowest(np.array([-128, 127], np.int32)) == np.int8
    assert narrowest(np.array([-129], np.int32)) == np.int16
    assert narrowest(np.array([40_000], np.int32)) == np.int32
    assert narrowest(np.array([2**40], np.int64)) == np.int64
    assert narrowest(np.array([255], np.uint32)) == np.uint8
    assert narrowest(np.array([1], np.int8)) == np.int8
    assert narrowest(np.zeros((0, 3), np.int32)) == np.int8
    assert narrowest(np.array([True])) == np.bool_
    assert narrowest(np.array([0.5], np.float64)) == np.float64


def _slow_task(name: str, pause: float, fail: bool = False) -> str:
    """A task whose last example comes `pause` seconds after the others (or fails)."""

    def generate():
        for i in range(6):
            if i == 5:
                time.sleep(pause)
                if fail:
                    raise RuntimeError("the source broke")
            yield {"ids": np.full([3], i, np.int32)}

    def examples(split, shuffle_files):
        del split, shuffle_files
        signature = {"ids": tf.TensorSpec([3], tf.int32)}
        return tf.data.Dataset.from_generator(generate, output_signature=signature)

    return register_train_task(name, examples)


def test_a_slow_end_of_the_build_is_not_silent(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        prepared_examples, "Progress", functools.partial(progress.Progress, every=0.05)
    )
    store = prepared_examples.PreparedStore(str(tmp_path), "fingerprint")
    assert len(store.split(_slow_task("prepared_slow_test", pause=0.6), "train")) == 6
    time.sleep(0.3)
    lines = capsys.readouterr().out.splitlines()
    what = "preparing prepared_slow_test train examples"
    assert lines[0] == f"{what} (once; cached for later runs) ..."
    assert any(line.startswith(f"{what}: 0 so far, still working (") for line in lines)
    assert lines[-1].startswith(f"{what}: 6 in ")  # and nothing after the end line

    with pytest.raises(tf.errors.OpError, match="the source broke"):
        store.split(_slow_task("prepared_failing_test", pause=0.2, fail=True), "train")
    capsys.readouterr()
    time.sleep(0.3)
    assert capsys.readouterr().out == ""  # a failed build's heartbeat has stopped
