"""LOT's run tasks: LongLM pretraining (LOT paper section 4); ClozeT and SenPos (the
candidate pointer, section 5.2, and the LongLM authors' ClozeT script); the generation
tasks PlotCom and OutGen (sections 3.3, 3.4, 5.2; Table 11); one model for all four, the
`lot` mixture (text-to-text; no LOT baseline trains one)."""

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
from cmrcx.benchmarks.lot import understanding as understanding_layouts
from cmrcx.common.errors import ConfigError, MissingSplitError
from cmrcx.common.files import write_atomically
from cmrcx.common.paths import resolve_path
from cmrcx.datasets import lot as lot_tfds
from cmrcx.model_api.candidate_pointer import CandidatePointerModel, LongLMAuthorsClozeModel
from cmrcx.model_api.causal_lm import CausalLMModel
from cmrcx.model_api.seq2seq import Seq2SeqModel
from cmrcx.models import registry
from cmrcx.tasks.lot import generation as generation_tasks
from cmrcx.tasks.lot import mixture as mixture_tasks
from cmrcx.tasks.lot import pretraining as longlm_tasks
from cmrcx.tasks.lot import understanding as lot_understanding
from cmrcx.training.run_tasks.base import RunTask, announce, register
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

    def __init__(self, run):
        self.run, self.name = run, run.task
        is_mixture = run.task == longlm_tasks.MIXTURE_NAME
        self.rows = list(longlm_tasks.TASKS) if is_mixture else [run.task]
        self.validation_dir = resolve_path(run.validation_data_dir)  # `cmrcx:` paths too
        longlm_tasks.register(
            run.vocabulary_name,
            run.vocab_file,
            {"train": run.data_dir, "validation": self.validation_dir},
            max_length=run.max_length,
            target_length=run.target_length,
        )
        self.row_tasks = [longlm_tasks.task_name(row, run.vocabulary_name) for row in self.rows]
        _note_special_id_differences(run, self.row_tasks[0])
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
                decoded = number < self.run.max_decoded_examples
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
                announce(path, "predictions", f"{len(decoded)} of {len(rows)} texts decoded")
        return results


