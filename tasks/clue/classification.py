"""SeqIO tasks for CLUE's classification family: the table in a loop, one helper.

`register(vocabulary_name, vocab_file, data_dirs)` registers, for every row of
`cmrcx.benchmarks.clue.tasks.TASKS` whose official folder is in ``data_dirs``, the task
``<row name>_<vocabulary_name>`` (e.g. ``clue_afqmc_bert_chinese``, ``clue_tnews11_tiny``),
and the mixtures ``clue_classification`` and ``clue`` over them. A row without a data dir
is not registered (asking for it is seqio's "not registered" error); each split's file is
read, and its TFDS copy prepared, only when that split is first asked for.

Pipeline per record of the `clue` TFDS builder (``text_a``, ``text_b`` already built
the baseline's way: WSC spans marked, CSL keywords joined):
  1. `tokenize_pair`: the ids of both texts (`WordPieceVocabulary.encode_tf`; for the
     "xlnet" input layout of `cmrcx.vocab.layouts`, `XLNetVocabulary`'s).
  2. `classification_inputs`: both texts cut by the BERT runner's rule (`kept_lengths`)
     and framed by the family's layout (`cmrcx.vocab.layouts` `Layout.pair`): ``[CLS] a
     [SEP] b [SEP]`` (``[CLS] a [SEP]`` when b has no tokens) padded to ``max_length``
     (the "xlnet" layout: ``a <sep> b <sep> <cls>``, padded on the left); ``label`` = the class
     index, -1 in the test split; ``id`` (JSON text, `cmrcx.datasets.clue.record_id`)
     and ``line_number`` carried for the submission writer.

Predictions are class indices (argmax over the head's ``num_classes`` logits, in the
table's label order); `label_postprocessor` turns them, and the targets, into the
official label strings, which the table's metric (accuracy) compares.

Splits keep the table's names: "train", "validation", "test" (diagnostics: "test" only).
Mixtures: both list every registered task, rated by its number of training examples
(`train_examples_rate`, T5's "proportional" mixing; tasks without a train split get 0
and are skipped by a train mixture). ``clue`` is the benchmark's mixture and will also
hold the span / multiple-choice families when they are registered; for now it equals
``clue_classification``.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Mapping

import seqio
import tensorflow as tf

from cmrcx.benchmarks.clue import metrics as clue_metrics
from cmrcx.benchmarks.clue.submission import labels_from_indices
from cmrcx.benchmarks.clue.tasks import TASKS, ClueTask, get_task
from cmrcx.datasets import clue as clue_tfds
from cmrcx.tasks import task_name
from cmrcx.tasks.sources import FileOrderSource
from cmrcx.vocab import layouts

MIXTURE_NAMES = ("clue_classification", "clue")
# The table's `metric` -> a `(targets, predictions) -> dict` function.
METRIC_FNS = {"accuracy": clue_metrics.accuracy}
# Integer features other than token ids (token types, mask, label): no vocabulary.
_NUMBERS = seqio.PassThroughVocabulary(size=0)


# --- Preprocessors ----------------------------------------------------------------------


def tokenize_pair(dataset: tf.data.Dataset, vocabulary: seqio.Vocabulary) -> tf.data.Dataset:
    """Adds the ids of both texts (WordPiece; XLNet's SentencePiece for the "xlnet" layout).

    {"text_a": "怎么还款", "text_b": "如何还钱", ...} ->
    {..., "ids_a": [怎, 么, 还, 款], "ids_b": [如, 何, 还, 钱]} (int32 ids; "" gives []).
    """

    def tokenize(example):
        ids = vocabulary.encode_tf(tf.stack([example["text_a"], example["text_b"]]))
        return {**example, "ids_a": ids[0], "ids_b": ids[1]}

    return dataset.map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)


def kept_lengths(len_a, len_b, max_length: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Token counts of (a, b) the BERT runner keeps, as TF ops (any broadcastable shapes).

    A pair (``len_b > 0``) is cut as `cmrcx.benchmarks.clue.inputs.truncate_seq_pair`
    cuts it to ``max_length - 3`` tokens: the longer side loses its last token, b on
    ties, until the two fit. In closed form, with room = max_length - 3: a keeps
    ``min(len_a, max(room - len_b, ceil(room / 2)))`` and b
    ``min(len_b, max(room - len_a, floor(room / 2)))``. A single text keeps its first
    ``max_length - 2`` tokens.

    >>> [int(n) for n in kept_lengths(5, 2, 7)]  # room 4: a loses 3
    [2, 2]
    >>> [int(n) for n in kept_lengths(9, 0, 7)]  # single: 7 - 2
    [5, 0]
    """
    len_a = tf.convert_to_tensor(len_a, tf.int32)
    len_b = tf.convert_to_tensor(len_b, tf.int32)
    room = max_length - 3
    pair_a = tf.minimum(len_a, tf.maximum(room - len_b, (room + 1) // 2))
    pair_b = tf.minimum(len_b, tf.maximum(room - len_a, room // 2))
    single_a = tf.minimum(len_a, max_length - 2)
    is_pair = len_b > 0
    return tf.where(is_pair, pair_a, single_a), tf.where(is_pair, pair_b, tf.zeros_like(len_b))


def classification_inputs(
    dataset: tf.data.Dataset,
    *,
    layout: layouts.Layout,
    max_length: int,
    ids: layouts.SpecialIds,
) -> tf.data.Dataset:
    """The encoder input of the baseline's ``convert_single_example``, fixed length: the
    texts cut by the BERT runner's rule (`kept_lengths`), then framed by ``layout``.

    {"ids_a": [怎, 么, 还, 款], "ids_b": [如, 何], "label_index": 1, "id": "0",
     "line_number": 1, ...} with max_length 8, the "bert" layout ->
    {"input_ids": [[CLS], 怎, 么, 还, [SEP], 如, 何, [SEP]],
     "token_type_ids": [0, 0, 0, 0, 0, 1, 1, 1], "input_mask": [1] * 8,
     "label": 1, "id": "0", "line_number": 1}
    (the "xlnet" layout: [怎, 么, 还, <sep>, 如, 何, <sep>, <cls>], types [0, 0, 0, 0, 1,
    1, 1, 2], padded on the left; CLUE's baselines/models/xlnet/classifier_utils.py).
    The second separator is there only when b keeps a token, as in the runner
    (``if tokens_b:``).
    """

    def frame(example):
        ids_a, ids_b = example["ids_a"], example["ids_b"]
        keep_a, keep_b = kept_lengths(tf.size(ids_a), tf.size(ids_b), max_length)
        input_ids, token_type_ids, input_mask = layout.pair(
            ids_a[:keep_a], ids_b[:keep_b], ids, max_length
        )
        return {
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "input_mask": input_mask,
            "label": example["label_index"],
            "id": example["id"],
            "line_number": example["line_number"],
        }

    return dataset.map(frame, num_parallel_calls=tf.data.AUTOTUNE)


# --- Postprocessing ---------------------------------------------------------------------


def label_postprocessor(output, example=None, is_target=False, *, task: ClueTask) -> str:
    """A class index -> the official label string (TNEWS: 5 -> "106").

    Predictions: ``output`` is the predicted class index. Targets (``is_target``): the
    example's ``label`` index (``output`` when no example is given). An unlabelled
    (test) target, -1, is a ValueError: there is nothing to score against.
    """
    index = example["label"] if is_target and example is not None else output
    if is_target and int(index) == -1:
        raise ValueError(f"{task.name}: the example has no label (test split); nothing to score")
    return labels_from_indices(task, [index])[0]


# --- Registration -----------------------------------------------------------------------


class ClueSource(FileOrderSource):
    """The `clue` TFDS records of one task's official folder, one split at a time, in file
    order whatever the shuffle or seed (`FileOrderSource`; the input pipeline shuffles).

    `num_input_examples` prepares the split it is asked about and reads its size from
    TFDS, so examples-proportional mixing rates cost nothing until they are needed.
    """

    def __init__(self, task: ClueTask, data_dir: str, cache_dir: str | None):
        self._task, self._data_dir, self._cache_dir = task, data_dir, cache_dir

        def official_split(split: str) -> tf.data.Dataset:
            return clue_tfds.load_split(task, data_dir, split, cache_dir)

        super().__init__(official_split, splits=list(task.split_files))

    def num_input_examples(self, split: str) -> int:
        return clue_tfds.num_examples(self._task, self._data_dir, split, self._cache_dir)


def train_examples_rate(task: seqio.Task, versions: int = 1) -> float:
    """Mixing rate: the task's training examples (as `seqio.mixing_rate_num_examples`),
    divided among the ``versions`` registered tasks of its data set (tnews10 and tnews11
    read the same train.json), so every training set counts once. 0 without a train split.

    Reading a rate prepares the task's train split (SeqIO computes rates whenever a
    mixture's dataset is built, whatever the split); evaluation goes task by task.
    """
    if "train" not in task.splits:
        return 0.0
    return task.num_input_examples("train") / versions


def register(
    vocabulary_name: str,
    vocab_file: str,
    data_dirs: Mapping[str, str],
    *,
    max_length: int | None = 128,
    lower_case: bool = True,
    tfds_cache_dir: str | None = None,
    layout: str | layouts.Layout = "bert",
) -> list[str]:
    """Registers a SeqIO task per task of ``data_dirs`` and the two CLUE mixtures.

    Args:
      vocabulary_name: suffix of the task names, e.g. "bert_chinese".
      vocab_file: the ``vocab.txt`` (BERT) or ``spiece.model`` (XLNet) of the layout.
      data_dirs: table task name (``"clue_afqmc"``) -> its unpacked official folder
        (``.../afqmc_public``). Rows not named here are not registered.
      max_length: encoder length of every task (one length, so the mixtures batch).
        None takes each row's own ``max_length``, the paper's Table 7 (128; CSL 256):
        right for one-task runs, but then CSL's examples are longer than the others'.
      lower_case: lower-case before WordPiece (the Chinese BERTs do).
      tfds_cache_dir: where prepared splits go (default ~/.cache/cmrcx/tfds).
      layout: the model family's input layout (`cmrcx.vocab.layouts`, or its name):
        "bert" ([CLS] a [SEP] b [SEP], WordPiece) or "xlnet" (a <sep> b <sep> <cls>
        padded on the left).

    Returns:
      The registered task names, in table order. Registering again with the same
      vocabulary name replaces its tasks (and drops those no longer given a data dir);
      the mixtures always point at the latest registration.
    """
    rows = [get_task(name) for name in data_dirs]  # KeyError listing the known names
    if not rows:
        raise ValueError("register: no data dirs given, so no CLUE task to register")
    if max_length is not None and max_length < 3:
        raise ValueError(f"max_length {max_length} leaves no room for [CLS] a [SEP]")
    layout = layouts.layout(layout)
    vocabulary = layout.vocabulary(vocab_file, lower_case)
    tokenize = functools.partial(tokenize_pair, vocabulary=vocabulary)
    versions = collections.Counter(row.dataset for row in rows)
    names, rates = [], []
    for row in TASKS.values():
        name = task_name(row.name, vocabulary_name)
        seqio.TaskRegistry.remove(name)
        if row.name not in data_dirs:
            continue
        frame = functools.partial(
            classification_inputs,
            layout=layout,
            max_length=max_length or row.max_length,
            ids=layout.special_ids(vocabulary),
        )
        seqio.TaskRegistry.add(
            name,
            source=ClueSource(row, data_dirs[row.name], tfds_cache_dir),
            preprocessors=[tokenize, frame],
            output_features={
                "input_ids": seqio.Feature(vocabulary, add_eos=False),
                "token_type_ids": seqio.Feature(_NUMBERS, add_eos=False),
                "input_mask": seqio.Feature(_NUMBERS, add_eos=False),
                "label": seqio.Feature(_NUMBERS, add_eos=False, rank=0),
            },
            postprocess_fn=functools.partial(label_postprocessor, task=row),
            metric_fns=[METRIC_FNS[row.metric]],
        )
        names.append(name)
        rates.append((name, functools.partial(train_examples_rate, versions=versions[row.dataset])))
    for mixture in MIXTURE_NAMES:
        seqio.MixtureRegistry.remove(mixture)
        seqio.MixtureRegistry.add(mixture, rates)
    return names
