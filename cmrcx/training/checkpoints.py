"""orbax checkpoints of the training state (resumable).

Training checkpoints live in MODEL_DIR/checkpoints/<step>/ (orbax writes to a
temporary directory and renames it, so a checkpoint is whole or absent) and
keep the newest N. Parameters-only exports are `cmrcx.weights.exports`.

A run that selects its model by a validation metric (`cmrcx.training.selection`) saves
each evaluated step with its metrics inside the checkpoint (orbax's `metrics` item,
committed with the state in the same rename): the scores cannot go missing or disagree
with the checkpoints, whatever moment a run is killed at. Keep-N rotation preserves the
selected step as well as the newest N, and orbax deletes old steps only after the save
that outranks them is committed, so the best step so far always exists.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import sys
import time

import jax
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers

from cmrcx.common.errors import STORAGE_ERRNOS, ConfigError, StorageError
from cmrcx.training.selection import Selection


@dataclasses.dataclass
class _KeepSelected(checkpoint_managers.PreservationPolicy):
    """orbax preservation: the selected step survives keep-N rotation."""

    selection: Selection

    def should_preserve(self, checkpoints, *, context) -> list[bool]:
        best = self.selection.best((info.step, info.metrics) for info in checkpoints)
        return [info.step == best for info in checkpoints]


class TrainCheckpoints:
    """Periodic, atomic, keep-N checkpoints of a TrainState (and, with a `Selection`, the
    selected step besides the newest N).

    Multi-host: every process calls `save`/`restore` with the same step; each
    writes its own shards into the one shared directory and orbax's primary
    process (0) commits the step (tests/training/test_multihost.py).
    """

    def __init__(
        self,
        model_dir: str,
        keep: int = 3,
        save_every: int = 1000,
        selection: Selection | None = None,
    ):
        _quiet_storage_failure_logs()
        _quiet_callbacks_into_closed_loops()
        self.directory = directory_of(model_dir)
        self.selection = selection
        if selection is None:
            options = ocp.CheckpointManagerOptions(
                max_to_keep=keep, save_interval_steps=save_every, create=True
            )
        else:
            # best_fn makes orbax write the metrics given to `save` into the checkpoint;
            # which steps stay is the policy's (the newest N, and the selected one).
            options = ocp.CheckpointManagerOptions(
                save_interval_steps=save_every,
                create=True,
                best_fn=lambda metrics: metrics[selection.metric],
                best_mode=selection.mode,
                preservation_policy=checkpoint_managers.AnyPreservationPolicy(
                    [checkpoint_managers.LatestN(keep), _KeepSelected(selection)]
                ),
            )
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def scored_steps(self) -> list[tuple[int, dict | None]]:
        """(step, the metrics saved with it or None) of every checkpoint, oldest first."""
        return [(step, self.manager.metrics(step)) for step in sorted(self.manager.all_steps())]

    def best_step(self) -> int | None:
        """The selected step (`Selection.best`) of the checkpoints; None without a
        selection or a scored checkpoint. Call it once pending saves have finished."""
        if self.selection is None:
            return None
        return self.selection.best(self.scored_steps())

    def step_of(self, which: int | str | None, split: str) -> int | None:
        """The checkpoint `which` means: a step number (or its text), "latest" (None: the
        newest readable, the caller's to find), "best" (the selected step, announced with
        its `split` score; ConfigError if there is none), or None: "best" with a
        selection, else "latest"."""
        if which is None:
            which = "best" if self.selection is not None else "latest"
        if isinstance(which, str) and which.isdigit():
            which = int(which)
        if which == "latest":
            return None
        if isinstance(which, int) and not isinstance(which, bool):
            steps = sorted(self.manager.all_steps())
            if which not in steps:
                raise ConfigError(
                    f"no checkpoint of step {which} in {self.directory}; its steps: "
                    f"{', '.join(map(str, steps)) or 'none'} (keep_checkpoints keeps the newest "
                    "few, and the selected one)"
                )
            return which
        if which != "best":
            raise ConfigError(f"checkpoint {which!r}: use best, latest or a step number")
        if self.selection is None:
            raise ConfigError(
                f"checkpoint 'best': {self.directory} holds a run without model selection "
                "(RunConfig.select_best is None): use latest or a step number"
            )
        best = self.best_step()
        if best is None:
            raise ConfigError(
                f"no checkpoint in {self.directory} has a {split} {self.selection.metric} "
                "(none was saved after an evaluation yet): use latest or a step number"
            )
        described = self.selection.describe(best, self.manager.metrics(best), split)
        print(f"selected checkpoint: {described}", flush=True)
        return best

    def remove_unfinished(self) -> list[str]:
        """Deletes the temporary directories of saves a killed process left unfinished
        (orbax writes ``<step>.orbax-checkpoint-tmp*`` and renames it when whole). Only
        the training process holding MODEL_DIR's lock may call this: an evaluation
        running beside a training run would delete the write in progress."""
        if jax.process_index() != 0 or not os.path.isdir(self.directory):
            return []
        unfinished = sorted(
            name for name in os.listdir(self.directory) if ocp.utils.TMP_DIR_SUFFIX in name
        )
        for name in unfinished:
            shutil.rmtree(os.path.join(self.directory, name))
            print(f"removed an unfinished checkpoint write: {self.directory}/{name}", flush=True)
        if unfinished:
            self.manager.reload()
        return unfinished

    # How long the failed write's directory must stay away before it counts as removed,
    # and how long to keep removing it at most.
    SETTLE_SECONDS = 1.0
    SETTLE_LIMIT_SECONDS = 30.0

    def _remove_failed_write(self, clock=time.monotonic, sleep=time.sleep) -> list[str]:
        """`remove_unfinished` after a refused write, repeated until the temporary
        directory stays away for SETTLE_SECONDS. orbax's error ends its wait while
        tensorstore still has writes of the step in flight; these run in C++ threads
        nothing in Python can wait for, and the removal frees the space they need, so
        they succeed and create the directory again (tensorstore's file store makes the
        parents it writes into)."""
        removed: list[str] = []
        start = last_seen = clock()
        while True:
            found = self.remove_unfinished()
            removed += [name for name in found if name not in removed]
            now = clock()
            if found:
                last_seen = now
            if now - last_seen >= self.SETTLE_SECONDS or now - start >= self.SETTLE_LIMIT_SECONDS:
                return removed
            sleep(0.05)

    def due(self, step: int, force: bool = False) -> bool:
        """Whether `save(step, ..., force)` would write a checkpoint."""
        return force or self.manager.should_save(step)

    def set_aside(self, steps) -> None:
        """Moves damaged checkpoints to checkpoints_damaged/<step> (kept for inspection,
        out of the way of the steps the resumed run saves again)."""
        if not steps or jax.process_index() != 0:
            return
        aside = self.directory + "_damaged"
        os.makedirs(aside, exist_ok=True)
        for step in steps:
            target = os.path.join(aside, str(step))
            shutil.rmtree(target, ignore_errors=True)
            shutil.move(os.path.join(self.directory, str(step)), target)
            print(f"moved the unreadable checkpoint to {target}", flush=True)
        self.manager.reload()

    def remove_from(self, step: int) -> list[int]:
        """Deletes the checkpoints of `step` and later (after pending saves finish)."""
        self.manager.wait_until_finished()
        removed = sorted(s for s in self.manager.all_steps() if s >= step)
        for s in removed:
            self.manager.delete(s)
        return removed

    def save(self, step: int, state, force: bool = False, metrics: dict | None = None) -> bool:
        """Saves if `step` is on the interval (or `force`); asynchronous. `metrics` (the
        step's evaluation, with a selection) are committed with the state. A failed write
        (this one's or the previous, still running, one's) on a full or read-only disk is
        a `StorageError` naming the directory; the latest whole checkpoint stays."""
        try:
            return self.manager.save(
                step, args=ocp.args.StandardSave(state), force=force, metrics=metrics
            )
        except Exception as error:
            self._raise_storage_error(error)
            raise

    def _raise_storage_error(self, error: BaseException) -> None:
        """StorageError if `error` (or its cause) is a refused write; else returns."""
        reason = storage_failure(error)
        if reason is None:
            return
        try:
            # orbax's writer threads may still be finishing the failed step; removing its
            # temporary directory before they end lets them leave a fresh one behind.
            self.manager.wait_until_finished()
        except Exception:  # the same refused write, re-raised by the threads: told below
            pass
        try:
            unfinished = self._remove_failed_write()  # frees the space the partial write took
        except OSError:
            unfinished = []
        self.manager.reload()  # orbax counted the failed step when its save began
        steps = ", ".join(name.split(".")[0] for name in unfinished)
        latest = self.manager.latest_step()
        resume = (
            f"the latest whole checkpoint is step {latest}"
            if latest is not None
            else "no checkpoint was saved before it"
        )
        what = f"the checkpoint of step {steps}" if steps else "a checkpoint"
        removed = "its partial files were removed and " if unfinished else ""
        raise StorageError(
            f"{what} could not be written to {self.directory} ({reason}); {removed}{resume}: "
            "free space (or move MODEL_DIR) and run the same command to resume"
        ) from error

    def restore(self, step: int, abstract_state):
        """State at `step`, placed in the shardings of `abstract_state`."""
        return self.manager.restore(step, args=ocp.args.StandardRestore(abstract_state))

    def close(self) -> None:
        """Waits for the pending write (StorageError if it failed) and closes."""
        try:
            self.manager.wait_until_finished()
        except Exception as error:
            self._raise_storage_error(error)
            raise
        self.manager.close()


class _StorageFailureLogFilter(logging.Filter):
    """orbax's writer threads log a failed write with its traceback, then the main thread
    raises it; a refused write is told there, as one `errors.StorageError` line. Also
    dropped: orbax's warning at every save without metrics in a selecting run (only the
    evaluated steps have them, by design)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Requested `tracked_metric`; did not provide"):
            return False
        return not (record.exc_info and storage_failure(record.exc_info[1]))


