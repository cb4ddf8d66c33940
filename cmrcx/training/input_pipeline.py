"""SeqIO task -> numpy batches for the trainer (host side).

Training: the task's examples (windows) are cached once, shuffled with a fixed
seed each epoch and repeated, so the order is a pure function of (seed, step):
a run resumed at step k skips k batches and sees exactly what an uninterrupted
run sees. Evaluation: in order, the last batch padded to full size with
`example_mask` 0, never dropped, so there is one compiled shape.

Multi-host: every host builds the same global batch and keeps only its rows, a
`seqio.ShardInfo` of the batch (`host_shard`). The examples are deliberately not
sharded at the source (SeqIO's other use of ShardInfo): each host shuffling its
own part would make the batches, and so the losses, depend on the host count.
The price is that every host preprocesses the whole split, which for CMRC 2019
(~100k blanks, about 1.6 times as many windows) is small next to training.

Numeric features go to the device; strings (`context_id`) stay on the host.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import jax
import numpy as np
import seqio
import tensorflow as tf

# Windows kept in memory for shuffling: CMRC 2019 train has ~100k blanks and about
# 1.6 times as many windows (one per blank and window holding it), ~160k at 512/128.
SHUFFLE_BUFFER = 200_000


def _examples(task_name: str, split: str) -> tf.data.Dataset:
    task = seqio.get_mixture_or_task(task_name)
    return task.get_dataset(sequence_length=None, split=split, shuffle=False, use_cached=False)


def count_examples(task_name: str, split: str) -> int:
    """Number of model examples (windows) in a split: what the schedule counts."""
    return int(_examples(task_name, split).reduce(0, lambda n, _: n + 1).numpy())


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
) -> Iterator[dict[str, np.ndarray]]:
    """Endless shuffled batches; `start_step` batches are skipped (resume).

    `batch_size` is global. Each array is [batch_size / shard.num_shards, ...]:
    this host's `shard` rows of the global batch (all rows when `shard` is None).
    """
    rows = host_rows(batch_size, shard)
    dataset = _examples(task_name, split).cache()
    dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.repeat().batch(batch_size, drop_remainder=True)
    dataset = dataset.skip(start_step).prefetch(2)
    for batch in dataset.as_numpy_iterator():
        out = {key: batch[key][rows] for key in device_keys if key != "example_mask"}
        out["example_mask"] = np.ones([rows.stop - rows.start], np.int32)
        yield out


def eval_batches(
    task_name: str,
    split: str,
    batch_size: int,
    device_keys: Sequence[str],
    shard: seqio.ShardInfo | None = None,
) -> Iterator[tuple[dict, dict]]:
    """(device batch, host batch) in order; the last batch padded, `example_mask` 0.

    The device batch is this host's `shard` rows of the padded global batch,
    [batch_size / shard.num_shards, ...]. The host batch holds every feature,
    strings included, for all real rows of the global batch: the scores come
    back whole, so any host can decode.
    """
    rows = host_rows(batch_size, shard)
    dataset = _examples(task_name, split).batch(batch_size).prefetch(2)
    for batch in dataset.as_numpy_iterator():
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
