"""A CMRC 2019 run: tasks, model, trainer, checkpoints and evaluation, from a RunConfig.

Used by the `train`, `eval` and `export` entry points; gin-free (the RunConfig
arrives filled in).
"""

from __future__ import annotations

import math
import operator
import os

import jax
import numpy as np
import optax
import seqio
import tensorflow as tf
from tqdm import tqdm

from cmrcx.benchmarks.cmrc2019 import evaluation
from cmrcx.benchmarks.cmrc2019.official_format import read_passages, write_predictions
from cmrcx.benchmarks.cmrc2019.windows import TOKEN_FEATURES
from cmrcx.datasets.cmrc2019 import require_split
from cmrcx.launch import ConfigError, RunConfig
from cmrcx.model_api.cloze import ClozeModel
from cmrcx.tasks import cmrc2019 as cmrc2019_tasks
from cmrcx.training import checkpoints, input_pipeline, partitioning, released_optimizer
from cmrcx.training.metric_writer import MetricWriter
from cmrcx.training.trainer import Trainer, adamw_with_warmup

# What the device sees of a window: SCORE_KEYS when scoring, plus the target to train.
SCORE_KEYS = (*TOKEN_FEATURES, "blank_positions", "blank_in_window", "example_mask")
TRAIN_KEYS = (*SCORE_KEYS, "target_blank")


