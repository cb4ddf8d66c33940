"""PlotCom and OutGen runs on the generic runner: a tiny OutGen run (lot_outgen_tiny.gin, 2
steps) that generates every validation and test record, writes them in the official
files' schema and scores them with the official metric function, compiling its scoring
(and so decoding) step once; the Table 11 gin files; the RunConfig generation settings."""

from __future__ import annotations

import json
import logging
import re
import types

import gin
import jax
import pytest

from cmrcx.benchmarks import task_names
from cmrcx.benchmarks.lot import formats
from cmrcx.cli import launch
from cmrcx.common import errors
from cmrcx.common.paths import package_path
from cmrcx.training import run_config
from cmrcx.training.run_tasks import lot as lot_run_tasks
from cmrcx.training.runner import Runner
from tests.tasks.test_lot_generation_tasks import (
    GENERATION_METRICS,
    OVERALL,
    install,
    lot_scorer_modules,
)
from tests.training.test_compile_hygiene import CompileLog

OUTGEN = package_path("data/lot_sample/outgen")


def read_jsonl(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f.read().splitlines()]


def outgen_runner(root, *bindings, for_training=True):
    """A Runner of lot_outgen_tiny.gin with short texts and 3 rows per evaluation batch
    (8 records: 3 batches, the last padded)."""
    gin.clear_config()
    launch.parse_gin(
        ["lot_outgen_tiny.gin"],
        [
            f"MODEL_DIR = '{root / 'run'}'",
            f"RunConfig.tfds_cache_dir = '{root / 'tfds'}'",
            "RunConfig.eval_batch_size = 3",
            "RunConfig.max_length = 48",
            "RunConfig.target_length = 48",
            *bindings,
        ],
    )
    run = launch.run_config_from_gin()
    gin.clear_config()
    return Runner(run, for_training=for_training)


@pytest.fixture(scope="module")
def outgen_run(tmp_path_factory):
    """The tiny OutGen model as initialised (no training: that is the slow test below)
    evaluated on validation and test, under the compile log."""
    root = tmp_path_factory.mktemp("outgen")
    scorers = lot_scorer_modules()
    log = CompileLog()
    logger = logging.getLogger("jax")
    with pytest.MonkeyPatch.context() as patch:
        install(patch, scorers)
        runner = outgen_runner(root, for_training=False)
        state = runner.trainer.init_state()
        logger.addHandler(log)
        jax.config.update("jax_log_compiles", True)
        try:
            results = {split: runner.evaluate(state, 0, split) for split in ("validation", "test")}
        finally:
            jax.config.update("jax_log_compiles", False)
            logger.removeHandler(log)
    return types.SimpleNamespace(
        run=runner.run, runner=runner, results=results, scorers=scorers, log=log
    )


@pytest.mark.parametrize("split, gold_file", [("validation", "val.jsonl"), ("test", "test.jsonl")])
def test_predictions_are_the_official_schema_line_by_line(outgen_run, split, gold_file):
    path = outgen_run.run.model_dir + f"/predictions/lot_outgen_{split}.jsonl"
    predictions, golds = read_jsonl(path), read_jsonl(f"{OUTGEN}/{gold_file}")
    assert len(predictions) == len(golds) == 8
    for prediction, gold in zip(predictions, golds, strict=True):
        story = prediction.pop("story")
        gold.pop("story", None)
        assert list(prediction) == [key for key in gold]  # inputs unchanged, key order kept
        assert prediction == gold
        assert isinstance(story, str) and not any(c.isspace() for c in story)
        assert "<extra_id" not in story and "</s>" not in story and "<pad>" not in story
    # The official reader reads it back as an OutGen file of the same records.
    records = formats.read_file("outgen", path, labelled=True)
    assert [r.outline for r in records] == [
        r.outline for r in formats.read_split("outgen", OUTGEN, split)
    ]


