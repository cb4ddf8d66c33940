"""The command lines, as a user runs them: train, eval, export, score; clear errors.

The tiny run trains, is evaluated and is exported in child processes, as a user runs
them (the training's quiet start is checked); the other commands (the score, the second
export and training, the errors) run in this process (`tests.support_cli`): the same
code, without a child's seconds of imports. The in-process smoke runs of every
paper config are in test_paper_configs.py.
"""

import json
import os
import subprocess
import sys

import pytest

from cmrcx.benchmarks.cmrc2019.official_format import read_passages
from cmrcx.common.paths import package_path
from cmrcx.weights import exports
from tests.support_cli import run_main

SAMPLE_DEV = package_path("data/cmrc2019_sample/cmrc2019_dev.json")


def cmrcx(module, *args, check=True, child=False):
    """`python -m cmrcx.<module> ARGS`: in this process, or with child=True in its own."""
    if child:
        command = [sys.executable, "-m", f"cmrcx.{module}", *args]
        out = subprocess.run(command, capture_output=True, text=True, timeout=900)
    else:
        out = run_main(module, *args)
    if check:
        assert out.returncode == 0, out.stderr[-4000:]
    return out


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


TRAIN_STDERR = {}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """2 steps of the tiny demo config; returns (model_dir, final metrics)."""
    model_dir = str(tmp_path_factory.mktemp("tiny") / "run")
    out = cmrcx(
        "train",
        "--gin_file=cmrc2019_tiny.gin",
        f"--gin.MODEL_DIR='{model_dir}'",
        "--gin.RunConfig.num_train_steps=2",
        "--gin.RunConfig.log_every=1",
        child=True,
    )
    TRAIN_STDERR["tiny"] = out.stderr
    return model_dir, last_json(out.stdout)


def test_quiet_start_on_a_cpu_machine(tiny_run):
    """No TensorFlow/CUDA start-up lines (an `E0000 ... cuInit` reads as a failure)."""
    for noise in ("oneDNN", "cuda", "cuInit", "absl::InitializeLog", "I0000", "E0000", "W0000"):
        assert noise not in TRAIN_STDERR["tiny"], TRAIN_STDERR["tiny"][-3000:]
    assert "train: 100%" in TRAIN_STDERR["tiny"]  # the progress bar still shows