class Cmrc2019Runner:
    """Everything one run needs, built once."""

    def __init__(self, run: RunConfig, for_training: bool = True):
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
        self.mesh = partitioning.make_mesh(run.mesh_shape)
        self.eval_batch_size = self._check_batch_sizes()
        self.num_train_steps, optimizer = self._optimizer(for_training)
        self.model = ClozeModel(run.model)
        self.trainer = Trainer(
            self.model,
            optimizer,
            self.mesh,
            self._example_batch(),
            rules=run.logical_rules or partitioning.logical_rules(run.partitioning),
            seed=run.seed,
            grad_accum_steps=run.grad_accum_steps,
        )
        self.checkpoints = checkpoints.TrainCheckpoints(
            run.model_dir, keep=run.keep_checkpoints, save_every=run.save_every
        )
        self.writer = MetricWriter(run.model_dir)

    def _check_batch_sizes(self) -> int:
        """Checks the training batch against the mesh; returns the evaluation batch size.

        The evaluation batch is rounded up to a multiple of the data-parallel device
        count (the padded rows are masked), so a 6-device run does not die at its
        final evaluation with batch 32.
        """
        run, data_size = self.run, self.mesh.shape["data"]
        if run.batch_size % (data_size * run.grad_accum_steps):
            raise ConfigError(
                f"RunConfig.batch_size {run.batch_size} does not split into "
                f"{run.grad_accum_steps} micro-batch(es) over {data_size} data-parallel devices; "
                f"use a multiple of {data_size * run.grad_accum_steps} (or another mesh_shape)"
            )
        eval_batch_size = -(-run.eval_batch_size // data_size) * data_size
        if eval_batch_size != run.eval_batch_size:
            print(
                f"eval batch {run.eval_batch_size} -> {eval_batch_size}: a multiple of the "
                f"{data_size} data-parallel devices (padding rows are masked)",
                flush=True,
            )
        return eval_batch_size

    def _optimizer(self, for_training: bool) -> tuple[int, optax.GradientTransformation]:
        """(optimizer steps of the run, the optimizer), for RunConfig.optimizer.

        adamw: epochs over training *windows* (what a step consumes), rounded up; the
        schedule spans exactly those steps. released_script: the script's counts,
        int(epochs) epochs of whole batches of windows, and a schedule length counted
        in *blanks* (cmrcx.training.released_optimizer).
        """
        run = self.run
        if not for_training:  # the optimizer's state structure only, to restore checkpoints
            if run.optimizer == "released_script":
                return 1, released_optimizer.released_bert_adam(run.learning_rate, 1)
            return 1, adamw_with_warmup(run.learning_rate, 1)
        windows = None
        if run.num_train_steps is None or run.optimizer == "released_script":
            require_split(run.data_dir, run.train_split)
            windows = input_pipeline.count_examples(self.train_task, run.train_split)
        if run.optimizer == "released_script":
            blanks = self._count_training_blanks()
            schedule = released_optimizer.script_schedule_steps(
                blanks, run.batch_size, run.num_epochs
            )
            steps = run.num_train_steps or released_optimizer.script_train_steps(
                windows, run.batch_size, run.num_epochs
            )
            print(
                f"released script's schedule: {blanks} training blanks x {run.num_epochs} "
                f"epochs / batch {run.batch_size} = {schedule} (t_total); {windows} windows "
                f"-> {steps} steps",
                flush=True,
            )
            optimizer = released_optimizer.released_bert_adam(
                run.learning_rate,
                max(1, schedule),
                run.warmup_fraction,
                run.weight_decay,
                max_grad_norm=run.max_grad_norm,
            )
            return steps, optimizer
        steps = run.num_train_steps
        if steps is None:
            steps = math.ceil(run.num_epochs * windows / run.batch_size)
            print(
                f"{windows} training windows x {run.num_epochs} epochs / batch "
                f"{run.batch_size} = {steps} steps",
                flush=True,
            )
        optimizer = adamw_with_warmup(
            run.learning_rate, steps, run.warmup_fraction, run.weight_decay, run.max_grad_norm
        )
        return steps, optimizer

    def _count_training_blanks(self) -> int:
        """Blanks of the training split (the script's len(train_examples)), from the source."""
        source = seqio.get_mixture_or_task(self.train_task).source
        dataset = source.get_dataset(split=self.run.train_split, shuffle=False)
        return int(dataset.reduce(0, lambda n, ex: n + tf.size(ex["answers"])).numpy())

    def _example_batch(self) -> dict[str, np.ndarray]:
        run, blanks = self.run, cmrc2019_tasks.MAX_BLANKS

        def width(key):
            if key in TOKEN_FEATURES:
                return [run.max_length]
            return [blanks] if key.startswith("blank_") else []

        return {k: np.zeros([run.batch_size, *width(k)], np.int32) for k in TRAIN_KEYS}

    def initial_state(self):
        """Latest checkpoint if there is one, else fresh (+ pretrained encoder)."""
        step = self.checkpoints.latest_step()
        if step is not None:
            print(f"resuming from {self.checkpoints.directory}/{step}", flush=True)
            return self.checkpoints.restore(step, self.trainer.abstract_state)
        state = self.trainer.init_state()
        if self.run.pretrained:
            state = self._with_pretrained_encoder(state)
        return state

    def restore(self, step: int | None = None):
        """(step, state) of a training checkpoint: `step`, or the latest."""
        step = step if step is not None else self.checkpoints.latest_step()
        if step is None:
            raise ConfigError(f"no checkpoint in {self.checkpoints.directory}: train first")
        return step, self.checkpoints.restore(step, self.trainer.abstract_state)

    def _with_pretrained_encoder(self, state):
        abstract_encoder = self.trainer.abstract_state.params["bert"]
        restored = checkpoints.load_params(self.run.pretrained, None)
        encoder = restored["bert"] if "bert" in restored else restored
        shapes = jax.tree.map(lambda a: a.shape, abstract_encoder)
        if jax.tree.map(np.shape, encoder) != shapes:
            raise ValueError(
                f"{self.run.pretrained}: encoder parameters do not match the "
                "model config (compare its model_config.json with the gin model)"
            )
        encoder = jax.tree.map(
            lambda a, s: jax.device_put(a, s.sharding), encoder, abstract_encoder
        )
        params = {**state.params, "bert": encoder}
        print(f"encoder weights from {self.run.pretrained}", flush=True)
        return state.replace(params=params)

    def train(self, stop_at: int | None = None):
        """Trains to the schedule's end (or `stop_at`), saving and evaluating on the way."""
        run, state = self.run, self.initial_state()
        start = int(jax.device_get(state.step))
        end = min(self.num_train_steps, stop_at or self.num_train_steps)
        # Every host reads the same global batch and feeds its rows: the data, and
        # so the losses, do not depend on the number of hosts.
        shard = input_pipeline.host_shard(self.trainer.batch_sharding, run.batch_size)
        batches = input_pipeline.train_batches(
            self.train_task, run.train_split, run.batch_size, TRAIN_KEYS, run.seed, start, shard
        )
        sums, losses = None, []
        progress = tqdm(
            range(start, end),
            desc="train",
            initial=start,
            total=end,
            disable=jax.process_index() != 0,
        )
        for step in progress:
            state, metrics = self.trainer.train_step(state, next(batches))
            sums = metrics if sums is None else jax.tree.map(operator.add, sums, metrics)
            if (step + 1) % run.log_every == 0 or step + 1 == end:
                sums = jax.device_get(sums)
                line = {
                    "loss": float(sums["loss_sum"] / sums["examples"]),
                    "accuracy": float(sums["correct"] / sums["examples"]),
                }
                losses.append((step + 1, line["loss"]))
                progress.set_postfix(loss=f"{line['loss']:.4f}")
                self.writer.write(step + 1, "train", line)
                sums = None
            self.checkpoints.save(step + 1, state, force=step + 1 == end)
            if run.eval_every and (step + 1) % run.eval_every == 0 and step + 1 != end:
                self.evaluate(state, step + 1)
        self.checkpoints.close()
        return state, losses

    def evaluate(self, state, step: int, split: str | None = None) -> dict[str, float]:
        """Scores a split, writes predictions/<task>_<split>.json and metrics lines."""
        split = split or self.run.eval_split
        passages = read_passages(
            require_split(self.run.data_dir, split), require_answers=split != "test"
        )
        table = evaluation.BlankLogitTable()
        shard = input_pipeline.host_shard(self.trainer.batch_sharding, self.eval_batch_size)
        batches = input_pipeline.eval_batches(
            self.score_task, split, self.eval_batch_size, SCORE_KEYS, shard
        )
        for device_batch, host_batch in tqdm(
            batches, desc=f"eval {split}", disable=jax.process_index() != 0
        ):
            # This host's rows go in; the whole batch's logits come back on every host.
            logits = self.trainer.score(state.params, device_batch)
            table.add(logits[: len(host_batch["input_ids"])], host_batch)
        table.check_complete()
        decoded = {
            mode: evaluation.decode_all(table.tables, mode) for mode in evaluation.DECODING_MODES
        }
        predictions = decoded[self.run.decoding]
        if jax.process_index() == 0:
            path = os.path.join(
                self.run.model_dir, "predictions", f"{self.train_task}_{split}.json"
            )
            write_predictions(path, predictions)
            print(f"predictions: {path} ({len(predictions)} passages)", flush=True)
        if passages[0].answers is None:
            return {}
        metric_fns = seqio.get_mixture_or_task(self.score_task).predict_metric_fns
        answers = {p.context_id: list(p.answers) for p in passages}
        results = evaluation.score_modes(decoded, answers, metric_fns)
        self.writer.write(step, split, results)
        return results
