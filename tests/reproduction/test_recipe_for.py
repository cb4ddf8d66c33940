"""`check.recipe_for`: every gin of the papers' tables (gin_configs/clue/, cmrc2019/,
lot/; not the pretraining and mixture runs) gets a recipe, chosen without running
anything; a family a task's recipe does not train is refused by name."""

from __future__ import annotations

import dataclasses

import gin
import pytest

from cmrcx.cli import launch
from cmrcx.common.errors import ConfigError
from cmrcx.models import registry
from cmrcx.models.gpt2 import GPT2Config
from cmrcx.reproduction import check
from tests.support import REPO_ROOT

FOLDERS = ("clue", "cmrc2019", "lot")


def _table_gins():
    for folder in FOLDERS:
        for path in sorted((REPO_ROOT / "gin_configs" / folder).glob("*.gin")):
            if not any(part in path.name for part in ("pretrain", "mixture")):
                yield path


def _run(name: str, tmp_path):
    gin.clear_config()
    launch.parse_gin(
        [name],
        [f"MODEL_DIR = '{tmp_path}'", "DATA_DIR = 'unused'", "VOCAB_FILE = 'cmrcx:tiny'",
         "RunConfig.require_pretrained = False"],
    )  # fmt: skip
    return launch.run_config_from_gin()


def test_every_gin_of_the_tables_has_a_recipe(tmp_path):
    seen = {}
    for path in _table_gins():
        run = _run(path.name, tmp_path)
        family = registry.family_of(run.model).name
        recipe = check.recipe_for(run)
        assert callable(recipe), path.name
        seen.setdefault((run.task, family), recipe)
    families = {family for _, family in seen}
    assert families == {"bert", "albert", "xlnet", "gpt2", "t5"}
    clue = [task for task, _ in seen if task.startswith("clue_")]
    assert len(set(clue)) == 14  # 9 classification, C3 and ChID x 2 versions, CMRC 2018
    for task in set(clue):
        for family in ("bert", "albert", "xlnet"):
            assert (task, family) in seen, (task, family)
    assert seen["clue_c311", "albert"] is check.ClueMultipleChoiceRecipe
    assert seen["clue_cmrc2018", "albert"] is check.CLUE_MRC_RECIPES["clue_cmrc2018"]
    assert seen["clue_chid10", "xlnet"] is check.ClueMultipleChoiceRecipe
    assert seen["clue_afqmc", "xlnet"] is check.ClueClassifierRecipe


def test_a_family_without_a_recipe_is_refused_before_anything_runs(tmp_path):
    run = dataclasses.replace(_run("clue_afqmc_bert.gin", tmp_path), model=GPT2Config())
    with pytest.raises(ConfigError, match="clue_afqmc with the gpt2 family: the CLUE "
                       "classification recipe trains bert"):  # fmt: skip
        check.check_reproduction(run, 3)
    cmrc2019 = dataclasses.replace(_run("cmrc2019_bert.gin", tmp_path), model=GPT2Config())
    with pytest.raises(ConfigError, match="cmrc2019 with the gpt2 family"):
        check.recipe_for(cmrc2019)
    mrc = dataclasses.replace(_run("clue_cmrc2018_bert.gin", tmp_path), optimizer="adafactor")
    with pytest.raises(ConfigError, match="optimizer 'adafactor': the CLUE reading comp"):
        check.recipe_for(mrc)