def test_metrics_are_cmrcx_score_of_the_written_file(outgen_run):
    """The run scores exactly what the file holds, as `cmrcx.score lot_outgen GOLD PRED`
    does: `generation_metrics("outgen", gold objects, predicted stories)` and the
    organisers' weighted score."""
    recorder, overall = outgen_run.scorers[GENERATION_METRICS], outgen_run.scorers[OVERALL]
    ((task, golds, predictions),) = recorder.calls  # validation only: test has no targets
    assert task == "outgen"
    assert golds == read_jsonl(f"{OUTGEN}/val.jsonl")
    path = outgen_run.run.model_dir + "/predictions/lot_outgen_validation.jsonl"
    assert predictions == [line["story"] for line in read_jsonl(path)]
    scores = recorder.generation_metrics(task, golds, predictions)
    expected = {**scores, "organisers-weighted-score": overall.organisers_weighted_score(scores)}
    assert outgen_run.results["validation"] == pytest.approx(expected, nan_ok=True)
    try:
        from cmrcx.benchmarks.lot import scoring
    except ImportError:
        scoring = None
    if scoring is not None:  # the scorer of `cmrcx.score` (null where it prints NaN)
        scored = scoring.score_generation("lot_outgen", f"{OUTGEN}/val.jsonl", path)
        scored = {k: float("nan") if v is None else v for k, v in scored.items()}
        assert outgen_run.results["validation"] == pytest.approx(scored, nan_ok=True)
    assert outgen_run.results["test"] == {}  # no targets in the test file


def test_scoring_and_decoding_compile_once(outgen_run):
    """Two splits of three batches each (the last padded): one compilation of the scoring
    step, whose decoding loop is inside it."""
    log = outgen_run.log
    assert log.count("score_batch") == 1
    assert outgen_run.runner.trainer._score_step._cache_size() == 1
    # Array functions only: the runner's eager scalar ops (its non-finite flags) compile
    # twice at a6c8ce5 already (tests/training/test_compile_hygiene.py fails on them).
    repeated = {key: n for key, n in log.compiled.items() if n > 1 and re.search(r"\[\d", key[1])}
    assert not repeated, f"compiled more than once for the same shapes: {repeated}"


def test_the_paper_decoding_is_the_run_tasks(outgen_run):
    task = outgen_run.runner.task
    assert isinstance(task, lot_run_tasks.LotGenerationRunTask)
    assert (task.decoding.method, task.decoding.top_k, task.decoding.temperature) == (
        "sample",
        40,
        0.7,
    )
    # local_tiny.gin: a model trained from scratch generates from its own start token.
    assert task.model.generator.start_token_id == task.model.decoder.start_token_id == 0


def test_run_tasks_match_run_config():
    for name in lot_run_tasks.LOT_GENERATION_RUN_TASKS:  # RunConfig.task takes the registry's
        assert name in run_config.run_task_names(), name


MODELS = {  # model -> (d_model, encoder layers, vocabulary_name, partitioning)
    "mt5_base": (768, 12, "mt5", "data"),
    "longlm_small": (512, 6, "longlm", "data"),
    "longlm_base": (768, 12, "longlm", "data"),
    "longlm_large": (1536, 24, "longlm", "fsdp"),
}


