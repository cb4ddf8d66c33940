"""A tf.data pipeline read from Python, without tf.data's autotuning thread.

TensorFlow 2.21 gives each iterator of a dataset with autotuning on (tf.data's default)
a model thread, `Model::OptimizeLoop`, that sleeps between optimisations for a period
that doubles as the iterator runs. Deleting the iterator joins that thread, and now and
then the join waits the sleep out instead of the cancellation waking it: the full-size
ChID store (a minute of reading) ended 25 to 56 s after its last example in about one
run in four, the process idle, its main thread in `RootDataset::Iterator::~Iterator`
waiting on `UnboundedThreadPool::LogicalThreadWrapper` and the model thread in
`Model::OptimizeLoop`'s timed wait (py-spy and gdb, 2026-11-29; CHANGELOG.md,
2026-11-29). Without autotuning there is no model thread, and the elements and their order
are the same. What else changes: a `map` or `interleave` asked for `AUTOTUNE` runs at
tf.data's default parallelism (the core count, at most 16), a `prefetch(AUTOTUNE)`
buffer is grown by tf.data's simpler buffer tuner, and tf.data does not rewrite plain
`map`s into parallel ones nor inject a `prefetch` (those rewrites need autotuning). On
full-size ChID and CMRC 2018 this cost nothing measurable (CHANGELOG.md).

Every pipeline cmrcx reads to its end goes without it: from Python through
`numpy_iterator` (the prepared store's build, the batches of a split without a store) or
`without_autotune` (the records read back from TFDS), and the counts taken with `reduce`
(`Dataset.reduce`, which on a CPU runs its own finalized, autotuned iterator too).
"""

from __future__ import annotations


def without_autotune(dataset):
    """`dataset` with tf.data's autotuning (and so its model thread) off."""
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def numpy_iterator(dataset):
    """`dataset.as_numpy_iterator()` of `without_autotune(dataset)`."""
    return without_autotune(dataset).as_numpy_iterator()


def reduce(dataset, initial, function):
    """`dataset.reduce(initial, function)` of `without_autotune(dataset)`, as numpy."""
    return without_autotune(dataset).reduce(initial, function).numpy()
