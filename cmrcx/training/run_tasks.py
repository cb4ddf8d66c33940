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

import json
import os
from typing import Any

import jax
import numpy as np
import seqio
import tensorflow as tf

from cmrcx.benchmarks.clue import submission as clue_submission
from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_TASKS
from cmrcx.benchmarks.clue.tasks import ClueTask
from cmrcx.benchmarks.clue_mrc.tasks import TASKS as CLUE_MRC_TASKS
from cmrcx.benchmarks.cmrc2019 import evaluation as cmrc2019_evaluation
from cmrcx.benchmarks.cmrc2019.official_format import write_predictions
from cmrcx.benchmarks.records import MissingSplitError
from cmrcx.datasets import clue as clue_tfds
from cmrcx.datasets import cmrc2019 as cmrc2019_tfds
from cmrcx.launch import resolve_path
from cmrcx.model_api.classification import ClassificationModel
from cmrcx.model_api.cloze import ClozeModel
from cmrcx.model_api.seq2seq import Seq2SeqModel
from cmrcx.t5_vocabulary import special_id_differences
from cmrcx.tasks import clue as clue_tasks
from cmrcx.tasks import cmrc2019 as cmrc2019_tasks
from cmrcx.tasks import longlm as longlm_tasks


def _announce(path: str, what: str, detail: str = "") -> None:
    """`predictions: PATH (16 records)`: one line per file written, from process 0."""
    if jax.process_index() == 0:
        print(f"{what}: {path}" + (f" ({detail})" if detail else ""), flush=True)


def metric_lines(task: str, results: dict[str, float], split: str) -> str:
    """One line per metric: ``clue_afqmc validation accuracy: 56.25``."""
    return "\n".join(f"{task} {split} {k}: {v:.2f}" for k, v in results.items())


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
            _announce(path, "predictions", f"{len(predictions)} passages")
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
        return metric_lines(self.name, results, split)


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
            _announce(str(path), "predictions", f"{len(labels)} records")
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


# --- LongLM pretraining (LOT paper section 4) -------------------------------------------

# RunConfig.task values: the mixture of both objectives, or one of them.
LONGLM_RUN_TASKS = (longlm_tasks.MIXTURE_NAME, *longlm_tasks.TASKS)
# The objectives' seed for evaluation examples: the same spans and split points at every
# evaluation, so metrics of two checkpoints compare.
LONGLM_EVAL_SEED = 0


def pad_to_lengths(example: dict, lengths: dict[str, int]) -> dict:
    """Pads each feature of `lengths` with 0 to its length and adds `<key>_mask`.

    {"inputs": [5, 9, 1]} with {"inputs": 5} -> {"inputs": [5, 9, 1, 0, 0],
    "inputs_mask": [1, 1, 1, 0, 0]}. Longer features fail (check_lengths rules them out).
    The mask comes from the length, never from the ids: 0 is a token like any other
    (<unk> in LongLM's spiece.model), and the padding id is not the model's pad.
    """
    out = dict(example)
    for key, length in lengths.items():
        ids = example[key]
        extra = [[0, length - tf.size(ids)]]
        out[key] = tf.ensure_shape(tf.pad(ids, extra), [length])
        out[f"{key}_mask"] = tf.ensure_shape(tf.pad(tf.ones_like(ids), extra), [length])
    return out


def _register_function_task(name: str, dataset_fn, splits, like: str) -> str:
    """A SeqIO task over `dataset_fn(split)`, with the features and metrics of task `like`."""
    model = seqio.get_mixture_or_task(like)
    seqio.TaskRegistry.remove(name)
    seqio.TaskRegistry.add(
        name,
        source=seqio.FunctionDataSource(lambda split, shuffle_files: dataset_fn(split), splits),
        preprocessors=[],
        output_features=model.output_features,
    )
    return name


