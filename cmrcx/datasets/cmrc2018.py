"""TFDS builder `cmrc2018`: CLUE's CMRC 2018 release (cmrc2018_public), files read unchanged.

DATA_DIR is the unpacked official folder holding train.json, dev.json ("validation"),
test.json and trial.json ("trial"); nothing is downloaded (no network is assumed). Every file
goes through `cmrcx.benchmarks.clue.cmrc2018_format.read_questions`, so a malformed record
fails the build with that reader's `DataFormatError` (file, record, field), and its summary
(`Cmrc2018Split.summary`: empty questions, passages and first answers, first answers not at
their ``answer_start``, all read as the official scripts read them) is printed when a split
holding any of them is built.

Records, one per question in file order (``disable_shuffling``): ``id`` (the question id,
the predictions' key), ``context_id``, ``context``, ``question``, ``answers`` (texts; empty in
test, whose FAKE_ANSWER_n placeholders are dropped) and ``answer_starts`` (as in the file).

Each split is prepared on its own, when first read (`prepare`, `load_split`), under a folder
keyed by the data dir, the split and the file's contents: a missing or broken test.json never
blocks training on train.json and evaluating on dev.json.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
from tqdm import tqdm

from cmrcx.benchmarks.clue.cmrc2018_format import SPLIT_FILES, read_split
from cmrcx.common.errors import MissingSplitError
from cmrcx.datasets.prepared_splits import content_keyed_dir, prepare_once

DOWNLOAD_URL = "https://storage.googleapis.com/cluebenchmark/tasks/cmrc2018_public.zip"
HOMEPAGE = "https://github.com/ymcui/cmrc2018"
CITATION = """@inproceedings{cui-etal-2019-span,
  title = "A Span-Extraction Dataset for {C}hinese Machine Reading Comprehension",
  author = "Cui, Yiming and Liu, Ting and Che, Wanxiang and Xiao, Li and Chen, Zhipeng and
            Ma, Wentao and Wang, Shijin and Hu, Guoping",
  booktitle = "Proceedings of EMNLP-IJCNLP 2019",
  year = "2019",
  pages = "5883--5889",
  url = "https://aclanthology.org/D19-1600",
}"""
MANUAL_INSTRUCTIONS = (
    f"Unzip cmrc2018_public.zip ({DOWNLOAD_URL}) and pass the cmrc2018_public/ folder as "
    "DATA_DIR (" + ", ".join(f"{split}: {name}" for split, name in SPLIT_FILES.items()) + "). "
    "Only the files of the splits you use need to be there."
)


class Cmrc2018(tfds.core.GeneratorBasedBuilder):
    """CMRC 2018 span extraction: one record per question."""

    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {
        "1.0.0": "Official files read unchanged; file order kept.",
        "1.1.0": "The test file's FAKE_ANSWER_n placeholder answers are dropped.",
    }
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_INSTRUCTIONS

    def __init__(self, *, split: str | None = None, **kwargs):
        """split: build only this split's file; None builds every official file present."""
        self._only_split = split
        super().__init__(**kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "id": tfds.features.Text(),
                    "context_id": tfds.features.Text(),
                    "context": tfds.features.Text(),
                    "question": tfds.features.Text(),
                    "answers": tfds.features.Sequence(tfds.features.Text()),
                    "answer_starts": tfds.features.Sequence(np.int32),
                }
            ),
            homepage=HOMEPAGE,
            citation=CITATION,
            # Keep the official order: predictions and logs follow it.
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        data_dir = str(dl_manager.manual_dir)
        if self._only_split is not None:
            require_split(data_dir, self._only_split)
            present = [self._only_split]
        else:
            present = available_splits(data_dir)
        if not present:
            raise MissingSplitError(f"no CMRC 2018 file in {data_dir}.\n{MANUAL_INSTRUCTIONS}")
        return {split: self._generate_examples(data_dir, split) for split in present}

    def _generate_examples(self, data_dir: str, split: str):
        records = read_split(data_dir, split)
        if records.notes():  # tqdm.write: on its own line, not after TFDS's progress bar
            tqdm.write(records.summary())
        for index, question in enumerate(records.questions):
            yield (
                index,
                {
                    "id": question.qid,
                    "context_id": question.context_id,
                    "context": question.context,
                    "question": question.question,
                    "answers": list(question.answers),
                    "answer_starts": list(question.answer_starts),
                },
            )


def available_splits(data_dir: str) -> list[str]:
    """The splits whose official file is in ``data_dir``, in SPLIT_FILES order."""
    return [s for s, name in SPLIT_FILES.items() if os.path.isfile(os.path.join(data_dir, name))]


def require_split(data_dir: str, split: str) -> str:
    """Path of ``split``'s official file; MissingSplitError naming it otherwise."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown CMRC 2018 split {split!r}; splits: {', '.join(SPLIT_FILES)}")
    if not os.path.isdir(data_dir):
        raise MissingSplitError(f"DATA_DIR={data_dir} is not a directory.\n{MANUAL_INSTRUCTIONS}")
    path = os.path.join(data_dir, SPLIT_FILES[split])
    if not os.path.isfile(path):
        raise MissingSplitError(
            f"CMRC 2018 split {split!r} needs {SPLIT_FILES[split]} in DATA_DIR={data_dir}, "
            f"which is not there.\n{MANUAL_INSTRUCTIONS}"
        )
    return path


def prepare(data_dir: str, split: str, cache_dir: str | None = None) -> str:
    """Builds one split from its official file in ``data_dir`` (once); returns the TFDS
    data_dir to read ``split`` of `Cmrc2018` from.

    The prepared copy lives under ``cache_dir`` (default ~/.cache/cmrcx/tfds) in a folder
    keyed by the data dir, the split and the file's contents (SHA-1).

    Raises:
      MissingSplitError: ``data_dir`` is not a directory or lacks the split's file.
      DataFormatError: the file is malformed (names the file, record and field).
    """
    data_dir = os.path.abspath(data_dir)
    path = require_split(data_dir, split)
    tfds_dir = content_keyed_dir(cache_dir, f"cmrc2018-{split}", (data_dir, split), path)
    prepare_once(Cmrc2018, tfds_dir, data_dir, split=split)
    return tfds_dir


def load_split(data_dir: str, split: str, cache_dir: str | None = None) -> tf.data.Dataset:
    """The records of one split, in file order, prepared first if needed (see `prepare`)."""
    tfds_dir = prepare(data_dir, split, cache_dir)
    return Cmrc2018(data_dir=tfds_dir).as_dataset(split=split, shuffle_files=False)
