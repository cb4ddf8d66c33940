"""CLUE classification on the generic runner: gin files of Table 7, a tiny run end to end
(train, evaluate, restore, test-split submission), mismatched MODEL_DIRs, and the mixture
evaluation's table, JSON and submission zip."""

import importlib.util
import json
import shutil
import zipfile

import gin
import numpy as np
import pytest

from cmrcx.benchmarks.clue.submission import read_submission
from cmrcx.cli import launch
from cmrcx.common.errors import ConfigError
from cmrcx.common.paths import package_path
from cmrcx.training.mixture_eval import evaluate_mixture
from cmrcx.training.runner import Runner
from cmrcx.weights import exports
from tests.support import REPO_ROOT


def _load_tool(name: str):
    path = REPO_ROOT / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_clue_gin = _load_tool("make_clue_gin")
SAMPLE = package_path("data/clue_sample/afqmc_public")


@pytest.fixture(scope="module")
def tfds_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tfds"))


def test_generated_gin_files_are_current():
    assert make_clue_gin.main(["--check"]) == 0


# (experiment, batch, length, epochs, learning rate, hidden size): Table 7 cells.
CELLS = [
    ("clue_afqmc_bert.gin", 16, 128, 3.0, 2e-5, 768),
    ("clue_iflytek_roberta_wwm_ext_large.gin", 24, 128, 3.0, 2e-5, 1024),
    ("clue_iflytek_ernie.gin", 32, 128, 3.0, 2e-5, 768),
    ("clue_ocnli_roberta_wwm_ext.gin", 32, 128, 3.0, 3e-5, 768),
    ("clue_cluewsc11_bert.gin", 8, 128, 50.0, 2e-5, 768),
    ("clue_csl_roberta_large.gin", 4, 256, 5.0, 5e-6, 1024),
    ("clue_csl_bert_wwm_ext.gin", 4, 256, 5.0, 1e-5, 768),
    ("clue_cmnli_bert.gin", 16, 128, 2.0, 3e-5, 768),
]


@pytest.mark.parametrize("experiment, batch, length, epochs, lr, hidden", CELLS)
def test_table_7_cells(experiment, batch, length, epochs, lr, hidden):
    launch.parse_gin([experiment], [])
    run = launch.gin_run_config()
    assert experiment.startswith(run.task + "_")
    assert (run.batch_size, run.max_length, run.num_epochs, run.learning_rate) == (
        batch, length, epochs, lr,
    )  # fmt: skip
    assert run.model.hidden_size == hidden and run.require_pretrained
    assert (run.adam_epsilon, run.warmup_fraction, run.eval_split) == (1e-8, 0.1, "validation")


# Reading comprehension: (experiment, batch, length, epochs, learning rate, hidden size,
# warm-up fraction of the task's CLUE run script).
MRC_CELLS = [
    ("clue_cmrc2018_roberta_wwm_ext_large.gin", 32, 512, 2.0, 2.5e-5, 1024, 0.1),
    ("clue_cmrc2018_roberta_large.gin", 32, 256, 2.0, 3e-5, 1024, 0.1),
    ("clue_cmrc2018_ernie.gin", 32, 512, 2.0, 3e-5, 768, 0.1),
    ("clue_chid11_bert.gin", 24, 64, 3.0, 2e-5, 768, 0.06),
    ("clue_chid10_roberta_wwm_ext_large.gin", 24, 64, 3.0, 2e-5, 1024, 0.06),
    ("clue_c311_roberta_wwm_ext.gin", 24, 512, 8.0, 2e-5, 768, 0.05),
    ("clue_c310_bert_wwm_ext.gin", 24, 512, 8.0, 2e-5, 768, 0.05),
]


