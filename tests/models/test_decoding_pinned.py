"""Decoding pinned: the tokens greedy, sampling and beam search give for fixed seeds on
tiny random T5 (LongLM-shaped) and GPT-2 models, recorded before the decoding loop was
sped up. The loop may change how it computes a step (top-k without a
full sort, cache layout, fusion), never what it draws for a seed: a change of these
tokens is a change of behaviour, not of speed. Also: the sort-free `filter_logits` and
`categorical` give the sort-based filter's and jax's arrays, bit for bit.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.models import decoding
from cmrcx.models.gpt2 import GPT2Config, GPT2DecodeModel, GPT2LMHeadModel
from cmrcx.models.t5 import T5Config, T5DecodeModel, T5ForConditionalGeneration

STEPS = 9
T5_CONFIG = T5Config(
    vocab_size=101, d_model=48, d_kv=10, num_heads=3, d_ff=70, num_layers=2,
    num_decoder_layers=3, relative_attention_num_buckets=8, relative_attention_max_distance=20,
    eos_token_id=66,
)  # fmt: skip
GPT2_CONFIG = GPT2Config(
    vocab_size=97, n_positions=40, n_embd=30, n_layer=2, n_head=3, n_inner=44,
    bos_token_id=1, eos_token_id=55, pad_token_id=0,
)  # fmt: skip


def source_batch(vocab: int, left_padded: bool):
    """3 rows of 11 ids, two of them padded (on the left for GPT-2)."""
    rng = np.random.default_rng(4)
    ids = rng.integers(4, vocab, [3, 11]).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    if left_padded:
        mask = mask[:, ::-1].copy()
    return np.where(mask > 0, ids, 0), mask


def randomised(params, seed: int):
    """Flax's init with every layer-norm scale drawn from U(0.5, 1.5): with unit
    scales the tiny models repeat one token; these vary their choices."""
    leaves, tree = jax.tree.flatten_with_path(params)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    return jax.tree.unflatten(tree, [
        jax.random.uniform(key, x.shape, x.dtype, 0.5, 1.5)
        if "scale" in jax.tree_util.keystr(path) else x
        for (path, x), key in zip(leaves, keys, strict=True)
    ])  # fmt: skip


@pytest.fixture(scope="module")
def t5():
    ids, mask = source_batch(T5_CONFIG.vocab_size, left_padded=False)
    network = T5ForConditionalGeneration(T5_CONFIG)
    params = jax.jit(network.init)(jax.random.key(0), ids, mask, ids[:, :2])["params"]
    params = nn.meta.unbox(params)
    return T5DecodeModel(T5_CONFIG), jax.jit(randomised, static_argnums=1)(params, 1), ids, mask


@pytest.fixture(scope="module")
def gpt2():
    ids, mask = source_batch(GPT2_CONFIG.vocab_size, left_padded=True)
    params = nn.meta.unbox(jax.jit(GPT2LMHeadModel(GPT2_CONFIG).init)(jax.random.key(0), ids, mask))
    return (
        GPT2DecodeModel(GPT2_CONFIG),
        jax.jit(randomised, static_argnums=1)(params["params"], 1),
        ids,
        mask,
    )


def row_keys(seed):
    return jax.random.split(jax.random.key(seed), 3)


# name: the decoding call on (model, params, ids, mask).
CASES = {
    "greedy": lambda *a: decoding.greedy(*a, STEPS),
    "top_k": lambda *a: decoding.sample(*a, STEPS, jax.random.key(7), 1.0, 5),
    "top_k_row_keys": lambda *a: decoding.sample(*a, STEPS, row_keys(8), 0.8, 10),
    "top_p": lambda *a: decoding.sample(*a, STEPS, jax.random.key(9), 1.2, 0, 0.9),
    "top_k_top_p": lambda *a: decoding.sample(*a, STEPS, row_keys(10), 1.0, 20, 0.8),
    "unfiltered": lambda *a: decoding.sample(*a, STEPS, jax.random.key(11)),
    "beam": lambda *a: decoding.beam_search(*a, STEPS, 4, 1.0, False),
    "beam_never": lambda *a: decoding.beam_search(*a, STEPS, 3, 2.0, "never"),
}
# (tokens, lengths) of each case, recorded at commit 901b63e (before the speed-up).
PINNED = {
    "t5": {
        "greedy": (
            [
                [91, 91, 91, 91, 91, 91, 91, 91, 91],
                [91, 91, 91, 91, 91, 91, 91, 91, 91],
                [36, 36, 36, 36, 36, 36, 36, 36, 36],
            ],
            [9, 9, 9],
        ),
        "top_k": (
            [
                [4, 66, 0, 0, 0, 0, 0, 0, 0],
                [91, 91, 91, 66, 0, 0, 0, 0, 0],
                [75, 73, 73, 73, 73, 75, 75, 75, 51],
            ],
            [2, 4, 9],
        ),
        "top_k_row_keys": (
            [
                [45, 90, 90, 90, 90, 72, 72, 74, 66],
                [42, 66, 0, 0, 0, 0, 0, 0, 0],
                [38, 38, 38, 38, 34, 67, 67, 67, 80],
            ],
            [9, 2, 9],
        ),
        "top_p": (
            [
                [91, 7, 43, 63, 86, 63, 63, 48, 86],
                [4, 30, 35, 97, 75, 86, 86, 63, 48],
                [40, 4, 66, 0, 0, 0, 0, 0, 0],
            ],
            [9, 9, 3],
        ),
        "top_k_top_p": (
            [
                [15, 4, 4, 4, 4, 82, 63, 68, 0],
                [97, 75, 67, 73, 73, 84, 67, 67, 67],
                [63, 63, 14, 67, 67, 18, 18, 18, 36],
            ],
            [9, 9, 9],
        ),
        "unfiltered": (
            [
                [52, 48, 77, 42, 36, 34, 6, 84, 68],
                [52, 95, 36, 51, 45, 58, 74, 45, 89],
                [36, 36, 75, 73, 73, 73, 73, 70, 44],
            ],
            [9, 9, 9],
        ),
        "beam": (
            [
                [91, 91, 91, 91, 91, 91, 91, 91, 91],
                [91, 91, 91, 91, 91, 91, 91, 91, 91],
                [51, 51, 51, 51, 51, 51, 51, 51, 51],
            ],
            [9, 9, 9],
        ),
        "beam_never": (
            [
                [91, 91, 91, 91, 91, 91, 91, 91, 91],
                [91, 91, 91, 91, 91, 91, 91, 91, 91],
                [51, 51, 51, 51, 51, 51, 51, 51, 51],
            ],
            [9, 9, 9],
        ),
    },
    "gpt2": {
        "greedy": (
            [
                [30, 30, 30, 30, 30, 30, 0, 0, 0],
                [87, 87, 87, 87, 87, 87, 87, 87, 87],
                [72, 72, 72, 72, 72, 72, 72, 72, 72],
            ],
            [9, 9, 9],
        ),
        "top_k": (
            [
                [43, 43, 64, 44, 44, 74, 39, 18, 55],
                [7, 55, 0, 0, 0, 0, 0, 0, 0],
                [9, 85, 67, 38, 47, 54, 68, 9, 30],
            ],
            [9, 2, 9],
        ),
        "top_k_row_keys": (
            [
                [88, 90, 84, 44, 19, 19, 64, 24, 39],
                [56, 27, 63, 59, 31, 31, 31, 2, 87],
                [88, 43, 28, 28, 82, 63, 42, 78, 88],
            ],
            [9, 9, 9],
        ),
        "top_p": (
            [
                [30, 7, 30, 13, 86, 49, 34, 68, 8],
                [8, 18, 39, 75, 28, 90, 8, 67, 58],
                [57, 12, 62, 27, 47, 59, 93, 0, 92],
            ],
            [9, 9, 9],
        ),
        "top_k_top_p": (
            [
                [17, 58, 90, 7, 90, 95, 77, 61, 80],
                [86, 55, 0, 0, 0, 0, 0, 0, 0],
                [44, 55, 0, 0, 0, 0, 0, 0, 0],
            ],
            [9, 2, 2],
        ),
        "unfiltered": (
            [
                [52, 39, 22, 42, 36, 34, 6, 49, 68],
                [56, 8, 40, 26, 23, 62, 57, 35, 4],
                [86, 2, 24, 15, 58, 67, 41, 27, 52],
            ],
            [9, 9, 9],
        ),
        "beam": (
            [
                [30, 90, 90, 90, 90, 90, 90, 90, 90],
                [87, 87, 87, 87, 87, 87, 87, 87, 87],
                [9, 9, 9, 9, 9, 9, 9, 9, 9],
            ],
            [9, 9, 9],
        ),
        "beam_never": (
            [
                [9, 9, 9, 9, 9, 9, 9, 9, 9],
                [87, 87, 87, 87, 87, 87, 87, 87, 87],
                [9, 9, 9, 9, 9, 9, 9, 9, 9],
            ],
            [9, 9, 9],
        ),
    },
}


# The default suite runs these (one compilation of a while loop each, ~5 s); the rest slow.
DEFAULT_CASES = ("top_k", "top_k_row_keys", "beam")
CASE_PARAMS = [
    pytest.param(case, marks=() if case in DEFAULT_CASES else pytest.mark.slow) for case in CASES
]


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_t5_tokens_are_the_recorded_ones(t5, case):
    got = CASES[case](*t5)
    np.testing.assert_array_equal(got.tokens, PINNED["t5"][case][0])
    np.testing.assert_array_equal(got.lengths, PINNED["t5"][case][1])


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_gpt2_tokens_are_the_recorded_ones(gpt2, case):
    got = CASES[case](*gpt2)
    np.testing.assert_array_equal(got.tokens, PINNED["gpt2"][case][0])
    np.testing.assert_array_equal(got.lengths, PINNED["gpt2"][case][1])


def sorted_filter(logits, temperature, top_k, top_p):
    """`decoding.filter_logits` as it was: one stable sort of the vocabulary, inverted by
    a second. The sort-free version must give the same array, bit for bit."""
    logits = logits.astype(jnp.float32) / temperature
    order = jnp.argsort(-logits, axis=-1, stable=True)
    ranked = jnp.take_along_axis(logits, order, axis=-1)
    keep = jnp.ones(ranked.shape, bool)
    if top_k > 0:
        keep &= jnp.arange(ranked.shape[-1]) < top_k
    if top_p < 1.0:
        probs = jax.nn.softmax(jnp.where(keep, ranked, -jnp.inf), axis=-1)
        keep &= (jnp.cumsum(probs, axis=-1) - probs) < top_p
    ranked = jnp.where(keep, ranked, -jnp.inf)
    return jnp.take_along_axis(ranked, jnp.argsort(order, axis=-1), axis=-1)


def test_filter_logits_is_the_sorted_one_bit_for_bit():
    """Ties (broken by index), -0.0 next to 0.0, -inf and NaN logits included."""
    rng = np.random.default_rng(0)
    rows = np.round(rng.normal(size=[4, 301]) * 2).astype(np.float32) / 2  # ties, -0.0
    rows[1, ::3] = -np.inf
    rows[2, ::2] = -0.0
    rows[2, 1::2] = 0.0
    rows[3, 7] = np.nan
    for options in [(1.0, 40, 1.0), (0.7, 3, 1.0), (1.0, 0, 0.9), (1.3, 4, 0.8), (1.0, 301, 1.0)]:
        want = np.asarray(jax.jit(sorted_filter, static_argnums=(1, 2, 3))(rows, *options))
        got = np.asarray(jax.jit(decoding.filter_logits, static_argnums=(1, 2, 3))(rows, *options))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), str(options))


def test_first_argmax_and_categorical_are_jax_s():
    x = np.array([[0.0, -0.0, 1, np.nan, 1, np.nan], [-0.0, 0.0, -1, -1, -np.inf, np.inf],
                  [-np.inf] * 6, [2, 1, 2, 0, 0, 2]], np.float32)  # fmt: skip
    np.testing.assert_array_equal(decoding.first_argmax(x), jnp.argmax(x, axis=-1))
    logits = jnp.asarray(np.random.default_rng(1).normal(size=[3, 1000]), jnp.float32)
    key = jax.random.key(5)
    np.testing.assert_array_equal(
        decoding.categorical(key, logits), jax.random.categorical(key, logits)
    )
    keys = jax.random.split(key, 3)
    np.testing.assert_array_equal(
        decoding.categorical(keys, logits), jax.vmap(jax.random.categorical)(keys, logits)
    )
