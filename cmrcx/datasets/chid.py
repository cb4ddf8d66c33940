"""TFDS builder `chid`: CLUE's ChID files, one record per blank, read unchanged.

DATA_DIR is the unpacked official ``chid_public/`` folder: train.json + train_answer.json
(train), dev.json + dev_answer.json (validation),
test.json or test1.1.json (CLUE 1.1) or test1.0.json (test, by
CLUE version; config ``chid11`` or ``chid10``). Nothing is downloaded (no network is
assumed). Every record goes through `cmrcx.benchmarks.clue.chid.read_split`, so a
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

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from cmrcx.benchmarks.clue.chid import VERSIONS, read_split, split_files
from cmrcx.datasets import versioned_clue
from cmrcx.datasets.versioned_clue import VersionedClueBuilder, version_configs

DOWNLOAD_URL = "https://storage.googleapis.com/cluebenchmark/tasks/chid_public.zip"
HOMEPAGE = "https://github.com/CLUEbenchmark/CLUE"
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


class Chid(VersionedClueBuilder):
    """ChID idiom cloze: one multiple-choice record per blank."""

    # A new version re-reads files prepared by an older reader, whose checks they skipped.
    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {
        "1.0.0": "Official files read unchanged; file order kept.",
        "1.1.0": "A line with more blanks than candidates, or more than 10 candidates, is "
        "refused when read (not when decoded); empty content and candidates are read.",
    }
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_INSTRUCTIONS
    BUILDER_CONFIGS = version_configs("chid", VERSIONS)
    DATASET, PREFIX = "ChID", "chid"
    split_files = staticmethod(split_files)

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
    return versioned_clue.available_splits(Chid, data_dir, version)


def require_split(data_dir: str, split: str, version: str = "1.1") -> list[str]:
    """Paths of the official files of ``split``; MissingSplitError naming the first absent."""
    return versioned_clue.require_split(Chid, data_dir, split, version)


def load_split(
    data_dir: str, split: str, version: str = "1.1", cache_dir: str | None = None
) -> tf.data.Dataset:
    """The blanks of one split, in file order, prepared first if needed
    (`cmrcx.datasets.versioned_clue.prepare`)."""
    return versioned_clue.load_split(Chid, data_dir, split, version, cache_dir)
