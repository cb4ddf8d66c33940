"""The XLNet family through the generic CLUE path: Table 7's XLNet-mid gin files, and
local_tiny.gin after one of them making a CPU smoke run of a tiny XLNet (the bundled
XLNet-layout SentencePiece model): train, evaluate, restore; ChID through the official
files and `cmrcx.score`."""

import json
import os
import shutil
import subprocess
import sys

import gin
import pytest

from cmrcx import score
from cmrcx.benchmarks.clue import chid, chid_decoding
from cmrcx.cli import launch
from cmrcx.common.paths import package_path
from cmrcx.models.xlnet import XLNetConfig
from cmrcx.tasks.clue.reading import split_records
from cmrcx.training.run_tasks.base import build_run_task
from cmrcx.training.runner import Runner
from tests.support import REPO_ROOT

SAMPLE = package_path("data/clue_sample/afqmc_public")

# (experiment, batch, length, epochs, learning rate): Table 7's XLNet-mid cells.
CELLS = [
    ("clue_afqmc_xlnet_mid.gin", 16, 128, 3.0, 2e-5),
    ("clue_ocnli_xlnet_mid.gin", 32, 128, 3.0, 5e-5),
    ("clue_csl_xlnet_mid.gin", 4, 256, 5.0, 1e-5),
    ("clue_cmrc2018_xlnet_mid.gin", 32, 512, 2.0, 3e-5),
    ("clue_c311_xlnet_mid.gin", 24, 512, 8.0, 2e-5),
]


@pytest.mark.parametrize("experiment, batch, length, epochs, lr", CELLS)
def test_table_7_xlnet_mid_cells(experiment, batch, length, epochs, lr):
    launch.parse_gin([experiment], [])
    run = launch.gin_run_config()
    assert (run.batch_size, run.max_length, run.num_epochs, run.learning_rate) == (
        batch, length, epochs, lr,
    )  # fmt: skip
    assert run.model == XLNetConfig()  # XLNet-mid: 24 layers, 768 wide, 12 heads, 32000 pieces
    assert (run.model.num_layers, run.model.d_model, run.model.vocab_size) == (24, 768, 32000)
    assert not run.lower_case and run.require_pretrained and run.vocabulary_name == "xlnet_mid"


def _tiny_run(tmp_path, experiment="clue_afqmc_xlnet_mid.gin", data_dir=SAMPLE):
    gin.clear_config()
    launch.parse_gin(
        [experiment, "local_tiny.gin"],
        [
            f"MODEL_DIR = '{tmp_path / 'run'}'",
            f"DATA_DIR = '{data_dir}'",
            "RunConfig.num_train_steps = 2",
            f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
        ],
    )
    return launch.run_config_from_gin()


def test_local_tiny_gives_a_tiny_xlnet_and_its_vocabulary(tmp_path):
    run = _tiny_run(tmp_path)
    assert (run.model.num_layers, run.model.d_model, run.model.vocab_size) == (2, 32, 512)
    assert run.vocab_file == package_path("data/xlnet_tiny/spiece.model")
    assert run.pretrained is None and not run.require_pretrained


@pytest.mark.slow  # ~50 s (CMRC 2018) / ~25 s (C3) on 2 cores
@pytest.mark.parametrize(
    "experiment, folder, metrics",
    [
        ("clue_cmrc2018_xlnet_mid.gin", "cmrc2018_public", {"EM", "F1", "AVERAGE"}),
        ("clue_c311_xlnet_mid.gin", "c3_public", {"accuracy"}),
    ],
)
def test_smoke_run_of_xlnet_reading_comprehension(tmp_path, experiment, folder, metrics):
    run = _tiny_run(tmp_path, experiment, package_path(f"data/clue_mrc_sample/{folder}"))
    assert build_run_task(run).layout.name == "xlnet"
    runner = Runner(run)
    state, losses = runner.train()
    assert [step for step, _ in losses] == [1, 2]
    assert set(runner.evaluate(state, 2)) == metrics
    predictions = next((tmp_path / "run" / "predictions").glob("*_validation.json"))
    if folder == "cmrc2018_public":  # answers are the passages' own characters
        questions = split_records(
            build_run_task(run).row, run.data_dir, "validation", run.tfds_cache_dir
        )
        answers = json.loads(predictions.read_text())
        assert all(answers[q.qid] in q.context for q in questions)


