"""FLOP counts and the matmul rate they are compared with.

Matmuls only: embedding gathers, softmax, LayerNorm, the activation and the optimizer
are not counted. One transformer layer of hidden h and intermediate i over batch b,
sequence s, T = b*s tokens:
    layer = 2*T*(4*h*h + 2*h*i) + 2*2*b*s*s*h
            (Q, K, V, output and the two FFN projections; Q.K^T and probs.V)
A train step is 3x the forward pass (the backward pass does two matmuls per forward
matmul). A family's forward is its layers plus its head (bert.forward_flops).

The rate is compared with a 2048^3 float32 matmul (2*2048^3 FLOP) timed in the same
process: `jnp.dot` in the cmrcx child, `torch.mm` in the torch child.
"""

from __future__ import annotations

import statistics

from . import steps

MATMUL_SIZE = 2048
TRAIN_OVER_FORWARD = 3


def layer_flops(batch: int, seq: int, hidden: int, intermediate: int) -> float:
    """Matmul FLOPs of one transformer layer's forward pass (formula above)."""
    tokens = batch * seq
    dense = 2 * tokens * (4 * hidden**2 + 2 * hidden * intermediate)
    attention = 2 * 2 * batch * seq**2 * hidden
    return dense + attention


def jax_matmul_rate(size: int = MATMUL_SIZE, repeats: int = 7) -> float:
    """FLOP/s of a jitted size^3 float32 jnp.dot (median of `repeats`)."""
    import jax
    import jax.numpy as jnp

    x, y = jax.random.normal(jax.random.key(0), (2, size, size), jnp.float32)
    dot = jax.jit(jnp.dot)
    jax.block_until_ready(dot(x, y))
    seconds = steps.timed(lambda: jax.block_until_ready(dot(x, y)), repeats)
    return 2 * size**3 / statistics.median(seconds)


def torch_matmul_rate(size: int = MATMUL_SIZE, repeats: int = 7) -> float:
    """FLOP/s of a size^3 float32 torch.mm (median of `repeats`)."""
    import torch

    x, y = torch.randn(2, size, size).unbind(0)
    seconds = steps.timed(lambda: torch.mm(x, y), repeats)
    return 2 * size**3 / statistics.median(seconds)
