"""The run of an existing MODEL_DIR for `eval` and `export`: its saved configuration
(MODEL_DIR/run_config.json, which `cmrcx.train` writes), with gin files and bindings as
overrides only.

`python -m cmrcx.eval --model_dir=runs/x` needs no gin file and no PRETRAINED or
DATA_DIR: the run saved them, and the checkpoint holds the weights. A gin value given
as well replaces the saved one (`--gin.DATA_DIR="'/data/test_split'"`); a path macro
left None or %gin.REQUIRED (a paper gin's PRETRAINED, DATA_DIR) keeps the saved path.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import gin

from cmrcx.cli import launch
from cmrcx.common.errors import ConfigError
from cmrcx.common.paths import resolve_path
from cmrcx.training import run_config
from cmrcx.training.run_config import RUN_CONFIG_FILE, RunConfig

MODEL_DIR_FLAG = (
    "--model_dir",
    {
        "default": None,
        "help": "a trained run (what cmrcx.train left in MODEL_DIR); its saved "
        "run_config.json is the configuration, --gin_file/--gin.KEY=VALUE override it",
    },
)
# The run files' path macros and the RunConfig fields they set: None (or %gin.REQUIRED)
# there means "not given", so the saved path stays.
PATH_MACROS = {
    "MODEL_DIR": "model_dir",
    "DATA_DIR": "data_dir",
    "VOCAB_FILE": "vocab_file",
    "PRETRAINED": "pretrained",
}
# Without a gin file the macros still reach RunConfig, as the run files wire them.
_MACRO_WIRING = [f"{macro} = None" for macro in PATH_MACROS] + [
    f"RunConfig.{field} = %{macro}" for macro, field in PATH_MACROS.items()
]


def start(argv: Sequence[str], description: str, extra: Sequence[tuple[str, dict]] = ()):
    """Flags, gin, process start-up and the checked RunConfig of the trained run:
    (args, run). `--model_dir=DIR` alone is enough; the gin-file form
    (`--gin_file=NAME.gin --gin.MODEL_DIR=...`) works as before, filled in from the saved
    run where the gin files leave a path unset. PRETRAINED is never required (the
    checkpoint holds the weights)."""
    args = launch.parse_flags(argv, description, [*extra, MODEL_DIR_FLAG], need_gin_file=False)
    if not args.gin_file and args.model_dir is None:
        raise ConfigError(
            "give --model_dir=DIR, the MODEL_DIR of a trained run (or --gin_file=NAME.gin "
            "with --gin.MODEL_DIR=...)"
        )
    bindings = args.gin_bindings if args.gin_file else [*_MACRO_WIRING, *args.gin_bindings]
    launch.parse_gin(args.gin_file, bindings)
    launch.prepare_process()
    given = launch.run_config_with_required_values()
    model_dir = resolve_path(args.model_dir or given.model_dir)
    if model_dir is None:
        raise ConfigError("MODEL_DIR is not set: add --model_dir=DIR (a trained run)")
    saved = run_config.read_run_config(model_dir)
    if saved is None:
        if not args.gin_file:
            raise ConfigError(_no_saved_run(model_dir))
        run = given  # a run from before run_config.json: the gin files say it all
    else:
        run = overridden(saved, given)
    run = dataclasses.replace(run, model_dir=model_dir, require_pretrained=False)
    return args, run.checked()


def _no_saved_run(model_dir: str) -> str:
    """The one-line error for a --model_dir without run_config.json."""
    from cmrcx.training import checkpoints  # orbax and jax: after gin, as in the runner

    if not os.path.isdir(model_dir):
        return f"MODEL_DIR {model_dir} does not exist: give the MODEL_DIR of a trained run"
    if not checkpoints.has_checkpoints(model_dir):
        return f"no checkpoint in {checkpoints.directory_of(model_dir)}: train first"
    return (
        f"MODEL_DIR {model_dir} has no {RUN_CONFIG_FILE} (the configuration cmrcx.train "
        "saves): give the gin file it was trained with, --gin_file=NAME.gin"
    )


def overridden(saved: RunConfig, given: RunConfig) -> RunConfig:
    """`saved` with the RunConfig fields and task options that gin binds replaced by
    `given`'s values (a path field only when given a path), and the model's fields bound
    in gin applied."""
    bound = launch.bound_run_config_names()
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    changes, options = {}, {}
    for name in bound:
        value = getattr(given, name)
        if name in PATH_MACROS.values() and (value is None or value is gin.REQUIRED):
            continue
        (changes if name in fields else options)[name] = value
    if "model" not in bound:
        changes["model"] = _model_with_bindings(saved.model)
    if options:  # by name, over the saved ones: RunConfig.checked() gives them their class
        saved_options = dataclasses.asdict(saved.options) if saved.options else {}
        changes["options"] = {**saved_options, **options}
    return dataclasses.replace(saved, **changes)


def _model_with_bindings(model):
    """The saved network config with the fields gin binds for its class
    (`--gin.cmrcx.BertConfig.dtype="'bfloat16'"`) replaced."""
    selector = _selector(type(model))
    bound = gin.config._CONFIG.get(("", selector), {})
    if not bound:
        return model
    wrapper = gin.config._REGISTRY.get_match(selector).wrapper
    kept = {
        f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.name not in bound
    }
    return wrapper(**kept)


def _selector(cls) -> str:
    """gin's name of a class `cmrcx.cli.launch` registered (RunConfig, cmrcx.BertConfig)."""
    for selector, configurable in gin.config._REGISTRY.items():
        if configurable.wrapped is cls:
            return selector
    raise KeyError(cls)
