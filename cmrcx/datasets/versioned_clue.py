"""What the ChID and C3 builders share: one BuilderConfig per CLUE version (their test
files changed in CLUE 1.1: config ``chid11`` / ``chid10``, ``c311`` / ``c310``), splits
read from several official files, and one split prepared at a time, under a folder keyed
by the contents of every file it reads.

A builder subclasses `VersionedClueBuilder` (setting ``DATASET``, ``PREFIX``,
``split_files`` and its own ``_info`` / ``_generate_examples``); the module functions take
that class as their first argument.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable

import tensorflow as tf
import tensorflow_datasets as tfds

from cmrcx.common.errors import MissingSplitError
from cmrcx.datasets.prepared_splits import files_keyed_dir, prepare_once, require_files

SPLITS = ("train", "validation", "test")


@dataclasses.dataclass(eq=False)
class VersionConfig(tfds.core.BuilderConfig):
    """A BuilderConfig holding the CLUE version, which picks the test file."""

    clue_version: str = "1.1"


def version_configs(prefix: str, versions) -> list[VersionConfig]:
    """``("chid", ("1.1", "1.0"))`` -> configs ``chid11``, ``chid10``."""
    return [
        VersionConfig(name=config_name(prefix, v), description=f"CLUE {v} test set", clue_version=v)
        for v in versions
    ]


def config_name(prefix: str, version: str) -> str:
    """``("chid", "1.1")`` -> ``"chid11"`` (the submission file's prefix)."""
    return prefix + version.replace(".", "")


class VersionedClueBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Builds the splits whose files are present (or only the one asked for)."""

    DATASET: str  # the name in messages, e.g. "ChID"
    PREFIX: str  # the config and cache prefix, e.g. "chid"
    # (split, version, data_dir) -> the official file names of the split, in reading order.
    split_files: Callable[..., tuple[str, ...]]

    def __init__(self, *, split: str | None = None, **kwargs):
        """split: build only this split's files; None builds every split present."""
        self._only_split = split
        super().__init__(**kwargs)

    def _split_generators(self, dl_manager):
        data_dir = str(dl_manager.manual_dir)
        version = self.builder_config.clue_version
        if self._only_split is not None:
            require_split(type(self), data_dir, self._only_split, version)
            present = [self._only_split]
        else:
            present = available_splits(type(self), data_dir, version)
        if not present:
            raise MissingSplitError(
                f"no {self.DATASET} file in {data_dir}.\n{self.MANUAL_DOWNLOAD_INSTRUCTIONS}"
            )
        return {split: self._generate_examples(data_dir, split) for split in present}


def available_splits(builder: type[VersionedClueBuilder], data_dir: str, version: str) -> list:
    """The splits whose official files are all in ``data_dir``."""
    return [
        split
        for split in SPLITS
        if all(
            os.path.isfile(os.path.join(data_dir, name))
            for name in builder.split_files(split, version, data_dir)
        )
    ]


def require_split(
    builder: type[VersionedClueBuilder], data_dir: str, split: str, version: str
) -> list[str]:
    """Paths of the official files of ``split``; MissingSplitError naming the first absent."""
    names = builder.split_files(split, version, data_dir)
    return require_files(
        builder.DATASET, data_dir, split, names, builder.MANUAL_DOWNLOAD_INSTRUCTIONS
    )


def prepare(
    builder: type[VersionedClueBuilder],
    data_dir: str,
    split: str,
    version: str,
    cache_dir: str | None,
) -> str:
    """Builds one split from its official files in ``data_dir`` (once); returns the TFDS
    data_dir to read ``split`` of ``<builder>/<config>`` from.

    The prepared copy lives under ``cache_dir`` (default ~/.cache/cmrcx/tfds), keyed by the
    data dir, the config, the split and the SHA-1 of every file the split reads.

    Raises:
      MissingSplitError: ``data_dir`` is not a directory or lacks one of the split's files.
      DataFormatError: a file is malformed (names the file, record and field).
    """
    data_dir = os.path.abspath(data_dir)
    paths = require_split(builder, data_dir, split, version)
    name = config_name(builder.PREFIX, version)
    tfds_dir = files_keyed_dir(
        cache_dir, f"{builder.PREFIX}-{name}-{split}", (data_dir, name, split), paths
    )
    prepare_once(functools.partial(builder, config=name), tfds_dir, data_dir, split=split)
    return tfds_dir


def load_split(
    builder: type[VersionedClueBuilder],
    data_dir: str,
    split: str,
    version: str,
    cache_dir: str | None,
) -> tf.data.Dataset:
    """The records of one split, in file order, prepared first if needed (see `prepare`)."""
    name = config_name(builder.PREFIX, version)
    prepared = builder(config=name, data_dir=prepare(builder, data_dir, split, version, cache_dir))
    return prepared.as_dataset(split=split, shuffle_files=False)
