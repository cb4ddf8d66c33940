"""Helpers for test modules (importable as `tests.support`; `tests` is a package): the
repository root derived from this file, never a machine path,
and the entry points run in a child process as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


# `jax.jit(..., compiler_options=FAST_COMPILE)`: XLA's optimisation level 0, for tests that
# check semantics, not codegen (it compiles faster); parity tests keep the default level.
FAST_COMPILE = {"xla_backend_optimization_level": 0}


def run_cli_in(root: Path, module: str, *args, timeout: float = 600, **kwargs):
    """`python -m cmrcx.<module> ARGS` in a child process at `root`, this checkout first
    on the path; the CompletedProcess with text stdout/stderr."""
    env = {**os.environ, "PYTHONPATH": str(root), **kwargs.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", f"cmrcx.{module}", *map(str, args)],
        cwd=kwargs.pop("cwd", root),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def register_train_task(name: str, examples) -> str:
    """A SeqIO task `name` (replacing any of that name) whose only split, train, is
    `examples(split, shuffle_files)`, with no preprocessors."""
    import seqio

    seqio.TaskRegistry.remove(name)
    seqio.TaskRegistry.add(
        name,
        source=seqio.FunctionDataSource(examples, splits=("train",)),
        preprocessors=[],
        output_features={},
    )
    return name


def write_cmrc2019_vocabulary(trial: Path, path: Path) -> int:
    """A vocab.txt laid out as bert-base-chinese's ([PAD], [unused1..99], [UNK], [CLS],
    [SEP], [MASK]) holding every character of the CMRC 2019 file `trial` as both the
    authors' and cmrcx's tokenizers see it (lower-cased, accents stripped), alone and as a
    ##piece. Returns its size."""
    import json
    import unicodedata

    data = json.loads(trial.read_text(encoding="utf-8"))["data"]
    chars = set()
    for record in data:
        for text in [record["context"], *record["choices"]]:
            text = unicodedata.normalize("NFD", text.lower())
            chars.update(c for c in text if not c.isspace() and unicodedata.category(c) != "Mn")
    special = ["[PAD]", *(f"[unused{i}]" for i in range(1, 100)), "[UNK]", "[CLS]", "[SEP]"]
    tokens = [*special, "[MASK]", *sorted(chars), *(f"##{c}" for c in sorted(chars))]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return len(tokens)


def wait_for(child: subprocess.Popen, condition, timeout: float = 300.0, poll=0.002) -> bool:
    """Polls `condition()` until true (True) or the child ends first (False); a
    TimeoutError after `timeout` seconds of neither."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if child.poll() is not None:
            return False
        time.sleep(poll)
    raise TimeoutError(f"the child neither reached the moment nor ended in {timeout:.0f} s")


def text_has(path: Path, text: str):
    """A condition for `wait_for`: `text` is in the file at `path`."""
    return lambda: path.exists() and text in path.read_text(errors="replace")
