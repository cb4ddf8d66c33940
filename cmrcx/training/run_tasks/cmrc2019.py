"""CMRC 2019's run task: windows in, per-passage choice lists out (QAC/PAC)."""

from __future__ import annotations

import os

import jax
import numpy as np
import seqio
import tensorflow as tf

from cmrcx.benchmarks.cmrc2019 import evaluation as cmrc2019_evaluation
from cmrcx.benchmarks.cmrc2019.official_format import read_passages, write_predictions
from cmrcx.common import tf_iterators
from cmrcx.datasets import cmrc2019 as cmrc2019_tfds
from cmrcx.datasets import records
from cmrcx.model_api.cloze import ClozeModel
from cmrcx.models import registry
from cmrcx.tasks import cmrc2019 as cmrc2019_tasks
from cmrcx.training.run_tasks.base import RunTask, announce, register
from cmrcx.training.task_options import Cmrc2019Options


class Cmrc2019RunTask(RunTask):
    """CMRC 2019 sentence cloze: windows in, per-passage choice lists out (QAC/PAC)."""

    name = "cmrc2019"
    options_class = Cmrc2019Options

    def __init__(self, run):
        self.run = run
        self.train_task, self.score_task = cmrc2019_tasks.register(
            run.vocabulary_name,
            run.vocab_file,
            {"cmrc2019": run.data_dir},
            max_length=run.max_length,
            doc_stride=run.options.doc_stride,
            max_candidate_tokens=run.options.max_candidate_tokens,
            tfds_cache_dir=run.tfds_cache_dir,
            lower_case=run.lower_case,
        )
        network = registry.network(run.model, "cloze")
        self.model = ClozeModel(network, run.max_length, cmrc2019_tasks.MAX_BLANKS)

    def require_split(self, split: str) -> None:
        cmrc2019_tfds.require_split(self.run.data_dir, split)

    def check_split(self, split: str) -> None:
        path = cmrc2019_tfds.require_split(self.run.data_dir, split)
        read_passages(path, require_answers=split != "test")

    def count_training_blanks(self) -> int:
        """Blanks of the training split (the released script's len(train_examples))."""
        source = seqio.get_mixture_or_task(self.train_task).source
        dataset = source.get_dataset(split=self.run.train_split, shuffle=False)
        return int(tf_iterators.reduce(dataset, 0, lambda n, ex: n + tf.size(ex["answers"])))

    def evaluation(self, split: str) -> Cmrc2019Evaluation:
        return Cmrc2019Evaluation(self, split)

    def results_table(self, results: dict[str, float], split: str) -> str:
        return cmrc2019_evaluation.results_table(results, split)

    def metrics_reported(self) -> dict[str, str]:
        """QAC and PAC of every decoding mode: "qac/paper", "pac/assignment", ..."""
        return {
            f"{metric}/{mode}": "max"
            for mode in cmrc2019_evaluation.DECODING_MODES
            for metric in ("qac", "pac")
        }


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
            for ex in records.numpy_records(dataset)
        }

    def finish(self, model_dir: str) -> dict[str, float]:
        """Decodes every mode, writes predictions/<task>_<split>.json, scores if labelled."""
        run, task = self.run_task.run, seqio.get_mixture_or_task(self.run_task.score_task)
        self.table.check_complete()
        decoded = {
            mode: cmrc2019_evaluation.decode_all(self.table.tables, mode)
            for mode in cmrc2019_evaluation.DECODING_MODES
        }
        predictions = decoded[run.options.decoding]
        if jax.process_index() == 0:
            path = os.path.join(
                model_dir, "predictions", f"{self.run_task.train_task}_{self.split}.json"
            )
            write_predictions(path, predictions)
            announce(path, "predictions", f"{len(predictions)} passages")
        answers = self._answers()
        if not any(answers.values()):  # the test split has no answers
            return {}
        return cmrc2019_evaluation.score_modes(decoded, answers, task.predict_metric_fns)


register(["cmrc2019"], Cmrc2019RunTask)