@pytest.mark.parametrize("experiment, batch, length, epochs, lr, hidden, warmup", MRC_CELLS)
def test_table_7_mrc_cells(experiment, batch, length, epochs, lr, hidden, warmup):
    launch.parse_gin([experiment], [])
    run = launch.gin_run_config()
    assert experiment.startswith(run.task + "_")
    assert (run.batch_size, run.max_length, run.num_epochs, run.learning_rate) == (
        batch, length, epochs, lr,
    )  # fmt: skip
    assert run.model.hidden_size == hidden and run.require_pretrained
    # BERTAdam of CLUE's mrc_pytorch scripts: epsilon 1e-6, decay 0.01, clipping at 1.0.
    assert (run.adam_epsilon, run.weight_decay, run.max_grad_norm) == (1e-6, 0.01, 1.0)
    assert (run.warmup_fraction, run.eval_split, run.optimizer) == (warmup, "validation", "adamw")
    if run.task == "clue_cmrc2018":
        assert run.doc_stride == 128


def test_every_clue_gin_parses():
    for path in sorted(make_clue_gin.generated_files()):
        gin.clear_config()
        launch.parse_gin([path.name], [])
        run = launch.gin_run_config()
        assert path.name.startswith(run.task + "_"), path.name


def tiny_run(model_dir, tfds_cache, *extra, experiment="clue_afqmc_tiny.gin"):
    gin.clear_config()
    launch.parse_gin(
        [experiment, "local_tiny.gin"],
        [
            f"MODEL_DIR = '{model_dir}'",
            f"DATA_DIR = '{SAMPLE}'",
            "RunConfig.num_train_steps = 3",
            "RunConfig.max_length = 64",
            f"RunConfig.tfds_cache_dir = '{tfds_cache}'",
            *extra,
        ],
    )
    return launch.run_config_from_gin()


@pytest.fixture(scope="module")
def afqmc_run(tmp_path_factory, tfds_cache):
    """The tiny AFQMC run, trained once for the module: (run, its runner, the trained state,
    the logged losses, a copy of its MODEL_DIR as training left it). The tests that need a
    trained MODEL_DIR of their own copy that one (`trained_model_dir`)."""
    root = tmp_path_factory.mktemp("afqmc_run")
    run = tiny_run(root / "afqmc", tfds_cache)
    runner = Runner(run)
    state, losses = runner.train()
    shutil.copytree(root / "afqmc", root / "as_trained")
    return run, runner, state, losses, root / "as_trained"


def trained_model_dir(afqmc_run, model_dir):
    """A copy at `model_dir` of the module's trained AFQMC MODEL_DIR (the tiny run's)."""
    shutil.copytree(afqmc_run[-1], model_dir)
    return model_dir


def test_tiny_run_trains_evaluates_restores_and_submits(afqmc_run):
    run, runner, state, losses, _ = afqmc_run
    model_dir = run.model_dir
    assert [step for step, _ in losses] == [1, 3]  # step 1: orbax's first save, logged
    assert all(np.isfinite(loss) for _, loss in losses)
    trained = runner.evaluate(state, 3)
    assert set(trained) == {"accuracy"} and 0 <= trained["accuracy"] <= 100
    predictions = f"{model_dir}/predictions/clue_afqmc_tiny_validation.json"
    lines = read_submission("clue_afqmc", predictions)
    assert [line.id for line in lines] == list(range(16))
    gold = [json.loads(x)["label"] for x in open(f"{SAMPLE}/dev.json", encoding="utf-8")]
    accuracy = 100 * np.mean([line.label == g for line, g in zip(lines, gold, strict=True)])
    assert trained["accuracy"] == pytest.approx(accuracy)  # targets from the task = the file's

    restored_runner = Runner(run, for_training=False)
    step, restored = restored_runner.restore()
    assert step == 3 and restored_runner.evaluate(restored, step) == pytest.approx(trained)
    assert restored_runner.evaluate(restored, step, "test") == {}
    submission = f"{model_dir}/submission/afqmc_predict.json"
    assert len(read_submission("clue_afqmc", submission)) == 16


@pytest.mark.slow  # default-suite budget (15 min on 2 cores)
def test_experiment_gin_with_tiny_overlay(tmp_path, tfds_cache):
    run = tiny_run(tmp_path / "x", tfds_cache, experiment="clue_afqmc_roberta_wwm_ext.gin")
    assert run.pretrained is None and run.task == "clue_afqmc"
    state, losses = Runner(run).train()
    assert [step for step, _ in losses] == [1, 3]  # step 1: orbax's first save, logged


