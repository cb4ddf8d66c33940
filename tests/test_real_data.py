"""Integration: the real CMRC 2019 trial file (../shared/data), as train and validation.

The tiny config trains one epoch on it and must write a prediction for every
blank of all 139 passages. Skipped (and says so) where ../shared is absent.
"""

import json
import pathlib
import subprocess
import sys

import pytest

from cmrcx.benchmarks.cmrc2019.official_format import read_passages

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "cmrc2019"
TRIAL = SHARED / "cmrc2019_trial.json"


@pytest.mark.skipif(not TRIAL.is_file(), reason=f"real data not present: {TRIAL}")
def test_tiny_config_one_epoch_on_trial_predicts_every_blank(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cmrcx.train",
            "--gin_file=cmrc2019_tiny.gin",
            f"--gin.MODEL_DIR='{tmp_path}'",
            f"--gin.DATA_DIR='{SHARED}'",
            "--gin.RunConfig.train_split='trial'",
            "--gin.RunConfig.eval_split='trial'",
            "--gin.RunConfig.num_epochs=1.0",
            f"--gin.RunConfig.tfds_cache_dir='{tmp_path}/tfds'",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    passages = read_passages(TRIAL)
    assert len(passages) == 139 and sum(p.num_blanks for p in passages) == 1504
    predictions = json.loads((tmp_path / "predictions" / "cmrc2019_tiny_trial.json").read_text())
    assert set(predictions) == {p.context_id for p in passages}
    for p in passages:
        assert len(predictions[p.context_id]) == p.num_blanks
        assert all(0 <= c < len(p.choices) for c in predictions[p.context_id])
    metrics = json.loads(out.stdout.strip().splitlines()[-1])
    print("trial after one epoch:", metrics)
