"""The bundled gin_configs/ tree: bare names found in any folder, the paths from before
the folders (in --gin_file and in a user's includes), the package data that installs
every file, and the %gin.REQUIRED values of the run files with their one-line messages."""

import os
import re
import tomllib

import gin
import pytest

from cmrcx.cli import launch
from cmrcx.common import errors
from tests.support import REPO_ROOT

ROOT = str(REPO_ROOT)


def bundled(path: str) -> str:
    return os.path.join(launch.gin_configs_dir(), path)


@pytest.mark.parametrize(
    "name, path",
    [
        ("cmrc2019_bert.gin", "cmrc2019/cmrc2019_bert.gin"),
        ("clue_afqmc_bert.gin", "clue/clue_afqmc_bert.gin"),
        ("longlm_pretrain_tiny.gin", "lot/longlm_pretrain_tiny.gin"),
        ("local_tiny.gin", "local_tiny.gin"),
        ("ernie_base.gin", "models/bert/ernie_base.gin"),
        ("fsdp.gin", "partitioning/fsdp.gin"),
        ("runs/released_script.gin", "runs/released_script.gin"),
        ("models/t5/tiny.gin", "models/t5/tiny.gin"),
        # The paths from before the folders.
        ("models/bert_base.gin", "models/bert/base.gin"),
        ("models/t5_tiny.gin", "models/t5/tiny.gin"),
        ("models/longlm_small.gin", "models/t5/longlm_small.gin"),
    ],
)
def test_bare_names_and_old_paths_find_the_bundled_file(name, path):
    assert launch.bundled_gin_file(name) == bundled(path)


def test_a_bare_name_in_two_folders_names_both():
    with pytest.raises(errors.ConfigError, match="models/bert/tiny.gin, .*models/t5/tiny.gin"):
        launch.parse_gin(["tiny.gin"], [])


def test_the_paper_name_finds_the_file_in_its_folder():
    assert launch._gin_file_of_paper_name("cluewsc2020_bert.gin") == bundled(
        "clue/clue_cluewsc11_bert.gin"
    )


def test_every_old_path_names_an_existing_file():
    for old, new in launch.MOVED_MODEL_FILES.items():
        assert os.path.isfile(bundled(new)), old
    # Every experiment was at the top level before the folders: its old name still finds it
    # (LOT's task experiments, lot_*.gin, came after the folders).
    for path in launch.bundled_gin_files():
        folder, name = os.path.split(path)
        if folder in ("cmrc2019", "clue", "lot") and not name.startswith("lot_"):
            assert launch.moved_gin_file(name) == path  # (LOT's task files came after)


def test_an_old_model_path_binds_what_the_new_one_does():
    for old, new in launch.MOVED_MODEL_FILES.items():
        gin.clear_config()
        launch.parse_gin([new], [])
        expected = gin.config_str()
        gin.clear_config()
        launch.parse_gin([old], [])
        assert gin.config_str() == expected, old


def test_bundled_includes_name_the_files_where_they_are():
    """No bundled file leans on the old paths: each include names a file in gin_configs/."""
    for path in launch.bundled_gin_files():
        with open(bundled(path), encoding="utf-8") as f:
            for include in re.findall(r"^include '([^']+)'", f.read(), re.MULTILINE):
                assert os.path.isfile(bundled(include)), f"{path}: include {include!r}"


def test_a_users_file_including_old_paths_still_parses(tmp_path, monkeypatch):
    mine = tmp_path / "mine.gin"
    mine.write_text(
        "include 'cmrc2019_bert.gin'\n"
        "include 'models/bert_tiny.gin'\n"
        "include 'models/longlm_small.gin'\n"
        "RunConfig.seed = 7\n"
    )
    monkeypatch.chdir(tmp_path)  # a models/ folder here must not matter
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "bert_tiny.gin").write_text("RunConfig.log_every = 99\n")
    launch.parse_gin([str(mine)], [])
    run = launch.gin_run_config()
    assert run.require_pretrained and run.seed == 7 and run.log_every == 10
    assert gin.query_parameter("cmrcx.BertConfig.hidden_size") == 128
    assert gin.query_parameter("cmrcx.T5Config.d_model") == 512
    assert type(run.model).__name__ == "T5Config"  # the last model gin chose the family


