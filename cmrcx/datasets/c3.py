"""TFDS builder `c3`: CLUE's C3 files, one record per question, read unchanged.

DATA_DIR is the unpacked official ``c3_public/`` folder: d-train.json + m-train.json
(train), d-dev.json + m-dev.json (validation),
test.json or test1.1.json (CLUE 1.1) or test1.0.json (test, by CLUE
version; config ``c311`` or ``c310``). A split's d- and m- files are concatenated in that
order, as the baseline does. Nothing is downloaded (no network is assumed). Every record
goes through `cmrcx.benchmarks.clue.c3.read_split`, so a malformed document fails the
build with that reader's `DataFormatError` (file, record, field).

Records, in file order (``disable_shuffling``), one per question: ``id`` (the question's
id as JSON text, see `record_id`; the test files' own ids, else the index in the split),
``source`` (file name), ``record`` and ``question_index`` (where it sits in that file),
``document_id``, ``context`` (the sentences), ``question``, ``choices`` (as in the file,
unpadded), ``answer`` ("" in a test file) and ``label`` (index among the padded choices,
-1 in a test file).

Each split is prepared on its own when first read (`prepare`, `load_split`), under a folder
keyed by the data dir, the config, the split and the contents of the files it reads.
"""

from __future__ import annotations

import json

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from cmrcx.benchmarks.clue.c3 import VERSIONS, read_split, split_files
from cmrcx.datasets import versioned_clue
from cmrcx.datasets.versioned_clue import VersionedClueBuilder, version_configs

DOWNLOAD_URL = "https://storage.googleapis.com/cluebenchmark/tasks/c3_public.zip"
HOMEPAGE = "https://github.com/CLUEbenchmark/CLUE"
CITATION = """@article{sun-etal-2020-investigating,
  title = "Investigating Prior Knowledge for Challenging {C}hinese Machine Reading
           Comprehension",
  author = "Sun, Kai and Yu, Dian and Yu, Dong and Cardie, Claire",
  journal = "Transactions of the Association for Computational Linguistics",
  volume = "8",
  year = "2020",
  pages = "141--155",
}"""
MANUAL_INSTRUCTIONS = (
    f"Unzip c3_public.zip ({DOWNLOAD_URL}) and pass the c3_public/ folder as DATA_DIR: "
    "d-train.json + m-train.json (train), d-dev.json + m-dev.json (validation), "
    "test.json or test1.1.json (test, config c311) or test1.0.json (test, config "
    "c310). Only the files "
    "of the splits you use need to be there."
)


class C3(VersionedClueBuilder):
    """C3 multiple-choice reading comprehension: one record per question."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Official files read unchanged; file order kept."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_INSTRUCTIONS
    BUILDER_CONFIGS = version_configs("c3", VERSIONS)
    DATASET, PREFIX = "C3", "c3"
    split_files = staticmethod(split_files)

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "id": tfds.features.Text(),
                    "source": tfds.features.Text(),
                    "record": np.int32,
                    "question_index": np.int32,
                    "document_id": tfds.features.Text(),
                    "context": tfds.features.Sequence(tfds.features.Text()),
                    "question": tfds.features.Text(),
                    "choices": tfds.features.Sequence(tfds.features.Text()),
                    "answer": tfds.features.Text(),
                    "label": np.int32,
                }
            ),
            homepage=HOMEPAGE,
            citation=CITATION,
            # Keep the official order: submissions follow the test file question by question.
            disable_shuffling=True,
        )

    def _generate_examples(self, data_dir: str, split: str):
        questions = read_split(data_dir, split, self.builder_config.clue_version)
        for index, question in enumerate(questions):
            yield (
                index,
                {
                    "id": json.dumps(question.id, ensure_ascii=False),
                    "source": question.source,
                    "record": question.record,
                    "question_index": question.question_index,
                    "document_id": question.document_id or "",
                    "context": list(question.context),
                    "question": question.question,
                    "choices": list(question.choices),
                    "answer": question.answer or "",
                    "label": -1 if question.label is None else question.label,
                },
            )


def record_id(id_text: str | bytes) -> int | str:
    """The id of a prepared record as the file has it: ``b"17"`` -> 17, ``'"a7"'`` -> "a7"."""
    return json.loads(id_text)


def available_splits(data_dir: str, version: str = "1.1") -> list[str]:
    """The splits whose official files are all in ``data_dir``."""
    return versioned_clue.available_splits(C3, data_dir, version)


def require_split(data_dir: str, split: str, version: str = "1.1") -> list[str]:
    """Paths of the official files of ``split``; MissingSplitError naming the first absent."""
    return versioned_clue.require_split(C3, data_dir, split, version)


def load_split(
    data_dir: str, split: str, version: str = "1.1", cache_dir: str | None = None
) -> tf.data.Dataset:
    """The questions of one split, in file order, prepared first if needed
    (`cmrcx.datasets.versioned_clue.prepare`)."""
    return versioned_clue.load_split(C3, data_dir, split, version, cache_dir)
