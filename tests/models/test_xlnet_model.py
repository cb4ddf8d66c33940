"""The Flax XLNet encoder on its own: logical axis names, remat, bfloat16, the relative
shift. Parity with transformers' PyTorch XLNet is tests/weights/test_xlnet_conversion.py."""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.models import registry
from cmrcx.models.xlnet import XLNetConfig, XLNetEncoder, rel_shift, relative_positions
from tests.support import FAST_COMPILE

TINY = XLNetConfig(vocab_size=61, d_model=16, num_layers=2, num_heads=2, d_inner=24)


def batch(length: int = 9):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, TINY.vocab_size, [2, length])
    mask = np.ones_like(ids)
    mask[1, :3] = 0  # left padding
    types = np.zeros_like(ids)
    types[:, length // 2 :] = 1
    types[:, -1] = 2
    return ids, types, mask


def init(module, *inputs):
    return jax.jit(module.init, compiler_options=FAST_COMPILE)(jax.random.key(0), *inputs)


def apply(module, variables, *inputs):
    return jax.jit(module.apply, compiler_options=FAST_COMPILE)(variables, *inputs)


@pytest.fixture(scope="module")
def variables():
    return init(XLNetEncoder(TINY), *batch())


def test_every_parameter_has_logical_axis_names(variables):
    boxed = variables["params"]
    leaves = jax.tree.leaves(boxed, is_leaf=lambda x: isinstance(x, nn.LogicallyPartitioned))
    assert leaves and all(isinstance(leaf, nn.LogicallyPartitioned) for leaf in leaves)
    names = nn.get_partition_spec(boxed)["layers"]["rel_attn"]["q"]
    assert tuple(names) == ("layers", "embed", "heads", "kv")


def test_relative_shift_puts_distance_i_minus_j_at_i_j():
    length = 5
    # Scores equal to the relative distance of each of the 2L positions: L, ..., 1 - L.
    distances = np.arange(length, -length, -1.0)
    scores = np.broadcast_to(distances, (1, 1, length, 2 * length))
    shifted = np.asarray(rel_shift(jnp.asarray(scores), length))[0, 0]
    i, j = np.indices((length, length))
    np.testing.assert_array_equal(shifted, i - j)
    assert relative_positions(TINY, length).shape == (2 * length, TINY.d_model)


def test_remat_changes_memory_not_numbers(variables):
    ids, types, mask = batch()
    params = nn.unbox(variables)["params"]

    def loss(p, policy):
        config = dataclasses.replace(TINY, remat_policy=policy)
        hidden, pooled = XLNetEncoder(config).apply({"params": p}, ids, types, mask)
        return jnp.sum(hidden**2) + jnp.sum(pooled)

    grad = jax.jit(jax.value_and_grad(loss), static_argnums=1, compiler_options=FAST_COMPILE)
    plain = grad(params, "none")
    for policy in ("full", "dots"):
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
            plain,
            grad(params, policy),
        )


def test_bfloat16_compute_keeps_float32_parameters(variables):
    ids, types, mask = batch()
    config = dataclasses.replace(TINY, dtype="bfloat16")
    assert {x.dtype for x in jax.tree.leaves(nn.unbox(variables))} == {jnp.dtype("float32")}
    hidden, _ = apply(XLNetEncoder(config), variables, ids, types, mask)
    want, _ = apply(XLNetEncoder(TINY), variables, ids, types, mask)
    assert hidden.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(hidden, np.float32), want, atol=0.1)


def test_classification_head_reads_the_last_token():
    """Left padding: the summary is the state of the last position (`<cls>`); changing
    a padded token's id changes nothing the head reads."""
    ids, types, mask = batch()
    network = registry.network(TINY, "classification", num_classes=3)
    head_variables = init(network, ids, types, mask)
    other = ids.copy()
    other[1, 0] = (other[1, 0] + 1) % TINY.vocab_size  # a padded position
    both = apply(network, head_variables, np.stack([ids, other]).reshape(4, -1),
                 np.tile(types, (2, 1)), np.tile(mask, (2, 1)))  # fmt: skip
    np.testing.assert_allclose(both[:2], both[2:], atol=1e-6)
