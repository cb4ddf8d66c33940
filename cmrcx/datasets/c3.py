"""TFDS builder `c3`: CLUE's C3 files, one record per question, read unchanged.

DATA_DIR is the unpacked official ``c3_public/`` folder: d-train.json + m-train.json
(train), d-dev.json + m-dev.json (validation),
test.json or test1.1.json (CLUE 1.1) or test1.0.json (test, by CLUE
version; config ``c311`` or ``c310``). A split's d- and m- files are concatenated in that
order, as the baseline does. Nothing is downloaded (no network is assumed). Every record
goes through `cmrcx.benchmarks.clue_mrc.c3.read_split`, so a malformed document fails the
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

import dataclasses
import functools
import json
import os

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from cmrcx.benchmarks.clue_mrc.c3 import VERSIONS, read_split, split_files
from cmrcx.benchmarks.records import MissingSplitError
from cmrcx.datasets.prepared_splits import files_keyed_dir, prepare_once, require_files

DOWNLOAD_URL = "https://storage.googleapis.com/cluebenchmark/tasks/c3_public.zip"
HOMEPAGE = "https://github.com/CLUEbenchmark/CLUE"
SPLITS = ("train", "validation", "test")
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


def config_name(version: str) -> str:
    """``"1.1"`` -> ``"c311"`` (the submission file's prefix)."""
    return "c3" + version.replace(".", "")


@dataclasses.dataclass(eq=False)
class C3Config(tfds.core.BuilderConfig):
    """A BuilderConfig holding the CLUE version, which picks the test file."""

    clue_version: str = "1.1"


class C3(tfds.core.GeneratorBasedBuilder):
    """C3 multiple-choice reading comprehension: one record per question."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Official files read unchanged; file order kept."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_INSTRUCTIONS
    BUILDER_CONFIGS = [
        C3Config(name=config_name(v), description=f"CLUE {v} test set", clue_version=v)
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

    def _split_generators(self, dl_manager):
        data_dir = str(dl_manager.manual_dir)
        version = self.builder_config.clue_version
        if self._only_split is not None:
            require_split(data_dir, self._only_split, version)
            present = [self._only_split]
        else:
            present = available_splits(data_dir, version)
        if not present:
            raise MissingSplitError(f"no C3 file in {data_dir}.\n{MANUAL_INSTRUCTIONS}")
        return {split: self._generate_examples(data_dir, split) for split in present}

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
    return require_files("C3", data_dir, split, names, MANUAL_INSTRUCTIONS)


def prepare(data_dir: str, split: str, version: str = "1.1", cache_dir: str | None = None) -> str:
    """Builds one split from its official files in ``data_dir`` (once); returns the TFDS
    data_dir to read ``split`` of ``c3/<config>`` from.

    The prepared copy lives under ``cache_dir`` (default ~/.cache/cmrcx/tfds), keyed by the
    data dir, the config, the split and the SHA-1 of every file the split reads.

    Raises:
      MissingSplitError: ``data_dir`` is not a directory or lacks one of the split's files.
      DataFormatError: a file is malformed (names the file, record and field).
    """
    data_dir = os.path.abspath(data_dir)
    paths = require_split(data_dir, split, version)
    name = config_name(version)
    tfds_dir = files_keyed_dir(cache_dir, f"c3-{name}-{split}", (data_dir, name, split), paths)
    prepare_once(functools.partial(C3, config=name), tfds_dir, data_dir, split=split)
    return tfds_dir


def prepared_builder(
    data_dir: str, split: str, version: str = "1.1", cache_dir: str | None = None
) -> C3:
    """The `C3` builder holding ``split``, prepared first if needed."""
    return C3(config=config_name(version), data_dir=prepare(data_dir, split, version, cache_dir))


def load_split(
    data_dir: str, split: str, version: str = "1.1", cache_dir: str | None = None
) -> tf.data.Dataset:
    """The questions of one split, in file order, prepared first if needed (see `prepare`)."""
    builder = prepared_builder(data_dir, split, version, cache_dir)
    return builder.as_dataset(split=split, shuffle_files=False)
