"""One model for all four LOT tasks: the `lot` mixture (text-to-text; no LOT baseline
trains one), RunConfig.task "lot"."""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import numpy as np
import seqio
import tensorflow as tf

from cmrcx.benchmarks.lot import formats as lot_formats
from cmrcx.benchmarks.lot import overall as lot_overall
from cmrcx.benchmarks.lot import paper as lot_paper
from cmrcx.common.errors import ConfigError, MissingSplitError
from cmrcx.common.files import write_atomically
from cmrcx.datasets import lot as lot_tfds
from cmrcx.model_api.seq2seq import Seq2SeqModel
from cmrcx.tasks.lot import generation as generation_tasks
from cmrcx.tasks.lot import mixture as mixture_tasks
from cmrcx.tasks.lot import pretraining as longlm_tasks
from cmrcx.tasks.lot import understanding as lot_understanding
from cmrcx.training.run_tasks.base import RunTask, register
from cmrcx.training.run_tasks.longlm import note_special_id_differences
from cmrcx.training.run_tasks.lot import (
    LotGenerationEvaluation,
    LotUnderstandingEvaluation,
    check_marker_ids_fit,
    generation_decoding,
    generation_model,
)
from cmrcx.training.task_options import LotMixtureOptions

LOT_MIXTURE_RUN_TASK = mixture_tasks.MIXTURE_NAME  # RunConfig.task "lot"
LEAK_GUARD_FILE = "lot_leak_guard.json"  # MODEL_DIR/: the training lines the guard dropped
UNDERSTANDING_OVERALL, GENERATION_OVERALL = "understanding-overall", "generation-overall"


@dataclasses.dataclass(frozen=True)
class _UnderstandingPart:
    """What `LotUnderstandingEvaluation` reads of its run task: one understanding task of
    the mixture, so its prediction file and accuracy are made as a single run's are."""

    name: str  # "lot_clozet": predictions/<name>_<split>.jsonl
    data_task: str  # "clozet"
    run: object  # the mixture's RunConfig with data_dir the task's folder
    score_task: str  # the SeqIO task whose metric fns score it


@dataclasses.dataclass(frozen=True)
class _GenerationPart:
    """What `LotGenerationEvaluation` reads of its run task, for PlotCom or OutGen."""

    name: str  # "lot_plotcom"
    row: generation_tasks.GenerationTask
    row_task: str  # the SeqIO task: postprocessing and official metrics
    run: object
    model: Seq2SeqModel
    decoding: longlm_tasks.Decoding

    def prediction_path(self, model_dir: str, split: str) -> str:
        return os.path.join(model_dir, "predictions", f"{self.name}_{split}.jsonl")


