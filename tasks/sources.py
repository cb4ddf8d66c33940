"""The data source of every cmrcx task read from official files: a split in file order.

SeqIO (0.0.20) calls a `seqio.FunctionDataSource`'s function as ``fn(split,
shuffle_files)`` without a seed and as ``fn(split, shuffle_files, seed)`` with one, and
refuses a function that cannot take the seed. `seqio.Evaluator` always passes one (42 by
default), as does a mixture's sampling, so every source must accept it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import seqio
import tensorflow as tf


class FileOrderSource(seqio.FunctionDataSource):
    """``read_split(split)``'s examples, in the official file's order, for any shuffle/seed.

    The order is the data's: ``example_index`` / ``line_number`` and the submission files
    are built from it, and scoring pairs predictions with records by it. So neither
    ``shuffle`` nor ``seed`` reorders the source: ``get_dataset(split, shuffle, seed)``
    gives the same examples in the same order for every seed, and for none. A seed does
    what it is for elsewhere: `seqio.Task.get_dataset` shuffles the preprocessed examples
    with it when ``shuffle=True`` and seeds stochastic preprocessors, a `seqio.Mixture`
    samples its tasks with it, and cmrcx's runner shuffles training examples itself
    (`cmrcx.training.input_pipeline`, from RunConfig.seed).
    """

    def __init__(self, read_split: Callable[[str], tf.data.Dataset], splits: Iterable[str]):
        def in_file_order(split: str, shuffle_files: bool, seed: int | None = None):
            del shuffle_files, seed  # file order whatever is asked: see the class docstring
            return read_split(split)

        super().__init__(in_file_order, splits=splits)
