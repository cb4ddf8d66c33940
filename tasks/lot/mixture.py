"""The SeqIO mixture `lot`: LOT's four tasks as text-to-text for one T5-family model.

`register(vocabulary_name, spiece_model, data_dirs, *, rates=None, ...)` registers, for
``data_dirs`` = {"lot_clozet": DIR, "lot_senpos": DIR, "lot_plotcom": DIR, "lot_outgen":
DIR} (each the folder of that task's official train.jsonl, val.jsonl, test.jsonl), the
tasks ``<task>_<vocabulary_name>_t2t`` (`lot_clozet_longlm_t2t`, ...) and the mixture
``lot`` of the four, each at its rate. Every task's example is
`cmrcx.benchmarks.lot.text_to_text.example` of one record, in file order:

  inputs [<= max_length], targets [<= target_length] (int32 ids, EOS last);
  candidate_ids [candidates] (the candidates' sentinel ids; empty for PlotCom, OutGen);
  label [] (the 0-based right candidate; -1 without one, and for PlotCom, OutGen);
  example_index [] (the record's place in the split), line [] (its 1-based line), raw
  (the official JSON object as text): carried for the prediction files.

Training splits are leak-guarded (`cmrcx.benchmarks.lot.leak_guard`): every training
record telling a story of a validation or test file of the four is dropped first
(`guard_training`); `example_index` of a training example counts the kept records.

Rates (`mixture_rates`): None gives T5's "proportional" mixing, each task's rate its
number of (kept) training examples; else a rate per task ({"lot_clozet": 1.0, ...},
every task named, 0 leaves a task out of training). `training_epoch` turns the rates into
a fixed epoch (`epoch_counts`): the shortest draw in which every example of every task
with a rate comes at least once, so proportional rates give every example exactly once.

Postprocessing and metrics: ClozeT and SenPos, the predicted candidate index against
`label` with the official accuracy; PlotCom and OutGen, the generation tasks' clean-up
and official metrics (`cmrcx.tasks.lot.generation`).
"""

from __future__ import annotations

import fractions
import functools
import json
import math
from collections.abc import Mapping

import numpy as np
import seqio
import tensorflow as tf

from cmrcx.benchmarks.lot import leak_guard, text_to_text
from cmrcx.benchmarks.lot.understanding_metrics import accuracy
from cmrcx.common.errors import MissingSplitError
from cmrcx.datasets import lot as lot_tfds
from cmrcx.tasks import task_name
from cmrcx.tasks.lot import generation as generation_tasks
from cmrcx.tasks.lot import understanding as understanding_tasks
from cmrcx.tasks.sources import FileOrderSource
from cmrcx.vocab import layouts
from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary

MIXTURE_NAME = "lot"
ROLE = "t2t"  # <task>_<vocabulary_name>_t2t
# The mixture's tasks (RunConfig.mixture_rates keys, the metric prefixes) -> LOT data task.
ROWS = {"lot_clozet": "clozet", "lot_senpos": "senpos", "lot_plotcom": "plotcom",
        "lot_outgen": "outgen"}  # fmt: skip
UNDERSTANDING_ROWS = ("lot_clozet", "lot_senpos")
SPLITS = ("train", "validation", "test")
HELD_OUT_SPLITS = ("validation", "test")
_NUMBERS = seqio.PassThroughVocabulary(size=0)


def t2t_task_name(row: str, vocabulary_name: str) -> str:
    """`lot_clozet_longlm_t2t`: the mixture's task of `row` for a vocabulary."""
    return task_name(row, vocabulary_name, ROLE)


# --- Records and the leak guard ---------------------------------------------------------


def _check_rows(data_dirs: Mapping[str, str]) -> None:
    if set(data_dirs) != set(ROWS):
        raise ValueError(
            f"the lot mixture needs a folder for each of {', '.join(ROWS)}; got "
            f"{', '.join(data_dirs) or 'none'}"
        )


def split_records(row: str, data_dir: str, split: str, cache_dir: str | None) -> tuple:
    """A split's records in file order (prepared once through the `lot` TFDS builder)."""
    return understanding_tasks.split_records(ROWS[row], data_dir, split, cache_dir)


def guard_training(
    data_dirs: Mapping[str, str], cache_dir: str | None = None
) -> leak_guard.GuardReport:
    """Every task's training records without those telling a validation/test story of
    any of the four (`leak_guard.guard`). Every train.jsonl is required (MissingSplitError
    naming it); validation and test files are read where present."""
    _check_rows(data_dirs)
    training, held_out = {}, {}
    for row, data_dir in data_dirs.items():
        lot_tfds.require_split(ROWS[row], data_dir, "train")
        training[ROWS[row]] = split_records(row, data_dir, "train", cache_dir)
        present = lot_tfds.available_splits(ROWS[row], data_dir)
        held_out[ROWS[row]] = {
            split: split_records(row, data_dir, split, cache_dir)
            for split in HELD_OUT_SPLITS
            if split in present
        }
    return leak_guard.guard(training, held_out)


