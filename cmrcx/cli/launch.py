"""What `train`, `eval` and `export` share: flags, gin, and building a run.

This is the only layer that applies gin. `--gin_file=NAME.gin` finds bare names
in any folder of the bundled gin_configs/ (and the paths files had before it had
folders); `--gin.KEY=VALUE` adds one binding (T5X style: `--gin.MODEL_DIR="'runs/x'"`).
Paths written `cmrcx:REL` point inside the installed package (the bundled sample and
tiny vocabulary).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib.resources
import inspect
import logging
import os
import pathlib
import re
import sys
import tokenize
from collections.abc import Sequence

import gin

from cmrcx import cpu
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
from cmrcx.training import task_options
from cmrcx.training.run_config import RunConfig

PREEMPTED_EXIT_STATUS = 143  # 128 + SIGTERM, what schedulers expect of a terminated job


def gin_configs_dir() -> str:
    return str(importlib.resources.files("cmrcx.gin_configs"))


# Where bundled files were before gin_configs/ had folders. These names keep
# working, in --gin_file and in a user's `include` lines. The model files were renamed:
MOVED_MODEL_FILES = {
    "models/bert_base.gin": "models/bert/base.gin",
    "models/bert_large.gin": "models/bert/large.gin",
    "models/bert_multilingual.gin": "models/bert/multilingual.gin",
    "models/bert_tiny.gin": "models/bert/tiny.gin",
    "models/ernie_base.gin": "models/bert/ernie_base.gin",
    "models/roberta_large.gin": "models/bert/roberta_large.gin",
    "models/longlm_small.gin": "models/t5/longlm_small.gin",
    "models/longlm_base.gin": "models/t5/longlm_base.gin",
    "models/longlm_large.gin": "models/t5/longlm_large.gin",
    "models/mt5_base.gin": "models/t5/mt5_base.gin",
    "models/t5_tiny.gin": "models/t5/tiny.gin",
}
# ... and the experiments moved from the top level into a folder under their own name.
MOVED_EXPERIMENTS = {"cmrc2019_": "cmrc2019/", "clue_": "clue/", "longlm_pretrain_": "lot/"}


def moved_gin_file(name: str) -> str | None:
    """The path in gin_configs/ of a file by its name before the folders:
    ``models/bert_base.gin`` -> ``models/bert/base.gin``, ``cmrc2019_bert.gin`` ->
    ``cmrc2019/cmrc2019_bert.gin``; None for any other name."""
    if name in MOVED_MODEL_FILES:
        return MOVED_MODEL_FILES[name]
    for prefix, folder in MOVED_EXPERIMENTS.items():
        if name.startswith(prefix) and not os.path.dirname(name):
            return folder + name
    return None


def bundled_gin_files() -> list[str]:
    """Every bundled gin file, as its path in gin_configs/ (``clue/clue_afqmc_bert.gin``)."""
    root = pathlib.Path(gin_configs_dir())
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*.gin"))


def bundled_gin_file(name: str) -> str | None:
    """The bundled file `name` stands for (absolute path), None if there is none: a path
    in gin_configs/ (``runs/clue_finetune.gin``), a path from before the folders
    (moved_gin_file), or a bare name in any folder (``cmrc2019_bert.gin``). ConfigError
    if a bare name is in two folders (``tiny.gin``: models/bert/ and models/t5/)."""
    root = gin_configs_dir()
    for path in (name, moved_gin_file(name)):
        if path is not None and os.path.isfile(os.path.join(root, path)):
            return os.path.join(root, path)
    if os.path.dirname(name):
        return None
    found = [path for path in bundled_gin_files() if os.path.basename(path) == name]
    if len(found) > 1:
        raise ConfigError(
            f"gin file {name!r} is in more than one folder: give one of {', '.join(found)}"
        )
    return os.path.join(root, found[0]) if found else None


def _bundled_names_text() -> str:
    """The bundled gin files by folder, a folder's experiments as task x model patterns:
    ``local_tiny.gin; clue/: clue_{afqmc,c310,...}_{bert,ernie,...}.gin, ...; runs/: ...``."""
    folders: dict[str, list[str]] = {}
    for path in bundled_gin_files():
        folder, name = os.path.split(path)
        folders.setdefault(folder, []).append(name)
    return "; ".join(
        f"{folder}/: {_names_as_patterns(names)}" if folder else _names_as_patterns(names)
        for folder, names in sorted(folders.items())  # the top level first
    )


def _names_as_patterns(names: list[str]) -> str:
    """``clue_afqmc_bert.gin clue_afqmc_ernie.gin clue_csl_bert.gin clue_csl_ernie.gin``
    -> ``clue_{afqmc,csl}_{bert,ernie}.gin``: names `<task>_<model>.gin` (a RunConfig.task)
    where two or more models share two or more tasks; other names as they are."""
    from cmrcx.common import quiet_start

    quiet_start.import_tensorflow()  # the run-task registry imports it: quietly, off GPUs
    from cmrcx.training.run_config import run_task_names

    run_tasks = run_task_names()
    tasks_of_model: dict[str, list[str]] = {}
    for name in names:
        tasks = [task for task in run_tasks if name.startswith(task + "_")]
        if tasks:
            task = max(tasks, key=len)
            tasks_of_model.setdefault(name[len(task) + 1 : -len(".gin")], []).append(task)
    models_of_tasks: dict[tuple[str, ...], list[str]] = {}
    for model, tasks in tasks_of_model.items():
        models_of_tasks.setdefault(tuple(tasks), []).append(model)
    entries = {name: name for name in names}  # first name of an entry -> its text
    for tasks, models in models_of_tasks.items():
        if len(tasks) < 2 or len(models) < 2:
            continue
        grid = [f"{task}_{model}.gin" for task in tasks for model in models]
        for name in grid:
            del entries[name]
        shared = os.path.commonprefix(tasks)
        shared = shared[: shared.rfind("_") + 1]  # clue_
        tails = ",".join(task[len(shared) :] for task in tasks)
        entries[min(grid)] = f"{shared}{{{tails}}}_{{{','.join(models)}}}.gin"
    return ", ".join(text for _, text in sorted(entries.items()))


def _moved_include(path: str) -> str | None:
    """For gin's include search: the bundled file that `path` (a search-path prefix
    joined with an include's name, e.g. GIN_CONFIGS/models/bert_base.gin) named before
    the folders; None for any other path."""
    root = gin_configs_dir()
    if not path.startswith(root + os.sep):
        return None
    moved = moved_gin_file(pathlib.Path(os.path.relpath(path, root)).as_posix())
    if moved is None or not os.path.isfile(os.path.join(root, moved)):
        return None
    return os.path.join(root, moved)


def _open_moved_include(path: str):
    return open(_moved_include(path), encoding="utf-8")


def _is_moved_include(path: str) -> bool:
    return _moved_include(path) is not None


def parse_flags(
    argv: Sequence[str],
    description: str,
    extra: Sequence[tuple[str, dict]] = (),
    need_gin_file: bool = True,
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
    gin_bindings, rest = split_gin_flags(argv)
    args = parser.parse_args(rest)
    args.gin_bindings = list(args.gin_bindings) + gin_bindings
    if need_gin_file and not args.gin_file:
        parser.error("give at least one --gin_file (e.g. --gin_file=cmrc2019_tiny.gin)")
    return args


def split_gin_flags(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(bindings, other args): each --gin.KEY=VALUE as the binding "KEY = VALUE"."""
    gin_bindings, rest = [], []
    for arg in argv:
        if arg.startswith("--gin.") and "=" in arg:
            key, value = arg[len("--gin.") :].split("=", 1)
            gin_bindings.append(f"{key} = {value}")
        else:
            rest.append(arg)
    return gin_bindings, rest


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
        elif bundled := bundled_gin_file(name):
            files.append(bundled)
        elif paper_named := _gin_file_of_paper_name(name):
            print(f"note: {name} is {os.path.basename(paper_named)}", file=sys.stderr)
            files.append(paper_named)
        else:
            raise ConfigError(
                f"gin file {name!r} not found; bundled (a bare name finds a file in any "
                f"folder): {_bundled_names_text()} (a task's paper name works in their "
                f"place: {task_names.paper_names_text()})"
            )
    # gin logs "Path not found" for each search-path miss before it finds an
    # include; those lines are noise (a real miss raises), so they are filtered.
    root = logging.getLogger()
    root.addFilter(_drop_gin_path_misses)
    try:
        gin.parse_config_files_and_bindings(files, bindings, finalize_config=False)
    except SyntaxError as error:
        if error.filename not in (None, "<string>") and not error.filename.endswith(".gin"):
            raise  # a Python module a gin `import` loads: its own traceback
        raise ConfigError(_gin_syntax_message(error)) from None
    except tokenize.TokenError as error:  # an unclosed bracket: `mesh_shape=(-1,`
        raise ConfigError(f"gin cannot parse a binding or gin file ({error.args[0]})") from None
    except ValueError as error:
        message = _gin_name_message(str(error))
        if message is None:
            raise
        raise ConfigError(message) from None
    finally:
        root.removeFilter(_drop_gin_path_misses)


