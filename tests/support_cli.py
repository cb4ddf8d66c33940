"""The entry points run in this process, for tests where the command's work and messages,
not the process around it, are what is checked: `run_main("eval", ...)` returns what
`run_cli` (a child process) returns, a CompletedProcess with text stdout and stderr, and
pays neither the child's seconds of imports nor its own compiles (this process's are
shared through the session's compilation cache).

What runs is what `python -m cmrcx.<module>` runs after `cmrcx.cli.startup.start()` (a
re-exec with the huge-page tunable, only faster): `launch.main_guard(main, argv)` where
the module's `__main__` block calls it, else `main(argv)` as the status. What it does
not see: output written to file descriptors 1 and 2 below Python (TensorFlow's C++
start-up lines: the quiet-start tests keep a child), and Python logging records (pytest's
log capture holds the root logger, so they are not on stderr as in a child)."""

from __future__ import annotations

import contextlib
import importlib
import io
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import gin


def _text_stream() -> io.TextIOWrapper:
    """A text stream with a `.buffer` (cmrcx.tokenize writes bytes to sys.stdout.buffer)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)


def _status(code) -> int:
    """A SystemExit's code as the process's exit status (a message is printed, status 1)."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def run_main(module: str, *args, stdin: str | bytes = b"") -> subprocess.CompletedProcess:
    """`python -m cmrcx.<module> ARGS` in this process; gin is cleared before and after.
    An uncaught exception is status 1 with its traceback on stderr, as in a child."""
    entry = importlib.import_module(f"cmrcx.{module}")
    argv = [str(arg) for arg in args]
    guarded = "launch.main_guard(main)" in Path(entry.__file__).read_text(encoding="utf-8")
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    out, err = _text_stream(), _text_stream()
    gin.clear_config()
    with contextlib.ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        saved_stdin, saved_argv = sys.stdin, sys.argv
        stack.callback(setattr, sys, "stdin", saved_stdin)
        stack.callback(setattr, sys, "argv", saved_argv)
        stack.callback(gin.clear_config)
        sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        sys.argv = [entry.__file__, *argv]  # argparse's usage line names the file, as -m does
        try:
            if guarded:
                from cmrcx.cli import launch

                launch.main_guard(entry.main, argv)
                status = 0
            else:
                status = _status(entry.main(argv))
        except SystemExit as exit_:
            status = _status(exit_.code)
        except Exception:  # noqa: BLE001 (a child prints it and exits 1)
            traceback.print_exc()
            status = 1
    return subprocess.CompletedProcess(
        ["python", "-m", f"cmrcx.{module}", *argv],
        status,
        out.buffer.getvalue().decode("utf-8", "replace"),
        err.buffer.getvalue().decode("utf-8", "replace"),
    )