class LongLMPretrainRunTask:
    """LongLM pretraining: text infilling and/or conditional continuation from scratch
    (or from PRETRAINED), perplexity and BLEU-3/4 on the held-out texts (Table 9).

    Registers `<task>_train_<vocab>` (the mixture or one objective, padded to fixed
    lengths; the objectives' noise drawn with RunConfig.seed) and `<task>_score_<vocab>`
    (every held-out text once per objective, in order, with `task_index`, `example_index`
    and `decode_method`: the first RunConfig.max_decoded_examples of each objective are
    decoded the paper's way for BLEU).
    """

    def __init__(self, run):
        self.run, self.name = run, run.task
        is_mixture = run.task == longlm_tasks.MIXTURE_NAME
        self.rows = list(longlm_tasks.TASKS) if is_mixture else [run.task]
        self.validation_dir = resolve_path(run.validation_data_dir)  # `cmrcx:` paths too
        longlm_tasks.register_longlm_pretrain(
            run.vocabulary_name,
            run.vocab_file,
            run.data_dir,
            self.validation_dir,
            input_length=run.max_length,
            target_length=run.target_length,
        )
        self.row_tasks = [longlm_tasks.task_name(row, run.vocabulary_name) for row in self.rows]
        _note_special_id_differences(run, self.row_tasks[0])
        self.lengths = {"inputs": run.max_length, "targets": run.target_length}
        splits = ["train"] + (["validation"] if self.validation_dir else [])
        self.train_task = _register_function_task(
            f"{run.task}_train_{run.vocabulary_name}",
            self._train_examples,
            splits,
            self.row_tasks[0],
        )
        self.score_task = _register_function_task(
            f"{run.task}_score_{run.vocabulary_name}",
            self._score_examples,
            splits,
            self.row_tasks[0],
        )
        decodings = [longlm_tasks.TASKS[row].decoding for row in self.rows]
        self.model = Seq2SeqModel(run.model, run.max_length, run.target_length, decodings)

    def _train_examples(self, split: str) -> tf.data.Dataset:
        """One pass over the split: the mixture's sampling (stopping when an objective runs
        out) or one objective, padded."""
        source = self.row_tasks[0] if len(self.rows) == 1 else longlm_tasks.MIXTURE_NAME
        dataset = seqio.get_mixture_or_task(source).get_dataset(
            sequence_length=None, split=split, shuffle=False, seed=self.run.seed, num_epochs=1
        )
        keep = ("inputs", "targets")
        return dataset.map(lambda ex: pad_to_lengths({k: ex[k] for k in keep}, self.lengths))

    def _score_examples(self, split: str) -> tf.data.Dataset:
        """Each objective's examples of the split in order, tagged, padded."""
        datasets = []
        for index, name in enumerate(self.row_tasks):
            dataset = seqio.get_mixture_or_task(name).get_dataset(
                sequence_length=None, split=split, shuffle=False, seed=LONGLM_EVAL_SEED
            )

            def tag(number, example, index=index):
                number = tf.cast(number, tf.int32)
                decoded = number < self.run.max_decoded_examples
                return pad_to_lengths(
                    {
                        **example,
                        "task_index": tf.constant(index, tf.int32),
                        "example_index": number,
                        "decode_method": tf.where(decoded, index, -1),
                    },
                    self.lengths,
                )

            datasets.append(dataset.enumerate().map(tag))
        combined = datasets[0]
        for dataset in datasets[1:]:
            combined = combined.concatenate(dataset)
        return combined

    def require_split(self, split: str) -> None:
        folders = {"train": self.run.data_dir, "validation": self.validation_dir}
        if split not in folders:
            raise ValueError(f"{self.name} has no {split!r} split; it has train, validation")
        folder = folders[split]
        if folder is None:
            raise MissingSplitError(
                f"{self.name}: split 'validation' needs a folder of held-out .txt texts: set "
                "RunConfig.validation_data_dir (the paper holds out 1,000 texts)"
            )
        if not tf.io.gfile.glob(os.path.join(folder, "*.txt")):
            raise MissingSplitError(f"{self.name}: no .txt files in {folder} (split {split!r})")

    def evaluation(self, split: str) -> LongLMEvaluation:
        return LongLMEvaluation(self, split)

    def results_table(self, results: dict[str, float], split: str) -> str:
        """One line per objective: `longlm_infilling validation: PPL 11.61  BLEU-3/4 ...`."""
        lines = []
        for row in self.rows:
            objective = longlm_tasks.TASKS[row].objective
            line = f"{row} {split}: PPL {results.get(f'{objective}_perplexity', float('nan')):.2f}"
            if f"{objective}_bleu-3" in results:
                line += (
                    f"  BLEU-3/4 {results[f'{objective}_bleu-3']:.2f}/"
                    f"{results[f'{objective}_bleu-4']:.2f}"
                    f" ({int(results[f'{objective}_decoded'])} decoded)"
                )
            lines.append(line)
        return "\n".join(lines)


def _note_special_id_differences(run, task_name: str) -> None:
    """Prints a note when the model's pad / eos ids are not the vocabulary's.

    Not an error: the loss and perplexity never read them (masks say what is padding),
    but the targets end in the vocabulary's EOS while decoding for BLEU stops at the
    model's, so such a run decodes every text to target_length (the text is still cut
    at the vocabulary's EOS). A release's config.json may say so (`cmrcx.convert`).
    """
    vocabulary = seqio.get_mixture_or_task(task_name).output_features["targets"].vocabulary
    differences = special_id_differences(run.model, vocabulary)
    if differences and jax.process_index() == 0:
        print(
            f"note: the model's {'; '.join(differences)} ({run.vocab_file}): set "
            "cmrcx.T5Config.pad_token_id / eos_token_id to the vocabulary's, unless the "
            "model was trained so",
            flush=True,
        )