def _gin_syntax_message(error: SyntaxError) -> str:
    """A gin parse error in one line: where, the statement, and the usual cause."""
    statement = (error.text or "").strip()
    if error.filename in (None, "<string>"):
        where = f"the binding {statement!r}"
    else:
        where = f"{error.filename}:{error.lineno}: {statement!r}"
    reason = " ".join(error.msg.split()).rstrip(".")
    # Python's literal_eval text carries an object's address: "Failed to parse token 'x'" says it.
    reason = re.sub(
        r"malformed node or string on line \d+: <ast\.\w+ object at 0x\w+> ", "", reason
    )
    said = f"gin cannot parse {where} ({reason})"
    if "parse token" not in reason and "Unable to parse value" not in reason:
        return said
    return (
        f"{said}: values are Python literals, so a string needs quotes inside the shell's "
        "(--gin.MODEL_DIR=\"'runs/x'\"); numbers, True, False and None take none"
    )


_GIN_UNKNOWN_PARAMETER = re.compile(
    r"Configurable '([\w.]+)' doesn't have a parameter named '(\w+)'"
)
_GIN_UNKNOWN_CONFIGURABLE = re.compile(r"No configurable matching (?:reference )?'@?([\w.]+)")


def _gin_name_message(text: str) -> str | None:
    """gin's error for a binding naming no configurable or no parameter, in one line with
    the closest names; None for other errors."""
    said = re.sub(
        r"\.?\s*In bindings string line \d+\s*", " in the binding: ", " ".join(text.split())
    )
    if match := _GIN_UNKNOWN_PARAMETER.search(text):
        configurable = gin.config._REGISTRY.get_match(match.group(1))
        names = list(inspect.signature(configurable.wrapped).parameters) if configurable else []
        close = difflib.get_close_matches(match.group(2), names, n=3)
    elif match := _GIN_UNKNOWN_CONFIGURABLE.search(text):
        names = [name.rsplit(".", 1)[-1] for name, _ in gin.config._REGISTRY.items()]
        close = difflib.get_close_matches(match.group(1).rsplit(".", 1)[-1], names, n=3)
    else:
        return None
    return f"gin: {said}" + (f" (did you mean {', '.join(close)}?)" if close else "")


