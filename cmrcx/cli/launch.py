"""What `train`, `eval` and `export` share: flags, gin, and building a run.

This is the only layer that applies gin. `--gin_file=NAME.gin` finds bare names
in the bundled gin_configs/; `--gin.KEY=VALUE` adds one binding (T5X style:
`--gin.MODEL_DIR="'runs/x'"`). Paths written `cmrcx:REL` point inside the
installed package (the bundled sample and tiny vocabulary).
"""

from __future__ import annotations

import argparse
import importlib.resources
import logging
import os
import sys
from collections.abc import Sequence

import gin

from cmrcx.benchmarks import task_names
from cmrcx.common.errors import (
    STORAGE_ERRNOS,
    ConfigError,
    DataFormatError,
    MissingSplitError,
    Preempted,
    StorageError,
    TrainingDiverged,
)
from cmrcx.models import registry
from cmrcx.training.run_config import RunConfig

PREEMPTED_EXIT_STATUS = 143  # 128 + SIGTERM, what schedulers expect of a terminated job


def gin_configs_dir() -> str:
    return str(importlib.resources.files("cmrcx.gin_configs"))


def parse_flags(
    argv: Sequence[str], description: str, extra: Sequence[tuple[str, dict]] = ()
) -> argparse.Namespace:
    """--gin_file (repeatable), --gin.KEY=VALUE (repeatable), plus `extra` flags."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--gin_file",
        action="append",
        default=[],
        help="gin file; bare names resolve to the bundled gin_configs/",
    )
    parser.add_argument(
        "--gin_bindings",
        action="append",
        default=[],
        help='one gin binding, e.g. "RunConfig.batch_size = 8"',
    )
    for name, kwargs in extra:
        parser.add_argument(name, **kwargs)
    gin_bindings, rest = [], []
    for arg in argv:
        if arg.startswith("--gin.") and "=" in arg:
            key, value = arg[len("--gin.") :].split("=", 1)
            gin_bindings.append(f"{key} = {value}")
        else:
            rest.append(arg)
    args = parser.parse_args(rest)
    args.gin_bindings = list(args.gin_bindings) + gin_bindings
    if not args.gin_file:
        parser.error("give at least one --gin_file (e.g. --gin_file=cmrc2019_tiny.gin)")
    return args


def parse_gin(gin_files: Sequence[str], bindings: Sequence[str]) -> None:
    """Parses gin files (bare names from the bundled directory) and bindings."""
    # The bundled directory is searched before the working directory (gin's ''
    # prefix). Otherwise a `runs/` or `models/` folder in the working directory
    # (MODEL_DIR='runs/x' makes one) shadows `include 'runs/...'`, and gin's
    # package-resource reader crashes on it as a namespace package (gin 0.5).
    # gin has no public call to put a search path first.
    prefixes = gin.config._LOCATION_PREFIXES
    if gin_configs_dir() in prefixes:
        prefixes.remove(gin_configs_dir())
    prefixes.insert(0, gin_configs_dir())
    files = []
    for name in gin_files:
        if os.path.isfile(name):
            files.append(os.path.abspath(name))
        elif os.path.isfile(os.path.join(gin_configs_dir(), name)):
            files.append(os.path.join(gin_configs_dir(), name))
        elif paper_named := _gin_file_of_paper_name(name):
            print(f"note: {name} is {os.path.basename(paper_named)}", file=sys.stderr)
            files.append(paper_named)
        else:
            bundled = sorted(f for f in os.listdir(gin_configs_dir()) if f.endswith(".gin"))
            raise ConfigError(
                f"gin file {name!r} not found; bundled: {', '.join(bundled)} (a task's paper "
                f"name works in their place: {task_names.paper_names_text()})"
            )
    # gin logs "Path not found" for each search-path miss before it finds an
    # include; those lines are noise (a real miss raises), so they are filtered.
    root = logging.getLogger()
    root.addFilter(_drop_gin_path_misses)
    try:
        gin.parse_config_files_and_bindings(files, bindings, finalize_config=False)
    finally:
        root.removeFilter(_drop_gin_path_misses)


def _gin_file_of_paper_name(name: str) -> str | None:
    """The bundled gin file a paper's task name stands for: ``clue_cluewsc2020_bert.gin``
    or ``cluewsc2020_bert.gin`` -> ``clue_cluewsc11_bert.gin`` (the current CLUE version)."""
    if os.path.dirname(name) or not name.endswith(".gin"):
        return None
    parts = name[: -len(".gin")].split("_")
    for cut in range(len(parts) - 1, 0, -1):  # the longest task name first
        registered = task_names.find("_".join(parts[:cut]))
        if registered is not None:
            candidate = os.path.join(gin_configs_dir(), "_".join([registered, *parts[cut:]]))
            if os.path.isfile(candidate + ".gin"):
                return candidate + ".gin"
    return None


def _drop_gin_path_misses(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Path not found:")


def prepare_process() -> None:
    """Per-process start-up: keep TensorFlow off accelerators; join a multi-host job.

    jax.distributed.initialize() runs when the environment describes a cluster:
    JAX_COORDINATOR_ADDRESS (host:port) with JAX_NUM_PROCESSES and JAX_PROCESS_ID,
    or CMRCX_DISTRIBUTED=1 on a TPU pod / SLURM job that JAX detects itself.
    """
    from cmrcx.common import quiet_start

    quiet_start.import_tensorflow()  # TF only feeds data: off GPUs, start-up chatter dropped
    if os.environ.get("JAX_COORDINATOR_ADDRESS") or os.environ.get("CMRCX_DISTRIBUTED") == "1":
        import jax

        # JAX reads the coordinator address itself, but the process count and id
        # only on clusters it detects (SLURM, TPU, Open MPI, k8s); elsewhere they
        # come from JAX_NUM_PROCESSES / JAX_PROCESS_ID (the names orbax's launcher uses).
        count, index = os.environ.get("JAX_NUM_PROCESSES"), os.environ.get("JAX_PROCESS_ID")
        jax.distributed.initialize(
            num_processes=int(count) if count else None,
            process_id=int(index) if index else None,
        )


def gin_run_config() -> RunConfig:
    """The RunConfig of the parsed gin files and bindings, as written (unchecked)."""
    return _GIN_RUN_CONFIG()


def run_config_from_gin() -> RunConfig:
    """The RunConfig of the parsed gin files and bindings, checked (paths resolved)."""
    return gin_run_config().checked()


def start(argv: Sequence[str], description: str, extra: Sequence[tuple[str, dict]] = ()):
    """Flags, gin, process start-up and the checked RunConfig: (args, run)."""
    args = parse_flags(argv, description, extra)
    parse_gin(args.gin_file, args.gin_bindings)
    prepare_process()
    return args, run_config_from_gin()


def main_guard(main, argv: Sequence[str] | None = None) -> None:
    """Runs `main(argv)`; user errors print one line and exit 2, not a traceback."""
    try:
        main(sys.argv[1:] if argv is None else argv)
    except Preempted as preempted:
        _end(f"preempted: {preempted}", PREEMPTED_EXIT_STATUS, argv)
    except (ConfigError, DataFormatError, MissingSplitError, TrainingDiverged) as error:
        _end(f"error: {error}", 2, argv)
    except StorageError as error:
        _end(f"error: {error}", 2, argv)
    except OSError as error:
        if error.errno not in STORAGE_ERRNOS:
            raise
        # A write into a full disk fails in write() or close(), with no file name.
        where = error.filename or "a file (see the last path printed above)"
        _end(f"error: {where}: {error.strerror}", 2, argv)


def _end(message: str, status: int, argv) -> None:
    """Prints the one-line message and exits. As the process's own command (argv None) it
    ends at once after flushing: orbax's background writers would otherwise print
    shutdown tracebacks after the message. In-process callers (tests) get SystemExit."""
    print(message, file=sys.stderr)
    if argv is not None:
        sys.exit(status)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


# Gin reaches the library through these names only: `RunConfig.*` and the model configs
# of the registered families, `cmrcx.<ConfigClass>.*` (cmrcx.BertConfig.*, cmrcx.T5Config.*),
# in gin files and --gin.KEY=VALUE bindings.
_GIN_RUN_CONFIG = gin.external_configurable(RunConfig, name="RunConfig")
for _family in registry.FAMILIES.values():
    gin.external_configurable(_family.config_class, module="cmrcx")
