"""The benchmarks' official semantics, in pure Python (no JAX, no TensorFlow).

One sub-package per benchmark (``clue/``; ``cmrc2019/`` and ``lot/`` to follow): the
official file formats with strict validation, input construction as the authors'
baselines do it, the official metrics and the submission / prediction file writers.
Everything here imports in milliseconds, so ``python -m cmrcx.score`` and the tests stay
fast, and the SeqIO / TFDS / model layers build on it rather than re-reading the rules.
"""
