"""The benchmarks' official semantics, in pure Python (no JAX, no TensorFlow).

One sub-package per benchmark (``cmrc2019/``, ``clue/``, ``lot/``): the official file
formats with strict validation, input construction as the authors' baselines do it, the
official metrics, the submission / prediction file writers, and each benchmark's file
scorers (``scoring.py``, which ``python -m cmrcx.score`` calls). Shared here: sliding
windows (``windows.py``), field validation (``records.py``) and the task names people
type (``task_names.py``).
Everything here imports in milliseconds, so ``python -m cmrcx.score`` and the tests stay
fast, and the SeqIO / TFDS / model layers build on it rather than re-reading the rules.
"""
