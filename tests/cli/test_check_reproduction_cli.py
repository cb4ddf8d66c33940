"""`python -m cmrcx.check_reproduction`: the table and --json of a tiny CLUE run from a
PRETRAINED export made here, the one-line error of a gin without a recipe (in this
process), --help (in a child, as a user runs it)."""

import json

import gin
import jax
import numpy as np
import pytest
from flax import linen as nn

pytest.importorskip("torch")
pytest.importorskip("transformers")

from cmrcx import check_reproduction  # noqa: E402
from cmrcx.cli import launch  # noqa: E402
from cmrcx.models.bert import BertEncoder  # noqa: E402
from cmrcx.weights import exports  # noqa: E402
from tests.support_cli import run_main  # noqa: E402


@pytest.fixture
def pretrained(tmp_path):
    """A cmrcx export of a random tiny BERT encoder (the geometry of clue_afqmc_tiny.gin)."""
    launch.parse_gin(["clue_afqmc_tiny.gin"], ["MODEL_DIR = 'unused'"])
    config = launch.gin_run_config().model
    ids = np.zeros([1, 8], np.int32)
    params = BertEncoder(config).init(jax.random.key(7), ids, ids, np.ones_like(ids))
    export = tmp_path / "pretrained"
    exports.export_params(str(export), {"bert": nn.meta.unbox(params["params"])}, config)
    return export


def _argv(tmp_path, pretrained, *extra):
    return [
        "--gin_file=clue_afqmc_tiny.gin",
        f"--gin.PRETRAINED='{pretrained}'",
        f"--gin.RunConfig.tfds_cache_dir='{tmp_path / 'tfds'}'",
        "--steps=3",
        *extra,
    ]


def test_table_and_json(tmp_path, pretrained, capsys):
    check_reproduction.main(_argv(tmp_path, pretrained))
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[-5].split() == ["step", "learning_rate", "loss", "reference", "rel.diff"]
    assert [line.split()[0] for line in lines[-4:-1]] == ["1", "2", "3"]
    assert lines[-1].startswith("verdict: same (max relative difference ")

    gin.clear_config()  # the second run parses its flags afresh
    check_reproduction.main(_argv(tmp_path, pretrained, "--json"))
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(report) == {"rows", "max_relative_difference", "verdict"}
    assert [row["step"] for row in report["rows"]] == [1, 2, 3]
    for row in report["rows"]:
        assert set(row) == {"step", "learning_rate", "loss", "reference_loss",
                            "relative_difference"}  # fmt: skip
        assert row["relative_difference"] <= 1e-5
    # 40 pairs x 10 epochs / batch 8 = 50 steps, 5 of warm-up at 5e-4.
    assert [row["learning_rate"] for row in report["rows"]] == pytest.approx([0, 1e-4, 2e-4])
    assert report["verdict"] == "same"
    assert report["max_relative_difference"] == max(
        row["relative_difference"] for row in report["rows"]
    )


def test_a_gin_without_a_recipe_says_which_have_one():
    result = run_main("check_reproduction", "--gin_file=longlm_pretrain_tiny.gin", "--steps=2")
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: no reference recipe for longlm_pretrain yet: check_reproduction "
                           "supports clue_afqmc, ")  # fmt: skip
    assert "cmrc2019, " in last
    assert "Traceback" not in result.stderr


def test_help(run_cli):
    result = run_cli("check_reproduction", "--help")
    assert result.returncode == 0
    assert "--steps" in result.stdout and "--json" in result.stdout
    assert "reference recipe" in result.stdout
