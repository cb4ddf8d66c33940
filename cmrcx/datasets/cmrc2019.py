"""TFDS builder `cmrc2019`: the official CMRC 2019 JSON files, read unchanged.

The files are not downloaded (no network is assumed, and the train split is not
on a stable URL): put them in one directory and pass it as the manual dir.
Every record is validated by `cmrcx.benchmarks.cmrc2019.official_format.read_passages`, so a
malformed file fails the build with an error naming the file, record and field.

Each split is prepared on its own, when it is first read (`prepare`, `load_split`):
a malformed or missing test file never stops a run that trains on train and
evaluates on validation, while a run that reads the test split fails with the
file's error.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from cmrcx.benchmarks.cmrc2019.official_format import read_passages
from cmrcx.common.errors import MissingSplitError
from cmrcx.datasets.prepared_splits import content_keyed_dir, prepare_once

# split name -> official file name. `test` is the qualifying set, without answers.
SPLIT_FILES = {
    "train": "cmrc2019_train.json",
    "trial": "cmrc2019_trial.json",
    "validation": "cmrc2019_dev.json",
    "test": "cmrc2019_qualify.json",
}
HOMEPAGE = "https://github.com/ymcui/cmrc2019"
CITATION = """@inproceedings{cui-etal-2020-sentence,
  title = "A Sentence Cloze Dataset for {C}hinese Machine Reading Comprehension",
  author = "Cui, Yiming and Liu, Ting and Yang, Ziqing and Chen, Zhipeng and Ma, Wentao
            and Che, Wanxiang and Wang, Shijin and Hu, Guoping",
  booktitle = "Proceedings of COLING 2020",
  year = "2020",
}"""
MANUAL_INSTRUCTIONS = f"""\
Put the official CMRC 2019 files in one directory (DATA_DIR) under their official names:
  {", ".join(SPLIT_FILES.values())}
(train / trial / validation / test splits; only the splits you use need to be there).
They are published by the CMRC 2019 authors at {HOMEPAGE} (data/, and the
competition site linked from its README), under CC BY-SA 4.0."""


class Cmrc2019(tfds.core.GeneratorBasedBuilder):
    """CMRC 2019 sentence cloze: passages with [BLANKk] markers and candidates."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Official files read unchanged; file order kept."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_INSTRUCTIONS

    def __init__(self, *, split: str | None = None, **kwargs):
        """split: build only this split's file; None builds every official file present."""
        self._only_split = split
        super().__init__(**kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "context_id": tfds.features.Text(),
                    "context": tfds.features.Text(),
                    "choices": tfds.features.Sequence(tfds.features.Text()),
                    # answers[k] is the choice filling [BLANK k+1]; empty for test.
                    "answers": tfds.features.Sequence(np.int32),
                }
            ),
            homepage=HOMEPAGE,
            citation=CITATION,
            # Keep the official file order: predictions and logs follow it.
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        manual_dir = str(dl_manager.manual_dir)
        if self._only_split is not None:
            require_split(manual_dir, self._only_split)
            present = [self._only_split]
        else:
            present = available_splits(manual_dir)
        if not present:
            raise MissingSplitError(f"no CMRC 2019 file in {manual_dir}.\n{MANUAL_INSTRUCTIONS}")
        return {
            split: self._generate_examples(os.path.join(manual_dir, SPLIT_FILES[split]), split)
            for split in present
        }

    def _generate_examples(self, path: str, split: str):
        for passage in read_passages(path, require_answers=split != "test"):
            yield (
                passage.context_id,
                {
                    "context_id": passage.context_id,
                    "context": passage.context,
                    "choices": list(passage.choices),
                    "answers": list(passage.answers or ()),
                },
            )


def available_splits(data_dir: str) -> list[str]:
    """The splits whose official file is in `data_dir`, in SPLIT_FILES order."""
    return [s for s, name in SPLIT_FILES.items() if os.path.isfile(os.path.join(data_dir, name))]


def require_split(data_dir: str, split: str) -> str:
    """Path of `split`'s official file; MissingSplitError naming it otherwise."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown CMRC 2019 split {split!r}; splits: {', '.join(SPLIT_FILES)}")
    path = os.path.join(data_dir, SPLIT_FILES[split])
    if not os.path.isfile(path):
        raise MissingSplitError(
            f"split {split!r} needs {SPLIT_FILES[split]} in DATA_DIR={data_dir}, "
            f"which is not there.\n{MANUAL_INSTRUCTIONS}"
        )
    return path


def prepare(data_dir: str, split: str, cache_dir: str | None = None) -> str:
    """Builds one split's TFDS dataset from its official file in `data_dir` (once).

    The prepared copy lives under `cache_dir` (default ~/.cache/cmrcx/tfds) in a
    folder keyed by the directory, the split and the file's contents (SHA-1), so
    different data directories never share a cache and an edited file is re-read.
    Only this split's file is read: a broken file of another split does not matter.
    Returns the TFDS data_dir to read `split` of `cmrc2019` from.

    Raises:
      MissingSplitError: `data_dir` is not a directory or lacks the split's file.
      DataFormatError: the file is malformed (names the file, record and field).
    """
    data_dir = os.path.abspath(data_dir)
    if not os.path.isdir(data_dir):
        raise MissingSplitError(f"DATA_DIR={data_dir} is not a directory.\n{MANUAL_INSTRUCTIONS}")
    path = require_split(data_dir, split)
    tfds_dir = content_keyed_dir(cache_dir, f"cmrc2019-{split}", (data_dir, split), path)
    prepare_once(Cmrc2019, tfds_dir, data_dir, split=split)
    return tfds_dir


def load_split(data_dir: str, split: str, cache_dir: str | None = None) -> tf.data.Dataset:
    """The records of one split, in file order, prepared first if needed (see `prepare`)."""
    tfds_dir = prepare(data_dir, split, cache_dir)
    return Cmrc2019(data_dir=tfds_dir).as_dataset(split=split, shuffle_files=False)
