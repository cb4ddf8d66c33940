"""`activation_apart`: the feed-forward activation as one XLA:CPU fusion of its own in the
trainer's scoring step on one CPU device, with the same values bit for bit."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.cpu import inference as cpu_inference
from cmrcx.models.bert import ACTIVATIONS, BertConfig, BertLayer


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_the_values_are_the_activation_s_bit_for_bit(name):
    activation = ACTIVATIONS[name]
    x = jax.random.normal(jax.random.key(0), (64, 96)) * 6
    x = x.at[0, :4].set(jnp.array([jnp.nan, jnp.inf, -jnp.inf, -0.0]))
    plain = jax.jit(activation)(x)
    apart = jax.jit(functools.partial(cpu_inference.activation_apart, activation))(x)
    np.testing.assert_array_equal(np.asarray(apart), np.asarray(plain))  # NaN where NaN


def test_a_bert_base_layer_computes_the_gelu_in_one_fusion():
    """At BERT-base's scoring shape (batch 8 x 512: the sizes at which XLA:CPU fuses the
    feed-forward matmuls with YNNPACK; small layers fuse otherwise) the activation is one
    loop fusion writing one [batch, length, intermediate] array for the next matmul.
    Compiled only, not run."""
    batch, length, intermediate = 8, 512, 3072
    layer = BertLayer(BertConfig(intermediate_size=intermediate), deterministic=True)
    hidden = jax.ShapeDtypeStruct((batch, length, 768), jnp.float32)
    bias = jax.ShapeDtypeStruct((batch, 1, 1, length), jnp.float32)
    params = jax.eval_shape(layer.init, jax.random.key(0), hidden, bias)

    def loop_fusions_of_the_intermediate_shape(enabled):
        with cpu_inference.one_cpu_inference(enabled):
            text = jax.jit(layer.apply).lower(params, hidden, bias).compile().as_text()
        entry = text[text.index("ENTRY") :].splitlines()
        shape = f"f32[{batch},{length},{intermediate}]"
        return [
            line.split("=")[0].strip()
            for line in entry
            if "kind=kLoop" in line and shape in line.split("fusion(")[0]
        ]

    assert len(loop_fusions_of_the_intermediate_shape(True)) == 1
    # Why it exists: without it XLA:CPU splits the GeLU in two passes (x + bias, erfc)
    # and leaves the multiplies to the next matmul's YNNPACK fusion.
    assert len(loop_fusions_of_the_intermediate_shape(False)) == 2


def test_the_layer_applies_it_only_in_inference_where_the_trainer_turns_it_on(monkeypatch):
    """Off by default; with `one_cpu_inference(True)` only the deterministic layer takes it."""
    config = BertConfig(
        hidden_size=32, num_heads=4, intermediate_size=64, hidden_dropout=0.0, attention_dropout=0.0
    )
    hidden = jax.random.normal(jax.random.key(0), (2, 6, 32))
    bias = jnp.zeros((2, 1, 1, 6))
    params = BertLayer(config).init(jax.random.key(1), hidden, bias)
    calls, activation_apart = [], cpu_inference.activation_apart

    def counted(activation, x):
        calls.append(x.shape)
        return activation_apart(activation, x)

    monkeypatch.setattr("cmrcx.cpu.inference.activation_apart", counted)
    default = BertLayer(config, deterministic=True).apply(params, hidden, bias)
    assert calls == []
    with cpu_inference.one_cpu_inference(True):
        inference = BertLayer(config, deterministic=True).apply(params, hidden, bias)
        assert calls == [(2, 6, 64)]
        BertLayer(config, deterministic=False).apply(
            params, hidden, bias, rngs={"dropout": jax.random.key(2)}
        )
        assert calls == [(2, 6, 64)]
    np.testing.assert_allclose(inference[0], default[0], atol=1e-6)