def _quiet_storage_failure_logs() -> None:
    absl_logger = logging.getLogger("absl")  # where absl.logging (orbax's logger) writes
    if not any(isinstance(f, _StorageFailureLogFilter) for f in absl_logger.filters):
        absl_logger.addFilter(_StorageFailureLogFilter())


def _quiet_callbacks_into_closed_loops() -> None:
    """When one write of a checkpoint fails, orbax ends the save's event loop while
    tensorstore's other writes are still running; each of them, finishing, hands its
    result to the closed loop and tensorstore reports the RuntimeError('Event loop is
    closed') through `sys.unraisablehook` - dozens of tracebacks around the one error line
    the failed save is told by. Only that error is dropped; every other goes on to the
    hook that was there."""
    previous = sys.unraisablehook
    if getattr(previous, "drops_closed_loop_callbacks", False):
        return

    def hook(unraisable) -> None:
        error = unraisable.exc_value
        if not (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"):
            previous(unraisable)

    hook.drops_closed_loop_callbacks = True
    sys.unraisablehook = hook


_OS_ERROR_CODE = re.compile(r"os_error_code='(\d+)'")


def directory_of(model_dir: str) -> str:
    """MODEL_DIR/checkpoints, where a run's training checkpoints are."""
    return os.path.join(os.path.abspath(model_dir), "checkpoints")


def has_checkpoints(model_dir: str) -> bool:
    """Whether MODEL_DIR holds a training checkpoint (a step folder), without making any
    folder there."""
    directory = directory_of(model_dir)
    return os.path.isdir(directory) and any(name.isdigit() for name in os.listdir(directory))


def read_failure(error: BaseException, limit: int = 300) -> str:
    """Why a checkpoint did not restore, in one line: the first line of the innermost
    error of the chain (tensorstore's own text, naming the file and the fault; orbax's
    outer message carries a repr of a tensorstore spec instead)."""
    seen = set()
    while error.__cause__ is not None and id(error) not in seen:
        seen.add(id(error))
        error = error.__cause__
    text = str(error).strip()
    return text.splitlines()[0][:limit] if text else type(error).__name__


def storage_failure(error: BaseException) -> str | None:
    """The reason ("No space left on device") if `error`, or an error in its chain, is
    a write the storage refused (`errors.STORAGE_ERRNOS`); None otherwise. orbax raises
    tensorstore's failures as ValueError text with ``os_error_code='28'`` in it."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        code = error.errno if isinstance(error, OSError) else None
        match = _OS_ERROR_CODE.search(str(error))
        if code is None and match:
            code = int(match.group(1))
        if code in STORAGE_ERRNOS:
            return os.strerror(code)
        error = error.__cause__ or error.__context__
    return None