@pytest.mark.parametrize("task", ["plotcom", "outgen"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_table11_gin_files(task, model):
    launch.parse_gin([f"lot_{task}_{model}.gin"], [])
    assert launch.unset_required_values() == ["MODEL_DIR", "DATA_DIR"]
    run = launch.gin_run_config()
    d_model, layers, vocabulary, partitioning = MODELS[model]
    assert (run.task, run.vocabulary_name) == (f"lot_{task}", vocabulary)
    assert (run.model.d_model, run.model.num_layers, run.partitioning) == (
        d_model,
        layers,
        partitioning,
    )
    # Section 5.2: batch 12, length 512, lr 3e-5; top-k 40, temperature 0.7.
    assert (run.batch_size, run.max_length, run.target_length) == (12, 512, 512)
    assert (run.learning_rate, run.num_epochs, run.require_pretrained) == (3e-5, 10.0, True)
    assert (run.generation_method, run.generation_top_k, run.generation_temperature) == (
        "sample",
        40,
        0.7,
    )
    # gen.py: max_length 512 with the start token, decoder_start_token_id=1.
    assert (run.generation_max_new_tokens, run.generation_start_token_id) == (511, 1)
    assert not run.drop_last_char_without_eos


def test_a_table11_gin_without_pretrained_names_it(tmp_path):
    launch.parse_gin(
        ["lot_outgen_longlm_small.gin"], [f"MODEL_DIR = '{tmp_path}'", f"DATA_DIR = '{OUTGEN}'"]
    )
    with pytest.raises(errors.ConfigError, match="^this config fine-tunes a pretrained T5 but"):
        launch.run_config_from_gin()
    gin.clear_config()
    launch.parse_gin(["lot_outgen_longlm_small.gin"], [f"PRETRAINED = '{tmp_path}'"])
    launch.parse_gin([], [f"MODEL_DIR = '{tmp_path}'"])
    with pytest.raises(errors.ConfigError, match="DATA_DIR is not set.*train.jsonl, val.jsonl"):
        launch.run_config_from_gin()


@pytest.mark.parametrize(
    "binding, message",
    [
        ("RunConfig.generation_method = 'beam'", "generation_method 'beam': use one of greedy"),
        ("RunConfig.generation_max_new_tokens = 200", "generation_max_new_tokens 200: use 1 to"),
        ("RunConfig.generation_temperature = 0.0", "generation_temperature 0.0 is not positive"),
    ],
)
def test_bad_generation_settings_are_named(tmp_path, binding, message):
    launch.parse_gin(["lot_outgen_tiny.gin"], [f"MODEL_DIR = '{tmp_path}'", binding])
    with pytest.raises(errors.ConfigError, match=message):
        launch.run_config_from_gin()


@pytest.mark.skipif(
    task_names.find("OutGen") is None, reason="the LOT paper names come with the scoring work"
)
def test_the_paper_name_is_the_task(tmp_path):
    paper_name = "RunConfig.task = 'OutGen'"
    launch.parse_gin(["lot_plotcom_tiny.gin"], [f"MODEL_DIR = '{tmp_path}'", paper_name])
    assert launch.run_config_from_gin().task == "lot_outgen"


@pytest.mark.slow
def test_tiny_outgen_run_trains_generates_scores_and_restores(tmp_path, monkeypatch):
    """lot_outgen_tiny.gin end to end (the demo's run, fewer steps): train, generate every
    validation record, score; a restored runner's evaluation gives the same file and
    metrics (sampling keys are per example, fixed by RunConfig.generation_seed)."""
    install(monkeypatch, lot_scorer_modules())
    runner = outgen_runner(tmp_path, "RunConfig.num_train_steps = 4", "RunConfig.log_every = 2")
    state, losses = runner.train()
    assert [step for step, _ in losses] == [1, 2, 4] and losses[-1][1] < losses[0][1]
    trained = runner.evaluate(state, 4)
    path = tmp_path / "run/predictions/lot_outgen_validation.jsonl"
    written = path.read_text(encoding="utf-8")
    assert len(read_jsonl(path)) == 8
    restored_runner = outgen_runner(tmp_path, "RunConfig.eval_batch_size = 8", for_training=False)
    step, restored = restored_runner.restore()
    assert step == 4 and restored_runner.evaluate(restored, step) == pytest.approx(trained)
    assert path.read_text(encoding="utf-8") == written  # another batch size, same outputs


@pytest.mark.slow
def test_table11_gin_with_local_tiny_smoke_runs(tmp_path, monkeypatch):
    """A Table 11 experiment + local_tiny.gin: a CPU smoke run (2 steps, generation of every
    validation record, predictions), then a restored runner evaluates to the same."""
    install(monkeypatch, lot_scorer_modules())
    launch.parse_gin(
        ["lot_plotcom_longlm_small.gin", "local_tiny.gin"],
        [
            f"MODEL_DIR = '{tmp_path / 'run'}'",
            f"DATA_DIR = '{package_path('data/lot_sample/plotcom')}'",
            f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
            "RunConfig.num_train_steps = 2",
        ],
    )
    run = launch.run_config_from_gin()
    assert (run.target_length, run.generation_max_new_tokens) == (128, None)
    runner = Runner(run)
    state, _ = runner.train()
    trained = runner.evaluate(state, 2)
    assert len(read_jsonl(tmp_path / "run/predictions/lot_plotcom_validation.jsonl")) == 16
    restored_runner = Runner(run, for_training=False)
    step, restored = restored_runner.restore()
    assert restored_runner.evaluate(restored, step) == pytest.approx(trained)


@pytest.mark.parametrize("task", ["plotcom", "outgen"])
def test_table11_gpt2_gin_files(task, repo_root):
    """GPT2-base (Table 11's anchor row): the paper's setting, LM fine-tuning, no decoder
    start token, the cells it cites equal `cmrcx.benchmarks.lot.paper`'s."""
    from cmrcx.benchmarks.lot import paper

    name = f"lot_{task}_gpt2.gin"
    launch.parse_gin([name], [])
    assert launch.unset_required_values() == ["MODEL_DIR", "DATA_DIR"]
    run = launch.gin_run_config()
    assert (run.task, run.vocabulary_name) == (f"lot_{task}", "gpt2_chinese")
    assert type(run.model).__name__ == "GPT2Config" and run.model.n_layer == 12
    assert (run.batch_size, run.max_length, run.target_length) == (12, 512, 512)
    assert run.max_length + run.target_length <= run.model.n_positions
    assert (run.learning_rate, run.num_epochs, run.require_pretrained) == (3e-5, 10.0, True)
    assert (run.generation_method, run.generation_top_k, run.generation_temperature) == (
        "sample",
        40,
        0.7,
    )
    assert run.generation_start_token_id is None
    text = (repo_root / "gin_configs" / "lot" / name).read_text()
    for split, short in (("validation", "val "), ("test", "test")):
        cited = re.search(rf"#   {short} ([\d. /]+)\n", text).group(1)
        cells = [float(v) for v in cited.split(" / ")]
        row = paper.row(paper.TABLE_11, split, "GPT2-base").scores
        first = 0 if task == "plotcom" else 4
        assert cells == list(row[first : first + len(cells)])


@pytest.mark.slow
def test_gpt2_generation_smoke_run(tmp_path, monkeypatch):
    """lot_outgen_gpt2.gin + local_tiny.gin from a converted transformers GPT-2 of the tiny
    geometry: fine-tuned as an LM for 2 steps, every validation record generated by
    continuing its prompt, predictions written; exported back to a GPT2LMHeadModel that
    transformers loads with the run's weights."""
    import numpy as np
    import torch
    import transformers

    from cmrcx import convert
    from cmrcx import export as export_cli

    install(monkeypatch, lot_scorer_modules())
    tiny = dict(vocab_size=4096, n_positions=512, n_embd=32, n_layer=2, n_head=4, n_inner=64)
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**tiny))
    hf.save_pretrained(tmp_path / "hf")
    vocab = package_path("data/tiny_vocab.txt")
    (tmp_path / "hf" / "vocab.txt").write_text(open(vocab, encoding="utf-8").read())
    assert convert.main(["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "pre")]) == 0
    bindings = [
        f"MODEL_DIR = '{tmp_path / 'run'}'",
        f"DATA_DIR = '{OUTGEN}'",
        f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
        "RunConfig.num_train_steps = 2",
        "RunConfig.max_length = 64",
        "RunConfig.target_length = 64",
        f"PRETRAINED = '{tmp_path / 'pre'}'",
        "RunConfig.require_pretrained = True",
    ]
    launch.parse_gin(["lot_outgen_gpt2.gin", "local_tiny.gin"], bindings)
    run = launch.run_config_from_gin()
    assert type(run.model).__name__ == "GPT2Config" and run.model.n_embd == 32
    runner = Runner(run)
    assert type(runner.task.model).__name__ == "CausalLMModel"
    state, _ = runner.train()
    results = runner.evaluate(state, 2)
    assert "bleu-1" in results
    assert len(read_jsonl(tmp_path / "run/predictions/lot_outgen_validation.jsonl")) == 8
    gin.clear_config()
    export_cli.main(
        ["--gin_file=lot_outgen_gpt2.gin", "--gin_file=local_tiny.gin",
         *[f"--gin.{b.replace(' = ', '=', 1)}" for b in bindings],
         "--out", str(tmp_path / "hf_out"), "--format", "hf"]
    )  # fmt: skip
    back = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "hf_out").eval()
    trained = jax.device_get(state.params["gpt2"]["wte"]["embedding"])
    np.testing.assert_array_equal(back.transformer.wte.weight.detach().numpy(), trained)
    assert not np.array_equal(hf.transformer.wte.weight.detach().numpy(), trained)
