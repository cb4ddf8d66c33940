"""Helpers for test modules (importable as `support`: pytest puts tests/ on the path for
its conftest.py): the repository root derived from this file, never a machine path,
and the entry points run in a child process as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


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
