"""CLUE's run tasks, one per registered task name: the classification tasks (one example
per record, the official label out) and the reading-comprehension tasks, CMRC 2018 (span
extraction) and ChID and C3 (multiple choice): windows or choice sets in, official files
out, decoded the baselines' way.

Evaluation batches come in split order, so the scores' rows line up with the split's
records (`cmrcx.tasks.clue.reading.split_records`) and, for CMRC 2018, its windows
(`span_windows`): both read once per process and reused here for decoding.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import numpy as np
import seqio

from cmrcx.benchmarks.clue import c3, chid_decoding
from cmrcx.benchmarks.clue import cmrc2018_windows as spans
from cmrcx.benchmarks.clue import official_format as clue_format
from cmrcx.benchmarks.clue import submission as clue_submission
from cmrcx.benchmarks.clue.reading_tasks import SPAN
from cmrcx.benchmarks.clue.reading_tasks import TASKS as READING_TASKS
from cmrcx.benchmarks.clue.tasks import TASKS as CLASSIFICATION_TASKS
from cmrcx.benchmarks.clue.tasks import ClueTask
from cmrcx.common.errors import DataFormatError
from cmrcx.common.files import write_atomically
from cmrcx.datasets import clue as clue_tfds
from cmrcx.model_api.classification import ClassificationModel
from cmrcx.model_api.multiple_choice import MultipleChoiceModel
from cmrcx.model_api.span import SpanExtractionModel
from cmrcx.models import registry
from cmrcx.tasks.clue import classification as clue_tasks
from cmrcx.tasks.clue import reading as clue_mrc_tasks
from cmrcx.training.run_tasks.base import RunTask, announce, register
from cmrcx.training.task_options import ClueReadingOptions
from cmrcx.vocab import layouts


def run_layout(run) -> layouts.Layout:
    """The run's model family's input layout (`cmrcx.models.registry.Family.layout`,
    `cmrcx.vocab.layouts`): it chooses the vocabulary and the frame of every CLUE task."""
    return registry.family_of(run.model).layout


# --- Classification ------------------------------------------------------------------------


class ClueClassificationRunTask(RunTask):
    """A CLUE classification task: one example per record, the official label out."""

    def __init__(self, run):
        self.run, self.row = run, CLASSIFICATION_TASKS[run.task]
        self.name = self.row.name
        (self.train_task,) = clue_tasks.register(
            run.vocabulary_name,
            run.vocab_file,
            {self.row.name: run.data_dir},
            max_length=run.max_length,
            lower_case=run.lower_case,
            tfds_cache_dir=run.tfds_cache_dir,
            layout=run_layout(run),
        )
        self.score_task = self.train_task
        network = registry.network(run.model, "classification", num_classes=self.row.num_classes)
        self.model = ClassificationModel(network, run.max_length)

    def require_split(self, split: str) -> None:
        clue_tfds.require_split(self.row, self.run.data_dir, split)

    def check_split(self, split: str) -> None:
        self.require_split(split)
        records = clue_format.read_split(self.row, self.run.data_dir, split)
        if not records.examples:
            skipped = f" ({len(records.skipped_ids)} without a majority label)"
            raise DataFormatError(
                f"{records.path}: no records to evaluate{skipped if records.skipped_ids else ''}"
            )

    def evaluation(self, split: str) -> ClassificationEvaluation:
        return ClassificationEvaluation(self, split)

    def metrics_reported(self) -> dict[str, str]:
        return {self.row.metric: "max"}  # "accuracy"


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
            announce(str(path), "predictions", f"{len(labels)} records")
            if self.split == "test":
                path = clue_submission.write_submission(
                    row, os.path.join(model_dir, "submission"), self.ids, labels
                )
                announce(str(path), "submission file")
        if not self.label_indices or min(self.label_indices) < 0:
            return {}
        targets = [task.postprocess_fn(i, example={"label": i}, is_target=True)
                   for i in self.label_indices]  # fmt: skip
        results = {}
        for metric_fn in task.predict_metric_fns:
            results.update({k: float(v) for k, v in metric_fn(targets, labels).items()})
        return results


# --- Reading comprehension -------------------------------------------------------------------

# RunConfig.decoding -> ChID's decoding written to the prediction files. "paper": the
# CLUE baseline script's global greedy assignment, which gave the paper's numbers.
CHID_DECODING = {"paper": "baseline", "baseline": "baseline", "assignment": "assignment"}


class ClueMrcRunTask(RunTask):
    """A CLUE reading-comprehension task: windows or choice sets in, official files out."""

    options_class = ClueReadingOptions

    def __init__(self, run):
        self.run, self.row = run, READING_TASKS[run.task]
        self.name = self.row.name
        self.layout = run_layout(run)
        (self.train_task,) = clue_mrc_tasks.register(
            run.vocabulary_name,
            run.vocab_file,
            {self.row.name: run.data_dir},
            max_length=run.max_length,
            lower_case=run.lower_case,
            tfds_cache_dir=run.tfds_cache_dir,
            doc_stride=run.options.doc_stride,
            train_split=run.train_split,
            layout=self.layout,
        )
        self.score_task = self.train_task
        self.vocabulary = self.layout.vocabulary(run.vocab_file, run.lower_case)
        if self.row.problem == SPAN:
            self.model = SpanExtractionModel(registry.network(run.model, "span"), run.max_length)
        else:
            network = registry.network(run.model, "multiple_choice")
            self.model = MultipleChoiceModel(network, self.row.num_choices, run.max_length)

    def require_split(self, split: str) -> None:
        clue_mrc_tasks.require_split(self.row, self.run.data_dir, split)

    def check_split(self, split: str) -> None:
        self.require_split(split)
        clue_mrc_tasks.read_official_split(self.row, self.run.data_dir, split)

    def records(self, split: str) -> tuple:
        """The split's records (questions, blanks), read once per process."""
        return clue_mrc_tasks.split_records(
            self.row, self.run.data_dir, split, self.run.tfds_cache_dir
        )

    def windows(self, split: str) -> dict:
        """CMRC 2018: the split's windows, as the SeqIO task serves them (cached)."""
        run = self.run
        return clue_mrc_tasks.span_windows(
            self.row,
            self.vocabulary,
            run.data_dir,
            split,
            run.max_length,
            run.options.doc_stride,
            run.tfds_cache_dir,
            training=split == run.train_split,
            layout=self.layout,
        )

    def count_examples(self, split: str) -> int:
        """Examples (CMRC 2018 windows, ChID blanks, C3 questions) of a split, without
        building ChID's or C3's features (the runner's step count needs only this)."""
        if self.row.dataset == "cmrc2018":
            return len(self.windows(split)["input_ids"])
        return len(self.records(split))

    def evaluation(self, split: str) -> MrcEvaluation:
        return MrcEvaluation(self, split)

    def metrics_reported(self) -> dict[str, str]:
        if self.row.dataset == "cmrc2018":  # the official evaluator's numbers
            return {"EM": "max", "F1": "max", "AVERAGE": "max"}
        if self.row.dataset == "chid":  # the written decoding's, and the other one's
            other = (
                "assignment"
                if CHID_DECODING[self.run.options.decoding] == "baseline"
                else "baseline"
            )
            return {"accuracy": "max", f"accuracy_{other}": "max"}
        return {"accuracy": "max"}