class LongLMEvaluation:
    """Per objective: the targets' log-likelihoods (perplexity over every held-out text)
    and the generations of the decoded rows (BLEU), with the task's own metric fns."""

    def __init__(self, run_task: LongLMPretrainRunTask, split: str):
        self.run_task, self.split = run_task, split
        self.rows = {index: [] for index in range(len(run_task.rows))}  # (example, ll, ids)

    def add(self, scores: np.ndarray, examples: dict[str, np.ndarray]) -> None:
        """scores: float [n, 1 + target_length] (Seq2SeqModel.score_batch) for n real rows."""
        for i, row_scores in enumerate(scores):
            generated = None
            if examples["decode_method"][i] >= 0:
                generated = _until_eos(row_scores[1:].astype(np.int64), self.run_task.run.model)
            example = {
                "text_id": examples["text_id"][i].decode(),
                "inputs": _real(examples["inputs"][i], examples["inputs_mask"][i]),
                "targets": _real(examples["targets"][i], examples["targets_mask"][i]),
            }
            task_rows = self.rows[int(examples["task_index"][i])]
            task_rows.append((example, float(row_scores[0]), generated))

    def finish(self, model_dir: str) -> dict[str, float]:
        """Writes predictions/<task>_<split>.jsonl per objective (the decoded rows);
        returns {objective}_perplexity, _bleu-3, _bleu-4, _decoded per objective."""
        results = {}
        for index, name in enumerate(self.run_task.row_tasks):
            task = seqio.get_mixture_or_task(name)
            vocabulary = task.output_features["targets"].vocabulary
            objective = longlm_tasks.TASKS[self.run_task.rows[index]].objective
            rows = self.rows[index]
            targets = [
                task.postprocess_fn(vocabulary.decode(ex["targets"]), example=ex, is_target=True)
                for ex, _, _ in rows
            ]
            for metric_fn in task.score_metric_fns:
                metrics = metric_fn(targets, [score for _, score, _ in rows])
                results.update({f"{objective}_{k}": float(v) for k, v in metrics.items()})
            decoded = [(ex, t, ids) for (ex, _, ids), t in zip(rows, targets, strict=True)
                       if ids is not None]  # fmt: skip
            predictions = [task.postprocess_fn(vocabulary.decode(ids)) for _, _, ids in decoded]
            if decoded:
                for metric_fn in task.predict_metric_fns:
                    metrics = metric_fn([t for _, t, _ in decoded], predictions)
                    results.update({f"{objective}_{k}": float(v) for k, v in metrics.items()})
            results[f"{objective}_decoded"] = float(len(decoded))
            if jax.process_index() == 0:
                path = os.path.join(model_dir, "predictions", f"{name}_{self.split}.jsonl")
                _write_generations(path, vocabulary, decoded, predictions)
                _announce(path, "predictions", f"{len(decoded)} of {len(rows)} texts decoded")
        return results


def _real(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return ids[mask > 0]


def _until_eos(ids: np.ndarray, config) -> np.ndarray:
    """Generated ids up to and including the first EOS."""
    ends = np.flatnonzero(ids == config.eos_token_id)
    return ids[: ends[0] + 1] if len(ends) else ids


def _write_generations(path: str, vocabulary, decoded, predictions) -> None:
    """One JSON line per decoded text: text_id, input, target, generation (as scored)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for (example, target, ids), prediction in zip(decoded, predictions, strict=True):
            line = {
                "text_id": example["text_id"],
                "input": vocabulary.decode(example["inputs"]),
                "target": target["text"],
                "prediction": prediction,
                "ids": [int(i) for i in ids],
            }
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    os.replace(path + ".tmp", path)


def build_run_task(run):
    """The RunTask of `run.task` (its SeqIO tasks registered for this run)."""
    if run.task == "cmrc2019":
        return Cmrc2019RunTask(run)
    if run.task in LONGLM_RUN_TASKS:
        return LongLMPretrainRunTask(run)
    if run.task in CLUE_TASKS:
        return ClueClassificationRunTask(run)
    if run.task in CLUE_MRC_TASKS:
        from cmrcx.training.clue_mrc_run_tasks import ClueMrcRunTask

        return ClueMrcRunTask(run)
    raise ValueError(f"RunConfig.task {run.task!r}: no run task for it")
