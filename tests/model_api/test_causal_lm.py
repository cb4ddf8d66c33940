"""LM fine-tuning of a decoder-only model on seq2seq batches (GPT-2 on PlotCom / OutGen):
the loss is transformers' GPT-2 cross-entropy of the target tokens after the input, the
padding between input and target changing nothing; generation continues the input; and
the LOT generation texts as GPT-2's prompt and continuation."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from cmrcx.model_api.causal_lm import CausalLMModel
from cmrcx.models import decoding, registry
from cmrcx.tasks.lot import pretraining
from cmrcx.weights import gpt2 as gpt2_weights
from tests.models.test_gpt2_model import ODD, reference_model

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    model = reference_model(seed=1)
    directory = tmp_path_factory.mktemp("gpt2_lm")
    model.save_pretrained(directory)
    release = gpt2_weights.read_dir(str(directory))
    return model, release.config, {"gpt2": release.params}


def seq2seq_batch():
    rng = np.random.default_rng(4)
    inputs, targets = rng.integers(3, ODD["vocab_size"], [3, 8]), rng.integers(3, 90, [3, 6])
    inputs_mask, targets_mask = np.ones_like(inputs), np.ones_like(targets)
    inputs_mask[1, 5:] = 0
    inputs_mask[2, 2:] = 0
    targets_mask[0, 4:] = 0
    targets_mask[2, 1:] = 0
    return {
        "inputs": np.where(inputs_mask > 0, inputs, 0),
        "inputs_mask": inputs_mask,
        "targets": np.where(targets_mask > 0, targets, 0),
        "targets_mask": targets_mask,
        "example_mask": np.array([1, 1, 1]),
    }


def test_loss_is_the_targets_cross_entropy_after_the_input(converted):
    hf, config, params = converted
    batch = seq2seq_batch()
    model = CausalLMModel(registry.network(config, "causal_lm"), 8, 6)
    loss_sum, metrics = jax.jit(model.loss_fn)(params, batch, None)
    want, count = 0.0, 0
    for row in range(3):
        source = batch["inputs"][row][batch["inputs_mask"][row] > 0]
        target = batch["targets"][row][batch["targets_mask"][row] > 0]
        with torch.no_grad():
            logits = hf(input_ids=torch.tensor(np.concatenate([source, target])[None])).logits
        log_probs = torch.log_softmax(logits[0].double(), -1).numpy()
        for k, token in enumerate(target):
            want -= log_probs[len(source) - 1 + k, token]
            count += 1
    assert float(metrics["examples"]) == count
    np.testing.assert_allclose(float(loss_sum), want, rtol=1e-5)
    scores = jax.jit(model.score_batch)(params, batch)
    np.testing.assert_allclose(float(-scores.sum()), want, rtol=1e-5)


def test_generation_continues_the_input(converted):
    """Greedy generation of a right-padded batch = transformers' generate on each row's
    real input alone."""
    hf, config, params = converted
    batch = seq2seq_batch()
    greedy = pretraining.Decoding("greedy", 0, 1.0, 5)
    model = CausalLMModel(registry.network(config, "causal_lm"), 8, 6, [greedy])
    batch = {**batch, "decode_method": np.zeros([3], np.int32), "example_index": np.arange(3)}
    got = np.asarray(jax.jit(model.generate)(params, batch))
    for row in range(3):
        source = batch["inputs"][row][batch["inputs_mask"][row] > 0]
        with torch.no_grad():
            out = hf.generate(
                input_ids=torch.tensor(source[None]), do_sample=False, max_new_tokens=5,
                eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id,
            ).numpy()[0, len(source) :]  # fmt: skip
        want = np.pad(out, (0, 6 - len(out)), constant_values=config.pad_token_id)
        np.testing.assert_array_equal(got[row], want)
    direct = decoding.greedy(
        model.generator, params["gpt2"], batch["inputs"], batch["inputs_mask"], 5
    )
    np.testing.assert_array_equal(got[:, :5], direct.tokens)


def test_lot_texts_as_a_prompt_and_its_continuation(tiny_vocab, tmp_path):
    """PlotCom: `[CLS] story with [unused1] at the blank [SEP]` -> `PLOT [SEP]`."""
    import seqio

    from cmrcx.common.paths import package_path
    from cmrcx.tasks.lot import generation

    (name,) = generation.register(
        "gpt2_test", tiny_vocab, {"lot_plotcom": package_path("data/lot_sample/plotcom")},
        max_length=48, target_length=16, tfds_cache_dir=str(tmp_path),
        layout="gpt2",
    )  # fmt: skip
    task = seqio.get_mixture_or_task(name)
    vocabulary = task.output_features["inputs"].vocabulary
    example = next(task.get_dataset(None, "validation", shuffle=False).as_numpy_iterator())
    inputs, targets = list(example["inputs"]), list(example["targets"])
    assert inputs[0] == vocabulary.cls_id and inputs[-1] == vocabulary.sep_id
    assert vocabulary.token_to_id("[unused1]") in inputs and len(inputs) <= 48
    assert targets[-1] == vocabulary.sep_id and len(targets) <= 16
    assert vocabulary.cls_id not in targets and vocabulary.token_to_id("[unused1]") not in targets
