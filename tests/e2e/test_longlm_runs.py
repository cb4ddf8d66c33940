"""LongLM pretraining on the generic runner: the seq2seq loss against transformers'
T5ForConditionalGeneration(labels=...), and a tiny run end to end (train, perplexity and
BLEU, predictions, restore giving the same metrics)."""

from __future__ import annotations

import json

import gin
import jax
import numpy as np
import pytest

from cmrcx.cli import launch
from cmrcx.common.errors import MissingSplitError
from cmrcx.model_api.seq2seq import Seq2SeqModel
from cmrcx.models import registry
from cmrcx.training import input_pipeline, run_config
from cmrcx.training.run_tasks import longlm as longlm_run_tasks
from cmrcx.training.run_tasks.base import build_run_task
from cmrcx.training.runner import Runner

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cmrcx.weights import t5 as t5_weights  # noqa: E402
from tests.models.test_decoding_t5 import ODD, reference_model  # noqa: E402


def seq2seq_batch(seed: int = 4, source: int = 11, target: int = 7) -> dict[str, np.ndarray]:
    """Three rows, ragged inputs and targets (padded with 0), the last row padding."""
    rng = np.random.default_rng(seed)
    inputs = rng.integers(2, ODD["vocab_size"], [3, source]).astype(np.int32)
    targets = rng.integers(2, ODD["vocab_size"], [3, target]).astype(np.int32)
    inputs_mask, targets_mask = np.ones_like(inputs), np.ones_like(targets)
    inputs_mask[1, source - 4 :] = 0
    targets_mask[0, target - 3 :] = 0
    targets_mask[2, target - 1 :] = 0
    return {
        "inputs": inputs * inputs_mask,
        "inputs_mask": inputs_mask,
        "targets": targets * targets_mask,
        "targets_mask": targets_mask,
        "example_mask": np.array([1, 1, 0], np.int32),
    }


def test_loss_and_scores_equal_transformers_labels(tmp_path):
    hf = reference_model("longlm")
    hf.save_pretrained(tmp_path)
    release = t5_weights.read_dir(str(tmp_path))
    batch = seq2seq_batch()
    model = Seq2SeqModel(registry.network(release.config, "seq2seq"), 11, 7)
    params = {"t5": release.params}
    loss_sum, metrics = jax.jit(model.loss_fn)(params, batch, None)
    scores = np.asarray(jax.jit(model.score_batch)(params, batch))

    labels = np.where(batch["targets_mask"] > 0, batch["targets"], -100)[:2].astype(np.int64)
    with torch.no_grad():
        out = hf(
            input_ids=torch.tensor(batch["inputs"][:2]),
            attention_mask=torch.tensor(batch["inputs_mask"][:2]),
            labels=torch.tensor(labels),
        )
        per_token = torch.nn.functional.cross_entropy(
            out.logits.transpose(1, 2), torch.tensor(labels), reduction="none"
        ).numpy()
    tokens = int(batch["targets_mask"][:2].sum())
    assert float(metrics["examples"]) == tokens == 11
    # HF's loss is the mean over real target tokens; the trainer divides by "examples".
    assert float(loss_sum) / tokens == pytest.approx(float(out.loss), rel=1e-5)
    np.testing.assert_allclose(scores[:2], -per_token.sum(1), rtol=1e-5)
    predicted = out.logits.numpy().argmax(-1)
    assert float(metrics["correct"]) == float(((predicted == labels) & (labels >= 0)).sum())


# LongLM's spiece.model layout (Chinese XLNet's): <unk> 0, <s> 1, </s> 2, <pad> 5.
LONGLM_IDS = {"pad_token_id": 5, "eos_token_id": 2, "decoder_start_token_id": 1}


def longlm_layout_batch(padding: int) -> dict[str, np.ndarray]:
    """Three rows with many id-0 tokens (<unk>: real text), padded with `padding`."""
    rng = np.random.default_rng(6)
    batch = seq2seq_batch(seed=6)
    for key in ("inputs", "targets"):
        ids = rng.integers(0, ODD["vocab_size"], batch[key].shape).astype(np.int32)
        ids[rng.random(ids.shape) < 0.3] = 0
        real = batch[f"{key}_mask"] > 0
        ids[:, -1:] = np.where(real[:, -1:], 2, ids[:, -1:])  # rows that run to the end: EOS
        batch[key] = np.where(real, ids, padding).astype(np.int32)
    return batch


