"""SeqIO task -> numpy batches for the trainer (host side).

With a `PreparedStore` (what `cmrcx.training.runner` passes), a task's split is
preprocessed once into fixed-shape rows on disk (`cmrcx.training.prepared_examples`)
and read back by index: training draws a seeded permutation of the whole split each
epoch (uniform over all of it, no shuffle buffer to fill), so the example at global
position p = step * batch_size + row is ``permutation(seed, p // n)[p % n]`` and a run
resumed at step k computes its batches directly, without reading the k before.
Evaluation reads the rows in order, the last batch padded to full size with
`example_mask` 0, never dropped, so there is one compiled shape.

Without a store (a SeqIO mixture, whose examples are sampled from its tasks, or a
caller that passes none) the examples are cached in memory, shuffled with a buffer
of SHUFFLE_BUFFER and a fixed seed each epoch and repeated; a resumed run skips k
batches. Either way the order is a pure function of (seed, step). With `shuffle=False` every
epoch reads the split in file order (windows as the task makes them), as the authors'
scripts do with a SequentialSampler: the order then does not depend on the seed.

Multi-host: every host builds the same global batch and keeps only its rows, a
`seqio.ShardInfo` of the batch (`host_shard`). The examples are deliberately not
sharded at the source (SeqIO's other use of ShardInfo): each host shuffling its
own part would make the batches, and so the losses, depend on the host count.
Every host reads only its rows of the store; each prepares the whole split once.

Numeric features go to the device; strings (`context_id`) stay on the host.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import jax
import numpy as np
import seqio
import tensorflow as tf

from cmrcx.common import tf_iterators
from cmrcx.training.prepared_examples import PreparedSplit, PreparedStore

# Examples kept in memory for shuffling without a store (a mixture: LOT's four tasks
# together hold a few ten thousand); with a store the permutation covers the whole split.
SHUFFLE_BUFFER = 200_000


def _examples(task_name: str, split: str) -> tf.data.Dataset:
    task = seqio.get_mixture_or_task(task_name)
    return task.get_dataset(sequence_length=None, split=split, shuffle=False, use_cached=False)


def _prepared(store: PreparedStore | None, task_name: str, split: str) -> PreparedSplit | None:
    return None if store is None else store.split(task_name, split)


def count_examples(task_name: str, split: str, store: PreparedStore | None = None) -> int:
    """Number of model examples (windows) in a split: what the schedule counts. With a
    `store`, the split is prepared (once) and its rows counted."""
    prepared = _prepared(store, task_name, split)
    if prepared is not None:
        return len(prepared)
    return int(tf_iterators.reduce(_examples(task_name, split), 0, lambda n, _: n + 1))


def epoch_permutation(seed: int, epoch: int, count: int) -> np.ndarray:
    """The order of the split's `count` examples in `epoch`: int64 [count]."""
    return np.random.default_rng([seed, epoch]).permutation(count)


def training_indices(
    seed: int, count: int, positions: np.ndarray, cache: dict, shuffle: bool = True
) -> np.ndarray:
    """Example index at each global position (step * batch + row) of the endless,
    epoch-by-epoch shuffled stream; `cache` keeps the epochs' permutations in use.
    shuffle=False: every epoch in file order (index = position mod count)."""
    epochs, offsets = np.divmod(positions, count)
    if not shuffle:
        return offsets
    if len(epochs) and epochs.min() == epochs.max():  # a batch inside one epoch: most
        return _permutation(seed, int(epochs[0]), count, cache)[offsets]
    out = np.empty_like(positions)
    for epoch in np.unique(epochs):
        here = epochs == epoch
        out[here] = _permutation(seed, int(epoch), count, cache)[offsets[here]]
    return out


def _permutation(seed: int, epoch: int, count: int, cache: dict) -> np.ndarray:
    """`epoch_permutation`, kept in `cache` (the earlier epochs' dropped)."""
    if epoch not in cache:
        for old in [e for e in cache if e < epoch]:
            del cache[old]
        cache[epoch] = epoch_permutation(seed, epoch, count)
    return cache[epoch]


def host_shard(batch_sharding: jax.sharding.Sharding, batch_size: int) -> seqio.ShardInfo:
    """The rows of a global batch of `batch_size` that this host's devices hold.

    `batch_sharding` splits dimension 0 of the batch. One process: ShardInfo(0, 1).
    Two hosts on a (data,) mesh of jax.devices(): ShardInfo(i, 2) on host i. Hosts
    that hold the same rows (a `model` axis spanning hosts) get the same shard.
    """
    indices = batch_sharding.addressable_devices_indices_map((batch_size,)).values()
    rows = sorted({index[0].indices(batch_size)[:2] for index in indices})
    return shard_of_rows(rows, batch_size)


