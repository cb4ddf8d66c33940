"""Process start-up of the entry points: the one call each makes before anything else.

`start()` runs under `if __name__ == "__main__":` ahead of every other cmrcx import, so
only the standard library has loaded when it may re-execute the process with glibc's
huge-page tunable (`cmrcx.cpu.hugepages`). The process-wide CPU paths (`cmrcx.cpu.enable`:
the same results, only faster) are installed later, by `cmrcx.cli.launch.prepare_process`,
once TensorFlow has been imported quietly: JAX must not load before that, or the
TensorFlow/CUDA start-up lines reach the terminal. The library never does either.
"""

from __future__ import annotations

from cmrcx.cpu import hugepages


def start(keep_freed: bool = False) -> None:
    """Re-executes the command once with the huge-page tunable where it helps (with
    keep_freed, malloc also keeps what it frees: `hugepages.KEEP_FREED`, the `eval` entry
    point). Loads no JAX."""
    hugepages.restart_with_hugepages(keep_freed=keep_freed)
