"""Inference on one CPU device: the forms of attention and of the feed-forward activation
that run fastest on XLA:CPU, and the switch (`one_cpu_inference`, read through `applies`)
that selects them in the BERT-shaped encoders (`cmrcx.models.bert`, which ALBERT runs).

Both compute the plain forms' values: `attention_by_head` the einsum attention's up to
float rounding, `activation_apart` the activation's bit for bit
(tests/cpu/test_attention_by_head.py, tests/cpu/test_activation_apart.py). Training steps
and meshes of several devices keep the plain forms.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import jax
import jax.numpy as jnp

# Attention scores per step of `attention_by_head`'s loop: 2^19 float32 (2 MiB), two
# heads at length 512, 32 at 128: a step's scores, softmax and context stay in the
# caches instead of making four trips through memory as the whole
# [batch, heads, length, length] array does. One BERT-base layer's attention, batch 8 x
# 512, float32, 2 AMD EPYC cores (`tools/bench.py layerops --rounds 3`, 2026-11-26, start
# load 0.49): 84.2 ms as two einsums and a softmax, 52.2 ms this way; PyTorch's
# fused SDPA kernel 50.1 ms.
SCORES_PER_STEP = 2**19

# Whether the step being traced is inference on a single CPU device. The trainer, which
# owns the mesh, turns it on while it traces its scoring step on one CPU device: the
# attention loop runs over the batch axis, which a mesh of several devices splits, and
# would gather every example's queries, keys and values onto each device.
_ONE_CPU_INFERENCE = contextvars.ContextVar("one_cpu_inference", default=False)


@contextlib.contextmanager
def one_cpu_inference(on: bool) -> Iterator[None]:
    """Within the block, `enabled()` is `on` (traces made here keep it)."""
    token = _ONE_CPU_INFERENCE.set(on)
    try:
        yield
    finally:
        _ONE_CPU_INFERENCE.reset(token)


def enabled() -> bool:
    """Whether the trace being made is the trainer's scoring step on one CPU device."""
    return _ONE_CPU_INFERENCE.get()


def applies(deterministic: bool) -> bool:
    """The switch of the BERT-shaped encoders: a layer without dropout (`deterministic`)
    traced under `one_cpu_inference(True)` takes `attention_by_head` and
    `activation_apart`; every other trace the plain einsums and activation."""
    return deterministic and enabled()


def activation_apart(activation, x: jax.Array) -> jax.Array:
    """activation(x), computed by XLA:CPU as one loop fusion whose result the next matmul
    reads: the same values, bit for bit.

    XLA:CPU otherwise splits erf GeLU (x * 0.5 * erfc(-x / sqrt 2)) across three passes:
    its YNNPACK fusion of the next matmul takes the final multiplies as a prologue, which
    leaves x + bias and erfc to two loop fusions of their own, each writing and reading
    a [tokens, intermediate] array (50 MB per BERT-base layer at batch 8 x 512). A select
    as the last op keeps the activation out of the YNNPACK fusion: YNNPACK does not take
    selects, and XLA cannot drop this one (x == x is false for NaN, where the select
    returns x, itself NaN, as the activation would). XLA:CPU removes optimization
    barriers, so they cannot do this. Profiled on BERT-base's scoring forward, batch 8 x
    512 (`jax.profiler` with `--xla_cpu_enable_xprof_traceme`, 2026-11-26): the second
    feed-forward matmul 115 -> 103 ms a layer, the activation's fusions 9.7 -> 7.5 ms.
    """
    return jnp.where(x == x, activation(x), x)


def attention_by_head(query, key, value, bias) -> jax.Array:
    """softmax(query . key^T + bias) . value, a few (example, head) pairs at a time.

    query: [batch, q, heads, kv]; key, value: [batch, k, heads, kv]; bias: additive,
    [batch, 1, 1, k], a padding mask (a bias per query or per head would be copied out
    per pair, as large as the scores this loop avoids). Returns the context
    [batch, q, heads, kv]. The softmax is taken in float32 and its probabilities cast to
    query's dtype before the second matmul, as the einsum form does
    (`tests/models/test_attention_by_head.py` compares the two). For inference on one
    device (`applies`): differentiating the loop is slower than the einsums, so
    training steps keep those.
    """
    batch, q_len, heads, kv = query.shape
    k_len = key.shape[1]
    if bias.shape != (batch, 1, 1, k_len):
        raise ValueError(f"bias {bias.shape}: attention_by_head takes [batch, 1, 1, k] only")

    def by_pair(x):  # [batch, length, heads, kv] -> [batch * heads, length, kv]
        return jnp.swapaxes(x, 1, 2).reshape(batch * heads, x.shape[1], kv)

    bias = jnp.broadcast_to(bias, (batch, heads, 1, k_len))
    bias = bias.reshape(batch * heads, 1, k_len).astype(query.dtype)

    def one_pair(pair):
        q, k, v, b = pair
        scores = (q @ k.T + b).astype(jnp.float32)
        return jax.nn.softmax(scores, axis=-1).astype(q.dtype) @ v

    pairs = (by_pair(query), by_pair(key), by_pair(value), bias)
    step = max(1, SCORES_PER_STEP // (q_len * k_len))
    context = jax.lax.map(one_pair, pairs, batch_size=min(step, batch * heads))
    return jnp.swapaxes(context.reshape(batch, heads, q_len, kv), 1, 2)
