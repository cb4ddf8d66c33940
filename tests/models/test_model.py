"""The Flax BERT cloze model: bert-base-chinese geometry, head and loss semantics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.linen import meta

from cmrcx.model_api.cloze import ClozeModel
from cmrcx.models import registry
from cmrcx.models.bert import BertConfig
from tests.support import FAST_COMPILE

TINY = BertConfig(
    vocab_size=300,
    hidden_size=32,
    num_layers=2,
    num_heads=4,
    intermediate_size=64,
    max_position_embeddings=16,
    hidden_dropout=0.0,
    attention_dropout=0.0,
)


def make_batch(batch=3, length=16, blanks=32, seed=0):
    rng = np.random.default_rng(seed)
    positions = np.zeros([batch, blanks], np.int32)
    positions[:, :3] = [[5, 9, 12]] * batch
    positions[0, 2] = 0  # row 0 holds only two blanks
    mask = np.ones([batch, length], np.int32)
    mask[:, 14:] = 0  # two padding tokens
    return {
        "input_ids": rng.integers(1, 300, [batch, length]).astype(np.int32),
        "token_type_ids": np.ones([batch, length], np.int32),
        "input_mask": mask,
        "blank_positions": positions,
        "blank_in_window": (positions > 0).astype(np.int32),
        "target_blank": np.array([1, 2, 0], np.int32),
        "example_mask": np.array([1, 1, 0], np.int32),
    }


def count(tree) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


def test_default_config_is_bert_base_chinese():
    """102,267,648 encoder parameters: bert-base-chinese's BertModel, pooler included."""
    model = ClozeModel(registry.network(BertConfig(), "cloze"))
    batch = {
        k: jnp.asarray(v[:, :8] if v.ndim == 2 and v.shape[1] == 16 else v)
        for k, v in make_batch().items()
    }
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), batch))
    params = jax.tree.map(
        lambda x: x.value if hasattr(x, "value") else x,
        shapes["params"],
        is_leaf=lambda x: hasattr(x, "value"),
    )
    assert count(params["bert"]) == 102_267_648
    assert count(params["cloze_head"]) == 768 + 1  # one learned vector and its bias
    embeddings = params["bert"]["embeddings"]
    assert embeddings["word_embeddings"]["embedding"].shape == (21128, 768)
    assert embeddings["position_embeddings"]["embedding"].shape == (512, 768)
    assert embeddings["token_type_embeddings"]["embedding"].shape == (2, 768)


class Jitted:
    """A ClozeModel's init, score_batch and loss_fn, each jitted once (one compile each, not
    one per op) for the tests of this module that share it."""

    def __init__(self, config: BertConfig):
        model = ClozeModel(registry.network(config, "cloze"))

        def jit(fn):
            return jax.jit(fn, compiler_options=FAST_COMPILE)

        self.params = meta.unbox(jit(model.init)(jax.random.key(1), make_batch())["params"])
        self.score_batch = jit(model.score_batch)
        self.loss_fn = jit(model.loss_fn)
        self.loss_grad = jit(jax.grad(lambda p, batch: model.loss_fn(p, batch, None)[0]))


@pytest.fixture(scope="module")
def tiny():
    model = Jitted(TINY)
    return model, model.params


def test_loss_is_cross_entropy_over_the_windows_blanks_only(tiny):
    model, params = tiny
    batch = make_batch()
    logits = np.asarray(model.score_batch(params, batch))
    loss_sum, metrics = model.loss_fn(params, batch, None)
    expected = 0.0
    for row in range(2):  # row 2 is padding (example_mask 0)
        blanks = np.flatnonzero(batch["blank_in_window"][row])
        scores = logits[row, blanks]
        log_probs = scores - np.log(np.sum(np.exp(scores - scores.max()))) - scores.max()
        expected -= log_probs[list(blanks).index(batch["target_blank"][row])]
    assert float(loss_sum) == pytest.approx(expected, rel=1e-5)
    assert float(metrics["examples"]) == 2
    # Slots outside the window are masked far below any real logit.
    assert logits[0, 2] <= -1e4 and logits[0, 5] <= -1e4


def test_padding_tokens_do_not_change_scores(tiny):
    model, params = tiny
    batch = make_batch()
    changed = dict(batch, input_ids=batch["input_ids"].copy())
    changed["input_ids"][:, 14:] = 7
    np.testing.assert_allclose(
        model.score_batch(params, batch), model.score_batch(params, changed), rtol=1e-5, atol=1e-5
    )


def test_dropout_is_active_only_with_an_rng():
    model = Jitted(BertConfig(**{**TINY.__dict__, "hidden_dropout": 0.5}))
    params = model.params
    batch = make_batch()
    a, _ = model.loss_fn(params, batch, jax.random.key(0))
    b, _ = model.loss_fn(params, batch, jax.random.key(1))
    c, _ = model.loss_fn(params, batch, None)
    d, _ = model.loss_fn(params, batch, None)
    assert float(a) != float(b) and float(c) == float(d)


def test_the_cloze_heads_bias_has_no_gradient(tiny):
    """Every blank's logit carries the same bias, and a softmax over the blanks ignores a
    shift of all logits alike: the loss does not depend on the bias, its gradient is only
    float32 rounding (why the script-parity test does not compare it; tests/
    reference_parity/README.md), while the head's kernel gets a real gradient."""
    model, params = tiny
    batch = make_batch()
    grads = model.loss_grad(params, batch)["cloze_head"]
    assert np.abs(np.asarray(grads["bias"])).max() <= 1e-6
    assert np.abs(np.asarray(grads["kernel"])).max() > 1e-3
    shifted = jax.tree.map(lambda x: x, params)
    shifted["cloze_head"] = {**params["cloze_head"], "bias": params["cloze_head"]["bias"] + 3.0}
    loss, _ = model.loss_fn(params, batch, None)
    assert float(model.loss_fn(shifted, batch, None)[0]) == pytest.approx(float(loss), rel=1e-6)