class MrcEvaluation:
    def __init__(self, run_task: ClueMrcRunTask, split: str):
        self.run_task, self.split = run_task, split
        self.scores: list[np.ndarray] = []

    def add(self, scores: np.ndarray, examples: dict[str, np.ndarray]) -> None:
        """scores: span [n, 2, length] start/end logits, or choice logits [n, choices], for
        the next n examples of the split (checked: decoding relies on the order)."""
        seen = sum(len(part) for part in self.scores)
        if self.run_task.row.dataset == "cmrc2018":
            expected = self.run_task.windows(self.split)["example_index"][seen : seen + len(scores)]
        else:
            expected = np.arange(seen, seen + len(scores))
        if not np.array_equal(examples["example_index"][: len(scores)], expected):
            raise ValueError(f"evaluation rows out of the split's order after row {seen}")
        self.scores.append(np.asarray(scores, np.float32))

    def finish(self, model_dir: str) -> dict[str, float]:
        """Writes predictions/<task>_<split>.json (and for test submission/<official
        name>) in the official format; returns the metrics if the split is labelled."""
        run_task, row = self.run_task, self.run_task.row
        records = run_task.records(self.split)
        windows = run_task.windows(self.split) if row.dataset == "cmrc2018" else None
        scores = np.concatenate(self.scores)
        expected = len(records) if windows is None else len(windows["input_ids"])
        if len(scores) != expected:
            raise ValueError(f"{len(scores)} score rows for {expected} examples")
        task = seqio.get_mixture_or_task(run_task.score_task)
        if row.dataset == "cmrc2018":
            return self._finish_cmrc2018(model_dir, task, records, windows, scores)
        if row.dataset == "chid":
            return self._finish_chid(model_dir, task, records, scores)
        return self._finish_c3(model_dir, task, records, scores)

    def _write(self, model_dir: str, write) -> None:
        """`write(directory, file_name)` for predictions/ and, for test, submission/."""
        if jax.process_index() != 0:
            return
        name = f"{self.run_task.train_task}_{self.split}.json"
        path = write(os.path.join(model_dir, "predictions"), name)
        print(f"predictions: {path}", flush=True)
        if self.split == "test":
            path = write(os.path.join(model_dir, "submission"), None)
            print(f"submission file: {path}", flush=True)

    def _finish_cmrc2018(self, model_dir, task, questions, windows, scores):
        # keep_whitespace: the answer is the passage's own characters from the span's first
        # to its last (casing, spaces and all). The PyTorch baseline joins its doc tokens
        # without the spaces between them ("Harry Potter" -> "HarryPotter"), which the
        # official evaluator then scores 0 against a spaced gold answer. Answers without
        # spaces (nearly all of CMRC 2018's) come out the same either way. XLNet's windows
        # give the characters their pieces cover, stripped (cmrc2018_xlnet).
        predictions = spans.predict_answers(
            questions,
            windows,
            scores[:, 0],
            scores[:, 1],
            self.run_task.vocabulary.tokens,
            keep_whitespace=True,
            covered_text=self.run_task.layout.answers_cover_pieces,
        )

        def write(directory, file_name):
            path = os.path.join(directory, file_name or self.run_task.row.submission_file)
            write_atomically(path, json.dumps(predictions, ensure_ascii=False, indent=1) + "\n")
            return path

        self._write(model_dir, write)
        if not all(q.answers for q in questions):
            return {}
        targets = [q.answers for q in questions]
        return _metrics(task, targets, [predictions[q.qid] for q in questions])

    def _finish_chid(self, model_dir, task, blanks, scores):
        mode = CHID_DECODING[self.run_task.run.options.decoding]
        tags = [b.tag for b in blanks]
        lines = [b.line_index for b in blanks]  # a line's blanks share its candidates
        choice_mask = np.zeros_like(scores, np.int32)
        for row, blank in enumerate(blanks):
            choice_mask[row, : len(blank.candidates)] = 1
        decoded = {
            m: chid_decoding.decode_predictions(m, lines, tags, scores, choice_mask)
            for m in ("baseline", "assignment")
        }
        version = self.run_task.row.clue_version
        self._write(
            model_dir,
            lambda directory, name: chid_decoding.write_submission(
                directory, decoded[mode], version, name
            ),
        )
        if any(b.label is None for b in blanks):
            return {}
        # "accuracy" is the decoding written to the files (the table's number); the other
        # decoding's accuracy comes with its name, e.g. "accuracy_assignment".
        targets = [b.label for b in blanks]
        results = _metrics(task, targets, [decoded[mode][t] for t in tags])
        other = "assignment" if mode == "baseline" else "baseline"
        others = _metrics(task, targets, [decoded[other][t] for t in tags])
        results.update({f"{k}_{other}": v for k, v in others.items()})
        return results

    def _finish_c3(self, model_dir, task, questions, scores):
        labels = [int(i) for i in np.argmax(scores, axis=-1)]
        version = self.run_task.row.clue_version
        ids = [q.id for q in questions]
        self._write(
            model_dir,
            lambda directory, name: c3.write_submission(directory, ids, labels, version, name),
        )
        if any(q.label is None for q in questions):
            return {}
        return _metrics(task, [q.label for q in questions], labels)


def _metrics(task: seqio.Task, targets, predictions) -> dict[str, float]:
    results = {}
    for metric_fn in task.predict_metric_fns:
        results.update({k: float(v) for k, v in metric_fn(targets, predictions).items()})
    return results


register(CLASSIFICATION_TASKS, ClueClassificationRunTask)
register(READING_TASKS, ClueMrcRunTask)
