"""SeqIO tasks for CMRC 2019 (sentence cloze), one registration helper.

`register(vocabulary_name, vocab_file, {"cmrc2019": data_dir})` registers the task
`cmrc2019_<vocabulary_name>` (e.g. `cmrc2019_bert_chinese`, `cmrc2019_bert_multilingual`,
`cmrc2019_tiny`) and the mixture `cmrc2019`. The vocabulary is data, chosen by
gin at the entry point; no task block is repeated per vocabulary.

Pipeline, per passage (TFDS record) -> many windows (model examples):
  1. `tokenize_passage`: one WordPiece word per passage character, as the authors'
     script makes them; `[BLANKk]` -> `[unusedk]`; WordPiece (a TF op). Choices are
     tokenized whole and capped at `max_candidate_tokens` (64 in the paper setup).
  2. `training_windows` (train) or `scoring_windows` (eval): numpy windowing
     (`cmrcx.benchmarks.cmrc2019.windows`), one example per (candidate, window).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import seqio
import tensorflow as tf

from cmrcx.benchmarks.cmrc2019 import metrics as cmrc2019_metrics
from cmrcx.benchmarks.cmrc2019 import windows as cmrc2019_windows
from cmrcx.benchmarks.cmrc2019.official_format import PASSAGE_REWRITES
from cmrcx.common.errors import ConfigError
from cmrcx.datasets import cmrc2019 as cmrc2019_tfds
from cmrcx.tasks import task_name
from cmrcx.tasks.sources import FileOrderSource
from cmrcx.vocab import layouts
from cmrcx.vocab.wordpiece import WordPieceVocabulary

MIXTURE_NAME = "cmrc2019"
# The authors' baseline replaces [BLANK1]..[BLANK15]; the official data has up to
# 15 blanks a passage. 32 leaves room and matches `[unused1..32]` in every BERT vocab.
MAX_BLANKS = 32
TOKEN_FEATURES = cmrc2019_windows.TOKEN_FEATURES
WINDOW_FEATURES = cmrc2019_windows.WINDOW_FEATURES


def window_ids(vocabulary: WordPieceVocabulary, max_blanks: int) -> layouts.SpecialIds:
    """BERT's special ids with the blank markers [unused1] to [unused<max_blanks>]."""
    try:
        return layouts.BERT.special_ids(vocabulary, num_blanks=max_blanks)
    except KeyError as missing:
        raise ConfigError(
            f"{vocabulary.vocab_file}: CMRC 2019 marks its blanks with [unused1] to "
            f"[unused{max_blanks}] (the authors' script), and this vocabulary has {missing}"
        ) from None


def tokenize_passage(dataset: tf.data.Dataset, vocabulary, max_candidate_tokens: int):
    """Adds `passage_ids` and ragged `choice_ids`; counts `num_blanks`.

    {"context": "他[BLANK1]。100", "choices": ["笑了", "100分"], ...} ->
    {..., "passage_ids": [他, [unused1], 。, 1, 0, 0], "choice_ids": [[笑, 了], [100, 分]],
     "num_blanks": 1}
    The passage is split into characters as the authors' script does (see
    `official_format.CHARACTER_SPACING`); the candidates are WordPieced whole.
    """

    def tokenize(example):
        context = marked = example["context"]
        for pattern, rewrite in PASSAGE_REWRITES:
            marked = tf.strings.regex_replace(marked, pattern, rewrite)
        choice_ids = vocabulary.encode_tf(example["choices"])[:, :max_candidate_tokens]
        return {
            **example,
            "passage_ids": vocabulary.encode_tf(marked),
            "choice_ids": choice_ids,
            "num_blanks": tf.size(tf.strings.split(context, "[BLANK")) - 1,
        }

    return dataset.map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)


