"""LOT's task runs: ClozeT and SenPos (the candidate pointer, section 5.2, and the
LongLM authors' ClozeT script) and the generation tasks PlotCom and OutGen (sections
3.3, 3.4, 5.2; Table 11)."""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import seqio
import tensorflow as tf

from cmrcx.benchmarks.lot import formats as lot_formats
from cmrcx.common.errors import ConfigError
from cmrcx.datasets import lot as lot_tfds
from cmrcx.model_api.candidate_pointer import CandidatePointerModel, LongLMAuthorsClozeModel
from cmrcx.model_api.causal_lm import CausalLMModel
from cmrcx.model_api.seq2seq import Seq2SeqModel
from cmrcx.models import registry
from cmrcx.tasks.lot import generation as generation_tasks
from cmrcx.tasks.lot import pretraining as longlm_tasks
from cmrcx.tasks.lot import understanding as lot_understanding
from cmrcx.training.run_tasks.base import RunTask, announce, metric_lines, register
from cmrcx.training.run_tasks.longlm import note_special_id_differences, until_eos
from cmrcx.training.task_options import LotGenerationOptions
from cmrcx.vocab import layouts


class LotUnderstandingRunTask(RunTask):
    """ClozeT or SenPos with the paper's candidate pointer (section 5.2) for the run's
    model family, or the LongLM authors' ClozeT step (`lot_clozet_longlm_authors`).

    The layout is the family's input layout's (`cmrcx.vocab.layouts`: "bert" WordPiece;
    "gpt2" causal WordPiece, the context token last; "t5" SentencePiece, whose decoder
    states the pointer reads); `cmrcx.benchmarks.lot.understanding` shows
    each with an example. Evaluation writes MODEL_DIR/predictions/<task>_<split>.jsonl:
    the split's file line for line, inputs unchanged, the predicted label in the gold
    file's type (`formats.write_predictions`), so the official eval.py and
    `python -m cmrcx.score lot_clozet GOLD PRED` score it as the run does.
    """

    def __init__(self, run):
        self.run, self.name = run, run.task
        self.data_task = lot_understanding.TASKS[run.task]
        self.layout = registry.family_of(run.model).layout
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

    def check_split(self, split: str) -> None:
        self.require_split(split)
        lot_formats.read_split(self.data_task, self.run.data_dir, split)

    def evaluation(self, split: str) -> LotUnderstandingEvaluation:
        return LotUnderstandingEvaluation(self, split)

    def metrics_reported(self) -> dict[str, str]:
        return {"accuracy": "max"}

    def results_table(self, results: dict[str, float], split: str) -> str:
        """`lot_clozet validation accuracy: 73.81`: the fraction (LOT's scale, kept in
        metrics.jsonl) printed as a percentage, as Table 10 and every read-out
        (`base.PRINTED_FIGURES`)."""
        return metric_lines(self.name, results, split, fractions=True)


def _check_special_ids_fit(run, layout) -> None:
    """ConfigError when a marker id the layout needs is past the model's embedding rows
    (`<sep>`/`<mask>` appended after a SentencePiece vocabulary that lacks them)."""
    if not layout.appends_markers:
        return
    task = seqio.get_mixture_or_task(lot_understanding.task_name(run.task, run.vocabulary_name))
    key = "inputs" if run.task == lot_understanding.AUTHORS else "input_ids"
    check_marker_ids_fit(run, task.output_features[key].vocabulary)


def check_marker_ids_fit(run, vocabulary) -> None:
    """ConfigError when `<sep>`/`<mask>` (appended after a SentencePiece vocabulary without
    them) or a sentinel is past the model's embedding rows."""
    ids = layouts.T5.special_ids(vocabulary)
    highest = max(ids.sep_id, ids.mask_id, *ids.sentinels)
    if highest >= run.model.vocab_size:
        raise ConfigError(
            f"{run.task}: the token id {highest} (<sep>/<mask>, appended after "
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

    options_class = LotGenerationOptions

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
            drop_last_char_without_eos=run.options.drop_last_char_without_eos,
            layout=family.layout,
        )
        if not self.causal:  # an encoder-decoder's (T5Config's) pad / eos ids
            note_special_id_differences(run, self.row_task)
        self.lengths = {"inputs": run.max_length, "targets": run.target_length}
        splits = list(generation_tasks.SPLITS)
        vocabulary_name = run.vocabulary_name
        self.train_task = longlm_tasks.register_function_task(
            f"{run.task}_train_{vocabulary_name}", self._train_examples, splits, self.row_task
        )
        self.score_task = longlm_tasks.register_function_task(
            f"{run.task}_score_{vocabulary_name}", self._score_examples, splits, self.row_task
        )
        self.decoding = generation_decoding(run.options)
        if self.causal:
            if run.options.generation_start_token_id is not None:
                raise ConfigError(
                    f"{run.task}: RunConfig.generation_start_token_id is for encoder-decoders; "
                    f"a {family.name} model continues its input (set it to None)"
                )
            self.model = CausalLMModel(
                registry.network(run.model, "causal_lm"),
                run.max_length,
                run.target_length,
                [self.decoding],
                sampling_seed=run.options.generation_seed,
            )
        else:
            self.model = generation_model(run, self.decoding)

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

    def check_split(self, split: str) -> None:
        self.require_split(split)
        lot_formats.read_split(self.row.lot_task, self.run.data_dir, split)

    def evaluation(self, split: str) -> LotGenerationEvaluation:
        return LotGenerationEvaluation(self, split)

    def prediction_path(self, model_dir: str, split: str) -> str:
        """MODEL_DIR/predictions/<task>_<split>.jsonl, e.g. lot_outgen_validation.jsonl."""
        return os.path.join(model_dir, "predictions", f"{self.name}_{split}.jsonl")

    def results_table(self, results: dict[str, float], split: str) -> str:
        """`lot_outgen validation bleu-1: 25.12`: the organisers' eval.py fractions (kept in
        metrics.jsonl) printed as percentages, as Table 11 (`base.PRINTED_FIGURES`)."""
        return metric_lines(self.name, results, split, fractions=True)


def generation_decoding(options: LotGenerationOptions) -> longlm_tasks.Decoding:
    """The decoding every evaluation example is generated with (RunConfig.generation_*)."""
    return longlm_tasks.Decoding(
        options.generation_method,
        options.generation_top_k,
        options.generation_temperature,
        options.generation_max_new_tokens,
    )


def generation_model(run, decoding, **options) -> Seq2SeqModel:
    """The run's seq2seq network with its generation settings and one decoding."""
    return Seq2SeqModel(
        registry.network(run.model, "seq2seq"),
        run.max_length,
        run.target_length,
        [decoding],
        generation_start_token_id=run.options.generation_start_token_id,
        sampling_seed=run.options.generation_seed,
        **options,
    )


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
            decoded = until_eos(ids, run_task.run.model)  # the model's EOS = the generator's
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