def _real(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return ids[mask > 0]


def _until_eos(ids: np.ndarray, config) -> np.ndarray:
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


class LotUnderstandingRunTask(RunTask):
    """ClozeT or SenPos with the paper's candidate pointer (section 5.2) for the run's
    model family, or the LongLM authors' ClozeT step (`lot_clozet_longlm_authors`).

    The layout follows the family's vocabulary and causality (WordPiece: BERT; causal
    WordPiece: GPT-2, the context token last; SentencePiece: T5, whose decoder states the
    pointer reads); `cmrcx.benchmarks.lot.understanding` shows
    each with an example. Evaluation writes MODEL_DIR/predictions/<task>_<split>.jsonl:
    the split's file line for line, inputs unchanged, the predicted label in the gold
    file's type (`formats.write_predictions`), so the official eval.py and
    `python -m cmrcx.score lot_clozet GOLD PRED` score it as the run does.
    """

    def __init__(self, run):
        self.run, self.name = run, run.task
        self.data_task = lot_understanding.TASKS[run.task]
        family = registry.family_of(run.model)
        # "wordpiece" | "wordpiece_causal" (GPT-2) | "sentencepiece"
        self.layout = understanding_layouts.layout_kind(family.vocabulary, family.causal)
        (self.train_task,) = lot_understanding.register(
            run.vocabulary_name,
            run.vocab_file,
            {run.task: run.data_dir},
            layout=self.layout,
            max_length=run.max_length,
            lower_case=run.lower_case,
            tfds_cache_dir=run.tfds_cache_dir,
        )
        self.score_task = self.train_task
        candidates = lot_understanding.num_candidates(
            self.data_task, run.data_dir, run.tfds_cache_dir
        )
        if run.task == lot_understanding.AUTHORS:
            network = registry.network(run.model, "seq2seq")
            self.model = LongLMAuthorsClozeModel(network, run.max_length, run.max_length + 1)
        else:
            network = registry.network(run.model, "candidate_pointer")
            self.model = CandidatePointerModel(network, run.max_length, candidates)
        _check_special_ids_fit(run, self.layout)

    def require_split(self, split: str) -> None:
        lot_tfds.require_split(self.data_task, self.run.data_dir, split)

    def evaluation(self, split: str) -> LotUnderstandingEvaluation:
        return LotUnderstandingEvaluation(self, split)

    def metrics_reported(self) -> dict[str, str]:
        return {"accuracy": "max"}

    def results_table(self, results: dict[str, float], split: str) -> str:
        """`lot_clozet validation accuracy: 0.7381 (73.81 %)`: the official fraction and
        the paper's percentage (Table 10)."""
        return "\n".join(
            f"{self.name} {split} {key}: {value:.4f} ({100 * value:.2f} %)"
            for key, value in results.items()
        )


def _check_special_ids_fit(run, layout: str) -> None:
    """ConfigError when a marker id the layout needs is past the model's embedding rows
    (`<sep>`/`<mask>` appended after a SentencePiece vocabulary that lacks them)."""
    if layout != "sentencepiece":
        return
    task = seqio.get_mixture_or_task(lot_understanding.task_name(run.task, run.vocabulary_name))
    key = "inputs" if run.task == lot_understanding.AUTHORS else "input_ids"
    vocabulary = task.output_features[key].vocabulary
    ids = lot_understanding.special_ids(layout, vocabulary)
    highest = max(ids.sep, ids.mask, *ids.sentinels)
    if highest >= run.model.vocab_size:
        raise ConfigError(
            f"{run.task}: the layout's token id {highest} (<sep>/<mask>, appended after "
            f"{run.vocab_file}'s {vocabulary.vocab_size} ids) is past the model's "
            f"{run.model.vocab_size} embedding rows: use a model with vocab_size > {highest}"
        )


class LotUnderstandingEvaluation:
    """The candidate logits of a split -> argmax -> the prediction file and accuracy."""

    def __init__(self, run_task: LotUnderstandingRunTask, split: str):
        self.run_task, self.split = run_task, split
        self.indices: list[int] = []
        self.labels: list[int] = []
        self.predicted: list[int] = []

    def add(self, logits: np.ndarray, examples: dict[str, np.ndarray]) -> None:
        """logits: float [n, candidates] for the n real rows of `examples`."""
        n = len(logits)
        self.predicted.extend(int(i) for i in np.argmax(logits, axis=-1))
        self.indices.extend(int(i) for i in examples["example_index"][:n])
        self.labels.extend(int(i) for i in examples["label"][:n])

    def finish(self, model_dir: str) -> dict[str, float]:
        run = self.run_task.run
        records = lot_understanding.split_records(
            self.run_task.data_task, run.data_dir, self.split, run.tfds_cache_dir
        )
        if sorted(self.indices) != list(range(len(records))):
            raise RuntimeError(
                f"{self.run_task.name} {self.split}: scored {len(self.indices)} examples for "
                f"{len(records)} records"
            )
        order = np.argsort(self.indices)
        predicted = [self.predicted[i] for i in order]
        labels = [self.labels[i] for i in order]
        if jax.process_index() == 0:
            name = f"{self.run_task.name}_{self.split}.jsonl"
            path = os.path.join(model_dir, "predictions", name)
            lot_formats.write_predictions(path, records, predicted)
            announce(path, "predictions", f"{len(predicted)} records")
        if min(labels) < 0:
            return {}
        task = seqio.get_mixture_or_task(self.run_task.score_task)
        results = {}
        for metric_fn in task.predict_metric_fns:
            results.update({k: float(v) for k, v in metric_fn(labels, predicted).items()})
        return results


register(tuple(lot_understanding.TASKS), LotUnderstandingRunTask)


# --- PlotCom and OutGen (LOT paper sections 3.3, 3.4 and 5.2; Table 11) --------------------

LOT_GENERATION_RUN_TASKS = tuple(generation_tasks.TASKS)  # "lot_plotcom", "lot_outgen"


class LotGenerationRunTask(RunTask):
    """PlotCom or OutGen: seq2seq fine-tuning (teacher forcing) in the authors' input
    format (`cmrcx.tasks.lot.generation`), or for a decoder-only family (GPT-2) LM
    fine-tuning on prompt + continuation with the loss on the continuation
    (`CausalLMModel`); at every evaluation a generation for every example of the split,
    decoded as RunConfig.generation_* say (the paper's top-k 40, temperature 0.7 in the
    gin files), cleaned as the authors' gen.py cleans it.

    Registers `<task>_<vocab>` (the SeqIO task: texts, ids, postprocessing, the official
    metrics), `<task>_train_<vocab>` (its examples padded to fixed lengths) and
    `<task>_score_<vocab>` (the same with `decode_method` 0: every example generated).
    Writes MODEL_DIR/predictions/<task>_<split>.jsonl in the official file's schema.
    """

    def __init__(self, run):
        self.run, self.name = run, run.task
        self.row = generation_tasks.get_task(run.task)
        family = registry.family_of(run.model)
        # A decoder-only family continues its prompt: LM fine-tuning on the target part.
        self.causal = family.causal_lm is not None
        (self.row_task,) = generation_tasks.register(
            run.vocabulary_name,
            run.vocab_file,
            {run.task: run.data_dir},
            max_length=run.max_length,
            target_length=run.target_length,
            tfds_cache_dir=run.tfds_cache_dir,
            drop_last_char_without_eos=run.drop_last_char_without_eos,
            vocabulary_kind=family.vocabulary,
        )
        if family.vocabulary == "sentencepiece":
            _note_special_id_differences(run, self.row_task)
        self.lengths = {"inputs": run.max_length, "targets": run.target_length}
        splits = list(generation_tasks.SPLITS)
        vocabulary_name = run.vocabulary_name
        self.train_task = longlm_tasks.register_function_task(
            f"{run.task}_train_{vocabulary_name}", self._train_examples, splits, self.row_task
        )
        self.score_task = longlm_tasks.register_function_task(
            f"{run.task}_score_{vocabulary_name}", self._score_examples, splits, self.row_task
        )
        self.decoding = longlm_tasks.Decoding(
            run.generation_method,
            run.generation_top_k,
            run.generation_temperature,
            run.generation_max_new_tokens,
        )
        if self.causal:
            if run.generation_start_token_id is not None:
                raise ConfigError(
                    f"{run.task}: RunConfig.generation_start_token_id is for encoder-decoders; "
                    f"a {family.name} model continues its input (set it to None)"
                )
            self.model = CausalLMModel(
                registry.network(run.model, "causal_lm"),
                run.max_length,
                run.target_length,
                [self.decoding],
                sampling_seed=run.generation_seed,
            )
        else:
            self.model = Seq2SeqModel(
                registry.network(run.model, "seq2seq"),
                run.max_length,
                run.target_length,
                [self.decoding],
                generation_start_token_id=run.generation_start_token_id,
                sampling_seed=run.generation_seed,
            )

    def _examples(self, split: str) -> tf.data.Dataset:
        return seqio.get_mixture_or_task(self.row_task).get_dataset(
            sequence_length=None, split=split, shuffle=False
        )

    def _train_examples(self, split: str) -> tf.data.Dataset:
        """The split's examples, padded (the input pipeline shuffles)."""
        return self._examples(split).map(
            lambda ex: longlm_tasks.pad_to_lengths(
                {"inputs": ex["inputs"], "targets": ex["targets"]}, self.lengths
            )
        )

    def _score_examples(self, split: str) -> tf.data.Dataset:
        """The split's examples in file order, padded, each to be generated (method 0)."""
        return self._examples(split).map(
            lambda ex: longlm_tasks.pad_to_lengths(
                {**ex, "decode_method": tf.constant(0, tf.int32)}, self.lengths
            )
        )

    def require_split(self, split: str) -> None:
        lot_tfds.require_split(self.row.lot_task, self.run.data_dir, split)

    def evaluation(self, split: str) -> LotGenerationEvaluation:
        return LotGenerationEvaluation(self, split)

    def prediction_path(self, model_dir: str, split: str) -> str:
        """MODEL_DIR/predictions/<task>_<split>.jsonl, e.g. lot_outgen_validation.jsonl."""
        return os.path.join(model_dir, "predictions", f"{self.name}_{split}.jsonl")


class LotGenerationEvaluation:
    """Every example's generation: cleaned as gen.py does, written into the official file's
    schema (its inputs unchanged, the target field filled), scored with the task's metric
    functions (the official eval.py's metrics) when the split has targets."""

    def __init__(self, run_task: LotGenerationRunTask, split: str):
        self.run_task, self.split = run_task, split
        self.rows: list[tuple[int, int, str, np.ndarray]] = []  # index, line, raw, ids

    def add(self, scores: np.ndarray, examples: dict[str, np.ndarray]) -> None:
        """scores: float [n, 1 + target_length] (Seq2SeqModel.score_batch) for n real rows."""
        steps = self.run_task.decoding.max_new_tokens or self.run_task.run.target_length
        for i, row_scores in enumerate(scores):
            self.rows.append(
                (
                    int(examples["example_index"][i]),
                    int(examples["line"][i]),
                    examples["raw"][i].decode("utf-8"),
                    row_scores[1 : 1 + steps].astype(np.int64),
                )
            )

    def finish(self, model_dir: str) -> dict[str, float]:
        """Writes predictions/<task>_<split>.jsonl; returns the official metrics ({} for a
        split without targets, such as LOT's test files)."""
        run_task = self.run_task
        task = seqio.get_mixture_or_task(run_task.row_task)
        vocabulary = task.output_features["targets"].vocabulary
        eos_id = run_task.model.generator.eos_token_id
        self.rows.sort()
        indices = [index for index, *_ in self.rows]
        if indices != list(range(len(indices))):
            raise RuntimeError(f"{run_task.name} {self.split}: examples missing or repeated")
        records, predictions = [], []
        for _, line, raw, ids in self.rows:
            fields = json.loads(raw)
            records.append(lot_formats.parse_record(run_task.row.lot_task, line, fields))
            decoded = _until_eos(ids, run_task.run.model)  # the model's EOS = the generator's
            predictions.append(
                task.postprocess_fn(generation_tasks.decoded_output(vocabulary, decoded, eos_id))
            )
        path = run_task.prediction_path(model_dir, self.split)
        if jax.process_index() == 0:
            lot_formats.write_predictions(path, records, predictions)
            announce(path, "predictions", f"{len(records)} {run_task.row.lot_task} generations")
        if not records or not all(lot_formats.has_gold(r) for r in records):
            return {}
        golds = [task.postprocess_fn(None, example={"raw": raw}, is_target=True)
                 for _, _, raw, _ in self.rows]  # fmt: skip
        results = {}
        for metric_fn in task.predict_metric_fns:
            results.update({k: float(v) for k, v in metric_fn(golds, predictions).items()})
        return results


register(LOT_GENERATION_RUN_TASKS, LotGenerationRunTask)


# --- One model for all of LOT: the `lot` mixture (issue 20, item 6) -----------------------

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
            rates=run.mixture_rates,
            max_length=run.max_length,
            target_length=run.target_length,
            tfds_cache_dir=run.tfds_cache_dir,
            drop_last_char_without_eos=run.drop_last_char_without_eos,
            guard_report=self.guard_report,
        )
        self.row_tasks = dict(zip(mixture_tasks.ROWS, names, strict=True))
        _note_special_id_differences(run, names[0])
        _check_marker_ids_fit(run, names[0])
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
        self.decoding = longlm_tasks.Decoding(
            run.generation_method,
            run.generation_top_k,
            run.generation_temperature,
            run.generation_max_new_tokens,
        )
        self.model = Seq2SeqModel(
            registry.network(run.model, "seq2seq"),
            run.max_length,
            run.target_length,
            [self.decoding],
            generation_start_token_id=run.generation_start_token_id,
            sampling_seed=run.generation_seed,
            num_candidates=self.num_candidates,
        )

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
        """Tables 10 and 11 of this one model (`cmrcx.training.lot_tables`)."""
        from cmrcx.training import lot_tables

        summary = lot_tables.summarize(lot_tables.metrics_by_task(results), split)
        return lot_tables.format_tables(summary)


def _check_marker_ids_fit(run, task_name: str) -> None:
    """ConfigError when `<sep>`/`<mask>` (appended after a vocabulary without them) or a
    sentinel is past the model's embedding rows."""
    vocabulary = seqio.get_mixture_or_task(task_name).output_features["inputs"].vocabulary
    ids = lot_understanding.special_ids("sentencepiece", vocabulary)
    highest = max(ids.sep, ids.mask, *ids.sentinels)
    if highest >= run.model.vocab_size:
        raise ConfigError(
            f"{run.task}: the token id {highest} (<sep>/<mask>, appended after "
            f"{run.vocab_file}'s {vocabulary.vocab_size} ids) is past the model's "
            f"{run.model.vocab_size} embedding rows: use a model with vocab_size > {highest}"
        )


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
