"""XLA:CPU's step temporaries in transparent huge pages: the entry points re-execute once.

XLA:CPU takes each step's temporaries from malloc (2.4 GB for a BERT-base train step at
sequence 512, batch 2). Blocks that large are mmap'ed on every call and unmapped when
freed, so each step faults them in again 4 KiB at a time: about 588k minor page faults
and their zero-filling per BERT-base step, against PyTorch's 143k (tools/bench.py train,
2026-11-26).
glibc's tunable ``glibc.malloc.hugetlb=1`` (glibc 2.35 and later) makes malloc advise
transparent huge pages (``madvise(MADV_HUGEPAGE)``) for its mmap'ed blocks, and the
kernel then maps them 2 MiB at a time. Keeping the blocks mapped instead (``mallopt``:
no mmap, no trim) removed the faults too, but fragmented the heap to twice the step's
memory, so it is not used.

glibc reads GLIBC_TUNABLES once, when the process starts, so ``python -m cmrcx.train``
(and ``eval``, ``generate``, ``check_reproduction``: ``cmrcx.cli.startup.start``)
re-execute themselves with it set, before importing JAX
or TensorFlow: the same pid, interpreter, flags and arguments, the tunable appended to
any the user set. Nothing changes where it cannot help: not Linux with glibc,
transparent huge pages ``never``, a ``glibc.malloc.hugetlb`` value already set (the
user's wins), or ``CMRCX_HUGEPAGES=0``. The library itself (``import cmrcx``) never
re-executes.

Evaluation (``python -m cmrcx.eval``) also has malloc keep what it frees
(``KEEP_FREED``: one arena, no mmap, no trimming), so each batch reuses the last one's
temporaries instead of faulting in fresh pages: on AMD Zen 5 (2026-11-29, CHANGELOG.md) the
full-size C3 evaluation went from 17.9 s to 8.0 s and ChID's from 80.9 s to 54.7 s, with
8 to 14% more peak RSS; CMRC 2018's did not change. Training does not: for a float32
train step it doubled the peak RSS for no speed. A tunable the user set is kept.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping

TUNABLE = "glibc.malloc.hugetlb=1"
KEEP_FREED = (
    "glibc.malloc.arena_max=1",
    "glibc.malloc.mmap_max=0",
    "glibc.malloc.trim_threshold=68719476736",  # 64 GiB: above any step's temporaries
)
SWITCH = "CMRCX_HUGEPAGES"  # "0": run as started; set to "1" in the re-executed process
THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"  # e.g. "always [madvise] never"


def environment_to_restart_with(
    environ: Mapping[str, str], thp_mode: str | None, libc: str, keep_freed: bool = False
) -> dict[str, str] | None:
    """The environment the process should re-execute with, or None to run as it is;
    with keep_freed, KEEP_FREED's tunables too, each unless the user set it.

    >>> environment_to_restart_with({}, "always [madvise] never", "glibc")["GLIBC_TUNABLES"]
    'glibc.malloc.hugetlb=1'
    >>> environment_to_restart_with({}, "always madvise [never]", "glibc") is None
    True
    """
    if environ.get(SWITCH) in ("0", "1") or libc != "glibc":
        return None
    if thp_mode is None or "[never]" in thp_mode:
        return None
    users = environ.get("GLIBC_TUNABLES", "")
    if "glibc.malloc.hugetlb=" in users:
        return None
    ours = [TUNABLE, *(KEEP_FREED if keep_freed else ())]
    ours = [t for t in ours if t.split("=")[0] + "=" not in users]
    tunables = ":".join([users, *ours] if users else ours)
    return {**environ, "GLIBC_TUNABLES": tunables, SWITCH: "1"}


def _thp_mode() -> str | None:
    try:
        with open(THP_MODE, encoding="ascii") as f:
            return f.read()
    except OSError:
        return None


def process_environment(
    environ: Mapping[str, str] | None = None, keep_freed: bool = False
) -> dict[str, str] | None:
    """environment_to_restart_with on this machine, of `environ` (default: this process's)."""
    if not sys.platform.startswith("linux"):
        return None
    environ = os.environ if environ is None else environ
    return environment_to_restart_with(environ, _thp_mode(), platform.libc_ver()[0], keep_freed)


def restart_with_hugepages(keep_freed: bool = False) -> None:
    """Re-executes the running command (`python [options] -m cmrcx.X ARGS`) once with
    GLIBC_TUNABLES's huge-page tunable set (and KEEP_FREED's with keep_freed: the `eval`
    entry point); returns at once when nothing would change."""
    environ = process_environment(keep_freed=keep_freed)
    command = list(getattr(sys, "orig_argv", []))
    if environ is None or len(command) < 2 or not sys.executable:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *command[1:]], environ)
