"""A malformed training file stops a run with one line that names the file once.

Each benchmark's tiny gin runs on a copy of its bundled sample whose training file has one
bad record; the error is raised where the run first reads the file (TFDS preparation or
the window count), before any training.
"""

import json
import shutil

import pytest

from cmrcx.common.errors import DataFormatError
from cmrcx.common.paths import package_path


def _break_json(path, edit):
    document = json.loads(path.read_text(encoding="utf-8"))
    edit(document)
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")


def _break_first_line(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(["{not json", *lines[1:]]) + "\n", encoding="utf-8")


def _set_question(document):
    document["data"][0]["paragraphs"][0]["qas"][0]["question"] = 5


def _set_context(document):
    document["data"][0]["context"] = 5


def _set_dialogue(document):
    document[0][0] = 5


# gin file, bundled sample, training file, how it is broken
CASES = [
    ("cmrc2019_tiny.gin", "data/cmrc2019_sample", "cmrc2019_train.json", _set_context),
    ("clue_afqmc_tiny.gin", "data/clue_sample/afqmc_public", "train.json", None),
    ("clue_cmrc2018_tiny.gin", "data/clue_mrc_sample/cmrc2018_public", "train.json", _set_question),
    ("clue_chid11_tiny.gin", "data/clue_mrc_sample/chid_public", "train.json", None),
    ("clue_c311_tiny.gin", "data/clue_mrc_sample/c3_public", "d-train.json", _set_dialogue),
]


@pytest.mark.parametrize("gin_file, sample, train_file, edit", CASES, ids=[c[0] for c in CASES])
def test_a_bad_training_record_names_its_file_once(
    tmp_path, tiny_runner, gin_file, sample, train_file, edit
):
    data_dir = tmp_path / "data"
    shutil.copytree(package_path(sample), data_dir)
    broken = data_dir / train_file
    _break_first_line(broken) if edit is None else _break_json(broken, edit)
    with pytest.raises(DataFormatError) as raised:
        tiny_runner(gin_file, f"DATA_DIR = '{data_dir}'")
    message = str(raised.value)
    assert message.startswith(f"{broken}: "), message
    assert message.count(str(data_dir)) == 1, message