def test_train_writes_checkpoint_predictions_metrics_events(tiny_run):
    model_dir, metrics = tiny_run
    for mode in ("paper", "baseline", "assignment"):
        assert 0 <= metrics[f"qac/{mode}"] <= 100 and 0 <= metrics[f"pac/{mode}"] <= 100
    assert os.path.isdir(os.path.join(model_dir, "checkpoints", "2"))
    with open(os.path.join(model_dir, "predictions", "cmrc2019_tiny_validation.json")) as f:
        predictions = json.load(f)
    passages = read_passages(SAMPLE_DEV)
    assert set(predictions) == {p.context_id for p in passages}
    for p in passages:  # one choice index per blank, every blank filled (paper mode)
        assert len(predictions[p.context_id]) == p.num_blanks
        assert all(0 <= c < len(p.choices) for c in predictions[p.context_id])
    with open(os.path.join(model_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    assert [x["step"] for x in lines if x["split"] == "train"] == [1, 2]
    assert lines[-1]["split"] == "validation" and "qac/paper" in lines[-1]
    assert os.listdir(os.path.join(model_dir, "events"))


def test_eval_restores_and_score_cli_agrees(tiny_run):
    model_dir, metrics = tiny_run
    gins = ["--gin_file=cmrc2019_tiny.gin", f"--gin.MODEL_DIR='{model_dir}'"]
    out = cmrcx("eval", *gins, child=True)
    evaluated = last_json(out.stdout)
    assert evaluated["step"] == 2
    for key, value in metrics.items():
        if "/" in key:
            assert evaluated[key] == pytest.approx(value), key
    predictions = os.path.join(model_dir, "predictions", "cmrc2019_tiny_validation.json")
    scored = last_json(cmrcx("score", "cmrc2019", SAMPLE_DEV, predictions).stdout)
    assert scored["qac"] == pytest.approx(metrics["qac/paper"])
    assert scored["pac"] == pytest.approx(metrics["pac/paper"])


def test_export_then_fine_tune_from_it(tiny_run, tmp_path):
    model_dir, _ = tiny_run
    export_dir = str(tmp_path / "export")
    cmrcx(
        "export",
        "--gin_file=cmrc2019_tiny.gin",
        f"--gin.MODEL_DIR='{model_dir}'",
        f"--out={export_dir}",
        child=True,
    )
    assert sorted(os.listdir(export_dir)) == ["model_config.json", "params", "vocab.txt"]
    with open(os.path.join(export_dir, "model_config.json")) as f:
        assert json.load(f)["model"]["hidden_size"] == 128
    out = cmrcx(
        "train",
        "--gin_file=cmrc2019_tiny.gin",
        f"--gin.MODEL_DIR='{tmp_path}/ft'",
        f"--gin.PRETRAINED='{export_dir}'",
        "--gin.RunConfig.num_train_steps=1",
    )
    assert f"encoder weights from {export_dir}" in out.stdout


def test_paper_config_names_what_is_missing(tmp_path):
    base = ["--gin_file=cmrc2019_bert.gin", f"--gin.MODEL_DIR='{tmp_path}/x'"]
    out = cmrcx("train", *base, check=False)
    assert out.returncode == 2 and "PRETRAINED is not set" in out.stderr
    assert out.stderr.strip().endswith("is `python -m cmrcx.convert`.")  # no internal reference
    assert "Traceback" not in out.stderr
    out = cmrcx("train", *base, f"--gin.PRETRAINED='{tmp_path}'", check=False)
    assert out.returncode == 2 and "DATA_DIR is not set" in out.stderr
    (tmp_path / "vocab.txt").write_text(open(package_path("data/tiny_vocab.txt")).read())
    out = cmrcx(
        "train",
        *base,
        f"--gin.PRETRAINED='{tmp_path}'",
        f"--gin.DATA_DIR='{tmp_path}'",
        check=False,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"PRETRAINED {tmp_path} is not a cmrcx export (no model_config.json)" in out.stderr
    (tmp_path / "config.json").write_text("{}")  # a HuggingFace release's folder
    out = cmrcx(
        "train",
        *base,
        f"--gin.PRETRAINED='{tmp_path}'",
        f"--gin.DATA_DIR='{tmp_path}'",
        check=False,
    )
    assert (
        "is a released checkpoint, not a cmrcx export: convert it first: python -m " in out.stderr
    )
    (tmp_path / "model_config.json").write_text('{"model": {}}')
    out = cmrcx(
        "train",
        *base,
        f"--gin.PRETRAINED='{tmp_path}'",
        f"--gin.DATA_DIR='{tmp_path}'",
        check=False,
    )
    assert out.returncode == 2
    assert "cmrc2019_train.json" in out.stderr and "cmrc2019_dev.json" in out.stderr


def test_unknown_gin_file_lists_bundled_ones():
    out = cmrcx("train", "--gin_file=nope.gin", check=False)
    assert out.returncode == 2 and "cmrc2019_tiny.gin" in out.stderr


def test_export_hf_loads_in_transformers_with_the_same_hidden_states(tiny_run, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import numpy as np

    from cmrcx.models.bert import BertEncoder

    model_dir, _ = tiny_run
    gins = ["--gin_file=cmrc2019_tiny.gin", f"--gin.MODEL_DIR='{model_dir}'"]
    cmrcx("export", *gins, f"--out={tmp_path}/hf", "--format=hf")
    cmrcx("export", *gins, f"--out={tmp_path}/orbax")
    assert sorted(os.listdir(tmp_path / "hf")) == ["config.json", "model.safetensors", "vocab.txt"]
    reference = transformers.BertModel.from_pretrained(str(tmp_path / "hf")).eval()
    ids = np.random.default_rng(0).integers(1, 4096, [2, 40])
    mask = np.ones_like(ids)
    mask[1, 30:] = 0
    with torch.no_grad():
        want = reference(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            token_type_ids=torch.zeros_like(torch.tensor(ids)),
        )
    params = exports.load_params(str(tmp_path / "orbax"), None)["bert"]
    config = exports.read_model_config(str(tmp_path / "orbax"))
    hidden, pooled = BertEncoder(config).apply({"params": params}, ids, np.zeros_like(ids), mask)
    np.testing.assert_allclose(np.asarray(hidden), want.last_hidden_state.numpy(), atol=1e-5)
    np.testing.assert_allclose(np.asarray(pooled), want.pooler_output.numpy(), atol=1e-5)


# Slow (a minute): sharding is covered in the default suite by tests/training/test_sharding.py
# and the released optimizer by tests/training/test_released_optimizer.py.
@pytest.mark.slow
def test_six_devices_released_script_optimizer_then_eval_on_one(tmp_path):
    """6 simulated devices: the eval batch (32) is rounded to 36 instead of failing at the
    final evaluation; the released script's optimizer trains from gin; a 1-device eval of
    that checkpoint gives the same scores."""
    model_dir = f"{tmp_path}/six"
    gins = [
        "--gin_file=cmrc2019_tiny.gin",
        f"--gin.MODEL_DIR='{model_dir}'",
        "--gin.RunConfig.optimizer='released_script'",
    ]
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=6"}
    six = [*gins, "--gin.RunConfig.mesh_shape=(6, 1)", "--gin.RunConfig.batch_size=6"]
    out = subprocess.run(
        [sys.executable, "-m", "cmrcx.train", *six, "--gin.RunConfig.num_train_steps=2"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "eval batch 32 -> 36" in out.stdout
    # 182 blanks in the bundled training sample, 10 epochs: t_total = int(182 / 6 * 10) = 303.
    assert "182 training blanks x 10.0 epochs / batch 6 = 303 (t_total)" in out.stdout
    trained = last_json(out.stdout)
    evaluated = last_json(cmrcx("eval", *gins, child=True).stdout)
    assert trained["step"] == evaluated["step"] == 2
    for key, value in trained.items():
        if "/" in key:
            assert evaluated[key] == pytest.approx(value), key
    bad = subprocess.run(
        [sys.executable, "-m", "cmrcx.train", *six, "--gin.RunConfig.batch_size=8"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "batch_size 8 does not split into 1 micro-batch(es) over 6" in bad.stderr
