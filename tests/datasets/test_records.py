"""The batched read of a prepared split (`cmrcx.datasets.records`) against tf.data's own."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from cmrcx.common import progress
from cmrcx.datasets import records

ANSWERS = [["甲", "乙乙"], [], ["丙"], ["丁", "戊", "己"], ["庚"]]


def _dataset() -> tf.data.Dataset:
    return tf.data.Dataset.from_generator(
        lambda: (
            {"id": i, "text": f"第{i}篇".encode(), "answers": a, "starts": list(range(len(a)))}
            for i, a in enumerate(ANSWERS)
        ),
        output_signature={
            "id": tf.TensorSpec((), tf.int32),
            "text": tf.TensorSpec((), tf.string),
            "answers": tf.TensorSpec((None,), tf.string),
            "starts": tf.TensorSpec((None,), tf.int32),
        },
    )


@pytest.mark.parametrize("read_batch", [2, 4096], ids=["batch boundaries", "one batch"])
def test_records_read_in_batches_equal_those_read_one_by_one(monkeypatch, read_batch):
    """Each record as `tfds.as_numpy` gives it, in order: scalars, strings, and sequence
    fields of different lengths (empty ones too)."""
    monkeypatch.setattr(records, "READ_BATCH", read_batch)
    batched = list(records.numpy_records(_dataset()))
    one_by_one = list(tfds.as_numpy(_dataset()))
    assert len(batched) == len(one_by_one) == 5
    for mine, expected in zip(batched, one_by_one, strict=True):
        assert mine.keys() == expected.keys()
        for name, value in expected.items():
            assert type(mine[name]) is type(value), name
            assert np.shape(mine[name]) == np.shape(value), name
            assert np.asarray(mine[name]).dtype == np.asarray(value).dtype, name
            np.testing.assert_array_equal(mine[name], value)
    assert [[a.decode() for a in r["answers"]] for r in batched][:2] == [["甲", "乙乙"], []]


def test_a_sequence_of_sequences_is_refused():
    nested = tf.data.Dataset.from_tensor_slices(
        {"spans": tf.ragged.constant([[[1], [2, 3]], [[4]]], dtype=tf.int32)}
    )
    with pytest.raises(NotImplementedError, match="ragged rank 2"):
        list(records.numpy_records(nested))


class _SlowClock:
    """`time` for `cmrcx.common.progress`: 10 s pass at every reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 10.0
        return self.now


def test_a_long_read_prints_its_counts(monkeypatch, capsys):
    monkeypatch.setattr(progress, "time", _SlowClock())
    assert len(list(records.read_records(_dataset(), "reading test records"))) == 5
    out = capsys.readouterr().out
    assert "reading test records: 1 (" in out and "reading test records: 5 in " in out
