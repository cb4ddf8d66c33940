"""`cmrcx.generate`'s flags and gin: `GenerationConfig` from gin files, --gin.KEY=VALUE
bindings and the decoding flags over them, then one call into `cmrcx.training.generation`."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Sequence

import gin

from cmrcx.cli import launch
from cmrcx.common import paths
from cmrcx.common.errors import ConfigError
from cmrcx.training import generation

LOT_GIN_FILE = "runs/lot_generation.gin"  # a LOT file's decoding without --gin_file

# Gin reaches generation through this name only: `GenerationConfig.*` (the full name stays
# `cmrcx.generate.GenerationConfig`, where the class was defined before).
GenerationConfig = gin.external_configurable(
    generation.GenerationConfig, name="GenerationConfig", module="cmrcx.generate"
)

# flag -> type; every one overrides the GenerationConfig field of the same name.
FLAGS = {
    "decoding": str,
    "top_k": int,
    "top_p": float,
    "temperature": float,
    "num_beams": int,
    "length_penalty": float,
    "max_new_tokens": int,
    "max_input_length": int,
    "batch_size": int,
    "seed": int,
}


def parse_flags(argv: Sequence[str], description: str | None = None) -> argparse.Namespace:
    """The flags above plus --gin_file and --gin.KEY=VALUE, both optional here."""
    parser = argparse.ArgumentParser(prog="python -m cmrcx.generate", description=description)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--checkpoint", required=True, help="cmrcx T5 export directory")
    parser.add_argument(
        "--input", required=True, help="one text or JSON id list per line, or a LOT jsonl file"
    )
    parser.add_argument(
        "--task", choices=sorted(generation.LOT_TASKS), default=None,
        help="read --input as this LOT task's official jsonl file (default: by its fields)",
    )  # fmt: skip
    parser.add_argument("--output", required=True, help="JSON lines file to write")
    parser.add_argument(
        "--gin_file", action="append", default=[], help="e.g. runs/lot_generation.gin"
    )
    parser.add_argument("--gin_bindings", action="append", default=[], help="one gin binding")
    for name, kind in FLAGS.items():
        parser.add_argument(f"--{name}", type=kind, default=None, help="overrides gin")
    bindings, rest = launch.split_gin_flags(argv)
    args = parser.parse_args(rest)
    args.gin_bindings += bindings
    return args


def generation_config(args: argparse.Namespace) -> generation.GenerationConfig:
    """Gin's GenerationConfig with the flags that were given put over it."""
    if args.gin_file or args.gin_bindings:
        launch.parse_gin(args.gin_file, args.gin_bindings)
    flags = {name: getattr(args, name) for name in FLAGS if getattr(args, name) is not None}
    return dataclasses.replace(GenerationConfig(), **flags)


def generate(args: argparse.Namespace) -> None:
    """The run `parse_flags` describes: reads the export and --input, writes --output."""
    input_path, output = paths.resolve_path(args.input), paths.resolve_path(args.output)
    if not os.path.isfile(input_path):
        raise ConfigError(f"input file not found: {input_path}")
    lot_task = generation.lot_task_of(input_path, args.task)
    if lot_task is not None and not args.gin_file:
        args.gin_file = [LOT_GIN_FILE]
        print(f"LOT {lot_task} file: decoding with {LOT_GIN_FILE}", flush=True)
    config_of_run = generation_config(args)
    config, params, vocab_path = generation.load_export(paths.resolve_path(args.checkpoint))
    config_of_run = config_of_run.checked(config.vocab_size)
    launch.prepare_process()  # before the vocabulary imports TensorFlow
    count = generation.write_generations(
        config_of_run, config, params, vocab_path, input_path, lot_task, output
    )
    print(f"wrote {count} generations to {output}")