class LotMixtureRunTask(RunTask):
    """One T5-family model fine-tuned on all four LOT tasks at once, as text-to-text (the
    SeqIO mixture `lot`, `cmrcx.tasks.lot.mixture`), and evaluated on all four.

    DATA_DIR is LOT's root: clozet/, senpos/, plotcom/, outgen/, each the task's official
    folder; every train.jsonl is required, val.jsonl and test.jsonl are optional (a split
    evaluates the tasks that have its file). Before training, the leak guard drops every
    training record telling a validation/test story (`cmrcx.benchmarks.lot.leak_guard`;
    one line printed, and when training the lines dropped in MODEL_DIR/lot_leak_guard.json).

    Registers `lot_train_<vocab>` (one epoch of the mixture at RunConfig.mixture_rates,
    `mixture.training_epoch`, padded) and `lot_score_<vocab>` (every task's examples of a
    split, in file order, tagged with `task_index`; PlotCom and OutGen rows generated with
    RunConfig.generation_*, ClozeT and SenPos rows scored by their candidates' sentinels
    as the first target token, the highest among the record's candidates chosen:
    `cmrcx.benchmarks.lot.text_to_text`). An evaluation writes each task's official
    prediction file MODEL_DIR/predictions/lot_<task>_<split>.jsonl, as the single-task
    runs do, and returns each task's metrics as `lot_<task>/<metric>` (`lot_clozet/accuracy`,
    `lot_outgen/bleu-1`), with Table 10's and Table 11's overall scores (fractions) when
    their columns are all there: `understanding-overall`, `generation-overall`.
    """

    options_class = LotMixtureOptions

    def __init__(self, run):
        self.run, self.name = run, run.task
        if run.train_split != "train":
            raise ConfigError(f"{run.task} trains on the train split (every task's train.jsonl)")
        self.data_dirs = {row: os.path.join(run.data_dir, data_task)
                          for row, data_task in mixture_tasks.ROWS.items()}  # fmt: skip
        self.guard_report = mixture_tasks.guard_training(self.data_dirs, run.tfds_cache_dir)
        if jax.process_index() == 0:
            print(self.guard_report.line(), flush=True)
        names = mixture_tasks.register(
            run.vocabulary_name,
            run.vocab_file,
            self.data_dirs,
            rates=run.options.mixture_rates,
            max_length=run.max_length,
            target_length=run.target_length,
            tfds_cache_dir=run.tfds_cache_dir,
            drop_last_char_without_eos=run.options.drop_last_char_without_eos,
            guard_report=self.guard_report,
        )
        self.row_tasks = dict(zip(mixture_tasks.ROWS, names, strict=True))
        note_special_id_differences(run, names[0])
        vocabulary = seqio.get_mixture_or_task(names[0]).output_features["inputs"].vocabulary
        check_marker_ids_fit(run, vocabulary)
        senpos_gaps = lot_understanding.num_candidates(
            "senpos", self.data_dirs["lot_senpos"], run.tfds_cache_dir
        )
        self.num_candidates = max(2, senpos_gaps)
        self.lengths = {"inputs": run.max_length, "targets": run.target_length}
        vocabulary_name = run.vocabulary_name
        self.train_task = longlm_tasks.register_function_task(
            f"lot_train_{vocabulary_name}",
            self._train_examples,
            list(mixture_tasks.SPLITS),
            names[0],
        )
        self.score_task = longlm_tasks.register_function_task(
            f"lot_score_{vocabulary_name}",
            self._score_examples,
            list(mixture_tasks.SPLITS),
            names[0],
        )
        self.decoding = generation_decoding(run.options)
        self.model = generation_model(run, self.decoding, num_candidates=self.num_candidates)

    def _train_examples(self, split: str) -> tf.data.Dataset:
        """One epoch of the mixture (its rates), padded; the input pipeline shuffles it.
        Another split (`cmrcx.inspect lot --split validation`): each task's examples once."""
        if split == "train":
            self._write_guard_file()
            epoch = mixture_tasks.training_epoch(self.run.vocabulary_name, self.run.seed)
        else:
            epoch = self._score_examples(split)
        return epoch.map(
            lambda ex: longlm_tasks.pad_to_lengths(
                {"inputs": ex["inputs"], "targets": ex["targets"]}, self.lengths
            )
        )

    def _write_guard_file(self) -> None:
        """MODEL_DIR/lot_leak_guard.json: per task, the training lines the guard dropped
        and the held-out record each tells (written when training reads its data)."""
        if jax.process_index() == 0:
            path = os.path.join(self.run.model_dir, LEAK_GUARD_FILE)
            lines = self.guard_report.dropped_lines()
            write_atomically(path, json.dumps(lines, indent=1, ensure_ascii=False) + "\n")

    def _score_examples(self, split: str) -> tf.data.Dataset:
        """Every task's examples of the split (the tasks that have its file), in file
        order, tagged and padded: candidate_ids / candidate_mask to num_candidates,
        decode_method 0 for PlotCom and OutGen (generated), -1 for ClozeT and SenPos."""
        datasets = []
        for index, row in enumerate(mixture_tasks.ROWS):
            if split not in self.splits_of(row):
                continue
            examples = seqio.get_mixture_or_task(self.row_tasks[row]).get_dataset(
                sequence_length=None, split=split, shuffle=False
            )
            generated = row not in mixture_tasks.UNDERSTANDING_ROWS

            def tag(example, index=index, generated=generated):
                candidates = example["candidate_ids"]
                padding = [[0, self.num_candidates - tf.size(candidates)]]
                example = {
                    **example,
                    "candidate_ids": tf.ensure_shape(
                        tf.pad(candidates, padding), [self.num_candidates]
                    ),
                    "candidate_mask": tf.ensure_shape(
                        tf.pad(tf.ones_like(candidates), padding), [self.num_candidates]
                    ),
                    "task_index": tf.constant(index, tf.int32),
                    "decode_method": tf.constant(0 if generated else -1, tf.int32),
                }
                return longlm_tasks.pad_to_lengths(example, self.lengths)

            datasets.append(examples.map(tag))
        combined = datasets[0]
        for dataset in datasets[1:]:
            combined = combined.concatenate(dataset)
        return combined

    def splits_of(self, row: str) -> list[str]:
        """The splits whose file the task's folder holds."""
        return lot_tfds.available_splits(mixture_tasks.ROWS[row], self.data_dirs[row])

    def require_split(self, split: str) -> None:
        """Training: every task's train.jsonl. Evaluation: some task's file of the split."""
        if split == "train":
            for row, data_task in mixture_tasks.ROWS.items():
                lot_tfds.require_split(data_task, self.data_dirs[row], split)
            return
        if not any(split in self.splits_of(row) for row in mixture_tasks.ROWS):
            name = lot_formats.SPLIT_FILES[split]
            raise MissingSplitError(
                f"{self.name}: no task has a {name} for split {split!r} under "
                f"{self.run.data_dir} (clozet/, senpos/, plotcom/, outgen/)"
            )

    def evaluation(self, split: str) -> LotMixtureEvaluation:
        if split == "train":
            raise ConfigError(f"{self.name} evaluates the validation or test split")
        return LotMixtureEvaluation(self, split)

    def part(self, row: str) -> _UnderstandingPart | _GenerationPart:
        """One task's evaluation view (see the part classes)."""
        run = dataclasses.replace(self.run, data_dir=self.data_dirs[row])
        if row in mixture_tasks.UNDERSTANDING_ROWS:
            return _UnderstandingPart(row, mixture_tasks.ROWS[row], run, self.row_tasks[row])
        row_task = generation_tasks.get_task(row)
        return _GenerationPart(row, row_task, self.row_tasks[row], run, self.model, self.decoding)

    def count_examples(self, split: str) -> int | None:
        """Training examples of one epoch at the mixture's rates (`mixture.epoch_counts`)."""
        if split != "train":
            return None
        mixture = seqio.get_mixture_or_task(mixture_tasks.MIXTURE_NAME)
        tasks = {row: seqio.get_mixture_or_task(name) for row, name in self.row_tasks.items()}
        sizes = {row: task.source.num_input_examples("train") for row, task in tasks.items()}
        rates = {row: mixture.get_rate(task) for row, task in tasks.items()}
        return sum(mixture_tasks.epoch_counts(sizes, rates).values())

    def metrics_reported(self) -> dict[str, str]:
        """Each task's Table 10 / 11 metrics (`lot_<task>/<metric>`), the organisers'
        OutGen score and both overall scores; all better higher."""
        names = [f"{task}/{metric}" for _, task, metric in lot_paper.TABLE_10_COLUMNS]
        names += [f"{task}/{metric}" for _, task, metric in lot_paper.TABLE_11_COLUMNS]
        names += ["lot_outgen/organisers-weighted-score", UNDERSTANDING_OVERALL, GENERATION_OVERALL]
        return {name: "max" for name in names}

    def results_table(self, results: dict[str, float], split: str) -> str:
        """Tables 10 and 11 of this one model (`cmrcx.benchmarks.lot.tables`)."""
        from cmrcx.benchmarks.lot import tables as lot_tables

        summary = lot_tables.summarize(lot_tables.metrics_by_task(results), split)
        return lot_tables.format_tables(summary)


