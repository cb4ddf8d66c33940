"""SeqIO tasks for LOT's understanding tasks, ClozeT and SenPos (the candidate pointer).

`register(vocabulary_name, vocab_file, data_dirs, *, layout, ...)` registers, for every
task named in ``data_dirs`` (``"lot_clozet"``, ``"lot_senpos"``, or the LongLM authors'
ClozeT variant ``"lot_clozet_longlm_authors"``), the task ``<task>_<vocabulary_name>``
(``lot_clozet_bert_chinese``, ``lot_senpos_longlm``) over the records of the TFDS builder
`cmrcx.datasets.lot` (the official jsonl files read unchanged), one example per record,
built by the token layout of `cmrcx.benchmarks.lot.understanding`:

  the family's input layout (`cmrcx.vocab.layouts` `Layout.pointer`): "bert" (vocab.txt),
      "gpt2" (vocab.txt, the context token last) or "t5" (spiece.model),
      input_ids, token_type_ids, input_mask [max_length]; candidate_positions,
      candidate_mask [candidates]; context_position, label [] (-1 in a test file);
      example_index [] (the record's index in the split, for decoding).
  the authors' variant (always SentencePiece),
      inputs, inputs_mask [max_length]; targets, targets_mask [max_length + 1]; the
      candidate and label features above; example_index.

ClozeT has 2 candidates; SenPos as many as the story has gaps: the candidate features are
padded to `num_candidates(...)`, the most gaps of any record of the splits present.

Metric: accuracy over 0-based indices (`cmrcx.benchmarks.lot.understanding_metrics`), a
fraction as the official eval.py prints it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import seqio
import tensorflow as tf

from cmrcx.benchmarks.lot import understanding
from cmrcx.benchmarks.lot.understanding_metrics import accuracy
from cmrcx.common.errors import DataFormatError, MissingSplitError
from cmrcx.datasets import lot as lot_tfds
from cmrcx.tasks import task_name
from cmrcx.tasks.sources import FileOrderSource
from cmrcx.vocab import layouts

TASKS = understanding.TASKS  # run task -> its LOT data task
AUTHORS = understanding.AUTHORS_TASK
SPLITS = ("train", "validation", "test")
_NUMBERS = seqio.PassThroughVocabulary(size=0)
_POINTER_FEATURES = ("candidate_positions", "candidate_mask")


@functools.lru_cache(maxsize=16)
def split_records(data_task: str, data_dir: str, split: str, cache_dir: str | None) -> tuple:
    """The records of a split in file order, read once per process (TFDS prepares it)."""
    records = tuple(lot_tfds.split_records(data_task, data_dir, split, cache_dir))
    if not records:
        raise DataFormatError(f"{data_dir}: the {split} split of LOT {data_task} has no records")
    return records


def available_splits(data_task: str, data_dir: str) -> list[str]:
    return lot_tfds.available_splits(data_task, data_dir)


def num_candidates(data_task: str, data_dir: str, cache_dir: str | None) -> int:
    """ClozeT: 2. SenPos: the most gaps of a story in the splits DATA_DIR holds."""
    if data_task == "clozet":
        return 2
    most = 1
    for split in available_splits(data_task, data_dir):
        records = split_records(data_task, data_dir, split, cache_dir)
        most = max(most, *(r.story.count(understanding.MASK) for r in records))
    return most


def _layout_fn(task: str, layout: layouts.Layout):
    if task == AUTHORS:
        return understanding.clozet_longlm_authors
    return layout.pointer(TASKS[task])


def examples(task, layout: layouts.Layout, vocabulary, records, max_length, candidates):
    """One padded feature dict per record, in order, built as it is asked for."""
    ids = layout.special_ids(vocabulary)
    encode = functools.lru_cache(maxsize=1 << 16)(lambda text: tuple(vocabulary.encode(text)))
    build = _layout_fn(task, layout)
    for index, record in enumerate(records):
        example = build(record, encode, ids, max_length)
        if task == AUTHORS:
            example = _pad_authors(example, max_length, candidates)
        else:
            example = understanding.pad_example(example, max_length, candidates)
        example["example_index"] = np.int32(index)
        yield example


def _pad_authors(example, max_length: int, candidates: int) -> dict[str, np.ndarray]:
    lengths = {"inputs": max_length, "targets": max_length + 1}
    out = {}
    for key, value in example.items():
        value = np.asarray(value, np.int32)
        if value.ndim == 1:
            size = candidates if key in _POINTER_FEATURES else lengths[key.split("_")[0]]
            value = np.pad(value, (0, size - value.size))
        out[key] = value
    return out


def signature(task: str, max_length: int, candidates: int) -> dict[str, tf.TensorSpec]:
    if task == AUTHORS:
        tokens = {"inputs": max_length, "targets": max_length + 1}
        spec = {
            f"{key}{suffix}": tf.TensorSpec((length,), tf.int32)
            for key, length in tokens.items()
            for suffix in ("", "_mask")
        }
    else:
        spec = {
            k: tf.TensorSpec((max_length,), tf.int32)
            for k in ("input_ids", "token_type_ids", "input_mask")
        }
    for key in _POINTER_FEATURES:
        spec[key] = tf.TensorSpec((candidates,), tf.int32)
    for key in ("context_position", "label", "example_index"):
        spec[key] = tf.TensorSpec((), tf.int32)
    return spec


class UnderstandingSource(FileOrderSource):
    """A split's examples in file order whatever the shuffle or seed (`FileOrderSource`;
    the input pipeline shuffles)."""

    def __init__(self, task, layout, vocabulary, data_dir, max_length, candidates, cache_dir):
        data_task = TASKS[task]

        def dataset(split: str) -> tf.data.Dataset:
            records = split_records(data_task, data_dir, split, cache_dir)
            return tf.data.Dataset.from_generator(
                lambda: examples(task, layout, vocabulary, records, max_length, candidates),
                output_signature=signature(task, max_length, candidates),
            )

        super().__init__(dataset, splits=SPLITS)
        self._data_task, self._data_dir, self._cache_dir = data_task, data_dir, cache_dir

    def num_input_examples(self, split: str) -> int:
        """Records of a split; 0 if its file is not in DATA_DIR."""
        try:
            lot_tfds.require_split(self._data_task, self._data_dir, split)
        except MissingSplitError:
            return 0
        return len(split_records(self._data_task, self._data_dir, split, self._cache_dir))


def _output_features(task: str, vocabulary) -> dict[str, seqio.Feature]:
    if task == AUTHORS:
        keys = {"inputs": vocabulary, "targets": vocabulary}
        keys.update({"inputs_mask": _NUMBERS, "targets_mask": _NUMBERS})
    else:
        keys = {"input_ids": vocabulary, "token_type_ids": _NUMBERS, "input_mask": _NUMBERS}
    features = {k: seqio.Feature(v, add_eos=False) for k, v in keys.items()}
    for key in _POINTER_FEATURES:
        features[key] = seqio.Feature(_NUMBERS, add_eos=False)
    for key in ("context_position", "label"):
        features[key] = seqio.Feature(_NUMBERS, add_eos=False, rank=0)
    return features


def register(
    vocabulary_name: str,
    vocab_file: str,
    data_dirs: Mapping[str, str],
    *,
    layout: str | layouts.Layout = "bert",
    max_length: int = 512,
    lower_case: bool = True,
    tfds_cache_dir: str | None = None,
) -> list[str]:
    """Registers a SeqIO task per task named in ``data_dirs``.

    Args:
      data_dirs: task (``"lot_clozet"``, ``"lot_senpos"``, ``"lot_clozet_longlm_authors"``)
        -> the folder of its official train.jsonl / val.jsonl / test.jsonl.
      layout: the family's input layout (`cmrcx.vocab.layouts`, or its name): "bert"
        (vocab_file a BERT vocab.txt), "gpt2" (the same vocabulary, laid out for a causal
        decoder) or "t5" (an spiece.model); the authors' variant is T5's whatever is given.
      max_length: tokens per example (the paper's 512); the authors' targets are one
        longer (the gold sentinel).

    Returns the registered names.
    """
    names = []
    for task, data_dir in data_dirs.items():
        if task not in TASKS:
            raise ValueError(f"LOT understanding task {task!r}: use one of {', '.join(TASKS)}")
        kind = layouts.T5 if task == AUTHORS else layouts.layout(layout)
        vocabulary = kind.vocabulary(vocab_file, lower_case)
        candidates = num_candidates(TASKS[task], data_dir, tfds_cache_dir)
        name = task_name(task, vocabulary_name)
        seqio.TaskRegistry.remove(name)
        source = UnderstandingSource(
            task, kind, vocabulary, data_dir, max_length, candidates, tfds_cache_dir
        )
        seqio.TaskRegistry.add(
            name,
            source=source,
            preprocessors=[],
            output_features=_output_features(task, vocabulary),
            metric_fns=[accuracy],
        )
        names.append(name)
    return names


__all__ = ["TASKS", "register", "split_records", "task_name"]