def _windows(dataset, *, ids, max_length, doc_stride, training: bool):
    """One example per (candidate, window); see `cmrcx.benchmarks.cmrc2019.windows`."""
    extra = "target_blank" if training else "choice_index"
    keys = (*WINDOW_FEATURES, extra)
    max_blanks = len(ids.blank_markers)

    def make(passage_ids, choice_values, choice_splits, answers, num_blanks):
        choice_ids = np.split(choice_values, choice_splits[1:-1])
        if training:
            out = cmrc2019_windows.training_examples(
                passage_ids, choice_ids, answers, ids, max_length, doc_stride
            )
        else:
            out = cmrc2019_windows.scoring_examples(
                passage_ids, choice_ids, int(num_blanks), ids, max_length, doc_stride
            )
        return tuple(out[key].astype(np.int32) for key in keys)

    def to_windows(example):
        arrays = tf.numpy_function(
            make,
            [
                example["passage_ids"],
                example["choice_ids"].flat_values,
                example["choice_ids"].row_splits,
                example["answers"],
                example["num_blanks"],
            ],
            [tf.int32] * len(keys),
            stateful=False,
        )
        count = tf.shape(arrays[0])[0]
        out = {}
        for key, value in zip(keys, arrays, strict=True):
            width = max_length if key in TOKEN_FEATURES else max_blanks
            out[key] = tf.ensure_shape(value, [None] if key == extra else [None, width])
        out["context_id"] = tf.fill([count], example["context_id"])
        out["num_blanks"] = tf.fill([count], tf.cast(example["num_blanks"], tf.int32))
        out["num_choices"] = tf.fill([count], tf.size(example["choices"]))
        return tf.data.Dataset.from_tensor_slices(out)

    return dataset.flat_map(to_windows)


def training_windows(dataset, **kwargs):
    return _windows(dataset, training=True, **kwargs)


def scoring_windows(dataset, **kwargs):
    return _windows(dataset, training=False, **kwargs)


def answers_postprocessor(output, example=None, is_target=False):
    """Targets: the passage's answer list; predictions pass through (decoded lists)."""
    if is_target and example is not None:
        return [int(a) for a in example["answers"]]
    return output


def register(
    vocabulary_name: str,
    vocab_file: str,
    data_dirs: Mapping[str, str],
    *,
    max_length: int = 512,
    doc_stride: int = 128,
    max_candidate_tokens: int = 64,
    max_blanks: int = MAX_BLANKS,
    tfds_cache_dir: str | None = None,
    lower_case: bool = True,
) -> list[str]:
    """Registers the training and scoring tasks for one vocabulary and the data dir
    ``data_dirs["cmrc2019"]`` (the folder of cmrc2019_train.json, ...).

    Each split's official file in `data_dir` is read (and its TFDS copy prepared) when
    that split is first asked for, so a split the run does not use is never read.
    Registering again (another data dir or length) replaces the earlier tasks.
    Returns [training task name, scoring task name] (``cmrc2019_<vocabulary_name>`` and
    ``cmrc2019_<vocabulary_name>_scoring``).
    """
    if set(data_dirs) != {"cmrc2019"}:
        raise ValueError(f"data_dirs {dict(data_dirs)}: CMRC 2019 takes {{'cmrc2019': DATA_DIR}}")
    data_dir = data_dirs["cmrc2019"]
    if max_candidate_tokens + 3 >= max_length:
        raise ValueError(
            f"max_length {max_length} leaves no room for the passage after a candidate of "
            f"up to {max_candidate_tokens} tokens plus [CLS] and two [SEP]"
        )
    vocabulary = WordPieceVocabulary(vocab_file, lower_case=lower_case)
    ids = window_ids(vocabulary, max_blanks)

    def official_split(split: str) -> tf.data.Dataset:
        return cmrc2019_tfds.load_split(data_dir, split, tfds_cache_dir)

    # File order for any shuffle / seed (training shuffles windows): `FileOrderSource`.
    source = FileOrderSource(official_split, splits=list(cmrc2019_tfds.SPLIT_FILES))
    output_features = {"input_ids": seqio.Feature(vocabulary, add_eos=False)}
    tokenize = functools.partial(
        tokenize_passage, vocabulary=vocabulary, max_candidate_tokens=max_candidate_tokens
    )
    window_args = dict(ids=ids, max_length=max_length, doc_stride=doc_stride)
    names = []
    for training in (True, False):
        name = task_name("cmrc2019", vocabulary_name, "" if training else "scoring")
        seqio.TaskRegistry.remove(name)
        windowing = training_windows if training else scoring_windows
        seqio.TaskRegistry.add(
            name,
            source=source,
            preprocessors=[tokenize, functools.partial(windowing, **window_args)],
            output_features=output_features,
            postprocess_fn=answers_postprocessor,
            metric_fns=[cmrc2019_metrics.qac_pac],
        )
        names.append(name)
    seqio.MixtureRegistry.remove(MIXTURE_NAME)
    seqio.MixtureRegistry.add(MIXTURE_NAME, [(names[0], 1.0)])
    return names
