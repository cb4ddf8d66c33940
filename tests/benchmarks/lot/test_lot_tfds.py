"""The TFDS builder `lot`: one split prepared on its own, file order kept, records rebuilt
equal to the reader's, and the reader's errors failing preparation."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import cmrcx.data
from cmrcx.benchmarks.lot import formats
from cmrcx.common.errors import DataFormatError, MissingSplitError
from cmrcx.datasets import lot as lot_tfds

SAMPLE = Path(cmrcx.data.__file__).parent / "lot_sample"
FEATURES = {
    "clozet": {"line", "raw", "story", "candidates", "label"},
    "senpos": {"line", "raw", "story", "sentence", "label"},
    "plotcom": {"line", "raw", "story", "plot"},
    "outgen": {"line", "raw", "title", "outline", "story"},
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    """One TFDS cache for the module's preparations (each keyed by its file's content)."""
    return str(tmp_path_factory.mktemp("lot_tfds"))


def only(tmp_path: Path, task: str, name: str) -> Path:
    """A DATA_DIR holding just one of the bundled files of ``task``."""
    folder = tmp_path / task
    folder.mkdir()
    shutil.copy(SAMPLE / task / name, folder / name)
    return folder


@pytest.mark.parametrize("task", formats.TASKS)
def test_one_split_is_prepared_alone_and_rebuilds_the_readers_records(
    tmp_path: Path, cache_dir: str, task: str
) -> None:
    data_dir = only(tmp_path, task, "val.jsonl")  # no train.jsonl, no test.jsonl
    assert lot_tfds.available_splits(task, str(data_dir)) == ["validation"]
    records = lot_tfds.split_records(task, str(data_dir), "validation", cache_dir)
    assert records == formats.read_split(task, data_dir, "validation")  # order, raw, labels
    example = next(
        lot_tfds.load_split(task, str(data_dir), "validation", cache_dir).as_numpy_iterator()
    )
    assert set(example) == FEATURES[task] and int(example["line"]) == 1


def test_unlabelled_test_files_prepare_with_label_minus_one_and_empty_targets(
    tmp_path: Path, cache_dir: str
) -> None:
    clozet = only(tmp_path, "clozet", "test.jsonl")
    labels = [
        int(e["label"])
        for e in lot_tfds.load_split("clozet", str(clozet), "test", cache_dir).as_numpy_iterator()
    ]
    assert labels == [-1] * 16
    outgen = only(tmp_path, "outgen", "test.jsonl")
    records = lot_tfds.split_records("outgen", str(outgen), "test", cache_dir)
    assert records == formats.read_split("outgen", outgen, "test")
    assert all(r.story is None and "story" not in r.raw for r in records)


def test_a_bad_file_fails_preparation_with_the_readers_error(
    tmp_path: Path, cache_dir: str
) -> None:
    data_dir = only(tmp_path, "senpos", "train.jsonl")
    lines = (data_dir / "train.jsonl").read_text(encoding="utf-8").splitlines()
    lines[4] = lines[4].replace('"label": ', '"label": 100 + ')  # not JSON any more
    (data_dir / "val.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as expected:
        formats.read_split("senpos", data_dir, "validation")
    assert "val.jsonl: line 5: malformed JSON" in str(expected.value)
    with pytest.raises(DataFormatError) as error:
        lot_tfds.load_split("senpos", str(data_dir), "validation", cache_dir)
    assert str(error.value) == str(expected.value)
    # The broken val.jsonl does not stop the train split.
    records = lot_tfds.split_records("senpos", str(data_dir), "train", cache_dir)
    assert (
        len(records) == 32
        and records[4].raw == formats.read_split("senpos", data_dir, "train")[4].raw
    )


def test_a_missing_split_names_its_file(tmp_path: Path) -> None:
    data_dir = only(tmp_path, "plotcom", "train.jsonl")
    with pytest.raises(MissingSplitError, match=r"split 'test' needs test.jsonl in DATA_DIR="):
        lot_tfds.require_split("plotcom", str(data_dir), "test")
    with pytest.raises(MissingSplitError, match="is not a directory"):
        lot_tfds.require_split("plotcom", str(tmp_path / "absent"), "train")
    with pytest.raises(ValueError, match="unknown LOT task"):
        lot_tfds.available_splits("lot", str(data_dir))
    assert lot_tfds.require_split("plotcom", str(data_dir), "train").endswith("train.jsonl")
    assert "Jiann/LOT" in lot_tfds.MANUAL_INSTRUCTIONS
