"""T5's decoding step on XLA:CPU: the decoder's layers unrolled over weight slices that are
made once per generation.

The decoder's blocks are one scanned module (parameters [layers, ...]). Run as a scan, a
decoding step would slice every weight and both caches at every step and restack the self
cache; instead `T5ForConditionalGeneration.init_cache` keeps each layer's parameters as
a tree of their own (`layer_slices`, once) and every step runs the block layer after layer
on them (`unrolled_layers`), reading the buffers `init_cache` made and updating each
layer's self cache in place. The logits are `decode`'s (teacher forcing) at every position:
tests/models/test_decoding_t5.py and test_decoding_pinned.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flax.linen as nn
import jax


def layer_slices(stacked, count: int) -> list:
    """A scanned module's parameters (leaves [layers, ...], boxed or not) as `count`
    trees, one per layer."""
    stacked = nn.meta.unbox(stacked)
    return [jax.tree.map(lambda x, i=i: x[i], stacked) for i in range(count)]


def unrolled_layers(
    make_block: Callable[..., nn.Module],
    layer_params: Sequence,
    hidden,
    per_layer: dict[str, Sequence],
    **shared,
):
    """The block of `make_block(parent=None)` (unbound; it returns (hidden, output))
    applied layer after layer: layer i with layer_params[i], per_layer's i-th entries as
    keyword arguments and `shared` as every layer's. Returns (hidden, [each layer's output]).
    """
    block = make_block(parent=None)
    outputs = []
    for i, params in enumerate(layer_params):
        inputs = {name: values[i] for name, values in per_layer.items()}
        hidden, output = block.apply({"params": params}, hidden, **inputs, **shared)
        outputs.append(output)
    return hidden, outputs
