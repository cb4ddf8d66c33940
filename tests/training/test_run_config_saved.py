"""Every MODEL_DIR/run_config.json written before the options moved to their benchmarks
still restores: data/run_configs/ holds files that the flat RunConfig (every option in
one dataclass) wrote for tiny runs of each kind of run task (local_tiny.gin and a
binding or two), and each restores to the same settings and its task's options."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from cmrcx.training import run_config, run_tasks, task_options

SAVED = Path(__file__).parent / "data" / "run_configs"
NAMES = sorted(path.stem for path in SAVED.glob("*.json"))


def _restored(name: str, tmp_path: Path) -> tuple[dict, run_config.RunConfig]:
    shutil.copy(SAVED / f"{name}.json", tmp_path / run_config.RUN_CONFIG_FILE)
    written = json.loads((SAVED / f"{name}.json").read_text(encoding="utf-8"))
    return written, run_config.read_run_config(str(tmp_path))


def test_the_saved_runs_cover_each_kind_of_run_task():
    assert NAMES == [
        "clue_afqmc_tiny",
        "clue_chid11_tiny",
        "clue_cmrc2018_tiny",
        "cmrc2019_tiny",
        "longlm_pretrain_tiny",
        "lot_mixture_tiny",
        "lot_outgen_tiny",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_a_saved_run_restores_its_settings_and_options(name, tmp_path):
    """Every RunConfig field as written; the task's own options, in its options class,
    as written; another task's options (the flat file held them all) are not carried."""
    written, run = _restored(name, tmp_path)
    assert type(run.options) is run_tasks.REGISTRY[run.task].options_class
    own = task_options.option_names(type(run.options))
    again = run_config.run_config_json(run)
    for field, value in written.items():
        if field in own:
            assert getattr(run.options, field) == value, field
            assert getattr(run, field) == value, field  # the old name reads the option
        if field in own or field in {f.name for f in dataclasses.fields(run)}:
            assert again[field] == value, field
        else:
            with pytest.raises(AttributeError):
                getattr(run, field)
    # The file it writes now restores the same run.
    (tmp_path / run_config.RUN_CONFIG_FILE).write_text(json.dumps(again), encoding="utf-8")
    assert run_config.read_run_config(str(tmp_path)) == run


def test_the_saved_options_are_the_written_ones():
    """Spot checks of options the fixtures set away from their defaults."""
    runs = {}
    for name in ("cmrc2019_tiny", "clue_chid11_tiny", "lot_mixture_tiny", "lot_outgen_tiny"):
        data = json.loads((SAVED / f"{name}.json").read_text(encoding="utf-8"))
        options = {k: v for k, v in data.items() if k in task_options.all_option_defaults()}
        runs[name] = run_config.RunConfig(task=data["task"], options=options)
    assert run_config.with_task_options(runs["cmrc2019_tiny"]).options == (
        task_options.Cmrc2019Options(doc_stride=64, decoding="assignment")
    )
    assert run_config.with_task_options(runs["clue_chid11_tiny"]).options == (
        task_options.ClueReadingOptions(doc_stride=64, decoding="baseline")
    )
    mixture = run_config.with_task_options(runs["lot_mixture_tiny"]).options
    assert mixture.mixture_rates == {
        "lot_clozet": 1.0, "lot_senpos": 0.5, "lot_plotcom": 2, "lot_outgen": 0
    }  # fmt: skip
    outgen = run_config.with_task_options(runs["lot_outgen_tiny"]).options
    assert (outgen.generation_top_k, outgen.generation_seed) == (8, 3)
