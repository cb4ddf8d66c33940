"""TFDS builder `chid`: CLUE's ChID files, one record per blank, read unchanged.

DATA_DIR is the unpacked official ``chid_public/`` folder: train.json + train_answer.json
(train), dev.json + dev_answer.json (validation),
test.json or test1.1.json (CLUE 1.1) or test1.0.json (test, by
CLUE version; config ``chid11`` or ``chid10``). Nothing is downloaded (no network is
assumed). Every record goes through `cmrcx.benchmarks.clue_mrc.chid.read_split`, so a
malformed line or answer fails the build with that reader's `DataFormatError` (file, line or
answer key, field).

Records, in file order (``disable_shuffling``), one per blank: ``line_index`` (0-based line,
the unit the baseline decodes together), ``line_number``, ``passage_index``, ``tag``
(``#idiomNNNNNN#``), ``passage`` (the passage holding the blank, unchanged),
``candidates`` (the line's idioms) and ``label`` (answer index, -1 in a test file).

Each split is prepared on its own when first read (`prepare`, `load_split`), under a folder
keyed by the data dir, the config, the split and the contents of the files it reads.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from cmrcx.benchmarks.clue_mrc.chid import VERSIONS, read_split, split_files
from cmrcx.benchmarks.records import MissingSplitError
from cmrcx.datasets.prepared_splits import files_keyed_dir, prepare_once, require_files

DOWNLOAD_URL = "https://storage.googleapis.com/cluebenchmark/tasks/chid_public.zip"
HOMEPAGE = "https://github.com/CLUEbenchmark/CLUE"
SPLITS = ("train", "validation", "test")
CITATION = """@inproceedings{zheng-etal-2019-chid,
  title = "{C}h{ID}: A Large-scale {C}hinese {ID}iom Dataset for Cloze Test",
  author = "Zheng, Chujie and Huang, Minlie and Sun, Aixin",
  booktitle = "Proceedings of the 57th Annual Meeting of the Association for
               Computational Linguistics",
  year = "2019",
  pages = "778--787",
}"""
MANUAL_INSTRUCTIONS = (
    f"Unzip chid_public.zip ({DOWNLOAD_URL}) and pass the chid_public/ folder as DATA_DIR: "
    "train.json + train_answer.json (train), dev.json + dev_answer.json (validation), "
    "test.json or test1.1.json (test, config chid11) or test1.0.json (test, config "
    "chid10). Only the "
    "files of the splits you use need to be there."
)


def config_name(version: str) -> str:
    """``"1.1"`` -> ``"chid11"`` (the submission file's prefix)."""
    return "chid" + version.replace(".", "")


@dataclasses.dataclass(eq=False)
class ChidConfig(tfds.core.BuilderConfig):
    """A BuilderConfig holding the CLUE version, which picks the test file."""

    clue_version: str = "1.1"


class Chid(tfds.core.GeneratorBasedBuilder):
    """ChID idiom cloze: one multiple-choice record per blank."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Official files read unchanged; file order kept."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_INSTRUCTIONS
    BUILDER_CONFIGS = [
        ChidConfig(name=config_name(v), description=f"CLUE {v} test set", clue_version=v)
        for v in VERSIONS
    ]

    def __init__(self, *, split: str | None = None, **kwargs):
        """split: build only this split's files; None builds every split present."""
        self._only_split = split
        super().__init__(**kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "line_index": np.int32,
                    "line_number": np.int32,
                    "passage_index": np.int32,
                    "tag": tfds.features.Text(),
                    "passage": tfds.features.Text(),
                    "candidates": tfds.features.Sequence(tfds.features.Text()),
                    "label": np.int32,
                }
            ),
            homepage=HOMEPAGE,
            citation=CITATION,
            # File order: a line's blanks are decoded together, submissions follow tags.
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        data_dir = str(dl_manager.manual_dir)
        version = self.builder_config.clue_version
        if self._only_split is not None:
            require_split(data_dir, self._only_split, version)
            present = [self._only_split]
        else:
            present = available_splits(data_dir, version)
        if not present:
            raise MissingSplitError(f"no ChID file in {data_dir}.\n{MANUAL_INSTRUCTIONS}")
        return {split: self._generate_examples(data_dir, split) for split in present}

    def _generate_examples(self, data_dir: str, split: str):
        records = read_split(data_dir, split, self.builder_config.clue_version)
        for blank in records.blanks:
            yield (
                blank.tag,
                {
                    "line_index": blank.line_index,
                    "line_number": blank.line_number,
                    "passage_index": blank.passage_index,
                    "tag": blank.tag,
                    "passage": blank.passage,
                    "candidates": list(blank.candidates),
                    "label": -1 if blank.label is None else blank.label,
                },
            )


def available_splits(data_dir: str, version: str = "1.1") -> list[str]:
    """The splits whose official files are all in ``data_dir``."""
    return [
        split
        for split in SPLITS
        if all(
            os.path.isfile(os.path.join(data_dir, n)) for n in split_files(split, version, data_dir)
        )
    ]


def require_split(data_dir: str, split: str, version: str = "1.1") -> list[str]:
    """Paths of the official files of ``split``; MissingSplitError naming the first absent."""
    names = split_files(split, version, data_dir)
    return require_files("ChID", data_dir, split, names, MANUAL_INSTRUCTIONS)


def prepare(data_dir: str, split: str, version: str = "1.1", cache_dir: str | None = None) -> str:
    """Builds one split from its official files in ``data_dir`` (once); returns the TFDS
    data_dir to read ``split`` of ``chid/<config>`` from.

    The prepared copy lives under ``cache_dir`` (default ~/.cache/cmrcx/tfds), keyed by the
    data dir, the config, the split and the SHA-1 of the data and answer files.

    Raises:
      MissingSplitError: ``data_dir`` is not a directory or lacks one of the split's files.
      DataFormatError: a file is malformed (names the file, line or answer key, field).
    """
    data_dir = os.path.abspath(data_dir)
    paths = require_split(data_dir, split, version)
    name = config_name(version)
    tfds_dir = files_keyed_dir(cache_dir, f"chid-{name}-{split}", (data_dir, name, split), paths)
    prepare_once(functools.partial(Chid, config=name), tfds_dir, data_dir, split=split)
    return tfds_dir


def prepared_builder(
    data_dir: str, split: str, version: str = "1.1", cache_dir: str | None = None
) -> Chid:
    """The `Chid` builder holding ``split``, prepared first if needed."""
    return Chid(config=config_name(version), data_dir=prepare(data_dir, split, version, cache_dir))


def load_split(
    data_dir: str, split: str, version: str = "1.1", cache_dir: str | None = None
) -> tf.data.Dataset:
    """The blanks of one split, in file order, prepared first if needed (see `prepare`)."""
    builder = prepared_builder(data_dir, split, version, cache_dir)
    return builder.as_dataset(split=split, shuffle_files=False)
