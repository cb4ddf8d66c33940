"""`attention_by_head`: the inference attention of the BERT-shaped encoders on CPU."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.cpu import inference as cpu_inference
from cmrcx.models.bert import BertConfig, BertSelfAttention


def einsum_attention(query, key, value, bias):
    """The training form: whole [batch, heads, q, k] scores, float32 softmax."""
    scores = jnp.einsum("bqhd,bkhd->bhqk", query, key) + bias.astype(query.dtype)
    probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(query.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, value)


def inputs(batch, q_len, k_len, heads, kv, dtype, seed=0):
    rng = np.random.default_rng(seed)
    query, key, value = (
        jnp.asarray(rng.standard_normal((batch, length, heads, kv)), dtype)
        for length in (q_len, k_len, k_len)
    )
    real = np.ones((batch, k_len), bool)
    real[0, k_len - 3 :] = False  # row 0 ends in padding
    bias = jnp.where(jnp.asarray(real)[:, None, None, :], 0.0, jnp.finfo(dtype).min)
    return query, key, value, bias.astype(dtype)


@pytest.mark.parametrize(
    "dtype, tolerance", [(jnp.float32, 1e-5), (jnp.bfloat16, 2e-2)], ids=["float32", "bfloat16"]
)
@pytest.mark.parametrize("step", [1, 4, 64], ids=["one pair", "remainder", "all pairs"])
def test_equals_the_einsum_form(monkeypatch, dtype, tolerance, step):
    """Steps of 1, 4 (6 pairs: one full step and a remainder of 2) and all pairs at once;
    query and key lengths differ, and padded keys get no weight."""
    monkeypatch.setattr(cpu_inference, "SCORES_PER_STEP", step * 5 * 7)
    query, key, value, bias = inputs(batch=2, q_len=5, k_len=7, heads=3, kv=4, dtype=dtype)
    mine = cpu_inference.attention_by_head(query, key, value, bias)
    assert mine.shape == query.shape and mine.dtype == dtype
    expected = einsum_attention(query, key, value, bias)
    np.testing.assert_allclose(np.float32(mine), np.float32(expected), atol=tolerance)
    # The padded keys of row 0 carry no weight: changing their values changes nothing.
    changed = value.at[0, -3:].set(100.0)
    np.testing.assert_array_equal(
        np.float32(cpu_inference.attention_by_head(query, key, changed, bias)), np.float32(mine)
    )


def test_bias_other_than_a_padding_mask_is_refused():
    query, key, value, bias = inputs(batch=2, q_len=5, k_len=7, heads=3, kv=4, dtype=jnp.float32)
    per_query = jnp.broadcast_to(bias, (2, 1, 5, 7))
    with pytest.raises(ValueError, match=r"\[batch, 1, 1, k\] only"):
        cpu_inference.attention_by_head(query, key, value, per_query)


def test_bert_runs_it_only_in_inference_where_the_trainer_turns_it_on(monkeypatch):
    """Off by default (the einsums); with `one_cpu_inference(True)` inference goes
    through attention_by_head and training still runs the einsums, with the same output
    when dropout is off."""
    config = BertConfig(hidden_size=32, num_heads=4, attention_dropout=0.0, hidden_dropout=0.0)
    hidden = jax.random.normal(jax.random.key(0), (2, 6, 32))
    bias = jnp.zeros((2, 1, 1, 6)).at[1, ..., 4:].set(jnp.finfo(jnp.float32).min)
    layer = BertSelfAttention(config)
    params = layer.init(jax.random.key(1), hidden, bias, True)
    calls, attention_by_head = [], cpu_inference.attention_by_head

    def counted(*args):
        calls.append(args[0].shape)
        return attention_by_head(*args)

    monkeypatch.setattr("cmrcx.cpu.inference.attention_by_head", counted)
    default = layer.apply(params, hidden, bias, True)
    assert calls == []
    with cpu_inference.one_cpu_inference(True):
        inference = layer.apply(params, hidden, bias, True)
        assert calls and set(calls) == {(2, 6, 4, 8)}
        traced = len(calls)
        training = layer.apply(params, hidden, bias, False, rngs={"dropout": jax.random.key(2)})
        assert len(calls) == traced
    assert not cpu_inference.enabled()
    np.testing.assert_allclose(inference, training, atol=1e-6)
    np.testing.assert_allclose(inference, default, atol=1e-6)
