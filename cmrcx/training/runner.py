"""One run of any registered task: SeqIO tasks, model, trainer, checkpoints, evaluation.

Used by the `train`, `eval` and `export` entry points; gin-free (the RunConfig
arrives filled in). What differs between tasks (SeqIO registration, Model API,
decoding to the official format) comes from `cmrcx.training.run_tasks`.
"""

from __future__ import annotations

import json
import math
import operator
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

from cmrcx.common import errors
from cmrcx.common.errors import ConfigError
from cmrcx.common.files import write_atomically
from cmrcx.common.progress import said_if_slow, ticking
from cmrcx.training import (
    checkpoints,
    input_pipeline,
    memory_check,
    partitioning,
    released_optimizer,
    run_config,
    transformers2_adamw,
)
from cmrcx.training import selection as model_selection
from cmrcx.training.metric_writer import MetricWriter
from cmrcx.training.model_dir import (
    check_writable,
    model_dir_lock,
    preemption_noticed,
    sigterm_flag,
)
from cmrcx.training.prefetch import Prefetched
from cmrcx.training.prepared_examples import prepared_store
from cmrcx.training.run_config import RunConfig
from cmrcx.training.run_tasks import build_run_task
from cmrcx.training.selection import Selection
from cmrcx.training.trainer import (
    Trainer,
    adamw_with_warmup,
    warmup_linear_decay,
    with_padding_row_frozen,
)
from cmrcx.weights import exports


def require_trained(model_dir: str) -> None:
    """ConfigError, before a Runner makes anything in MODEL_DIR, when no run trained there
    (eval and export of a mistyped MODEL_DIR)."""
    if not checkpoints.has_checkpoints(model_dir):
        raise ConfigError(f"no checkpoint in {checkpoints.directory_of(model_dir)}: train first")


