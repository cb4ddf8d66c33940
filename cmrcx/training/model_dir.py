"""The run's MODEL_DIR and process: one training process per MODEL_DIR (an flock),
a MODEL_DIR checked writable before any work, and a preemption notice (SIGTERM) turned into
a step at which the train loop saves and stops (`cmrcx.training.runner`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import tempfile
import threading

import jax
from jax.experimental import multihost_utils

from cmrcx.common.errors import ConfigError

SIGTERM = threading.Event()


def pod_preemption() -> bool:
    """Whether JAX's preemption service watches SIGTERM for this process: a job of several
    processes (`jax.distributed.initialize`, which starts the service's notifier and its
    SIGTERM handler unless `jax_enable_preemption_service` is off)."""
    return jax.process_count() > 1 and jax.config.jax_enable_preemption_service


@contextlib.contextmanager
def sigterm_flag():
    """SIGTERM (a scheduler's notice before it takes the machine) sets an event the train
    loop reads after each step, instead of killing the process mid-step. Main thread only
    (Python's rule for signal handlers); elsewhere SIGTERM keeps its default action. In a
    job of several processes JAX's preemption service has the signal (`pod_preemption`):
    a Python handler would replace its handler, so none is installed and the loop asks
    `preemption_noticed` instead."""
    SIGTERM.clear()
    if threading.current_thread() is not threading.main_thread() or pod_preemption():
        yield SIGTERM
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: SIGTERM.set())
    try:
        yield SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)


def preemption_noticed(step: int) -> bool:
    """Whether the run saves `step` (just taken) and stops. One process: SIGTERM arrived.
    Several: `multihost_utils.reached_preemption_sync_point(step)`: a SIGTERM to any of
    them is sent to all by the coordination service, which picks the step after the
    largest any process has reached; every process answers True at that same step, so all
    save it. Every process must ask at every step, from the same first step."""
    if pod_preemption():
        return multihost_utils.reached_preemption_sync_point(step)
    return SIGTERM.is_set()


LOCK_FILE = ".train.lock"


@contextlib.contextmanager
def model_dir_lock(model_dir: str):
    """One training process per MODEL_DIR: an flock on MODEL_DIR/.train.lock, which the
    kernel releases when the process ends however it ends (no stale lock after a crash).
    Process 0 only: the hosts of one multi-host run share the directory."""
    if jax.process_index() != 0:
        yield
        return
    os.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, LOCK_FILE)
    with open(path, "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise ConfigError(
                f"MODEL_DIR {model_dir} is being trained by {holder}: wait for it to end, "
                "or give this run another MODEL_DIR"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def check_writable(model_dir: str) -> None:
    """ConfigError naming MODEL_DIR if it cannot be created or written (checked before any
    work, so a run never fails at its first checkpoint)."""
    if jax.process_index() != 0:
        return
    try:
        os.makedirs(model_dir, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=model_dir, prefix=".write_test"):
            pass
    except OSError as error:
        raise ConfigError(
            f"MODEL_DIR {model_dir} cannot be created or written "
            f"({error.strerror or error}): give a directory this user can write"
        ) from None
