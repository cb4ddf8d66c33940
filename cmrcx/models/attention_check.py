"""Both attention implementations (`cmrcx.models.attention`) on one device, every routed family.

`compare_implementations` builds each family at a given geometry with random weights,
runs its forward output and the gradient of a fixed random projection of it with the
einsums and with `jax.nn.dot_product_attention`, and reports the largest differences. The
parity tests run it on CPU (XLA's kernel); the device check runs it on the accelerator
(cuDNN's where it applies, `attention.kernel_for`).
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from cmrcx.models import attention
from cmrcx.models.albert import AlbertConfig, AlbertEncoder
from cmrcx.models.bert import BertConfig, BertEncoder
from cmrcx.models.gpt2 import GPT2Config, GPT2LMHeadModel
from cmrcx.models.t5 import T5ForConditionalGeneration
from cmrcx.models.t5_stack import T5Config

FAMILIES = ("bert", "albert", "gpt2", "t5")

# Small geometries of each family (head width 16: a multiple of 8, as cuDNN wants).
SMALL = {
    "bert": BertConfig(
        vocab_size=64, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
        max_position_embeddings=64,
    ),
    "albert": AlbertConfig(
        vocab_size=64, embedding_size=16, hidden_size=32, num_layers=2, num_heads=2,
        intermediate_size=64, max_position_embeddings=64,
    ),
    "gpt2": GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=2, n_head=2),
    "t5": T5Config(
        vocab_size=64, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
        relative_attention_num_buckets=8, relative_attention_max_distance=16,
    ),
}  # fmt: skip


def _inputs(config, batch: int, length: int, seed: int) -> dict:
    """Token ids and a mask whose row 0 ends in padding (a quarter of the row)."""
    rng = np.random.default_rng(seed)
    vocab = config.vocab_size
    mask = np.ones((batch, length), np.int32)
    mask[0, length - max(1, length // 4) :] = 0
    ids = rng.integers(1, vocab, (batch, length)).astype(np.int32)
    return {"ids": jnp.asarray(ids), "mask": jnp.asarray(mask)}


def _forward(family: str, config):
    """(module, fn(module, params, inputs) -> float32 output [batch, length, ...])."""
    if family in ("bert", "albert"):
        module = (BertEncoder if family == "bert" else AlbertEncoder)(config)

        def run(params, x):
            types = jnp.zeros_like(x["ids"])
            return module.apply({"params": params}, x["ids"], types, x["mask"])[0]

    elif family == "gpt2":
        module = GPT2LMHeadModel(config)

        def run(params, x):
            return module.apply({"params": params}, x["ids"], x["mask"])

    else:
        module = T5ForConditionalGeneration(config)

        def run(params, x):
            return module.apply({"params": params}, x["ids"], x["mask"], x["ids"], x["mask"])

    def init(rng, x):
        return nn.meta.unbox(_init(module, family, rng, x))

    return init, run


def _init(module, family: str, rng, x):
    if family in ("bert", "albert"):
        return module.init(rng, x["ids"], jnp.zeros_like(x["ids"]), x["mask"])["params"]
    if family == "gpt2":
        return module.init(rng, x["ids"], x["mask"])["params"]
    return module.init(rng, x["ids"], x["mask"], x["ids"], x["mask"])["params"]


def _outputs(run, params, x, projection, name: str, compiler_options=None):
    """(forward output, gradient of sum(output * projection) w.r.t. params), traced with
    attention implementation `name` (each call its own jit: the setting is read at trace)."""

    def loss(params):
        return jnp.sum(run(params, x).astype(jnp.float32) * projection)

    def both(params):
        with attention.implementation(name):
            return run(params, x).astype(jnp.float32), jax.grad(loss)(params)

    return jax.jit(both, compiler_options=compiler_options)(params)


def _max_differences(mine, reference) -> dict[str, float]:
    mine, reference = jax.tree.leaves(mine), jax.tree.leaves(reference)
    abs_diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(mine, reference, strict=True))
    scale = max(float(jnp.max(jnp.abs(b))) for b in reference)
    return {"max_abs": abs_diff, "max_rel": abs_diff / max(scale, 1e-30)}


def compare_implementations(
    families=FAMILIES,
    dtype: str = "float32",
    batch: int = 2,
    length: int = 32,
    configs: dict | None = None,
    seed: int = 0,
    compiler_options: dict | None = None,
) -> dict[str, dict]:
    """Each family's output and parameter gradient, einsums against dot_product_attention,
    on JAX's default device.

    families: names of FAMILIES; dtype: "float32" | "bfloat16" (compute dtype; parameters
    float32); batch, length: the input (row 0 ends in padding; GPT-2 and T5's decoder are
    causal); configs: {family: config} replacing SMALL's geometry (the paper's, say:
    dropout is off either way, as inference); seed: weights and tokens.
    Returns {family: {"kernel": "xla" | "cudnn" (what dot_product used), "forward":
    {"max_abs", "max_rel"}, "grad": {"max_abs", "max_rel"}}}: max_rel is the largest
    absolute difference over the reference's largest magnitude (whole output, or over all
    parameter gradients). Below float32, also "einsum_vs_float32" and
    "dot_product_vs_float32": {"forward", "grad"} each against the float32 einsums.
    compiler_options: XLA's, for every program it jits (the tests' optimisation level 0).
    """
    results = {}
    for family in families:
        if family not in FAMILIES:
            raise ValueError(f"family {family!r}: use one of {', '.join(FAMILIES)}")
        config = (configs or {}).get(family, SMALL[family])
        config = dataclasses.replace(config, dtype=dtype)
        length_cap = getattr(config, "max_position_embeddings", getattr(config, "n_positions", 0))
        if length_cap and length > length_cap:
            raise ValueError(f"{family}: length {length} > the config's {length_cap} positions")
        x = _inputs(config, batch, length, seed)
        init, run = _forward(family, config)
        params = jax.jit(init, compiler_options=compiler_options)(jax.random.key(seed), x)
        shape = jax.eval_shape(run, params, x).shape
        projection = jax.random.normal(jax.random.key(seed + 1), shape, jnp.float32)
        reference = _outputs(run, params, x, projection, "einsum", compiler_options)
        mine = _outputs(run, params, x, projection, "dot_product", compiler_options)
        query = jnp.zeros((1, 1, 1, _head_dim(config)), jnp.dtype(dtype))
        results[family] = {
            "kernel": attention.kernel_for(query),
            "forward": _max_differences(mine[0], reference[0]),
            "grad": _max_differences(mine[1], reference[1]),
        }
        if dtype != "float32":  # each against the float32 einsums: which is nearer
            _, run32 = _forward(family, dataclasses.replace(config, dtype="float32"))
            exact = _outputs(run32, params, x, projection, "einsum", compiler_options)
            for name, outputs in (("einsum", reference), ("dot_product", mine)):
                results[family][f"{name}_vs_float32"] = {
                    "forward": _max_differences(outputs[0], exact[0]),
                    "grad": _max_differences(outputs[1], exact[1]),
                }
    return results


def _head_dim(config) -> int:
    if isinstance(config, T5Config):
        return config.d_kv
    return config.head_dim