# --- Rates and the training epoch -------------------------------------------------------


def mixture_rates(rates, sizes: Mapping[str, int]) -> dict[str, float]:
    """The rate of each task: `sizes` (T5's proportional mixing) when `rates` is None,
    else `rates` ({task: rate} or (task, rate) pairs naming every task of ROWS; rates
    finite and >= 0, not all 0). ValueError naming what is wrong."""
    if rates is None:
        return {row: float(sizes[row]) for row in ROWS}
    rates = dict(rates)
    if set(rates) != set(ROWS):
        missing, unknown = set(ROWS) - set(rates), set(rates) - set(ROWS)
        detail = "; ".join(
            text
            for text in (
                f"missing {', '.join(sorted(missing))}" if missing else "",
                f"unknown {', '.join(sorted(map(str, unknown)))}" if unknown else "",
            )
            if text
        )
        raise ValueError(f"mixture rates must name each of {', '.join(ROWS)} ({detail})")
    out = {}
    for row in ROWS:
        value = rates[row]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"mixture rate of {row}: {value!r} is not a number")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"mixture rate of {row}: {value!r}; use a finite rate >= 0")
        out[row] = float(value)
    if not any(out.values()):
        raise ValueError("mixture rates are all 0: nothing to train on")
    return out


def epoch_counts(sizes: Mapping[str, int], rates: Mapping[str, float]) -> dict[str, int]:
    """Examples of each task in one training epoch: N in all, task i's share of it
    rate_i / sum(rates) (largest remainders, exact fractions), N the least that gives
    every task with a rate at least its size. Proportional rates give the sizes.

    >>> epoch_counts({"a": 4, "b": 2}, {"a": 4.0, "b": 2.0})
    {'a': 4, 'b': 2}
    >>> epoch_counts({"a": 4, "b": 2}, {"a": 1.0, "b": 1.0})
    {'a': 4, 'b': 4}
    >>> epoch_counts({"a": 4, "b": 2}, {"a": 1.0, "b": 0.0})
    {'a': 4, 'b': 0}
    """
    # A task without training examples (all dropped by the guard) takes no share.
    exact = {row: fractions.Fraction(rate) if sizes[row] else 0 for row, rate in rates.items()}
    total = sum(exact.values())
    if not total:
        return {row: 0 for row in rates}
    shares = {row: rate / total for row, rate in exact.items()}
    active = [row for row in rates if shares[row] > 0]
    n = max(math.ceil(sizes[row] / shares[row]) for row in active)
    quotas = {row: n * shares[row] for row in rates}
    counts = {row: math.floor(q) for row, q in quotas.items()}
    by_remainder = sorted(rates, key=lambda row: (-(quotas[row] - counts[row]), row))
    for row in by_remainder[: n - sum(counts.values())]:
        counts[row] += 1
    return counts


def training_epoch(vocabulary_name: str, seed: int) -> tf.data.Dataset:
    """One training epoch of the registered mixture `lot` (`epoch_counts` of its rates):
    task i's training examples ⌊count_i / size_i⌋ times each, plus a subset of the rest
    drawn with `seed`; tasks one after the other (the input pipeline shuffles)."""
    mixture = seqio.get_mixture_or_task(MIXTURE_NAME)
    names = {row: t2t_task_name(row, vocabulary_name) for row in ROWS}
    tasks = {row: seqio.get_mixture_or_task(name) for row, name in names.items()}
    sizes = {row: task.source.num_input_examples("train") for row, task in tasks.items()}
    counts = epoch_counts(sizes, {row: mixture.get_rate(task) for row, task in tasks.items()})
    parts = []
    for number, row in enumerate(ROWS):
        if not counts[row]:
            continue
        examples = tasks[row].get_dataset(sequence_length=None, split="train", shuffle=False)
        copies, rest = divmod(counts[row], sizes[row])
        if copies:
            parts.append(examples.repeat(copies))
        if rest:
            drawn = np.random.default_rng([seed, number]).choice(sizes[row], rest, replace=False)
            chosen = tf.constant(np.sort(drawn), tf.int32)
            parts.append(
                examples.filter(
                    lambda ex, c=chosen: tf.reduce_any(tf.equal(ex["example_index"], c))
                )
            )
    if not parts:
        raise ValueError("the lot mixture has no training example left (see the leak guard)")
    epoch = parts[0]
    for part in parts[1:]:
        epoch = epoch.concatenate(part)
    return epoch


# --- Examples ---------------------------------------------------------------------------

