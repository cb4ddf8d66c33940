"""gin binds a run task's options by their old RunConfig names (`RunConfig.decoding`):
they reach the task's options class, checked by it with the same messages; a task ignores
another's option (local_tiny.gin binds doc_stride for all); eval's overrides of a saved
run replace single options."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cmrcx.cli import launch, saved_run
from cmrcx.common.errors import ConfigError
from cmrcx.training import run_config
from cmrcx.training.task_options import Cmrc2019Options, LotGenerationOptions, TaskOptions

SAVED = Path(__file__).parents[1] / "training" / "data" / "run_configs"


def _run(gin_file: str, tmp_path, *bindings: str) -> run_config.RunConfig:
    launch.parse_gin([gin_file], [f"MODEL_DIR = '{tmp_path}'", *bindings])
    return launch.run_config_from_gin()


def test_a_flat_binding_reaches_the_task_s_options(tmp_path):
    run = _run("cmrc2019_tiny.gin", tmp_path, 'RunConfig.decoding = "assignment"')
    assert run.options == Cmrc2019Options(doc_stride=64, decoding="assignment")
    assert (run.decoding, run.doc_stride) == ("assignment", 64)


def test_a_bad_option_is_refused_by_its_class_in_the_same_words(tmp_path):
    with pytest.raises(ConfigError, match=r"^RunConfig.decoding 'best': use one of paper, "):
        _run("cmrc2019_tiny.gin", tmp_path, 'RunConfig.decoding = "best"')
    with pytest.raises(ConfigError, match=r"RunConfig.generation_top_k is '8' \(str\)"):
        _run("lot_outgen_tiny.gin", tmp_path, "RunConfig.generation_top_k = '8'")


def test_another_task_s_option_is_ignored(tmp_path):
    run = _run("clue_afqmc_tiny.gin", tmp_path, "RunConfig.generation_top_k = 3")
    assert type(run.options) is TaskOptions  # local_tiny.gin's doc_stride too
    with pytest.raises(AttributeError, match="doc_stride"):
        run.doc_stride  # noqa: B018


def test_eval_overrides_one_option_of_a_saved_run(tmp_path):
    shutil.copy(SAVED / "lot_outgen_tiny.json", tmp_path / run_config.RUN_CONFIG_FILE)
    saved = run_config.read_run_config(str(tmp_path))
    launch.parse_gin([], ["RunConfig.generation_method = 'greedy'"])
    run = run_config.with_task_options(saved_run.overridden(saved, launch.gin_run_config()))
    assert run.options == LotGenerationOptions(
        generation_method="greedy", generation_top_k=8, generation_seed=3
    )