def test_a_model_dir_refuses_another_geometry_or_task(tmp_path, tfds_cache, afqmc_run):
    trained_model_dir(afqmc_run, tmp_path / "run")  # the tiny run's, trained
    other = tiny_run(tmp_path / "run", tfds_cache, "cmrcx.BertConfig.hidden_size = 64")
    with pytest.raises(ConfigError, match=r"RunConfig.model.hidden_size=.*this run has"):
        Runner(other)
    other = tiny_run(tmp_path / "run", tfds_cache, "RunConfig.task = 'clue_tnews11'")
    with pytest.raises(ConfigError, match="RunConfig.task='clue_afqmc'.*'clue_tnews11'"):
        Runner(other)
    # Compute options may change between sessions.
    Runner(tiny_run(tmp_path / "run", tfds_cache, "cmrcx.BertConfig.remat_policy = 'full'"))


def test_mixture_evaluation_table_json_and_zip(tmp_path, afqmc_run, capsys):
    runs_root = tmp_path / "runs"
    trained_model_dir(afqmc_run, runs_root / "clue_afqmc")  # the tiny run's, trained
    summary = evaluate_mixture("clue", str(runs_root), "validation")
    assert list(summary["scores"]) == ["AFQMC"] and summary["average"] == summary["scores"]["AFQMC"]
    assert summary["missing"][:3] == ["TNEWS", "IFLYTEK", "CLUEWSC2020"]
    out = capsys.readouterr().out
    assert "Avg  TNEWS  IFLYTEK  CLUEWSC2020  AFQMC" in out and "missing" in out
    saved = json.loads((runs_root / "clue_validation_results.json").read_text())
    assert saved["scores"] == summary["scores"]
    evaluate_mixture("clue", str(runs_root), "test")
    with zipfile.ZipFile(runs_root / "clue_submission.zip") as archive:
        assert archive.namelist() == ["afqmc_predict.json"]
    with pytest.raises(ConfigError, match="--mixture 'glue'"):
        evaluate_mixture("glue", str(runs_root))


def test_a_pretrained_export_of_another_activation_is_refused(tmp_path, tfds_cache):
    """Same shapes, different meaning (ERNIE's relu): not fine-tuned silently as GeLU."""
    import dataclasses

    runner = Runner(tiny_run(tmp_path / "a", tfds_cache))
    state = runner.trainer.init_state()
    relu = dataclasses.replace(runner.run.model, hidden_act="relu")
    exports.export_params(str(tmp_path / "export"), state.params["bert"], relu)
    # Refused when the run is built, before anything is made in MODEL_DIR, with the binding
    # that makes the gin model the checkpoint's.
    said = r"hidden_act='relu'.*'gelu'.*--gin.cmrcx.BertConfig.hidden_act=\"'relu'\"$"
    run = tiny_run(tmp_path / "b", tfds_cache, f"PRETRAINED = '{tmp_path / 'export'}'")
    with pytest.raises(ConfigError, match=said):
        Runner(run)
    assert not (tmp_path / "b").exists()
    # Another family's export: named as such.
    albert = "cmrcx.AlbertConfig()"
    run = tiny_run(tmp_path / "c", tfds_cache, f"PRETRAINED = '{tmp_path / 'export'}'",
                   f"RunConfig.model = @{albert}")  # fmt: skip
    with pytest.raises(ConfigError, match=r"is an export of BertConfig, the gin model is Alb"):
        Runner(run)
    fixed = tiny_run(
        tmp_path / "b", tfds_cache, f"PRETRAINED = '{tmp_path / 'export'}'",
        "cmrcx.BertConfig.hidden_act = 'relu'",
    )  # fmt: skip
    _, losses = Runner(fixed).train()
    assert len(losses) == 2
    # Only a run's start reads PRETRAINED: once trained, eval and export do not need it.
    shutil.rmtree(tmp_path / "export")
    moved = tiny_run(
        tmp_path / "b", tfds_cache, f"PRETRAINED = '{tmp_path / 'export'}'",
        "cmrcx.BertConfig.hidden_act = 'relu'",
    )  # fmt: skip
    assert Runner(moved, for_training=False).restore()[0] == 3
