"""`cmrcx.models.attention`: the einsums or `jax.nn.dot_product_attention`, by platform and
setting; both give the same outputs and gradients in every routed family (CPU: XLA's kernel)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.models import attention, attention_check
from cmrcx.models.bert import BertEncoder
from tests.support import FAST_COMPILE


@pytest.mark.parametrize(
    "chosen, platform, dropout, expected",
    [
        ("auto", "cpu", False, False),
        ("auto", "gpu", False, True),
        ("auto", "tpu", False, True),
        ("auto", "gpu", True, False),  # the API has no dropout
        ("einsum", "gpu", False, False),
        ("dot_product", "cpu", False, True),
        ("dot_product", "tpu", True, False),
    ],
)
def test_the_platform_and_the_setting_choose(chosen, platform, dropout, expected):
    with attention.implementation(chosen):
        assert attention.use_dot_product(dropout, platform) is expected
    assert attention.current_implementation() == "auto"  # restored


def test_an_unknown_implementation_is_refused():
    with pytest.raises(ValueError, match="attention_implementation 'flash'"):
        with attention.implementation("flash"):
            pass


def test_the_kernel_is_xla_off_nvidia_and_in_float32():
    query = jnp.zeros((1, 1, 1, 16), jnp.float32)
    assert attention.kernel_for(query, "cpu") == "xla"
    assert attention.kernel_for(query, "tpu") == "xla"
    assert attention.kernel_for(query, "gpu") == "xla"  # cuDNN takes half precision only


def _qkv(dtype, batch=2, q_len=6, k_len=6, heads=2, width=8, seed=0):
    rng = np.random.default_rng(seed)
    return [
        jnp.asarray(rng.standard_normal((batch, n, heads, width)), dtype)
        for n in (q_len, k_len, k_len)
    ]


def test_the_cudnn_bias_folds_mask_and_bias_into_the_same_attention():
    """What the cuDNN call gets (one [batch, heads, q, k] bias in the operands' dtype, the
    mask folded in) gives, through XLA's kernel, what bias and mask give separately: T5's
    per-head relative bias with a causal and padding mask, and BERT's finfo.min padding bias."""
    query, key, value = _qkv(jnp.float32)
    real = jnp.asarray([[1, 1, 1, 1, 0, 0], [1] * 6]) > 0
    causal = jnp.tril(jnp.ones((6, 6), bool))
    mask = causal[None, None] & real[:, None, None, :]
    bias = jnp.asarray(np.random.default_rng(1).standard_normal((1, 2, 6, 6)), jnp.float32)
    padding_bias = jnp.where(real, 0.0, jnp.finfo(jnp.float32).min)[:, None, None, :]

    @functools.partial(jax.jit, compiler_options=FAST_COMPILE)  # one compile, not one per op
    def folded_expected_mine(separate):
        folded = attention._cudnn_bias(query, key, separate.get("bias"), separate.get("mask"))
        expected = attention.dot_product_attention(query, key, value, kernel="xla", **separate)
        mine = attention.dot_product_attention(query, key, value, bias=folded, kernel="xla")
        return folded, expected, mine

    for separate in ({"bias": bias, "mask": mask}, {"bias": padding_bias}, {"mask": mask}):
        folded, expected, mine = folded_expected_mine(separate)
        assert folded.shape[::2] == (2, 6) and folded.shape[3] == 6
        np.testing.assert_allclose(np.asarray(mine), np.asarray(expected), atol=1e-6)


@pytest.fixture
def dot_product_calls(monkeypatch):
    """Counts the calls of jax.nn.dot_product_attention (as traced)."""
    calls = []
    real = jax.nn.dot_product_attention

    def counted(*args, **kwargs):
        calls.append(kwargs.get("implementation"))
        return real(*args, **kwargs)

    monkeypatch.setattr(attention.jax.nn, "dot_product_attention", counted)
    return calls


@pytest.mark.parametrize(
    "family, dtype",
    [
        ("bert", "float32"),
        *[
            pytest.param(family, dtype, marks=pytest.mark.slow)
            for family in attention_check.FAMILIES
            for dtype in ("float32", "bfloat16")
            if (family, dtype) != ("bert", "float32")
        ],
    ],
)
def test_both_implementations_agree_in_every_family(family, dtype, dot_product_calls):
    """Forward output and every parameter's gradient, with a padded row; GPT-2 and T5's
    decoder causal, T5 with its relative position bias. The dot_product side really runs
    jax.nn.dot_product_attention (XLA's kernel on CPU). float32: the same products in
    another order (relative 1e-5). bfloat16: the einsums round the scores to bf16, XLA's
    kernel keeps them float32, so the two differ by bf16's rounding (T5's gradients by 6%
    of their largest; LongLM-shaped T5 at 12 tokens: forward 0.8% from float32 against the
    einsums' 0.6%, gradients 4.8% against 6.4%); the kernel must be as near the float32
    result as the einsums, within a factor 2 (bf16's noise, not a masking error)."""
    # float32 (the default suite's case) at level 0; bf16's margins as they were measured.
    options = FAST_COMPILE if dtype == "float32" else None
    result = attention_check.compare_implementations(
        [family], dtype=dtype, batch=2, length=12, compiler_options=options
    )
    found = result[family]
    assert found["kernel"] == "xla"
    assert dot_product_calls and set(dot_product_calls) == {"xla"}
    if dtype == "float32":
        assert found["forward"]["max_rel"] < 1e-5, result
        assert found["grad"]["max_rel"] < 1e-5, result
        return
    assert found["forward"]["max_rel"] < 2e-2, result
    assert found["grad"]["max_rel"] < 0.1, result
    for part in ("forward", "grad"):
        mine = found["dot_product_vs_float32"][part]["max_rel"]
        assert mine <= 2 * found["einsum_vs_float32"][part]["max_rel"], result


@pytest.mark.slow
def test_a_dot_product_attention_ignoring_the_mask_would_be_seen(monkeypatch):
    """The comparison is sharp enough to see a kernel that drops the padding."""
    real = attention.dot_product_attention

    def unmasked(query, key, value, **kwargs):
        return real(query, key, value, scale=kwargs.get("scale", 1.0))

    monkeypatch.setattr(attention, "dot_product_attention", unmasked)
    result = attention_check.compare_implementations(["bert"], batch=2, length=12)
    assert result["bert"]["forward"]["max_rel"] > 1e-3


def test_training_with_attention_dropout_keeps_the_einsums(dot_product_calls):
    config = attention_check.SMALL["bert"]  # attention_dropout 0.1
    ids = jnp.ones((2, 8), jnp.int32)
    model = BertEncoder(config)

    def jit(fn):  # traced once (the calls are counted as traced), compiled once
        return jax.jit(fn, compiler_options=FAST_COMPILE)

    with attention.implementation("dot_product"):
        params = jit(model.init)(jax.random.key(0), ids, ids * 0, ids)  # inference: routed
        layers = len(dot_product_calls)
        assert layers > 0
        jit(lambda p, k: model.apply(p, ids, ids * 0, ids, False, rngs={"dropout": k}))(
            params, jax.random.key(1)
        )
        assert len(dot_product_calls) == layers  # training with dropout: none
        jit(lambda p: model.apply(p, ids, ids * 0, ids, True))(params)
        assert len(dot_product_calls) == 2 * layers


def test_the_comparison_is_offered_by_the_attention_module_and_names_bad_families():
    with pytest.raises(ValueError, match="family 'xlnet': use one of bert, albert, gpt2, t5"):
        attention_check.compare_implementations(["xlnet"])