class LotMixtureEvaluation:
    """The mixture's scores of a split, row by row to each task's own evaluation (the
    single-task runs' classes): prediction files and metrics made as theirs are."""

    def __init__(self, run_task: LotMixtureRunTask, split: str):
        self.run_task, self.split = run_task, split
        self.parts = {}
        for row in mixture_tasks.ROWS:
            if split in run_task.splits_of(row):
                part = run_task.part(row)
                evaluation = (
                    LotUnderstandingEvaluation
                    if isinstance(part, _UnderstandingPart)
                    else LotGenerationEvaluation
                )
                self.parts[row] = evaluation(part, split)

    def add(self, scores: np.ndarray, examples: dict[str, np.ndarray]) -> None:
        """scores: float [n, columns] (`Seq2SeqModel.score_batch`) for the n real rows.
        ClozeT and SenPos rows pass their candidates' log-probabilities, padding slots at
        -inf, so the argmax is `text_to_text.constrained_choice`."""
        n = len(scores)
        task_index = examples["task_index"][:n]
        first = self.run_task.model.candidate_column
        for index, row in enumerate(mixture_tasks.ROWS):
            rows = np.flatnonzero(task_index == index)
            if not rows.size:
                continue
            picked = {key: value[rows] for key, value in examples.items()}
            if row in mixture_tasks.UNDERSTANDING_ROWS:
                log_probs = scores[rows, first : first + self.run_task.num_candidates]
                present = picked["candidate_mask"] > 0
                self.parts[row].add(np.where(present, log_probs, -np.inf), picked)
            else:
                self.parts[row].add(scores[rows], picked)

    def finish(self, model_dir: str) -> dict[str, float]:
        """Each task's prediction file and `lot_<task>/<metric>`s; the overall scores."""
        results = {}
        for row, part in self.parts.items():
            results.update({f"{row}/{k}": v for k, v in part.finish(model_dir).items()})
        return results | _overall_scores(results, self.split)


def _overall_scores(results: dict[str, float], split: str) -> dict[str, float]:
    """Tables 10 and 11's Overall (the paper's weights; fractions) when every column is in
    `results`; only for validation and test, the splits the paper weighs."""
    if split not in ("validation", "test"):
        return {}
    tables = (
        (UNDERSTANDING_OVERALL, lot_paper.TABLE_10_COLUMNS, lot_overall.understanding_overall),
        (GENERATION_OVERALL, lot_paper.TABLE_11_COLUMNS, lot_overall.generation_overall),
    )
    scores = {}
    for key, columns, overall_fn in tables:
        values = [results.get(f"{task}/{metric}") for _, task, metric in columns]
        if None not in values:
            scores[key] = overall_fn(split, [100 * v for v in values]) / 100
    return scores


register((LOT_MIXTURE_RUN_TASK,), LotMixtureRunTask)
