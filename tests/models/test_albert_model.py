"""The ALBERT network: one shared layer (one parameter copy whatever the depth), both
embedding layouts, and the task heads of `cmrcx.models.heads` over it through the registry.

Parity with transformers is in tests/weights/test_albert_conversion.py.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.models import registry
from cmrcx.models.albert import AlbertConfig, AlbertEncoder
from tests.support import FAST_COMPILE

TINY = dict(
    vocab_size=64,
    embedding_size=8,
    hidden_size=16,
    num_heads=4,
    intermediate_size=32,
    max_position_embeddings=32,
    hidden_dropout=0.1,
    attention_dropout=0.1,
)


def fast_jit(fn):
    """fn jitted (one compile, not one per op) at XLA's optimisation level 0: these tests
    check semantics, not codegen, and level 0 compiles faster."""
    return jax.jit(fn, compiler_options=FAST_COMPILE)


def batch(shape=(2, 10), seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, TINY["vocab_size"], shape)
    types = np.zeros_like(ids)
    types[..., shape[-1] // 2 :] = 1
    mask = np.ones_like(ids)
    mask[..., -3:] = 0
    return ids, types, mask


def param_count(config: AlbertConfig) -> int:
    ids, types, mask = batch()
    shapes = jax.eval_shape(
        lambda: AlbertEncoder(config).init(jax.random.key(0), ids, types, mask)["params"]
    )
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(shapes))


@pytest.mark.parametrize("layout", ["albert", "albert_zh"])
def test_one_parameter_copy_whatever_the_depth(layout):
    counts = {n: param_count(AlbertConfig(**TINY, num_layers=n, embedding_layout=layout))
              for n in (1, 4, 12)}  # fmt: skip
    assert len(set(counts.values())) == 1, counts
    e, h, v, f = TINY["embedding_size"], TINY["hidden_size"], TINY["vocab_size"], 32
    positions, width = TINY["max_position_embeddings"], e if layout == "albert" else h
    embeddings = v * e + (positions + 2) * width + 2 * width
    projection = e * h + (h if layout == "albert" else 0)  # Google's Dense has a bias
    layer = 4 * (h * h + h) + 2 * 2 * h + (h * f + f) + (f * h + h)
    assert counts[12] == embeddings + projection + layer + h * h + h  # + the pooler


def test_layers_differ_only_in_their_input():
    """Depth changes the output (the layer is applied num_layers times) with the same params."""
    ids, types, mask = batch()
    two = AlbertEncoder(AlbertConfig(**TINY, num_layers=2))
    three = AlbertEncoder(AlbertConfig(**TINY, num_layers=3))
    params = fast_jit(two.init)(jax.random.key(1), ids, types, mask)
    hidden_two, _ = fast_jit(two.apply)(params, ids, types, mask)
    hidden_three, _ = fast_jit(three.apply)(params, ids, types, mask)  # the same tree fits
    assert hidden_two.shape == hidden_three.shape == (2, 10, 16)
    assert not np.allclose(hidden_two, hidden_three)


@pytest.mark.slow  # default-suite budget (15 min on 2 cores)
def test_dropout_draws_a_fresh_mask_per_layer_and_step():
    config = AlbertConfig(**TINY, num_layers=3)
    ids, types, mask = batch()
    model = AlbertEncoder(config)
    params = model.init(jax.random.key(0), ids, types, mask)

    @jax.jit
    def run(key):
        return model.apply(params, ids, types, mask, False, rngs={"dropout": key})[0]

    assert not np.allclose(run(jax.random.key(1)), run(jax.random.key(2)))
    np.testing.assert_array_equal(run(jax.random.key(1)), run(jax.random.key(1)))


# The three heads of CLUE's problem types, one compiled forward for all (the gradients through
# the shared layer: test_remat_...); the albert_zh layout (another embedding module, same
# heads) in the slow suite.
@pytest.mark.parametrize("layout", ["albert", pytest.param("albert_zh", marks=pytest.mark.slow)])
def test_classification_span_and_multiple_choice_heads_run_over_albert(layout):
    config = AlbertConfig(**TINY, num_layers=2, embedding_layout=layout)
    single, choices = batch(), batch((2, 3, 10))
    cases = {  # problem -> (network, inputs, output shape, the head's own layer)
        "classification": (registry.network(config, "classification", num_classes=3), single,
                           (2, 3), "classifier"),
        "span": (registry.network(config, "span"), single, (2, 2, 10), "qa_outputs"),
        "multiple_choice": (registry.network(config, "multiple_choice"), choices, (2, 3),
                            "classifier"),
    }  # fmt: skip

    @fast_jit
    def init(key):
        return {p: net.init(key, *inputs)["params"] for p, (net, inputs, _, _) in cases.items()}

    @fast_jit
    def run(params):
        return {
            p: net.apply({"params": params[p]}, *inputs, False, rngs={"dropout": jax.random.key(3)})
            for p, (net, inputs, _, _) in cases.items()
        }

    params = nn.meta.unbox(init(jax.random.key(0)))
    outputs = run(params)
    for problem, (_, _, shape, head) in cases.items():
        assert set(params[problem]) == {"albert", head}, problem
        assert outputs[problem].shape == shape and outputs[problem].dtype == jnp.float32
        assert np.all(np.isfinite(outputs[problem])), problem
    # The heads' encoder is ALBERT's: the shared layer once, in each head's tree.
    assert params["span"]["albert"]["layer"]["attention"]["query"]["kernel"].shape == (16, 4, 4)


@pytest.mark.parametrize("remat_policy", ["full", pytest.param("dots", marks=pytest.mark.slow)])
def test_remat_and_bfloat16_give_the_same_gradients(remat_policy):
    ids, types, mask = batch()
    base = AlbertEncoder(AlbertConfig(**TINY, num_layers=3))
    params = fast_jit(base.init)(jax.random.key(0), ids, types, mask)

    def grads(model):
        return fast_jit(jax.grad(lambda p: jnp.sum(model.apply(p, ids, types, mask)[0] ** 2)))(
            params
        )

    want = grads(base)
    got = grads(AlbertEncoder(AlbertConfig(**TINY, num_layers=3, remat_policy=remat_policy)))
    # Against the largest gradient: some are zero up to rounding (the key bias's: softmax
    # ignores a shift shared by every key), so they carry only float32 noise either way.
    scale = max(float(np.abs(a).max()) for a in jax.tree.leaves(want))
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5 * scale, rtol=0)
    half = AlbertEncoder(AlbertConfig(**TINY, num_layers=3, dtype="bfloat16"))
    hidden, pooled = fast_jit(half.apply)(params, ids, types, mask)
    assert hidden.dtype == jnp.bfloat16 and pooled.shape == (2, 16)


def test_bad_configs_are_named():
    with pytest.raises(ValueError, match="embedding_layout 'bert'"):
        AlbertConfig(embedding_layout="bert")
    with pytest.raises(ValueError, match="hidden_act 'swish'"):
        AlbertConfig(hidden_act="swish")
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        AlbertConfig(hidden_size=30, num_heads=4)


def test_registry_row():
    row = registry.family("albert")
    assert row is registry.family_of(AlbertConfig()) is registry.family_of_hf_type("albert")
    assert registry.family_of_tf_release(["albert_config_tiny.json", "vocab.txt"]) is row
    assert registry.family_of_tf_release(["bert_config.json"]) is None  # BERT: the default
    heads = row.head_options(AlbertConfig(classifier_dropout=0.2))
    assert heads == registry.HeadOptions(0.2, 0.02)
