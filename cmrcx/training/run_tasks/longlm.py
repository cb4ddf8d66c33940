"""LongLM pretraining as a run task (LOT paper section 4): text infilling and
conditional continuation, alone or as their mixture; perplexity-style scores and the
generations of the scoring split."""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import seqio
import tensorflow as tf

from cmrcx.common.errors import MissingSplitError
from cmrcx.common.files import write_atomically
from cmrcx.common.paths import resolve_path
from cmrcx.model_api.seq2seq import Seq2SeqModel
from cmrcx.models import registry
from cmrcx.tasks.lot import pretraining as longlm_tasks
from cmrcx.training.run_tasks.base import RunTask, announce, register
from cmrcx.training.task_options import LongLMOptions
from cmrcx.vocab.sentencepiece import special_id_differences

# RunConfig.task values: the mixture of both objectives, or one of them.
LONGLM_RUN_TASKS = (longlm_tasks.MIXTURE_NAME, *longlm_tasks.TASKS)
# The objectives' seed for evaluation examples: the same spans and split points at every
# evaluation, so metrics of two checkpoints compare.
LONGLM_EVAL_SEED = 0


class LongLMPretrainRunTask(RunTask):
    """LongLM pretraining: text infilling and/or conditional continuation from scratch
    (or from PRETRAINED), perplexity and BLEU-3/4 on the held-out texts (Table 9).

    Registers `<task>_train_<vocab>` (the mixture or one objective, padded to fixed
    lengths; the objectives' noise drawn with RunConfig.seed) and `<task>_score_<vocab>`
    (every held-out text once per objective, in order, with `task_index`, `example_index`
    and `decode_method`: the first RunConfig.max_decoded_examples of each objective are
    decoded the paper's way for BLEU).
    """

    options_class = LongLMOptions

    def __init__(self, run):
        self.run, self.name = run, run.task
        is_mixture = run.task == longlm_tasks.MIXTURE_NAME
        self.rows = list(longlm_tasks.TASKS) if is_mixture else [run.task]
        self.validation_dir = resolve_path(run.options.validation_data_dir)  # `cmrcx:` paths too
        longlm_tasks.register(
            run.vocabulary_name,
            run.vocab_file,
            {"train": run.data_dir, "validation": self.validation_dir},
            max_length=run.max_length,
            target_length=run.target_length,
        )
        self.row_tasks = [longlm_tasks.task_name(row, run.vocabulary_name) for row in self.rows]
        note_special_id_differences(run, self.row_tasks[0])
        self.lengths = {"inputs": run.max_length, "targets": run.target_length}
        splits = ["train"] + (["validation"] if self.validation_dir else [])
        self.train_task = longlm_tasks.register_function_task(
            f"{run.task}_train_{run.vocabulary_name}",
            self._train_examples,
            splits,
            self.row_tasks[0],
        )
        self.score_task = longlm_tasks.register_function_task(
            f"{run.task}_score_{run.vocabulary_name}",
            self._score_examples,
            splits,
            self.row_tasks[0],
        )
        decodings = [longlm_tasks.TASKS[row].decoding for row in self.rows]
        network = registry.network(run.model, "seq2seq")
        self.model = Seq2SeqModel(network, run.max_length, run.target_length, decodings)

    def _train_examples(self, split: str) -> tf.data.Dataset:
        """One pass over the split: the mixture's sampling (stopping when an objective runs
        out) or one objective, padded."""
        source = self.row_tasks[0] if len(self.rows) == 1 else longlm_tasks.MIXTURE_NAME
        dataset = seqio.get_mixture_or_task(source).get_dataset(
            sequence_length=None, split=split, shuffle=False, seed=self.run.seed, num_epochs=1
        )
        keep = ("inputs", "targets")
        return dataset.map(
            lambda ex: longlm_tasks.pad_to_lengths({k: ex[k] for k in keep}, self.lengths)
        )

    def _score_examples(self, split: str) -> tf.data.Dataset:
        """Each objective's examples of the split in order, tagged, padded."""
        datasets = []
        for index, name in enumerate(self.row_tasks):
            dataset = seqio.get_mixture_or_task(name).get_dataset(
                sequence_length=None, split=split, shuffle=False, seed=LONGLM_EVAL_SEED
            )

            def tag(number, example, index=index):
                number = tf.cast(number, tf.int32)
                decoded = number < self.run.options.max_decoded_examples
                return longlm_tasks.pad_to_lengths(
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

    def metrics_reported(self) -> dict[str, str]:
        """Per objective: perplexity (lower is better) and BLEU-3/4."""
        objectives = [longlm_tasks.TASKS[row].objective for row in self.rows]
        better = {"perplexity": "min", "bleu-3": "max", "bleu-4": "max"}
        return {f"{o}_{name}": mode for o in objectives for name, mode in better.items()}


def note_special_id_differences(run, task_name: str) -> None:
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
                generated = until_eos(row_scores[1:].astype(np.int64), self.run_task.run.model)
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
                announce(path, "predictions", f"{len(decoded)} of {len(rows)} texts decoded")
        return results


def _real(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return ids[mask > 0]


def until_eos(ids: np.ndarray, config) -> np.ndarray:
    """Generated ids up to and including the first EOS."""
    ends = np.flatnonzero(ids == config.eos_token_id)
    return ids[: ends[0] + 1] if len(ends) else ids


def _write_generations(path: str, vocabulary, decoded, predictions) -> None:
    """One JSON line per decoded text: text_id, input, target, generation (as scored)."""
    lines = []
    for (example, target, ids), prediction in zip(decoded, predictions, strict=True):
        line = {
            "text_id": example["text_id"],
            "input": vocabulary.decode(example["inputs"]),
            "target": target["text"],
            "prediction": prediction,
            "ids": [int(i) for i in ids],
        }
        lines.append(json.dumps(line, ensure_ascii=False) + "\n")
    write_atomically(path, "".join(lines))


register(LONGLM_RUN_TASKS, LongLMPretrainRunTask)


# --- Understanding: ClozeT and SenPos (the candidate pointer) ---------------------------------