def test_longlm_layout_attends_and_scores_id_0(tmp_path):
    """pad 5, eos 2, decoder start 1 (from config.json), id 0 a real token: the loss and
    scores equal transformers' with labels -100 at padding and the explicit attention mask
    (both attend and score every id 0), whatever id the batch is padded with. A model
    that took id 0 (or the pad id) for padding would differ from transformers here."""
    hf = reference_model("longlm")
    for name, value in LONGLM_IDS.items():
        setattr(hf.config, name, value)
    hf.save_pretrained(tmp_path)
    release = t5_weights.read_dir(str(tmp_path))
    assert {name: getattr(release.config, name) for name in LONGLM_IDS} == LONGLM_IDS
    model = Seq2SeqModel(registry.network(release.config, "seq2seq"), 11, 7)
    params = {"t5": release.params}
    loss_fn, score_batch = jax.jit(model.loss_fn), jax.jit(model.score_batch)
    batch = longlm_layout_batch(padding=0)
    real_targets = batch["targets"][batch["targets_mask"] > 0]
    assert (real_targets == 0).sum() >= 2 and (batch["inputs"] * batch["inputs_mask"] == 0).any()
    loss_sum, metrics = loss_fn(params, batch, None)
    scores = np.asarray(score_batch(params, batch))

    labels = np.where(batch["targets_mask"] > 0, batch["targets"], -100)[:2].astype(np.int64)
    with torch.no_grad():
        out = hf(
            input_ids=torch.tensor(batch["inputs"][:2]),
            attention_mask=torch.tensor(batch["inputs_mask"][:2]),
            labels=torch.tensor(labels),
        )
        per_token = torch.nn.functional.cross_entropy(
            out.logits.transpose(1, 2), torch.tensor(labels), reduction="none"
        ).numpy()
    tokens = int(batch["targets_mask"][:2].sum())
    assert float(metrics["examples"]) == tokens == 11
    assert float(loss_sum) / tokens == pytest.approx(float(out.loss), rel=1e-5)
    np.testing.assert_allclose(scores[:2], -per_token.sum(1), rtol=1e-5)
    for padding in (5, 77):  # the model's pad piece, or any other id
        repadded = longlm_layout_batch(padding)
        assert float(loss_fn(params, repadded, None)[0]) == pytest.approx(float(loss_sum))
        np.testing.assert_allclose(score_batch(params, repadded), scores, rtol=1e-6)


def test_run_tasks_match_launch():
    for name in longlm_run_tasks.LONGLM_RUN_TASKS:  # RunConfig.task takes the registry's
        assert name in run_config.run_task_names(), name


def tiny_run(model_dir, *extra):
    launch.parse_gin(
        ["longlm_pretrain_tiny.gin"],
        [
            f"MODEL_DIR = '{model_dir}'",
            "RunConfig.num_train_steps = 3",
            "RunConfig.log_every = 3",
            "RunConfig.max_length = 32",
            "RunConfig.target_length = 32",
            "RunConfig.max_decoded_examples = 2",
            *extra,
        ],
    )
    return launch.run_config_from_gin()


def test_tiny_run_trains_evaluates_and_restores(tmp_path):
    run = tiny_run(tmp_path / "pretrain")
    runner = Runner(run)
    state, losses = runner.train()
    assert [step for step, _ in losses] == [1, 3]  # step 1: orbax's first save, logged
    assert all(np.isfinite(loss) for _, loss in losses)
    # A random 512-token model: perplexity near the vocabulary size.
    assert 100 < np.exp(losses[-1][1]) < 2000
    trained = runner.evaluate(state, 3)
    for objective in ("infilling", "continuation"):
        assert 100 < trained[f"{objective}_perplexity"] < 2000
        assert 0 <= trained[f"{objective}_bleu-4"] <= trained[f"{objective}_bleu-3"] <= 100
        assert trained[f"{objective}_decoded"] == 2
        path = tmp_path / "pretrain" / "predictions" / f"longlm_{objective}_tiny_validation.jsonl"
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert [line["text_id"] for line in lines] == ["clock_shop.txt:0", "clock_shop.txt:1"]
        assert all(line["target"] and line["ids"] for line in lines)
    table = runner.results_table(trained, "validation")
    assert table.splitlines()[0].startswith("longlm_infilling validation: PPL ")

    restored_runner = Runner(run, for_training=False)
    step, restored = restored_runner.restore()
    assert step == 3 and restored_runner.evaluate(restored, step) == pytest.approx(trained)