def test_a_users_include_of_a_new_bare_name_finds_the_users_file(tmp_path, monkeypatch):
    """Only the old names are looked up in the folders: `include 'data.gin'` of a user's
    file stays that user's data.gin, not partitioning/data.gin."""
    (tmp_path / "data.gin").write_text("RunConfig.seed = 5\n")
    (tmp_path / "mine.gin").write_text("include 'cmrc2019_tiny.gin'\ninclude 'data.gin'\n")
    monkeypatch.chdir(tmp_path)
    launch.parse_gin(["mine.gin"], [])
    assert launch.gin_run_config().seed == 5


def test_the_not_found_error_lists_the_files_by_folder():
    with pytest.raises(errors.ConfigError) as error:
        launch.parse_gin(["nope.gin"], [])
    message = str(error.value)
    assert "bundled (a bare name finds a file in any folder): local_tiny.gin; clue/: " in message
    assert "clue_{afqmc,c310," in message and ",bert,bert_wwm_ext,ernie," in message
    assert "clue_afqmc_tiny.gin" in message and "cmrc2019/: cmrc2019_bert.gin," in message
    assert "models/t5/: family.gin, longlm_base.gin," in message and "\n" not in message


def test_the_wheel_patterns_cover_every_bundled_file():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        patterns = tomllib.load(f)["tool"]["setuptools"]["package-data"]["cmrcx.gin_configs"]
    depths = {pattern.count("/") for pattern in patterns if pattern.endswith("*.gin")}
    for path in launch.bundled_gin_files():
        assert path.count("/") in depths, path


# %gin.REQUIRED: MODEL_DIR and DATA_DIR of the run files.


@pytest.mark.parametrize(
    "experiment", ["cmrc2019_bert.gin", "clue_afqmc_bert.gin", "clue_c311_bert.gin",
                   "longlm_pretrain_small.gin"]
)  # fmt: skip
def test_run_files_leave_model_dir_and_data_dir_required(experiment):
    launch.parse_gin([experiment], [])
    assert launch.unset_required_values() == ["MODEL_DIR", "DATA_DIR"]
    launch.parse_gin([], ["MODEL_DIR = '/tmp/m'", "DATA_DIR = '/tmp/d'"])
    assert launch.unset_required_values() == []


def test_an_unset_model_dir_is_todays_message():
    launch.parse_gin(["cmrc2019_tiny.gin"], [])
    with pytest.raises(errors.ConfigError) as error:
        launch.run_config_from_gin()
    assert str(error.value) == "MODEL_DIR is not set: add --gin.MODEL_DIR=\"'runs/NAME'\""


def test_missing_values_are_named_in_todays_order(tmp_path):
    """MODEL_DIR, then PRETRAINED (not %gin.REQUIRED: None is a random start), then DATA_DIR."""
    launch.parse_gin(["cmrc2019_bert.gin"], [f"MODEL_DIR = '{tmp_path}'"])
    with pytest.raises(errors.ConfigError, match="^this config fine-tunes a pretrained BERT"):
        launch.run_config_from_gin()
    launch.parse_gin([], [f"PRETRAINED = '{tmp_path}'"])
    with pytest.raises(errors.ConfigError) as error:
        launch.run_config_from_gin()
    assert str(error.value).startswith("DATA_DIR is not set: add --gin.DATA_DIR=\"'DIR'\" with ")


def test_another_required_value_names_the_key_to_set(tmp_path):
    launch.parse_gin(
        ["cmrc2019_tiny.gin"],
        [f"MODEL_DIR = '{tmp_path}'", "SEED = %gin.REQUIRED", "RunConfig.seed = %SEED"],
    )
    with pytest.raises(errors.ConfigError) as error:
        launch.run_config_from_gin()
    assert str(error.value) == "SEED is %gin.REQUIRED and not set: add --gin.SEED=VALUE"
    gin.clear_config()
    launch.parse_gin(
        ["cmrc2019_tiny.gin"],
        [f"MODEL_DIR = '{tmp_path}'", "cmrcx.BertConfig.num_layers = %gin.REQUIRED"],
    )
    with pytest.raises(errors.ConfigError, match=r"^BertConfig.num_layers is %gin.REQUIRED"):
        launch.run_config_from_gin()


def test_the_cli_prints_one_line_not_a_gin_traceback(capsys):
    def main(argv):
        launch.parse_gin(["clue_afqmc_bert.gin"], [])
        launch.run_config_from_gin()

    with pytest.raises(SystemExit) as exit_:
        launch.main_guard(main, [])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        "error: MODEL_DIR is not set: add --gin.MODEL_DIR=\"'runs/NAME'\"\n"
    )
