"""A prepared split's records as NumPy dicts, read from tf.data a few thousand at a time.

`numpy_records(dataset)` gives each record as `tfds.as_numpy` does (NumPy scalars,
bytes, NumPy arrays for sequence fields) in the dataset's order; `read_records` adds a
progress line for splits that take more than a few seconds. The code that turns a whole
prepared split back into records goes through them: CLUE's reading comprehension splits
(`cmrcx.tasks.clue.reading`), LOT's (`cmrcx.datasets.lot.split_records`) and CMRC 2019's
answers (`cmrcx.training.run_tasks.cmrc2019`); SeqIO's own pipelines read them as
tf.data. A sequence field's arrays are views of their batch's: a caller that keeps many
of them converts them (to tuples of str with `texts`, ints) as these do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import jax
import numpy as np
import tensorflow as tf

from cmrcx.common import progress, tf_iterators

# Records come out of tf.data this many at a time: its iterator costs about 0.2 ms per
# element. ChID's 575,862 training blanks (one record each until its builder's 2.0.0)
# took 112 s to read one by one and 30 to 41 s this way (AMD EPYC, 2 cores).
READ_BATCH = 4096


def numpy_records(dataset: tf.data.Dataset) -> Iterator[dict]:
    """The dataset's elements in order, each a dict of NumPy values as `tfds.as_numpy`
    gives them."""
    for batch in tf_iterators.without_autotune(dataset.ragged_batch(READ_BATCH)):
        fields = {name: _rows(value) for name, value in batch.items()}
        for i in range(len(fields[next(iter(fields))])):
            yield {name: rows[i] for name, rows in fields.items()}


def read_records(dataset: tf.data.Dataset, what: str) -> Iterator[dict]:
    """`numpy_records` with a progress line named `what` ("reading chid train records")
    when the read takes longer than a few seconds (process 0 prints; every process reads)."""
    return progress.counted(numpy_records(dataset), what, jax.process_index() == 0)


def text(value) -> str:
    """A text field's value (bytes from tf.data) as str."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def texts(values) -> tuple[str, ...]:
    """A sequence-of-text field's values as a tuple of str."""
    return tuple(text(value) for value in values)


def _rows(value) -> Sequence:
    """A batched field as one NumPy value per record; sequence fields (candidates,
    answers) come batched as RaggedTensors and leave as NumPy arrays."""
    if isinstance(value, tf.RaggedTensor):
        if value.ragged_rank != 1:  # no builder here has a sequence of sequences
            raise NotImplementedError(f"a field of ragged rank {value.ragged_rank}")
        splits = value.row_splits.numpy()
        return np.split(value.flat_values.numpy(), splits[1:-1])
    return value.numpy()
