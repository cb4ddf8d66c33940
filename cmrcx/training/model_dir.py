"""The run's MODEL_DIR and process: one training process per MODEL_DIR (an flock),
a MODEL_DIR checked writable before any work, and SIGTERM turned into a flag the train
loop reads after each step (`cmrcx.training.runner`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import tempfile
import threading

import jax

from cmrcx.common.errors import ConfigError

SIGTERM = threading.Event()


@contextlib.contextmanager
def sigterm_flag():
    """SIGTERM (a scheduler's notice before it takes the machine) sets an event the train
    loop reads after each step, instead of killing the process mid-step. Main thread only
    (Python's rule for signal handlers); elsewhere SIGTERM keeps its default action."""
    SIGTERM.clear()
    if threading.current_thread() is not threading.main_thread():
        yield SIGTERM
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: SIGTERM.set())
    try:
        yield SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)


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