@pytest.mark.slow  # default-suite budget (15 min on 2 cores)
def test_tiny_run_with_longlm_layout(tmp_path, capsys):
    """LongLM's spiece.model layout (pad 5, eos 2, unk 0) and a model with those ids:
    trains and evaluates; the corpus's unknown characters (id 0) are real tokens of the
    padded examples. With T5's ids left in the model config, a note says so."""
    from tests.vocab.test_sentencepiece_vocab import train_xlnet_layout_model

    spiece = train_xlnet_layout_model(tmp_path / "spiece")  # 500 pieces + 100 sentinels
    vocab = [f"VOCAB_FILE = '{spiece}'", "cmrcx.T5Config.vocab_size = 600"]
    ids = [f"cmrcx.T5Config.{name} = {value}" for name, value in LONGLM_IDS.items()]
    run = tiny_run(tmp_path / "pretrain", *vocab, *ids)
    runner = Runner(run)
    assert "note:" not in capsys.readouterr().out
    batches = input_pipeline.eval_batches(
        runner.task.score_task, "validation", 64, ("inputs", "inputs_mask")
    )
    _, host = next(batches)
    real = host["inputs"][host["inputs_mask"] > 0]
    assert (real == 0).sum() > 20 and (host["inputs"][host["inputs_mask"] == 0] == 0).all()
    state, losses = runner.train()
    assert all(np.isfinite(loss) for _, loss in losses)
    results = runner.evaluate(state, 3)
    for objective in ("infilling", "continuation"):
        assert 100 < results[f"{objective}_perplexity"] < 2000
        path = tmp_path / "pretrain" / "predictions" / f"longlm_{objective}_tiny_validation.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines():
            generated = json.loads(line)["ids"]
            assert 2 not in generated[:-1] and len(generated) <= 32  # cut at EOS 2
    gin.clear_config()
    build_run_task(tiny_run(tmp_path / "other", *vocab))
    note = capsys.readouterr().out
    assert "note: the model's pad_token_id 0, the vocabulary's '<pad>' is 5" in note
    assert "eos_token_id 1, the vocabulary's '</s>' is 2" in note


def test_validation_split_is_required(tmp_path):
    run = tiny_run(tmp_path / "x", "VALIDATION_DIR = None", "RunConfig.task = 'longlm_infilling'")
    task = build_run_task(run)
    assert task.train_task == "longlm_infilling_train_tiny"
    with pytest.raises(MissingSplitError, match="validation_data_dir"):
        task.require_split("validation")


@pytest.mark.parametrize(
    "experiment, d_model, layers", [("small", 512, 6), ("base", 768, 12), ("large", 1536, 24)]
)
def test_paper_gin_files(experiment, d_model, layers):
    launch.parse_gin([f"longlm_pretrain_{experiment}.gin"], [])
    run = launch.gin_run_config()
    assert (run.task, run.batch_size, run.num_train_steps) == ("longlm_pretrain", 1000, 2500000)
    assert (run.learning_rate, run.weight_decay, run.warmup_fraction) == (1e-4, 0.0, 0.0)
    assert (run.max_length, run.target_length) == (512, 512)
    assert (run.model.d_model, run.model.num_layers) == (d_model, layers)


@pytest.mark.slow  # default-suite budget (15 min on 2 cores)
def test_export_of_a_run_generates_and_loads_in_transformers(tmp_path):
    """`cmrcx.export` of a T5 run: an orbax export `cmrcx.generate` reads (spiece.model
    beside it), and `--format hf` a directory transformers loads with the same logits."""
    from cmrcx import export, generate
    from cmrcx.models.decoding import greedy
    from cmrcx.models.t5 import T5DecodeModel, T5ForConditionalGeneration
    from cmrcx.weights import exports

    run = tiny_run(tmp_path / "pretrain")
    Runner(run).train()
    flags = ["--gin_file=longlm_pretrain_tiny.gin", f"--gin.MODEL_DIR='{tmp_path / 'pretrain'}'"]
    flags += ["--gin.RunConfig.max_length=32", "--gin.RunConfig.target_length=32"]
    gin.clear_config()
    export.main([*flags, "--out", str(tmp_path / "export")])
    gin.clear_config()
    export.main([*flags, "--out", str(tmp_path / "hf"), "--format", "hf"])
    config, params = exports.read_network(str(tmp_path / "export"))
    assert (tmp_path / "export" / "spiece.model").is_file()

    (tmp_path / "in.txt").write_text("[5, 6, 7, 1]\n", encoding="utf-8")
    gin.clear_config()
    generate.main(["--checkpoint", str(tmp_path / "export"), "--input", str(tmp_path / "in.txt"),
                   "--output", str(tmp_path / "out.jsonl"), "--max_new_tokens", "5"])  # fmt: skip
    ids = np.array([[5, 6, 7, 1]])
    want = greedy(T5DecodeModel(config), params, ids, np.ones_like(ids), 5)
    got = json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))["ids"]
    assert got == [int(t) for t in want.tokens[0][: int(want.lengths[0])]]

    hf = transformers.T5ForConditionalGeneration.from_pretrained(str(tmp_path / "hf")).eval()
    decoder = np.array([[0, 5, 9]])
    with torch.no_grad():
        expected = hf(input_ids=torch.tensor(ids), decoder_input_ids=torch.tensor(decoder)).logits
    logits = T5ForConditionalGeneration(config).apply(
        {"params": params}, ids, np.ones_like(ids), decoder, np.ones_like(decoder)
    )
    np.testing.assert_allclose(np.asarray(logits), expected.numpy(), atol=1e-4, rtol=0)