class Runner:
    """Everything one run needs, built once."""

    def __init__(self, run: RunConfig, for_training: bool = True):
        run = self.run = run_config.with_task_options(run)  # the options as its task's class
        # A new run's PRETRAINED that is no export of its network: said before anything is
        # made in MODEL_DIR (only a run's start reads it).
        if for_training and run.pretrained and not checkpoints.has_checkpoints(run.model_dir):
            run_config.check_pretrained(run.pretrained, run.model)
        check_writable(run.model_dir)
        saved = run_config.read_run_config(run.model_dir)
        if saved is not None:
            run_config.check_same_run(saved, run, run.model_dir)
        self.task = build_run_task(run)
        self.train_task, self.score_task = self.task.train_task, self.task.score_task
        self.model = self.task.model
        self.store = prepared_store(run)
        self.mesh = partitioning.make_mesh(run.mesh_shape, dcn_mesh_shape=run.dcn_mesh_shape)
        self.eval_batch_size = self._check_batch_sizes()
        self._train_windows = None  # training examples, once counted
        # The rate the update after k steps uses (host side, for the metric lines).
        self.learning_rate_at = None
        self.num_train_steps, optimizer = self._optimizer(for_training)
        if getattr(getattr(self.task, "row", None), "dataset", None) == "cmrc2018":
            # CLUE's run_mrc.py model (and transformers'): the [PAD] row gets no gradient.
            optimizer = with_padding_row_frozen(optimizer)
        self.selection = Selection.of_run(run)  # None: the final model is the run's model
        self.eval_every = run.eval_every
        if for_training and self.selection is not None:
            self.eval_every = model_selection.prepare(
                run, self.task, self.num_train_steps, self._training_examples
            )
        self.trainer = Trainer(
            self.model,
            optimizer,
            self.mesh,
            self.model.example_batch(run.batch_size),
            rules=run.logical_rules or partitioning.logical_rules(run.partitioning),
            seed=run.seed,
            grad_accum_steps=run.grad_accum_steps,
            attention_implementation=run.attention_implementation,
        )
        self.checkpoints = checkpoints.TrainCheckpoints(
            run.model_dir,
            keep=run.keep_checkpoints,
            save_every=run.save_every,
            selection=self.selection,
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
            if run.optimizer in ("released_script", "clue_mrc_script"):
                return 1, released_optimizer.released_bert_adam(run.learning_rate, 1)
            return 1, self._adamw(run.optimizer)(run.learning_rate, 1)
        if run.optimizer == "clue_mrc_script":
            return self._clue_mrc_script()
        windows, blanks = None, None
        if run.optimizer == "released_script":
            self.task.require_split(run.train_split)
            blanks = self.task.count_training_blanks()
        if run.optimizer == "released_script" and blanks is None:
            raise ConfigError(
                f"RunConfig.optimizer 'released_script' is CMRC 2019's released script; "
                f"{run.task} trains with 'adamw'"
            )
        if run.num_train_steps is None or run.optimizer == "released_script":
            windows = self._training_examples()
        if run.optimizer == "released_script":
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
            self.learning_rate_at = lambda k: released_optimizer.script_learning_rate(
                k, run.learning_rate, max(1, schedule), run.warmup_fraction
            )
            return steps, optimizer
        steps = run.num_train_steps
        if steps is None:
            steps = math.ceil(run.num_epochs * windows / run.batch_size)
            print(
                f"{windows} training examples x {run.num_epochs} epochs / batch "
                f"{run.batch_size} = {steps} steps",
                flush=True,
            )
        self.learning_rate_at = warmup_linear_decay(run.learning_rate, steps, run.warmup_fraction)
        optimizer = self._adamw(run.optimizer)(
            run.learning_rate,
            steps,
            run.warmup_fraction,
            run.weight_decay,
            run.max_grad_norm,
            run.adam_epsilon,
        )
        return steps, optimizer

    def _clue_mrc_script(self) -> tuple[int, optax.GradientTransformation]:
        """CLUE's run_mrc.py (CMRC 2018): int(epochs) epochs of ceil(windows / batch)
        steps (or num_train_steps), its BERTAdam's schedule over those steps."""
        run = self.run
        if run.task != "clue_cmrc2018":
            raise ConfigError(
                f"RunConfig.optimizer 'clue_mrc_script' is CLUE's run_mrc.py for CMRC 2018; "
                f"{run.task} trains with 'adamw'"
            )
        steps = run.num_train_steps or released_optimizer.clue_mrc_train_steps(
            self._training_examples(), run.batch_size, run.num_epochs
        )
        self.learning_rate_at = lambda k: released_optimizer.clue_mrc_learning_rate(
            k, run.learning_rate, steps, run.warmup_fraction
        )
        optimizer = released_optimizer.released_bert_adam(
            run.learning_rate,
            steps,
            run.warmup_fraction,
            run.weight_decay,
            eps=run.adam_epsilon,
            max_grad_norm=run.max_grad_norm,
            rate=self.learning_rate_at,
        )
        return steps, optimizer

    @staticmethod
    def _adamw(name: str):
        """The AdamW with warm-up and linear decay of RunConfig.optimizer (not released_script)."""
        if name == "transformers2_adamw":
            return transformers2_adamw.transformers2_adamw_with_warmup
        return adamw_with_warmup

    def _training_examples(self) -> int:
        """Examples (windows) of the training split, counted once."""
        if self._train_windows is None:
            split = self.run.train_split
            self.task.require_split(split)
            if self.store.holds(self.train_task):  # prepared once, then counted at once
                windows = input_pipeline.count_examples(self.train_task, split, self.store)
            else:  # a mixture: its run task counts an epoch at its rates
                windows = self.task.count_examples(split)
            if windows is None:
                windows = input_pipeline.count_examples(self.train_task, split)
            self._train_windows = windows
        return self._train_windows

    def _save_run_config(self) -> None:
        """MODEL_DIR/run_config.json: what the checkpoints are (mixture evaluation reads it)."""
        path = os.path.join(self.run.model_dir, run_config.RUN_CONFIG_FILE)
        if jax.process_index() != 0 or os.path.isfile(path):
            return  # MODEL_DIR exists: check_writable made it
        write_atomically(path, json.dumps(run_config.run_config_json(self.run), indent=1))

    def initial_state(self):
        """Latest checkpoint if there is one, else fresh (+ pretrained encoder). The run's
        record (run_config.json) is written once its state exists: a start that fails
        before (a PRETRAINED that does not fit) leaves MODEL_DIR free for the fixed run."""
        if self.checkpoints.latest_step() is not None:
            self._save_run_config()
            step, state = self._newest_readable()
            print(f"resuming from {self.checkpoints.directory}/{step}", flush=True)
            return state
        state = self.trainer.init_state()
        if self.run.pretrained:
            state = self._with_pretrained_encoder(state)
        self._save_run_config()
        return state

    def restore(self, step: int | str | None = None):
        """(step, state) of a training checkpoint. `step`: a step number, "latest", "best"
        (the selected one, RunConfig.select_best), or None: "best" if the run selects its
        model, else "latest"."""
        if self.checkpoints.latest_step() is None:
            raise ConfigError(f"no checkpoint in {self.checkpoints.directory}: train first")
        step = self.checkpoints.step_of(step, self.run.eval_split)
        if step is None:
            return self._newest_readable()
        try:
            return step, self.checkpoints.restore(step, self.trainer.abstract_state)
        except Exception as error:  # orbax raises many kinds; the message names the step
            raise ConfigError(
                f"checkpoint {self.checkpoints.directory}/{step} is unreadable: "
                f"{checkpoints.read_failure(error)}"
            ) from error

    def final_evaluation(self, state) -> tuple[int, dict[str, float]]:
        """(step, metrics) of the run's model on the eval split, its prediction files
        written: the final state, or with a selection the selected checkpoint (whose
        metrics line its evaluation during training wrote)."""
        if self.selection is None:
            return self.num_train_steps, self.evaluate(state, self.num_train_steps)
        step = self.checkpoints.step_of("best", self.run.eval_split)
        if step != int(jax.device_get(state.step)):
            _, state = self.restore(step)
        return step, self.evaluate(state, step, record=False)

    def _newest_readable(self):
        """(step, state) of the newest checkpoint that restores. A damaged one (a file
        truncated or deleted) is named and skipped; if none restores, a ConfigError:
        never a silent restart from scratch."""
        unreadable = []
        for step in sorted(self.checkpoints.manager.all_steps(), reverse=True):
            try:
                state = self.checkpoints.restore(step, self.trainer.abstract_state)
            except Exception as error:  # orbax raises many kinds (ValueError, OSError, ...)
                reason = checkpoints.read_failure(error)
                print(f"checkpoint step {step} is unreadable ({reason}); trying older")
                unreadable.append(step)
                continue
            self.checkpoints.set_aside(unreadable)
            return step, state
        self.checkpoints.close()  # orbax's threads wind down before the one-line exit
        raise ConfigError(
            f"no readable checkpoint in {self.checkpoints.directory} (steps "
            f"{', '.join(map(str, unreadable))} are damaged): remove them to train from "
            "the start, or restore them from a copy"
        )

    def _with_pretrained_encoder(self, state):
        """The export's encoder in `state` (`run_config.check_pretrained` compared its model
        config when the Runner was built)."""
        name = self.model.encoder_name
        abstract_encoder = self.trainer.abstract_state.params[name]
        restored = exports.load_params(self.run.pretrained, None)
        encoder = restored[name] if name in restored else restored
        shapes = jax.tree.map(lambda a: a.shape, abstract_encoder)
        if jax.tree.map(np.shape, encoder) != shapes:
            raise ConfigError(
                f"{self.run.pretrained}: encoder parameters do not match the "
                "model config (compare its model_config.json with the gin model)"
            )
        encoder = jax.tree.map(
            lambda a, s: jax.device_put(a, s.sharding), encoder, abstract_encoder
        )
        params = {**state.params, name: encoder}
        print(f"encoder weights from {self.run.pretrained}", flush=True)
        return state.replace(params=params)

    def train(self, stop_at: int | None = None):
        """Trains to the schedule's end (or `stop_at`), saving and evaluating on the way.

        A run killed at any moment (kill -9 included) resumes from its newest whole
        checkpoint: unfinished checkpoint writes are removed, metrics.jsonl loses the
        lines written after that step, and an evaluation the kill cut short runs again.
        """
        run, shown = self.run, jax.process_index() == 0
        with model_dir_lock(run.model_dir), sigterm_flag():
            self.checkpoints.remove_unfinished()
            end = min(self.num_train_steps, stop_at or self.num_train_steps)
            if (self.checkpoints.latest_step() or 0) < end:
                # A bad record of the eval split stops the run now, not at its first evaluation.
                with said_if_slow(f"reading the {run.eval_split} split's file", shown=shown):
                    self.task.check_split(run.eval_split)
                self._compile_checked(shown)
            with said_if_slow("the training state: restored, or new weights", shown=shown):
                state = self.initial_state()
            start = int(jax.device_get(state.step))
            self.writer.rewind(start)
            if self._evaluation_missing(start, end):
                self.evaluate(state, start)
            progress = tqdm(
                range(start, end),
                desc="train",
                initial=start,
                total=end,
                disable=not shown,
            )
            losses = []
            # Leaving the block (the end, a SIGTERM's break, an error) joins the read-ahead.
            with (
                ticking(progress),  # its elapsed time moves during a long step
                Prefetched(self._batches(start), run.prefetch_batches) as batches,
            ):
                state = self._train_loop(state, end, batches, progress, losses)
            step = int(jax.device_get(state.step))
            if step < end:  # the loop stops early only for a preemption notice
                raise errors.Preempted(
                    f"SIGTERM (here or on another host): stopped after step {step} and saved it "
                    f"({self.checkpoints.directory}/{step}); run the same command to resume"
                )
        return state, losses

    def _compile_checked(self, shown: bool) -> None:
        """The train step compiled before the state is allocated: one that cannot fit in
        the host's memory stops the run here, with a message, instead of being killed."""
        try:
            memory_check.compile_and_check(self.trainer, self.run, shown)
        except ConfigError:
            self.checkpoints.close()  # orbax's threads wind down before the one-line exit
            raise

    def _batches(self, start: int):
        """Training batches from step `start` on. Every host reads the same global batch
        and feeds its rows: the data, and so the losses, do not depend on the host count."""
        shard = input_pipeline.host_shard(self.trainer.batch_sharding, self.run.batch_size)
        return input_pipeline.train_batches(
            self.train_task,
            self.run.train_split,
            self.run.batch_size,
            self.model.train_keys,
            self.run.seed,
            start,
            shard,
            self.store,
            shuffle=self.run.shuffle_train,
        )

    def _evaluation_missing(self, start: int, end: int) -> bool:
        """Whether the periodic evaluation of the resumed step was cut short (its checkpoint
        is whole, its metrics line absent): the run does it before going on. Every host
        reads the shared MODEL_DIR's file, so all of them agree to evaluate."""
        return (
            0 < start < end
            and self._evaluates_at(start)
            and not self.writer.has_line(start, self.run.eval_split)
        )

    def _evaluates_at(self, step: int) -> bool:
        """Every eval_every steps; with a selection, the final step too (a candidate)."""
        periodic = bool(self.eval_every) and step % self.eval_every == 0
        return periodic or (self.selection is not None and step == self.num_train_steps)

    def _train_loop(self, state, end: int, batches, progress, losses):
        """Steps start..end; stops early, saved, after the step in which SIGTERM arrived
        (several hosts: at the preemption sync point, the same step on all).
        With a selection, an evaluation step is evaluated before it is saved (SIGTERM
        or not), and its checkpoint carries the scores."""
        run, sums, flags = self.run, None, None
        for step in progress:
            state, metrics = self.trainer.train_step(state, next(batches))
            sums = metrics if sums is None else jax.tree.map(operator.add, sums, metrics)
            flags = _first_nonfinite(flags, metrics, step + 1)
            stop = preemption_noticed(step + 1)  # every host answers the same
            evaluating = self._evaluates_at(step + 1)
            selecting = evaluating and self.selection is not None
            force = step + 1 == end or stop or selecting
            saving = self.checkpoints.due(step + 1, force=force)
            # A line at every save too: a resumed run's log windows then start where the
            # uninterrupted run's did, so both log the same losses at the same steps.
            log_now = (step + 1) % run.log_every == 0 or step + 1 == end or saving
            if log_now or evaluating:
                self._stop_if_diverged(flags)  # before anything is logged or saved
            if log_now:
                sums = jax.device_get(sums)
                line = {
                    "loss": float(sums["loss_sum"] / sums["examples"]),
                    "accuracy": float(sums["correct"] / sums["examples"]),
                    # The rate the update of this line's last step used (after `step` updates).
                    "learning_rate": float(self.learning_rate_at(step)),
                }
                losses.append((step + 1, line["loss"]))
                progress.set_postfix(loss=f"{line['loss']:.4f}")
                self.writer.write(step + 1, "train", line)
                sums = None
            scores = self._scores(state, step + 1) if selecting else None
            self.checkpoints.save(step + 1, state, force=force, metrics=scores)
            if stop:
                break
            if evaluating and not selecting and step + 1 != end:
                self.evaluate(state, step + 1)
        self.checkpoints.close()
        return state

    def _scores(self, state, step: int) -> dict[str, float]:
        """The eval split's metrics of a step, for its checkpoint (ConfigError, saves
        finished, if they lack the selection's metric)."""
        results = self.evaluate(state, step)
        try:
            model_selection.check_results(self.selection, results, self.run.eval_split, step)
        except ConfigError:
            self.checkpoints.close()
            raise
        return results

    def _stop_if_diverged(self, flags) -> None:
        """TrainingDiverged naming the first non-finite step; the last good checkpoint stays
        the latest (nothing after it is saved, no prediction file is written)."""
        if flags is None:
            return
        first_step, loss_bad, grad_bad = (int(x) for x in jax.device_get(flags))
        if first_step == 0:
            return
        # The state saved at step first_step - 1 is the one whose loss went non-finite:
        # it is not a good place to resume, so it goes (earlier saves finish first).
        removed = self.checkpoints.remove_from(first_step - 1)
        self.checkpoints.close()
        what = " and ".join(
            name for name, bad in (("loss", loss_bad), ("gradient norm", grad_bad)) if bad
        )
        latest = self.checkpoints.latest_step()
        removed_note = f" (step {removed[0]}'s state gave it and was removed)" if removed else ""
        resume = (
            f"the latest checkpoint is step {latest}{removed_note} "
            f"({self.checkpoints.directory}): lower RunConfig.learning_rate and run again "
            "to resume from it"
            if latest is not None
            else "no checkpoint was saved: lower RunConfig.learning_rate and start again"
        )
        verb = "are" if loss_bad and grad_bad else "is"
        raise errors.TrainingDiverged(f"step {first_step}: the {what} {verb} not finite; {resume}")

    def evaluate(
        self,
        state,
        step: int,
        split: str | None = None,
        record: bool = True,
        out_dir: str | None = None,
    ) -> dict[str, float]:
        """Scores a split, writes predictions/<task>_<split>.json (under `out_dir`, by
        default MODEL_DIR) and (`record`) a metrics line.

        Returns the task's metrics ({} for an unlabelled split such as test).
        """
        split = split or self.run.eval_split
        self.task.require_split(split)
        evaluation = self.task.evaluation(split)
        shard = input_pipeline.host_shard(self.trainer.batch_sharding, self.eval_batch_size)
        batches = input_pipeline.eval_batches(
            self.score_task, split, self.eval_batch_size, self.model.score_keys, shard, self.store
        )
        bar = tqdm(batches, desc=f"eval {split}", disable=jax.process_index() != 0)
        with ticking(bar):
            for device_batch, host_batch in bar:
                # This host's rows go in; the whole batch's scores come back on every host.
                scores = self.trainer.score(state.params, device_batch)
                real = len(host_batch[self.model.score_keys[0]])  # rows that are not padding
                evaluation.add(scores[:real], host_batch)
        slow = f"eval {split}: decoding and writing the predictions"
        with said_if_slow(slow, shown=jax.process_index() == 0):
            results = evaluation.finish(out_dir or self.run.model_dir)
        if results and record:
            self.writer.write(step, split, results)
        return results

    def results_table(self, results: dict[str, float], split: str) -> str:
        return self.task.results_table(results, split)


def _first_nonfinite(flags, metrics, step: int):
    """Device scalars (first non-finite step or 0, its loss flag, its grad-norm flag),
    updated without a host sync."""
    bad_loss, bad_grad = metrics["nonfinite_loss"] > 0, metrics["nonfinite_grad_norm"] > 0
    if flags is None:
        flags = (jnp.int32(0), jnp.int32(0), jnp.int32(0))
    first, loss_flag, grad_flag = flags
    new = (first == 0) & (bad_loss | bad_grad)
    return (
        jnp.where(new, step, first),
        jnp.where(new, bad_loss.astype(jnp.int32), loss_flag),
        jnp.where(new, bad_grad.astype(jnp.int32), grad_flag),
    )
