"""`cmrcx.eval` and `cmrcx.export` of a trained MODEL_DIR take the run's saved configuration
(run_config.json): `--model_dir=DIR` alone is enough (no gin file, DATA_DIR or
PRETRAINED); gin files and bindings override; the gin-file form keeps working."""

from __future__ import annotations

import json
import shutil

import gin
import pytest

from cmrcx import eval as eval_main
from cmrcx import export as export_main
from cmrcx import train as train_main
from cmrcx.cli import launch
from cmrcx.common.paths import package_path

# A paper gin (DATA_DIR %gin.REQUIRED, require_pretrained) made tiny by the overlay.
PAPER_GIN = ["--gin_file=clue_afqmc_bert.gin", "--gin_file=local_tiny.gin"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(MODEL_DIR of a 2-step AFQMC run, its TFDS cache), trained through the CLI's main."""
    root = tmp_path_factory.mktemp("saved_run")
    gin.clear_config()
    train_main.main(
        [
            *PAPER_GIN,
            f"--gin.MODEL_DIR='{root / 'run'}'",
            "--gin.DATA_DIR='cmrcx:data/clue_sample/afqmc_public'",
            "--gin.RunConfig.num_train_steps=2",
            f"--gin.RunConfig.tfds_cache_dir='{root / 'tfds'}'",
        ]
    )
    gin.clear_config()
    return root / "run"


def last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_eval_and_export_need_only_the_model_dir(trained, tmp_path, capsys):
    eval_main.main([f"--model_dir={trained}"])
    said = last_json(capsys)
    assert said["step"] == 2 and said["split"] == "validation" and "accuracy" in said
    (predictions,) = (trained / "predictions").glob("clue_afqmc_*_validation.json")
    assert len(predictions.read_text().splitlines()) == 16  # the sample's dev.json
    gin.clear_config()
    export_main.main([f"--model_dir={trained}", f"--out={tmp_path / 'export'}"])
    assert "exported step 2 to" in capsys.readouterr().out
    config = json.loads((tmp_path / "export" / "model_config.json").read_text())
    assert config["step"] == 2 and (tmp_path / "export" / "vocab.txt").is_file()


def test_a_binding_overrides_the_saved_data_dir(trained, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(package_path("data/clue_sample/afqmc_public"), data)
    lines = (data / "dev.json").read_text(encoding="utf-8").splitlines()
    (data / "dev.json").write_text("\n".join(lines[:5]) + "\n", encoding="utf-8")
    eval_main.main([f"--model_dir={trained}", f"--gin.DATA_DIR='{data}'", "--step=2"])
    assert last_json(capsys)["step"] == 2
    (written,) = (trained / "step_2" / "predictions").glob("clue_afqmc_*_validation.json")
    assert len(written.read_text().splitlines()) == 5  # the override's file, not the saved


def test_the_gin_file_form_takes_unset_paths_from_the_saved_run(trained, capsys):
    # No DATA_DIR (%gin.REQUIRED in the paper gin) and no PRETRAINED though it is required
    # for training: eval reads neither from the gin files.
    eval_main.main(
        [*PAPER_GIN, f"--gin.MODEL_DIR='{trained}'", "--gin.RunConfig.require_pretrained=True"]
    )
    assert last_json(capsys)["step"] == 2


def test_a_gin_value_that_changes_the_run_is_refused(trained, capsys):
    with pytest.raises(SystemExit):
        launch.main_guard(
            eval_main.main, [f"--model_dir={trained}", "--gin.RunConfig.max_length=32"]
        )
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert "holds a run with RunConfig.max_length=128, this run has RunConfig.max_length=32" in said


@pytest.mark.parametrize("made", ["nothing", "empty", "no_record"])
def test_a_model_dir_that_is_no_trained_run_is_one_line(made, trained, tmp_path, capsys):
    model_dir = tmp_path / "run"
    if made == "empty":
        model_dir.mkdir()
    if made == "no_record":
        shutil.copytree(trained, model_dir)
        (model_dir / "run_config.json").unlink()
    with pytest.raises(SystemExit) as exited:
        launch.main_guard(eval_main.main, [f"--model_dir={model_dir}"])
    assert exited.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        said
        == {
            "nothing": f"error: MODEL_DIR {model_dir} does not exist: give the MODEL_DIR of a "
            "trained run",
            "empty": f"error: no checkpoint in {model_dir}/checkpoints: train first",
            "no_record": f"error: MODEL_DIR {model_dir} has no run_config.json (the configuration "
            "cmrcx.train saves): give the gin file it was trained with, --gin_file=NAME.gin",
        }[made]
    )


def test_eval_without_model_dir_or_gin_file_says_what_to_give(capsys):
    with pytest.raises(SystemExit):
        launch.main_guard(export_main.main, ["--out=x"])
    assert "give --model_dir=DIR" in capsys.readouterr().err