def _gin_file_of_paper_name(name: str) -> str | None:
    """The bundled gin file a paper's task name stands for: ``clue_cluewsc2020_bert.gin``
    or ``cluewsc2020_bert.gin`` -> ``clue_cluewsc11_bert.gin`` (the current CLUE version)."""
    if os.path.dirname(name) or not name.endswith(".gin"):
        return None
    parts = name[: -len(".gin")].split("_")
    for cut in range(len(parts) - 1, 0, -1):  # the longest task name first
        registered = task_names.find("_".join(parts[:cut]))
        if registered is not None:
            candidate = bundled_gin_file("_".join([registered, *parts[cut:]]) + ".gin")
            if candidate is not None:
                return candidate
    return None


def _drop_gin_path_misses(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Path not found:")


# The run files mark MODEL_DIR and DATA_DIR %gin.REQUIRED. gin passes the marker itself on
# when nothing overrides it (gin checks only in gin.finalize(), which also locks the
# config). Left unset, they reach RunConfig as None: RunConfig.checked() says in its own
# words and order what is missing ("MODEL_DIR is not set: add --gin.MODEL_DIR=...").
_CHECKED_WHEN_NOT_SET = {"MODEL_DIR": "model_dir", "DATA_DIR": "data_dir"}


def run_config_with_required_values() -> RunConfig:
    """RunConfig() from gin, MODEL_DIR and DATA_DIR None if still %gin.REQUIRED;
    ConfigError naming any other binding or macro still %gin.REQUIRED."""
    unset = [key for key in unset_required_values() if key not in _CHECKED_WHEN_NOT_SET]
    if unset:
        raise ConfigError(f"{unset[0]} is %gin.REQUIRED and not set: add --gin.{unset[0]}=VALUE")
    run = gin_run_config()
    fields = [f for f in _CHECKED_WHEN_NOT_SET.values() if getattr(run, f) is gin.REQUIRED]
    return dataclasses.replace(run, **dict.fromkeys(fields))


def unset_required_values() -> list[str]:
    """What gin.finalize() would report still %gin.REQUIRED, as the key to set:
    ``MODEL_DIR`` (a macro), ``RunConfig.seed``. One binding at a time through gin's own
    check (its message names the binding); gin has no public view of the whole config."""
    unset = []
    for key, bindings in gin.config._CONFIG.items():
        for name, value in bindings.items():
            try:
                gin.config.find_missing_overrides_hook({key: {name: value}})
            except ValueError as error:  # "MODEL_DIR/macro.value set to `%gin.REQUIRED` but..."
                binding = str(error).split(" set to ", 1)[0]
                unset.append(binding.removesuffix("/macro.value"))
    return unset


def prepare_process() -> None:
    """Per-process start-up: keep TensorFlow off accelerators; the CPU paths
    (`cmrcx.cpu.enable`); join a multi-host job.

    jax.distributed.initialize() runs when the environment describes a cluster:
    JAX_COORDINATOR_ADDRESS (host:port) with JAX_NUM_PROCESSES and JAX_PROCESS_ID,
    or CMRCX_DISTRIBUTED=1 on a TPU pod / SLURM job that JAX detects itself.
    """
    from cmrcx.common import quiet_start

    quiet_start.import_tensorflow()  # TF only feeds data: off GPUs, start-up chatter dropped
    cpu.enable()  # the process-wide CPU paths (JAX loads here, after TensorFlow's quiet start)
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
    return run_config_with_required_values().checked()


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


def _run_config_with_options(**values) -> RunConfig:
    """gin's `RunConfig`: the RunConfig fields bound, and the run task's options by their
    own names (`RunConfig.decoding`), which RunConfig.checked() gives the task's options
    class (`cmrcx.training.task_options`)."""
    fields = {f.name for f in dataclasses.fields(RunConfig)} - {"options"}
    options = {name: values.pop(name) for name in list(values) if name not in fields}
    return RunConfig(**values, options=options or None)


def _run_config_signature() -> inspect.Signature:
    """RunConfig's fields and every run task's options, keyword-only with their defaults:
    what gin checks a `RunConfig.NAME` binding against."""
    defaults = {
        f.name: f.default
        if f.default is not dataclasses.MISSING
        else inspect.Parameter.empty  # the model: a default_factory
        for f in dataclasses.fields(RunConfig)
        if f.name != "options"
    }
    defaults.update(task_options.all_option_defaults())
    return inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
         for name, default in defaults.items()]
    )  # fmt: skip


_run_config_with_options.__signature__ = _run_config_signature()


def bound_run_config_names() -> list[str]:
    """The `RunConfig.NAME` that the parsed gin files and bindings bind (fields and
    options; gin has no public view)."""
    return list(gin.config._CONFIG.get(("", f"{RunConfig.__module__}.RunConfig"), {}))


# A user's `include 'models/bert_base.gin'` (a path from before the folders): gin tries
# its readers on each search path in turn, this one after plain open() fails. Registered
# once: gin keeps a list, and every parse would otherwise add another copy.
gin.config.register_file_reader(_open_moved_include, _is_moved_include)
# Gin reaches the library through these names only: `RunConfig.*` and the model configs
# of the registered families, `cmrcx.<ConfigClass>.*` (cmrcx.BertConfig.*, cmrcx.T5Config.*),
# in gin files and --gin.KEY=VALUE bindings.
# gin's RunConfig keeps the selector the dataclass had (cmrcx.training.run_config.RunConfig).
_GIN_RUN_CONFIG = gin.external_configurable(
    _run_config_with_options, name="RunConfig", module=RunConfig.__module__
)
for _family in registry.FAMILIES.values():
    gin.external_configurable(_family.config_class, module="cmrcx")
