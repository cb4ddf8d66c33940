"""Checkpoints and exports written before the model-family registry still load and give
the same outputs; every Model API builds the parameter tree that code built.

The fixtures (tests/fixtures/pre_registry, see its make_fixture.py) were written by the
code of commit 018b990: a 2-step CLUE AFQMC run (`cmrcx.train`), its export
(`cmrcx.export`), a converted T5 (`cmrcx.convert`), the logits each gives on fixed
inputs, and the trees of every Model API (paths, shapes, logical axes, initial values).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys

import flax.linen as nn
import jax
import numpy as np
import pytest

from cmrcx.common.paths import package_path
from cmrcx.model_api.classification import ClassificationModel
from cmrcx.model_api.cloze import ClozeModel
from cmrcx.model_api.multiple_choice import MultipleChoiceModel
from cmrcx.model_api.seq2seq import Seq2SeqModel
from cmrcx.model_api.span import SpanExtractionModel
from cmrcx.models import registry
from cmrcx.models.bert import BertConfig
from cmrcx.models.t5 import T5Config, T5ForConditionalGeneration
from cmrcx.training.run_config import RunConfig
from cmrcx.training.runner import Runner
from cmrcx.weights import exports
from tests.support import FAST_COMPILE, REPO_ROOT

FIXTURES = str(REPO_ROOT / "tests" / "fixtures" / "pre_registry")
sys.path.insert(0, FIXTURES)
import make_fixture  # noqa: E402  (the fixed inputs the expected outputs were computed on)

SAMPLE = package_path("data/clue_sample/afqmc_public")


def _expected() -> dict:
    with open(os.path.join(FIXTURES, "expected.json"), encoding="utf-8") as f:
        return json.load(f)


def _saved_run(tmp_path, **changes) -> RunConfig:
    """The fixture run's RunConfig (run_config.json) with this checkout's paths."""
    with open(os.path.join(FIXTURES, "afqmc_run", "run_config.json"), encoding="utf-8") as f:
        saved = json.load(f)
    model = {k: v for k, v in saved["model"].items() if k != "family"}
    assert saved["model"]["family"] == "bert"
    model_dir = tmp_path / "run"
    shutil.copytree(os.path.join(FIXTURES, "afqmc_run"), model_dir)
    run = RunConfig(
        task=saved["task"],
        model_dir=str(model_dir),
        data_dir=SAMPLE,
        vocabulary_name=saved["vocabulary_name"],
        vocab_file=os.path.join(FIXTURES, "vocab.txt"),
        model=BertConfig(**model),
        max_length=saved["max_length"],
        batch_size=saved["batch_size"],
        eval_batch_size=saved["eval_batch_size"],
        num_train_steps=saved["num_train_steps"],
        learning_rate=saved["learning_rate"],
        adam_epsilon=saved["adam_epsilon"],
        tfds_cache_dir=str(tmp_path / "tfds"),
    )
    return dataclasses.replace(run, **changes).checked()


def test_a_training_checkpoint_of_the_old_code_restores_with_the_same_logits(tmp_path):
    runner = Runner(_saved_run(tmp_path), for_training=False)
    step, state = runner.restore()  # the whole TrainState: parameters and AdamW moments
    assert step == _expected()["run_step"] == int(state.step)
    logits = jax.jit(runner.model.score_batch)(state.params, make_fixture.bert_batch())
    np.testing.assert_allclose(logits, _expected()["run_logits"], rtol=1e-6, atol=1e-9)


def test_an_export_of_the_old_code_loads_as_a_model_and_as_pretrained(tmp_path):
    export_dir = os.path.join(FIXTURES, "afqmc_export")
    config = exports.read_model_config(export_dir)  # written without a "family": BERT
    params = exports.load_params(export_dir, None)
    assert set(params) == {"bert", "classifier"}
    model = ClassificationModel(registry.network(config, "classification", num_classes=2), 16)
    logits = jax.jit(model.score_batch)(params, make_fixture.bert_batch())
    np.testing.assert_allclose(logits, _expected()["export_logits"], rtol=1e-6, atol=1e-9)

    run = _saved_run(tmp_path, pretrained=export_dir, model_dir=str(tmp_path / "fresh"))
    state = Runner(run).initial_state()
    encoder = jax.device_get(state.params["bert"])
    jax.tree.map(np.testing.assert_array_equal, encoder, params["bert"])


def test_a_t5_conversion_of_the_old_code_loads_with_the_same_logits():
    export_dir = os.path.join(FIXTURES, "t5_export")
    config = exports.read_model_config(export_dir)  # "family": "t5"
    assert isinstance(config, T5Config)
    params = exports.load_params(export_dir, None)["t5"]
    apply = jax.jit(T5ForConditionalGeneration(config).apply)  # one compile, not one per op
    logits = apply({"params": params}, **make_fixture.t5_batch())
    np.testing.assert_allclose(logits, _expected()["t5_logits"], rtol=1e-5, atol=1e-6)


def _tree(model) -> dict:
    # Jitted, as the Trainer initialises: one compile per model, not one per eager op
    # (half this test's time), at XLA's optimisation level 0 (the same random bits, a
    # faster compile); the pinned sums are the eager code's, within their rel.
    init = jax.jit(model.init, compiler_options=FAST_COMPILE)
    boxed = init(jax.random.key(0), model.example_batch(2))
    flat, _ = jax.tree_util.tree_flatten_with_path(
        boxed, is_leaf=lambda x: isinstance(x, nn.Partitioned)
    )
    return {"/".join(k.key for k in path): (leaf.value, leaf.names) for path, leaf in flat}


def _model_apis(pinned: dict) -> dict:
    bert = BertConfig(**pinned["bert_config"])
    tied, untied = (T5Config(**pinned[f"t5_{k}_config"]) for k in ("tied", "untied"))
    network = registry.network
    return {
        "cloze": ClozeModel(network(bert, "cloze"), 16, 4),
        "classification": ClassificationModel(network(bert, "classification", num_classes=3), 16),
        "span": SpanExtractionModel(network(bert, "span"), 16),
        "multiple_choice": MultipleChoiceModel(network(bert, "multiple_choice"), 3, 16),
        "seq2seq_tied": Seq2SeqModel(network(tied, "seq2seq"), 8, 6),
        "seq2seq_untied": Seq2SeqModel(network(untied, "seq2seq"), 8, 6),
    }


def test_every_model_api_builds_the_pinned_tree():
    """Same paths, shapes and logical axes (checkpoints restore, sharding rules apply) and
    the same initial values (the heads draw the same random numbers)."""
    with open(os.path.join(FIXTURES, "trees.json"), encoding="utf-8") as f:
        pinned = json.load(f)
    for problem, model in _model_apis(pinned).items():
        tree = _tree(model)
        assert sorted(tree) == sorted(pinned[problem]), problem
        for path, (value, names) in tree.items():
            shape, axes, total = pinned[problem][path]
            assert (list(value.shape), list(names)) == (shape, axes), (problem, path)
            got = float(np.sum(np.asarray(value), dtype=np.float64))
            assert got == pytest.approx(total, rel=1e-5, abs=1e-6), (problem, path)
