"""tools/reproduce_lot.sh end to end with a tiny random BERT, 2 steps per task, on the
bundled LOT sample: the understanding tasks train, the tasks without a gin file for the
model are skipped and named, Tables 10 (and 11 when present) and the published rows print."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from cmrcx.common.paths import package_path
from tests.support import REPO_ROOT

SCRIPT = REPO_ROOT / "tools" / "reproduce_lot.sh"


@pytest.mark.slow  # trains two tasks through the script: ~1-2 minutes
def test_reproduce_lot_prints_table_10_for_the_runs_and_the_published_row(tmp_path):
    runs = tmp_path / "runs"
    extra = [
        "--gin_file=local_tiny.gin",  # tiny BERT, tiny vocabulary, random weights
        "--gin.PRETRAINED=None",  # after the script's own binding: this one wins
        "--gin.RunConfig.vocabulary_name='tiny'",
        "--gin.RunConfig.num_train_steps=2",
        "--gin.RunConfig.max_length=64",
        f"--gin.RunConfig.tfds_cache_dir='{tmp_path}/tfds'",
    ]
    out = subprocess.run(
        ["bash", str(SCRIPT), "bert", package_path("data/lot_sample"), str(tmp_path / "x"),
         str(runs), *extra],
        capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable},
        timeout=1800,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    lines = out.stdout.splitlines()
    for split in ("validation", "test"):
        assert f"lot {split}" in lines
        assert (runs / f"lot_{split}_results.json").is_file()
    header = lines.index("Table 10") + 1
    assert lines[header].split() == ["ClozeT", "SenPos", "Overall"]
    assert all(float(v) >= 0 for v in lines[header + 1].split())
    for task in ("clozet", "senpos"):
        assert (runs / f"lot_{task}" / "predictions" / f"lot_{task}_test.jsonl").is_file()
    start = lines.index("published, Table 10 BERT-base validation")  # under the runs' row
    assert lines[start + 1].split() == ["70.75", "40.13", "51.36"]


@pytest.mark.slow  # trains ClozeT through the script: 1-2 minutes
def test_reproduce_lot_runs_gpt2_and_prints_its_published_row(tmp_path):
    data = tmp_path / "lot"
    shutil.copytree(package_path("data/lot_sample/clozet"), data / "clozet")
    runs = tmp_path / "runs"
    extra = [
        "--gin_file=local_tiny.gin",  # tiny GPT-2 over the bundled vocab.txt, random weights
        "--gin.PRETRAINED=None",
        "--gin.RunConfig.num_train_steps=2",
        "--gin.RunConfig.max_length=64",
        f"--gin.RunConfig.tfds_cache_dir='{tmp_path}/tfds'",
    ]
    out = subprocess.run(
        ["bash", str(SCRIPT), "gpt2", str(data), str(tmp_path / "x"), str(runs), *extra],
        capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable},
        timeout=1800,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    with open(runs / "lot_clozet" / "run_config.json", encoding="utf-8") as f:
        assert json.load(f)["model"]["family"] == "gpt2"
    lines = out.stdout.splitlines()
    start = lines.index("published, Table 10 GPT2-base validation")  # under the runs' row
    assert lines[start - 3] == "Table 10"
    assert lines[start + 1].split() == ["70.07", "37.78", "49.62"]
    assert "skip senpos: no " in out.stderr
