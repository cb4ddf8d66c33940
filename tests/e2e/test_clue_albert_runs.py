"""ALBERT through the CLUE path: a brightmart albert_zh TF release of the tiny geometry is
converted (`cmrcx.convert`), fine-tuned from as PRETRAINED with a generated ALBERT-tiny gin
plus local_tiny.gin (train, evaluate, restore), and exported to HuggingFace; and
tools/reproduce_clue.sh runs the albert_tiny row and prints its published Table 2 row."""

import json
import shutil

import gin
import pytest

from cmrcx import convert
from cmrcx.cli import launch
from cmrcx.common.paths import package_path
from cmrcx.models.albert import AlbertConfig
from cmrcx.training.runner import Runner
from tests.e2e.test_reproduce_clue import run_script, table
from tests.weights.test_albert_conversion import write_tf_checkpoint

SAMPLE = package_path("data/clue_sample/afqmc_public")
# gin_configs/models/albert/tiny.gin, which local_tiny.gin includes.
TINY_GIN = dict(vocab=4096, embedding=32, hidden=128, layers=2, heads=4, inner=512, positions=512)


def tiny_albert_zh_release(directory):
    """brightmart's names and albert_config_tiny.json keys at the tiny gin's geometry."""
    import numpy as np

    g, rng = TINY_GIN, np.random.default_rng(0)
    layer = "bert/encoder/layer_shared/"
    shapes = {
        "bert/embeddings/word_embeddings": (g["vocab"], g["embedding"]),
        "bert/embeddings/word_embeddings_2": (g["embedding"], g["hidden"]),
        "bert/embeddings/position_embeddings": (g["positions"], g["hidden"]),
        "bert/embeddings/token_type_embeddings": (2, g["hidden"]),
        "bert/embeddings/LayerNorm/gamma": (g["hidden"],),
        "bert/embeddings/LayerNorm/beta": (g["hidden"],),
        f"{layer}attention/output/dense/kernel": (g["hidden"], g["hidden"]),
        f"{layer}attention/output/dense/bias": (g["hidden"],),
        f"{layer}attention/output/LayerNorm/gamma": (g["hidden"],),
        f"{layer}attention/output/LayerNorm/beta": (g["hidden"],),
        f"{layer}intermediate/dense/kernel": (g["hidden"], g["inner"]),
        f"{layer}intermediate/dense/bias": (g["inner"],),
        f"{layer}output/dense/kernel": (g["inner"], g["hidden"]),
        f"{layer}output/dense/bias": (g["hidden"],),
        f"{layer}output/LayerNorm/gamma": (g["hidden"],),
        f"{layer}output/LayerNorm/beta": (g["hidden"],),
        "bert/pooler/dense/kernel": (g["hidden"], g["hidden"]),
        "bert/pooler/dense/bias": (g["hidden"],),
        "cls/predictions/output_bias": (g["vocab"],),
    }
    for proj in ("query", "key", "value"):
        shapes[f"{layer}attention/self/{proj}/kernel"] = (g["hidden"], g["hidden"])
        shapes[f"{layer}attention/self/{proj}/bias"] = (g["hidden"],)
    variables = {n: rng.normal(0, 0.05, s).astype(np.float32) for n, s in shapes.items()}
    directory.mkdir(parents=True)
    write_tf_checkpoint(variables, str(directory / "albert_model.ckpt"))
    config = {
        "attention_probs_dropout_prob": 0.0, "directionality": "bidi", "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0, "hidden_size": g["hidden"], "embedding_size": g["embedding"],
        "initializer_range": 0.02, "intermediate_size": g["inner"],
        "max_position_embeddings": g["positions"], "num_attention_heads": g["heads"],
        "num_hidden_layers": g["layers"], "type_vocab_size": 2, "vocab_size": g["vocab"],
        "ln_type": "postln",
    }  # fmt: skip
    (directory / "albert_config_tiny.json").write_text(json.dumps(config))
    shutil.copyfile(package_path("data/tiny_vocab.txt"), directory / "vocab.txt")


@pytest.mark.slow  # convert, train 3 steps, evaluate twice: ~40 s on 2 busy cores
def test_converted_albert_zh_release_fine_tunes_with_a_generated_gin(tmp_path):
    tiny_albert_zh_release(tmp_path / "albert_tiny_zh")
    export = tmp_path / "export"
    assert convert.main(["--from", str(tmp_path / "albert_tiny_zh"), "--to", str(export)]) == 0
    launch.parse_gin(
        ["clue_afqmc_albert_tiny.gin", "local_tiny.gin"],
        [
            f"MODEL_DIR = '{tmp_path / 'run'}'",
            f"DATA_DIR = '{SAMPLE}'",
            f"PRETRAINED = '{export}'",  # after local_tiny's None
            "RunConfig.num_train_steps = 3",
            "RunConfig.max_length = 64",
            f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
        ],
    )
    run = launch.run_config_from_gin()
    assert isinstance(run.model, AlbertConfig) and run.model.embedding_layout == "albert_zh"
    assert (run.model.hidden_size, run.model.num_layers, run.learning_rate) == (128, 2, 1e-3)
    runner = Runner(run)
    state, losses = runner.train()
    assert [step for step, _ in losses] == [1, 3]
    assert set(state.params) == {"albert", "classifier"}
    trained = runner.evaluate(state, 3)
    assert 0 <= trained["accuracy"] <= 100
    restored_runner = Runner(run, for_training=False)
    step, restored = restored_runner.restore()
    assert step == 3 and restored_runner.evaluate(restored, step) == pytest.approx(trained)
    with open(tmp_path / "run" / "run_config.json", encoding="utf-8") as f:
        assert json.load(f)["model"]["family"] == "albert"


def test_local_tiny_after_each_albert_gin_is_a_tiny_run_of_that_family():
    for experiment, layout, act in (
        ("clue_cmrc2018_albert_tiny.gin", "albert_zh", "gelu_new"),
        ("clue_c311_albert_xxlarge.gin", "albert", "relu"),
    ):
        gin.clear_config()
        launch.parse_gin([experiment, "local_tiny.gin"], [])
        model = launch.gin_run_config().model
        assert isinstance(model, AlbertConfig), experiment
        assert (model.hidden_size, model.num_layers, model.vocab_size) == (128, 2, 4096)
        assert (model.embedding_layout, model.hidden_act) == (layout, act)


@pytest.mark.slow  # one task through the script: ~80 s
def test_reproduce_clue_runs_the_albert_tiny_row(tmp_path):
    data_root = tmp_path / "clue"
    shutil.copytree(SAMPLE, data_root / "afqmc_public")
    runs, out = run_script(data_root, tmp_path, model="albert_tiny")
    lines = out.stdout.splitlines()
    _, scores = table(lines, "clue validation")
    assert 0.0 <= float(scores["AFQMC"]) <= 100.0
    with open(runs / "clue_afqmc" / "run_config.json", encoding="utf-8") as f:
        assert json.load(f)["model"]["family"] == "albert"
    start = lines.index("clue validation")  # Table 2's published row under the runs' row
    assert lines[start + 3] == "paper Table 2 (test), ALBERT-tiny"
    assert lines[start + 4].split()[:5] == ["56.01", "53.35", "48.71", "63.38", "69.92"]