def shard_of_rows(rows: Sequence[tuple[int, int]], batch_size: int) -> seqio.ShardInfo:
    """Sorted (start, stop) row ranges one host holds -> that block as a ShardInfo.

    >>> shard_of_rows([(4, 6), (6, 8)], 8)
    ShardInfo(index=1, num_shards=2)

    The rows must be one block of an even split: jax takes a host's data as its
    devices' slices in order, and a ShardInfo names one block.
    """
    start, stop = rows[0][0], rows[-1][1]
    gaps = any(a[1] != b[0] for a, b in zip(rows[:-1], rows[1:], strict=True))
    size = stop - start
    if gaps or batch_size % size or start % size:
        raise ValueError(
            f"this host's devices hold rows {list(rows)} of a batch of {batch_size}: not one "
            "block of an even split; build the mesh with each host's devices together"
        )
    return seqio.ShardInfo(index=start // size, num_shards=batch_size // size)


def host_rows(batch_size: int, shard: seqio.ShardInfo | None) -> slice:
    """Rows [index * n, (index + 1) * n) of a global batch, n = batch_size / num_shards."""
    if shard is None:
        return slice(0, batch_size)
    if batch_size % shard.num_shards:
        raise ValueError(f"batch size {batch_size} does not split over {shard.num_shards} hosts")
    size = batch_size // shard.num_shards
    return slice(shard.index * size, (shard.index + 1) * size)


def train_batches(
    task_name: str,
    split: str,
    batch_size: int,
    device_keys: Sequence[str],
    seed: int,
    start_step: int = 0,
    shard: seqio.ShardInfo | None = None,
    store: PreparedStore | None = None,
    shuffle: bool = True,
) -> Iterator[dict[str, np.ndarray]]:
    """Endless shuffled batches from step `start_step` on (resume).

    `batch_size` is global. Each array is [batch_size / shard.num_shards, ...]:
    this host's `shard` rows of the global batch (all rows when `shard` is None).
    shuffle=False: each epoch in file order, the seed unused.

    The store's split is prepared (if it is not yet) and checked now, in the caller's
    thread; the batches are read as they are asked for (by `prefetch.Prefetched`'s thread
    in a run).
    """
    rows = host_rows(batch_size, shard)
    prepared = _prepared(store, task_name, split)
    if prepared is not None:
        if not len(prepared):
            raise ValueError(f"{prepared.directory}: the training split has no examples")
        return _prepared_train_batches(
            prepared, batch_size, rows, device_keys, seed, start_step, shuffle
        )
    return _tf_data_train_batches(task_name, split, batch_size, rows, device_keys, seed,
                                  start_step, shuffle)  # fmt: skip


def _tf_data_train_batches(
    task_name: str,
    split: str,
    batch_size: int,
    rows: slice,
    device_keys: Sequence[str],
    seed: int,
    start_step: int,
    shuffle: bool,
) -> Iterator[dict[str, np.ndarray]]:
    """This host's `rows` of the batches of a task or mixture without a store."""
    dataset = _examples(task_name, split).cache()
    if shuffle:
        dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.repeat().batch(batch_size, drop_remainder=True)
    dataset = dataset.skip(start_step).prefetch(2)
    for batch in tf_iterators.numpy_iterator(dataset):
        out = {key: batch[key][rows] for key in device_keys if key != "example_mask"}
        out["example_mask"] = np.ones([rows.stop - rows.start], np.int32)
        yield out


def _prepared_train_batches(
    prepared: PreparedSplit,
    batch_size: int,
    rows: slice,
    device_keys: Sequence[str],
    seed: int,
    step: int,
    shuffle: bool = True,
) -> Iterator[dict[str, np.ndarray]]:
    """This host's `rows` of the global batches of `batch_size` from `step` on."""
    keys = [key for key in device_keys if key != "example_mask"]
    permutations = {}
    while True:
        positions = step * batch_size + np.arange(rows.start, rows.stop, dtype=np.int64)
        indices = training_indices(seed, len(prepared), positions, permutations, shuffle)
        batch = prepared.rows(indices, keys)
        batch["example_mask"] = np.ones([rows.stop - rows.start], np.int32)
        yield batch
        step += 1


def eval_batches(
    task_name: str,
    split: str,
    batch_size: int,
    device_keys: Sequence[str],
    shard: seqio.ShardInfo | None = None,
    store: PreparedStore | None = None,
) -> Iterator[tuple[dict, dict]]:
    """(device batch, host batch) in order; the last batch padded, `example_mask` 0.

    The device batch is this host's `shard` rows of the padded global batch,
    [batch_size / shard.num_shards, ...]. The host batch holds every feature,
    strings included, for all real rows of the global batch: the scores come
    back whole, so any host can decode.
    """
    rows = host_rows(batch_size, shard)
    prepared = _prepared(store, task_name, split)
    if prepared is not None:
        batches = (
            prepared.block(start, start + batch_size, prepared.keys)
            for start in range(0, len(prepared), batch_size)
        )
    else:
        dataset = _examples(task_name, split).batch(batch_size).prefetch(2)
        batches = tf_iterators.numpy_iterator(dataset)
    for batch in batches:
        real = len(batch[device_keys[0]])  # rows of the last batch may be fewer
        device = {}
        for key in device_keys:
            if key == "example_mask":
                continue
            value = batch[key]
            pad = [(0, batch_size - real)] + [(0, 0)] * (value.ndim - 1)
            device[key] = np.pad(value, pad)[rows]
        device["example_mask"] = (np.arange(batch_size) < real).astype(np.int32)[rows]
        yield device, batch
