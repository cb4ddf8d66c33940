"""Input and MODEL_DIR problems said at start-up: a bad record in the eval split's file
stops a training run before its first step (its file, record and field named), not at the
first evaluation after hours of training; an empty split file is named; eval of a
MODEL_DIR no run trained leaves nothing there."""

import re
import shutil

import pytest

from cmrcx import eval as eval_main
from cmrcx.cli import launch
from cmrcx.common.errors import DataFormatError
from cmrcx.common.paths import package_path
from cmrcx.training import checkpoints
from cmrcx.training.runner import Runner

# (gin file, the sample folder it reads, the validation file broken in a copy of it)
CASES = [
    ("cmrc2019_tiny.gin", "data/cmrc2019_sample", "cmrc2019_dev.json"),
    ("clue_afqmc_tiny.gin", "data/clue_sample/afqmc_public", "dev.json"),
    ("clue_cmrc2018_tiny.gin", "data/clue_mrc_sample/cmrc2018_public", "dev.json"),
    ("clue_chid11_tiny.gin", "data/clue_mrc_sample/chid_public", "dev_answer.json"),
    ("clue_c311_tiny.gin", "data/clue_mrc_sample/c3_public", "m-dev.json"),
    ("lot_clozet_tiny.gin", "data/lot_sample/clozet", "val.jsonl"),
    ("lot_senpos_tiny.gin", "data/lot_sample/senpos", "val.jsonl"),
    ("lot_plotcom_tiny.gin", "data/lot_sample/plotcom", "val.jsonl"),
    ("lot_outgen_tiny.gin", "data/lot_sample/outgen", "val.jsonl"),
]


@pytest.mark.parametrize("gin_file, sample, broken", CASES, ids=[c[0] for c in CASES])
def test_a_bad_validation_file_stops_the_run_before_training(
    gin_file, sample, broken, tmp_path, tiny_runner, monkeypatch
):
    data = tmp_path / "data"
    shutil.copytree(package_path(sample), data)
    text = (data / broken).read_text(encoding="utf-8")
    (data / broken).write_text(text[: len(text) // 2], encoding="utf-8")  # cut mid-record
    compiled = []
    monkeypatch.setattr(Runner, "_compile_checked", lambda self, shown: compiled.append(shown))
    with pytest.raises(DataFormatError, match=str(data / broken)):
        # SenPos reads val.jsonl when its Runner is built
        tiny_runner(gin_file, f"DATA_DIR = '{data}'", "RunConfig.num_train_steps = 2").train()
    assert not compiled and not checkpoints.has_checkpoints(str(tmp_path / "run"))


@pytest.mark.parametrize("emptied", ["train.json", "dev.json"])
def test_an_empty_split_file_is_named_not_a_tfds_assertion(emptied, tmp_path, tiny_runner):
    data = tmp_path / "data"
    shutil.copytree(package_path("data/clue_sample/afqmc_public"), data)
    (data / emptied).write_text("")
    said = {"train.json": "the train split's official file holds no records", "dev.json": ""}
    with pytest.raises(DataFormatError, match=said[emptied] or rf"{data}/dev.json: no records"):
        tiny_runner(
            "clue_afqmc_tiny.gin", f"DATA_DIR = '{data}'", "RunConfig.num_train_steps = 2"
        ).train()


def test_eval_of_a_model_dir_no_run_trained_makes_nothing_there(tmp_path, capsys):
    argv = ["--gin_file=clue_afqmc_tiny.gin", f"--gin.MODEL_DIR='{tmp_path / 'none'}'"]
    with pytest.raises(SystemExit) as exited:
        launch.main_guard(eval_main.main, argv)
    assert exited.value.code == 2 and not (tmp_path / "none").exists()
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.fullmatch(r"error: no checkpoint in .*/none/checkpoints: train first", said)
