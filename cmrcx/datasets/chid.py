"""TFDS builder `chid`: CLUE's ChID files, one record per line, read unchanged.

DATA_DIR is the unpacked official ``chid_public/`` folder: train.json + train_answer.json
(train), dev.json + dev_answer.json (validation),
test.json or test1.1.json (CLUE 1.1) or test1.0.json (test, by
CLUE version; config ``chid11`` or ``chid10``). Nothing is downloaded (no network is
assumed). Every record goes through `cmrcx.benchmarks.clue.chid.read_split`, so a
malformed line or answer fails the build with that reader's `DataFormatError` (file, line or
answer key, field).

Records, in file order (``disable_shuffling``), one per line that holds a blank:
``line_index`` (0-based line, the unit the baseline decodes together), ``line_number``,
``passages`` (the line's ``content`` up to the last passage with a blank, each unchanged,
a passage without a blank empty), ``candidates`` (the line's idioms), and per blank, in
the reader's order: ``tags`` (``#idiomNNNNNN#``), ``passage_indices`` (the passage
holding it) and ``labels`` (answer index, -1 in a test file). `blanks` turns a record
back into the reader's `ChidBlank`s. (Version 1 had one record per blank, repeating its
passage and the line's candidates in each; docs/performance.md has the times.)

Each split is prepared on its own when first read (`prepare`, `load_split`), under a folder
keyed by the data dir, the config, the split and the contents of the files it reads.
"""

from __future__ import annotations

import itertools

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from cmrcx.benchmarks.clue.chid import VERSIONS, ChidBlank, read_split, split_files
from cmrcx.datasets import versioned_clue
from cmrcx.datasets.records import text, texts
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
    """ChID idiom cloze: one record per line, its blanks multiple-choice examples."""

    # A new version re-reads files prepared by an older reader, whose checks they skipped.
    VERSION = tfds.core.Version("2.0.0")
    RELEASE_NOTES = {
        "1.0.0": "Official files read unchanged; file order kept.",
        "1.1.0": "A line with more blanks than candidates, or more than 10 candidates, is "
        "refused when read (not when decoded); empty content and candidates are read.",
        "2.0.0": "One record per line (its passages, candidates and blanks) instead of one "
        "per blank, which repeated its passage and the candidates.",
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
                    "passages": tfds.features.Sequence(tfds.features.Text()),
                    "candidates": tfds.features.Sequence(tfds.features.Text()),
                    "tags": tfds.features.Sequence(tfds.features.Text()),
                    "passage_indices": tfds.features.Sequence(np.int32),
                    "labels": tfds.features.Sequence(np.int32),
                }
            ),
            homepage=HOMEPAGE,
            citation=CITATION,
            # File order: a line's blanks are decoded together, submissions follow tags.
            disable_shuffling=True,
        )

    def _generate_examples(self, data_dir: str, split: str):
        records = read_split(data_dir, split, self.builder_config.clue_version)
        for line_index, group in itertools.groupby(records.blanks, lambda b: b.line_index):
            blanks = list(group)
            passages: dict[int, str] = {}
            for blank in blanks:
                passages[blank.passage_index] = blank.passage
            first = blanks[0]
            yield (
                str(line_index),
                {
                    "line_index": line_index,
                    "line_number": first.line_number,
                    "passages": [passages.get(k, "") for k in range(max(passages) + 1)],
                    "candidates": list(first.candidates),
                    "tags": [blank.tag for blank in blanks],
                    "passage_indices": [blank.passage_index for blank in blanks],
                    "labels": [-1 if blank.label is None else blank.label for blank in blanks],
                },
            )


def blanks(record: dict) -> list[ChidBlank]:
    """A record (NumPy values, as `tfds.as_numpy` or `cmrcx.datasets.records` give them) as
    the reader's blanks: a line's share one tuple of candidates and their passages' str."""
    passages = texts(record["passages"])
    candidates = texts(record["candidates"])
    line_index, line_number = int(record["line_index"]), int(record["line_number"])
    return [
        ChidBlank(
            line_index=line_index,
            line_number=line_number,
            passage_index=int(k),
            tag=text(tag),
            passage=passages[int(k)],
            candidates=candidates,
            label=None if label < 0 else int(label),
        )
        for tag, k, label in zip(
            record["tags"], record["passage_indices"], record["labels"], strict=True
        )
    ]


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
