"""What the generic runner needs of a benchmark task: its SeqIO tasks, Model API, evaluation.

`RunConfig.task` names the task ("cmrc2019", "clue_afqmc", ...); `build_run_task`
registers its SeqIO tasks for the run's vocabulary and data and returns a `RunTask`.
Adding a task of an existing problem type is a row in its benchmark's table
(`cmrcx.benchmarks.clue.tasks`); adding a problem type is a Model API and a RunTask
class here.

An evaluation takes the scores of every scoring batch (`add`), then `finish`
decodes them, writes the official-format prediction file and returns the metrics
of the task's own metric functions, with the targets the SeqIO task carries
(never re-read from the official files).
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
import seqio
import tensorflow as tf

from cmrcx.benchmarks.clue import submission as clue_submission
from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_TASKS
from cmrcx.benchmarks.clue.tasks import ClueTask
from cmrcx.benchmarks.cmrc2019 import evaluation as cmrc2019_evaluation
from cmrcx.benchmarks.cmrc2019.official_format import write_predictions
from cmrcx.datasets import clue as clue_tfds
from cmrcx.datasets import cmrc2019 as cmrc2019_tfds
from cmrcx.model_api.classification import ClassificationModel
from cmrcx.model_api.cloze import ClozeModel
from cmrcx.tasks import clue as clue_tasks
from cmrcx.tasks import cmrc2019 as cmrc2019_tasks


def _announce(path: str, what: str) -> None:
    if jax.process_index() == 0:
        print(f"{what}: {path}", flush=True)


class Cmrc2019RunTask:
    """CMRC 2019 sentence cloze: windows in, per-passage choice lists out (QAC/PAC)."""

    name = "cmrc2019"

    def __init__(self, run):
        self.run = run
        self.train_task, self.score_task = cmrc2019_tasks.register_cmrc2019(
            run.vocabulary_name,
            run.vocab_file,
            run.data_dir,
            max_length=run.max_length,
            doc_stride=run.doc_stride,
            max_candidate_tokens=run.max_candidate_tokens,
            tfds_cache_dir=run.tfds_cache_dir,
            lower_case=run.lower_case,
        )
        self.model = ClozeModel(run.model, run.max_length, cmrc2019_tasks.MAX_BLANKS)

    def require_split(self, split: str) -> None:
        cmrc2019_tfds.require_split(self.run.data_dir, split)

    def count_training_blanks(self) -> int:
        """Blanks of the training split (the released script's len(train_examples))."""
        source = seqio.get_mixture_or_task(self.train_task).source
        dataset = source.get_dataset(split=self.run.train_split, shuffle=False)
        return int(dataset.reduce(0, lambda n, ex: n + tf.size(ex["answers"])).numpy())

    def evaluation(self, split: str) -> Cmrc2019Evaluation:
        return Cmrc2019Evaluation(self, split)

    def results_table(self, results: dict[str, float], split: str) -> str:
        return cmrc2019_evaluation.results_table(results, split)


class Cmrc2019Evaluation:
    def __init__(self, run_task: Cmrc2019RunTask, split: str):
        self.run_task, self.split = run_task, split
        self.table = cmrc2019_evaluation.BlankLogitTable()

    def add(self, blank_logits: np.ndarray, examples: dict[str, np.ndarray]) -> None:
        self.table.add(blank_logits, examples)

    def _answers(self) -> dict[str, list[int]]:
        """{context_id: answers} from the scoring task's source (empty lists for test)."""
        task = seqio.get_mixture_or_task(self.run_task.score_task)
        dataset = task.source.get_dataset(split=self.split, shuffle=False)
        return {
            ex["context_id"].decode(): [int(a) for a in ex["answers"]]
            for ex in dataset.as_numpy_iterator()
        }

    def finish(self, model_dir: str) -> dict[str, float]:
        """Decodes every mode, writes predictions/<task>_<split>.json, scores if labelled."""
        run, task = self.run_task.run, seqio.get_mixture_or_task(self.run_task.score_task)
        self.table.check_complete()
        decoded = {
            mode: cmrc2019_evaluation.decode_all(self.table.tables, mode)
            for mode in cmrc2019_evaluation.DECODING_MODES
        }
        predictions = decoded[run.decoding]
        if jax.process_index() == 0:
            path = os.path.join(
                model_dir, "predictions", f"{self.run_task.train_task}_{self.split}.json"
            )
            write_predictions(path, predictions)
            _announce(path, f"predictions ({len(predictions)} passages)")
        answers = self._answers()
        if not any(answers.values()):  # the test split has no answers
            return {}
        return cmrc2019_evaluation.score_modes(decoded, answers, task.predict_metric_fns)


class ClueClassificationRunTask:
    """A CLUE classification task: one example per record, the official label out."""

    def __init__(self, run):
        self.run, self.row = run, CLUE_TASKS[run.task]
        self.name = self.row.name
        (self.train_task,) = clue_tasks.register_clue(
            run.vocabulary_name,
            run.vocab_file,
            {self.row.name: run.data_dir},
            max_length=run.max_length,
            lower_case=run.lower_case,
            tfds_cache_dir=run.tfds_cache_dir,
        )
        self.score_task = self.train_task
        self.model = ClassificationModel(run.model, self.row.num_classes, run.max_length)

    def require_split(self, split: str) -> None:
        clue_tfds.require_split(self.row, self.run.data_dir, split)

    def evaluation(self, split: str) -> ClassificationEvaluation:
        return ClassificationEvaluation(self, split)

    def results_table(self, results: dict[str, float], split: str) -> str:
        return "\n".join(f"{self.name} {split} {k}: {v:.2f}" for k, v in results.items())


class ClassificationEvaluation:
    def __init__(self, run_task: ClueClassificationRunTask, split: str):
        self.run_task, self.split = run_task, split
        self.ids: list[Any] = []
        self.label_indices: list[int] = []  # gold class indices; -1: unlabelled (test)
        self.predicted: list[int] = []

    def add(self, logits: np.ndarray, examples: dict[str, np.ndarray]) -> None:
        """logits: float [n, num_classes] for the n real rows of `examples`."""
        self.predicted.extend(int(i) for i in np.argmax(logits, axis=-1))
        self.ids.extend(clue_tfds.record_id(i) for i in examples["id"][: len(logits)])
        self.label_indices.extend(int(i) for i in examples["label"][: len(logits)])

    def finish(self, model_dir: str) -> dict[str, float]:
        """Writes predictions/<task>_<split>.json (and for test submission/<official name>)
        in the official submission format; returns the task's metrics if labelled."""
        row: ClueTask = self.run_task.row
        task = seqio.get_mixture_or_task(self.run_task.score_task)
        labels = clue_submission.labels_from_indices(row, self.predicted)
        if jax.process_index() == 0:
            name = f"{self.run_task.train_task}_{self.split}.json"
            path = clue_submission.write_submission(
                row, os.path.join(model_dir, "predictions"), self.ids, labels, file_name=name
            )
            _announce(str(path), f"predictions ({len(labels)} records)")
            if self.split == "test":
                path = clue_submission.write_submission(
                    row, os.path.join(model_dir, "submission"), self.ids, labels
                )
                _announce(str(path), "submission file")
        if not self.label_indices or min(self.label_indices) < 0:
            return {}
        targets = [task.postprocess_fn(i, example={"label": i}, is_target=True)
                   for i in self.label_indices]  # fmt: skip
        results = {}
        for metric_fn in task.predict_metric_fns:
            results.update({k: float(v) for k, v in metric_fn(targets, labels).items()})
        return results


def build_run_task(run):
    """The RunTask of `run.task` (its SeqIO tasks registered for this run)."""
    if run.task == "cmrc2019":
        return Cmrc2019RunTask(run)
    if run.task in CLUE_TASKS:
        return ClueClassificationRunTask(run)
    raise ValueError(f"RunConfig.task {run.task!r}: no run task for it")