CHID = package_path("data/clue_mrc_sample/chid_public")


def test_xlnet_chid_run_reads_the_xlnet_layout(tmp_path):
    """The fast check of the ChID run below (tests/benchmarks/clue/test_xlnet_mrc_features.py
    checks the features): the Table 7 gin, local_tiny.gin and the XLNet input layout."""
    run = _tiny_run(tmp_path, "clue_chid11_xlnet_mid.gin", CHID)
    assert (run.task, run.vocabulary_name, run.model.d_model) == ("clue_chid11", "xlnet_mid", 32)
    assert build_run_task(run).layout.name == "xlnet"


@pytest.mark.slow  # 45 s to 2 min on 2 cores (train with evaluations, then the test split)
def test_xlnet_chid_run_writes_the_official_files_that_cmrcx_score_reads(tmp_path, capsys):
    """ChID 1.1 with a tiny XLNet: train (selecting by validation accuracy), evaluate, write
    the official {tag: index} files; `cmrcx.score chid` on the written validation file
    gives the run's accuracy; the test split's submission names every blank of test1.1."""
    run = _tiny_run(tmp_path, "clue_chid11_xlnet_mid.gin", CHID)
    runner = Runner(run)
    state, losses = runner.train()
    assert [step for step, _ in losses] == [1, 2]
    results = runner.evaluate(state, 2)
    assert set(results) == {"accuracy", "accuracy_assignment"}
    name = runner.task.train_task
    written = tmp_path / "run" / "predictions" / f"{name}_validation.json"
    capsys.readouterr()
    assert score.main(["chid", f"{CHID}/dev_answer.json", str(written)]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["accuracy"] == pytest.approx(results["accuracy"]) and scored["total"] == 10
    assert runner.evaluate(state, 2, "test") == {}
    submission = tmp_path / "run" / "submission" / "chid11_predict.json"
    test = chid.read_split(CHID, "test")
    assert set(chid_decoding.read_submission(submission, test)) == {b.tag for b in test.blanks}


@pytest.mark.slow  # ~40 s on 2 cores
def test_smoke_run_of_a_generated_xlnet_gin(tmp_path):
    run = _tiny_run(tmp_path)
    runner = Runner(run)
    state, losses = runner.train()
    assert [step for step, _ in losses] == [1, 2]
    trained = runner.evaluate(state, 2)
    assert set(trained) == {"accuracy"}
    restored_runner = Runner(run, for_training=False)
    step, restored = restored_runner.restore()
    assert step == 2 and restored_runner.evaluate(restored, step) == pytest.approx(trained)


@pytest.mark.slow  # trains AFQMC and C3 through the script (~2 min)
def test_reproduce_clue_runs_xlnet_classification_and_reading_tasks(tmp_path):
    data_root = tmp_path / "clue"
    shutil.copytree(SAMPLE, data_root / "afqmc_public")
    shutil.copytree(package_path("data/clue_mrc_sample/c3_public"), data_root / "c3_public")
    extra = [
        "--gin_file=local_tiny.gin",  # tiny XLNet, tiny spiece.model, random weights
        "--gin.PRETRAINED=None",
        "--gin.RunConfig.num_train_steps=2",
        "--gin.RunConfig.max_length=64",
        f"--gin.RunConfig.tfds_cache_dir='{tmp_path}/tfds'",
    ]
    script = REPO_ROOT / "tools" / "reproduce_clue.sh"
    out = subprocess.run(
        ["bash", str(script), "xlnet_mid", str(data_root), str(tmp_path / "none"),
         str(tmp_path / "runs"), *extra],
        capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable},
        timeout=1800,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    assert "skip clue_c311" not in out.stderr
    for task in ("clue_afqmc", "clue_c311"):
        assert (tmp_path / "runs" / task / "run_config.json").is_file()
    assert "paper Table 2 (test), XLNet-mid" in out.stdout
