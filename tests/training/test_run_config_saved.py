"""Every MODEL_DIR/run_config.json written before the options moved to their benchmarks
still restores: data/run_configs/ holds files that the flat RunConfig (every option in
one dataclass) wrote for tiny runs of each kind of run task, and each restores to the
same settings and options."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cmrcx.training import run_config

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
def test_a_saved_run_restores_its_settings(name, tmp_path):
    written, run = _restored(name, tmp_path)
    again = run_config.run_config_json(run)
    assert again["model"] == written["model"]
    for field in written:
        if field in again:
            assert again[field] == written[field], field
    assert run.task == written["task"]
