"""Which attention a network traces: its own einsums, or `jax.nn.dot_product_attention`.

The families write attention as two einsums around a float32 softmax (the "einsum"
implementation; on one CPU device BERT's inference loops over a few heads at a time,
`cmrcx.cpu.inference.attention_by_head`). On a GPU or TPU the same product goes through
`jax.nn.dot_product_attention` ("dot_product"): cuDNN's fused flash attention where it
takes the call (`kernel_for`), XLA's composition of the same ops elsewhere. "auto" (the
default) is "dot_product" on gpu/tpu and "einsum" on cpu, where the einsums and the loop by
head were measured faster (`cmrcx.cpu.inference.SCORES_PER_STEP`).

Where each family goes (docs/scaling.md, "Attention"):

  BERT, ALBERT  self-attention, padding mask as an additive bias [batch, 1, 1, k].
  GPT-2         causal self-attention: the causal and padding mask as an additive bias
                [batch, 1, q, k]; also the prefill and the decoding step.
  T5            encoder, decoder self- and cross-attention: the relative position bias
                [1, heads, q, k] as `bias`, the mask as `mask`. The decoding step's
                attention against its cache stays the einsums (the cache keeps keys as
                [batch, heads, d_kv, k], which the API's [batch, k, heads, d_kv] would
                copy at every step).
  XLNet         not routed: its relative attention adds to the content term (q + r_w) k
                a relative-position term (q + r_r) r, shifted, and a segment term
                (q + r_s) seg, both computed from the query per head. The API's one
                query . key product could take them only as a [batch, heads, q, k] bias
                made by the same einsums: the size of the scores a fused kernel avoids.

`jax.nn.dot_product_attention` has no dropout: a training step whose attention-probability
dropout is on (BERT's and GPT-2's 0.1, T5's dropout_rate) keeps the einsums, whatever the
setting. (cuDNN's private fused attention takes a dropout rate, with cuDNN's own random
bits: not exposed by jax.nn, and not the `fold_in` keys the trainer gives dropout.)

The setting lives in a context variable that the trainer sets while it traces its steps
(`RunConfig.attention_implementation` in gin); networks read it through
`use_dot_product`. `cmrcx.models.attention_check.compare_implementations` runs
both on one device for every routed family.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import jax
import jax.numpy as jnp

IMPLEMENTATIONS = ("auto", "einsum", "dot_product")
_IMPLEMENTATION = contextvars.ContextVar("attention_implementation", default="auto")


def check_implementation(name: str) -> None:
    if name not in IMPLEMENTATIONS:
        raise ValueError(
            f"attention_implementation {name!r}: use one of {', '.join(IMPLEMENTATIONS)}"
        )


@contextlib.contextmanager
def implementation(name: str) -> Iterator[None]:
    """Within the block (and in traces made there), attention is `name` (IMPLEMENTATIONS)."""
    check_implementation(name)
    token = _IMPLEMENTATION.set(name)
    try:
        yield
    finally:
        _IMPLEMENTATION.reset(token)


def current_implementation() -> str:
    return _IMPLEMENTATION.get()


def use_dot_product(dropout_active: bool = False, platform: str | None = None) -> bool:
    """Whether the attention being traced goes through `dot_product_attention`.

    dropout_active: attention-probability dropout applies to this call (training with a
    rate > 0), which the API cannot do. platform: the backend ("cpu", "gpu", "tpu");
    None: JAX's default backend.
    """
    chosen = _IMPLEMENTATION.get()
    if chosen == "einsum" or dropout_active:
        return False
    if chosen == "dot_product":
        return True
    return (platform or jax.default_backend()) != "cpu"


# cuDNN's fused attention takes half-precision operands only, head widths up to 128 (256
# on Hopper; 128 keeps V100-era rules simple) in multiples of 8, and runs on Ampere
# (compute capability 8.0) or newer (jax._src.cudnn.fused_attention_stablehlo,
# check_layout and check_is_flash_attention, jax 0.10.2). A V100 (7.0) gets XLA's.
_CUDNN_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
# What the cuDNN path puts for "masked" into its bias: jax's own value for float16 in
# fused_attention_stablehlo.get_large_negative_number (a workaround there for cuDNN's
# trouble with two very large negative numbers; bf16 gets -2 << 40 there), which both
# dtypes hold: exp(-32768 + any score seen) is 0 in float32.
_CUDNN_MASKED = -(2 << 14)


def kernel_for(query: jax.Array, platform: str | None = None) -> str:
    """`dot_product_attention`'s `implementation` for this query: "cudnn" on an NVIDIA
    GPU of compute capability >= 8.0 with bf16/f16 operands and a head width it takes,
    "xla" otherwise (CPU, TPU, float32, V100)."""
    platform = platform or jax.default_backend()
    head_dim = query.shape[-1]
    if platform != "gpu" or query.dtype not in _CUDNN_DTYPES:
        return "xla"
    if head_dim > 128 or head_dim % 8:
        return "xla"
    capability = getattr(jax.devices("gpu")[0], "compute_capability", "0.0")
    return "cudnn" if float(capability) >= 8.0 else "xla"


def dot_product_attention(
    query, key, value, *, bias=None, mask=None, scale: float = 1.0, kernel: str | None = None
) -> jax.Array:
    """softmax(scale * query . key^T + bias, masked) . value by `jax.nn.dot_product_attention`.

    query: [batch, q, heads, d]; key, value: [batch, k, heads, d] (cast to query's dtype,
    as the einsums do); bias: float, broadcastable to [batch, heads, q, k] (additive: 0 or
    a very negative number for a padding mask, T5's relative position bias); mask: bool,
    the same broadcast (True = attend). Returns the context [batch, q, heads, d] in
    query's dtype. The softmax is float32 in both kernels. kernel: "xla" | "cudnn"; None:
    `kernel_for(query)`. For cuDNN, which wants one [batch, heads or 1, q, k] bias in the
    operands' dtype, the mask is folded into the bias and both are broadcast to that shape.
    """
    key, value = key.astype(query.dtype), value.astype(query.dtype)
    kernel = kernel or kernel_for(query)
    if kernel == "cudnn":
        bias, mask = _cudnn_bias(query, key, bias, mask), None
    return jax.nn.dot_product_attention(
        query, key, value, bias=bias, mask=mask, scale=scale, implementation=kernel
    )


def _cudnn_bias(query, key, bias, mask) -> jax.Array | None:
    """bias and mask as one bias [batch, heads or 1, q, k] in query's dtype (None if both are)."""
    if bias is None and mask is None:
        return None
    batch, q_len, heads, _ = query.shape
    combined = jnp.zeros((), jnp.float32) if bias is None else bias.astype(jnp.float32)
    combined = jnp.maximum(combined, _CUDNN_MASKED)  # a padding bias's finfo.min
    if mask is not None:
        combined = jnp.where(mask, combined, _CUDNN_MASKED)
    per_head = heads if combined.ndim == 4 and combined.shape[1] == heads else 1
    shape = (batch, per_head, q_len, key.shape[1])
    return jnp.broadcast_to(combined, shape).astype(query.dtype)
