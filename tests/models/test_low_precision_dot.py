"""Dense layers of bfloat16 operands ask for a float32 result (`low_precision_dot_general`):
the same values and gradients as `lax.dot_general`, and every matmul, forward and
backward, of bfloat16 operands with a float32 result (XLA:CPU's native bfloat16 kernel)."""

from __future__ import annotations

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.models.common import REMAT_POLICIES, low_precision_dot_general

# lhs [2, 16, 4, 8] x rhs [4, 8, 32]: the attention output's contraction of two axes.
DENSE = (((2, 3), (0, 1)), ((), ()))


def _operands(dtype):
    lhs = jax.random.normal(jax.random.key(0), (2, 16, 4, 8)).astype(dtype)
    rhs = jax.random.normal(jax.random.key(1), (4, 8, 32)).astype(dtype)
    return lhs, rhs


def _loss(dot, lhs, rhs):
    return jnp.sum(jnp.tanh(dot(lhs, rhs, DENSE).astype(jnp.float32)) ** 2)


def _dots(jaxpr) -> list:
    """(operand dtypes, preferred_element_type) of every dot_general, sub-jaxprs included."""
    found = [
        (tuple(str(v.aval.dtype) for v in eqn.invars), str(eqn.params["preferred_element_type"]))
        for eqn in jaxpr.eqns
        if eqn.primitive.name == "dot_general"
    ]
    for sub in jax.extend.core.subjaxprs(jaxpr):
        found += _dots(sub)
    return found


def test_float32_operands_are_lax_dot_general_unchanged():
    lhs, rhs = _operands(jnp.float32)
    np.testing.assert_array_equal(
        low_precision_dot_general(lhs, rhs, DENSE), jax.lax.dot_general(lhs, rhs, DENSE)
    )
    jaxpr = jax.make_jaxpr(lambda a, b: low_precision_dot_general(a, b, DENSE))(lhs, rhs)
    assert _dots(jaxpr.jaxpr) == [(("float32", "float32"), "None")]


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_values_and_gradients_are_those_of_lax_dot_general(dtype):
    lhs, rhs = _operands(dtype)
    got = low_precision_dot_general(lhs, rhs, DENSE)
    want = jax.lax.dot_general(lhs, rhs, DENSE)
    assert got.dtype == want.dtype == dtype and got.shape == want.shape == (2, 16, 32)
    np.testing.assert_allclose(np.float32(got), np.float32(want), rtol=1e-2, atol=1e-2)
    grads = jax.grad(lambda a, b: _loss(low_precision_dot_general, a, b), (0, 1))(lhs, rhs)
    reference = jax.grad(lambda a, b: _loss(jax.lax.dot_general, a, b), (0, 1))(lhs, rhs)
    for mine, theirs, operand in zip(grads, reference, (lhs, rhs), strict=True):
        assert mine.dtype == operand.dtype and mine.shape == operand.shape
        scale = float(jnp.max(jnp.abs(theirs.astype(jnp.float32))))
        np.testing.assert_allclose(np.float32(mine), np.float32(theirs), atol=2e-2 * scale)


def test_every_matmul_of_the_step_is_bfloat16_in_float32_out():
    """The forward and both backward matmuls: bf16 operands, float32 result, rounded
    after; `lax.dot_general` itself asks for none, so a bf16 one (what XLA:CPU upcasts)."""
    lhs, rhs = _operands(jnp.bfloat16)
    step = jax.make_jaxpr(jax.grad(lambda a, b: _loss(low_precision_dot_general, a, b), (0, 1)))
    assert _dots(step(lhs, rhs).jaxpr) == [(("bfloat16", "bfloat16"), "float32")] * 3
    plain = jax.make_jaxpr(jax.grad(lambda a, b: _loss(jax.lax.dot_general, a, b), (0, 1)))
    assert {p for _, p in _dots(plain(lhs, rhs).jaxpr)} == {"None"}


def test_other_contractions_go_to_lax_dot_general():
    """A batched matmul (attention's scores) is not a dense layer's contraction."""
    query = jnp.ones((2, 4, 8), jnp.bfloat16)
    batched = (((2,), (2,)), ((0,), (0,)))
    jaxpr = jax.make_jaxpr(lambda q: low_precision_dot_general(q, q, batched))(query)
    assert _dots(jaxpr.jaxpr) == [(("bfloat16", "bfloat16"), "None")]


def test_remat_dots_keeps_the_forward_matmul():
    """Under the "dots" remat policy the backward pass does not run the forward matmul
    again (the custom VJP hides it from the policy; its name keeps it): three matmuls
    in a step that returns the loss too, as with `lax.dot_general`."""
    lhs, rhs = _operands(jnp.bfloat16)
    policy = REMAT_POLICIES["dots"]
    for dot in (low_precision_dot_general, jax.lax.dot_general):
        loss = jax.checkpoint(lambda a, b, dot=dot: _loss(dot, a, b), policy=policy)
        text = jax.jit(jax.value_and_grad(loss, (0, 1))).lower(lhs, rhs).as_text()
        assert text.count("stablehlo.dot_general") == 3, dot


def test_a_bf16_bert_layer_runs_its_four_dense_matmuls_through_it():
    """QKV (fused), attention output, intermediate and output of a bf16 BERT layer ask
    for float32 results; only attention's two batched matmuls keep bf16 results."""
    from cmrcx.models.bert import BertConfig, BertLayer  # noqa: PLC0415

    config = BertConfig(hidden_size=32, num_heads=4, intermediate_size=64, dtype="bfloat16")
    layer = BertLayer(config, deterministic=True)
    hidden, bias = jnp.ones((2, 8, 32), jnp.bfloat16), jnp.zeros((2, 1, 1, 8))
    params = layer.init(jax.random.key(0), hidden, bias)
    dots = _dots(jax.make_jaxpr(layer.apply)(params, hidden, bias).jaxpr)
    assert sorted(p for _, p in dots) == ["bfloat16"] * 2 + ["float32"] * 4, dots


@pytest.mark.parametrize("family", ["albert", "gpt2", "t5_stack"])
def test_the_other_families_dense_layers_use_it(family):
    """Each family's one dense-layer helper hands its matmul to it."""
    import importlib  # noqa: PLC0415

    module = importlib.import_module(f"cmrcx.models.{family}")
    source = importlib.util.find_spec(module.__name__).origin
    with open(source, encoding="utf-8") as f:
        text = f.read()
    helper = text[text.index("def _dense(") :]
    helper = helper[: helper.index("\n\n\n")]
    assert "dot_general=low_precision_dot_general" in helper