_SIGNATURE = {
    "inputs": tf.TensorSpec([None], tf.int32),
    "targets": tf.TensorSpec([None], tf.int32),
    "candidate_ids": tf.TensorSpec([None], tf.int32),
    "label": tf.TensorSpec([], tf.int32),
    "example_index": tf.TensorSpec([], tf.int32),
    "line": tf.TensorSpec([], tf.int32),
    "raw": tf.TensorSpec([], tf.string),
}


def examples(records, vocabulary, max_length: int, target_length: int):
    """One example per record, in order (see the module docstring)."""
    ids = layouts.T5.special_ids(vocabulary)
    encode = functools.lru_cache(maxsize=1 << 16)(lambda text: tuple(vocabulary.encode(text)))
    for index, record in enumerate(records):
        example = text_to_text.example(record, encode, ids, max_length, target_length)
        label = getattr(record, "label", None)
        example["label"] = np.int32(-1 if label is None else label)
        example["example_index"] = np.int32(index)
        example["line"] = np.int32(record.line)
        example["raw"] = json.dumps(record.raw, ensure_ascii=False)
        yield example


class MixtureSource(FileOrderSource):
    """A task's examples of a split in file order whatever the shuffle or seed
    (`FileOrderSource`; the input pipeline shuffles); training records leak-guarded."""

    def __init__(self, row, data_dir, kept, vocabulary, max_length, target_length, cache_dir):
        def records(split: str):
            if split == "train":
                return kept
            lot_tfds.require_split(ROWS[row], data_dir, split)
            return split_records(row, data_dir, split, cache_dir)

        def dataset(split: str) -> tf.data.Dataset:
            chosen = records(split)
            return tf.data.Dataset.from_generator(
                lambda: examples(chosen, vocabulary, max_length, target_length),
                output_signature=_SIGNATURE,
            )

        super().__init__(dataset, splits=SPLITS)
        self._records = records

    def num_input_examples(self, split: str) -> int:
        """Records of the split (kept training records); 0 if its file is absent."""
        try:
            return len(self._records(split))
        except MissingSplitError:
            return 0


def label_postprocessor(output, example=None, is_target=False):
    """ClozeT, SenPos: targets are the example's 0-based `label`, predictions the chosen
    candidate index (`text_to_text.constrained_choice`), as they come."""
    return int(example["label"]) if is_target else output


# --- Registration -----------------------------------------------------------------------


def register(
    vocabulary_name: str,
    spiece_model: str,
    data_dirs: Mapping[str, str],
    *,
    rates=None,
    max_length: int = 512,
    target_length: int = 512,
    tfds_cache_dir: str | None = None,
    drop_last_char_without_eos: bool = False,
    guard_report: leak_guard.GuardReport | None = None,
) -> list[str]:
    """Registers the four tasks and the mixture `lot`; returns the tasks' names (ROWS
    order). Registering again replaces them.

    Args:
      data_dirs: every task of ROWS -> the folder of its official files (train.jsonl
        required, val.jsonl / test.jsonl where present).
      rates: `mixture_rates`'s (None: proportional to the kept training examples).
      max_length, target_length: input and target ids at most, EOS included (LOT paper
        section 5.2: 512).
      guard_report: `guard_training(data_dirs, tfds_cache_dir)` if already made.
    """
    _check_rows(data_dirs)
    report = guard_report or guard_training(data_dirs, tfds_cache_dir)
    vocabulary = T5SentencePieceVocabulary(spiece_model)
    features = {key: seqio.Feature(vocabulary, add_eos=True) for key in ("inputs", "targets")}
    # Not required: the run's training task keeps inputs and targets only.
    features["candidate_ids"] = seqio.Feature(_NUMBERS, add_eos=False, required=False)
    sizes = {row: len(report.kept[ROWS[row]]) for row in ROWS}
    rate_of = mixture_rates(rates, sizes)
    names = []
    for row, data_task in ROWS.items():
        name = t2t_task_name(row, vocabulary_name)
        seqio.TaskRegistry.remove(name)
        if row in UNDERSTANDING_ROWS:
            postprocess, metrics = label_postprocessor, [accuracy]
        else:
            postprocess = functools.partial(
                generation_tasks.generation_postprocessor,
                drop_last_char=drop_last_char_without_eos,
            )
            metrics = [functools.partial(generation_tasks.official_metrics, lot_task=data_task)]
        source = MixtureSource(
            row,
            data_dirs[row],
            tuple(report.kept[data_task]),
            vocabulary,
            max_length,
            target_length,
            tfds_cache_dir,
        )
        seqio.TaskRegistry.add(
            name,
            source=source,
            preprocessors=[],
            output_features=features,
            postprocess_fn=postprocess,
            metric_fns=metrics,
        )
        names.append(name)
    seqio.MixtureRegistry.remove(MIXTURE_NAME)
    seqio.MixtureRegistry.add(
        MIXTURE_NAME, [(name, rate_of[row]) for row, name in zip(ROWS, names, strict=True)]
    )
    return names
