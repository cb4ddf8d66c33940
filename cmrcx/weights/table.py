"""The machinery every family's weight table shares (numpy only: no JAX to convert).

A family's `weight_table(config)` lists `Entry`s: a cmrcx parameter `path` (layer i of a
stack named `layer_i`), the release's (HuggingFace) name `hf_name`, a `layout` rule
between the torch tensor and the Flax parameter, and the Flax `shape`. `params_from_table`
reads a checkpoint through the table, checking every tensor's shape in the checkpoint's
own layout (`torch_shape`) before it is transformed (one error listing every missing,
unknown and misshapen tensor), `tensors_from_table` writes one, and
`stack_layers`/`unstack_layers` convert between the table's `layer_i` and the networks'
scanned `layers` ([num_layers, ...]). `dense`, `layer_norm`, `split_heads` and
`merge_heads` build the entries the encoders share; `encoder_tensors` strips a task
model's encoder prefix and drops its heads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import NamedTuple

import numpy as np

LAYOUTS = (
    "same", "dense", "to_heads", "bias_to_heads", "from_heads",
    # transformers' Conv1D (GPT-2) keeps [in, out]: fused q/k/v [width, 3*heads*head_dim]
    # -> [width, 3, heads, head_dim], its bias, and the output [heads*head_dim, width].
    "conv1d_qkv", "bias_qkv", "conv1d_from_heads",
)  # fmt: skip


class WeightError(ValueError):
    """A checkpoint does not fit the network: lists every missing, unknown or misshapen tensor."""


class Entry(NamedTuple):
    """One parameter of a family's weight table."""

    path: tuple[str, ...]  # cmrcx parameter path under params[<family>], `layer_i` for block i
    hf_name: str  # the release's (HuggingFace state_dict) name
    layout: str  # how the torch tensor becomes the Flax one (`to_flax`, one of `LAYOUTS`)
    shape: tuple[int, ...]  # the Flax shape


def dense(path: tuple[str, ...], hf: str, features_in: int, features_out: int) -> list[Entry]:
    """A torch Linear `hf` (.weight [out, in], .bias) as a Flax Dense (kernel [in, out], bias)."""
    return [
        Entry((*path, "kernel"), f"{hf}.weight", "dense", (features_in, features_out)),
        Entry((*path, "bias"), f"{hf}.bias", "same", (features_out,)),
    ]


def layer_norm(path: tuple[str, ...], hf: str, width: int) -> list[Entry]:
    """A torch LayerNorm `hf` (.weight, .bias) as a Flax LayerNorm (scale, bias)."""
    return [
        Entry((*path, "scale"), f"{hf}.weight", "same", (width,)),
        Entry((*path, "bias"), f"{hf}.bias", "same", (width,)),
    ]


def split_heads(path: tuple[str, ...], hf: str, width: int, heads: int, head_dim: int):
    """A torch Linear `hf` into attention heads: kernel [width, heads, head_dim], bias."""
    return [
        Entry((*path, "kernel"), f"{hf}.weight", "to_heads", (width, heads, head_dim)),
        Entry((*path, "bias"), f"{hf}.bias", "bias_to_heads", (heads, head_dim)),
    ]


def merge_heads(path: tuple[str, ...], hf: str, heads: int, head_dim: int, width: int):
    """A torch Linear `hf` out of attention heads: kernel [heads, head_dim, width], bias."""
    return [
        Entry((*path, "kernel"), f"{hf}.weight", "from_heads", (heads, head_dim, width)),
        Entry((*path, "bias"), f"{hf}.bias", "same", (width,)),
    ]


def torch_shape(entry: Entry) -> tuple[int, ...]:
    """The shape a checkpoint holds for `entry` (its Flax `shape` through `to_torch`)."""
    shape, layout = tuple(entry.shape), entry.layout
    if layout == "dense":
        return shape[::-1]
    if layout == "to_heads":  # [width, heads, head_dim] <- [heads*head_dim, width]
        return (shape[1] * shape[2], shape[0])
    if layout == "from_heads":  # [heads, head_dim, width] <- [width, heads*head_dim]
        return (shape[2], shape[0] * shape[1])
    if layout == "conv1d_qkv":  # [width, 3, heads, head_dim] <- [width, 3*heads*head_dim]
        return (shape[0], int(np.prod(shape[1:])))
    if layout == "conv1d_from_heads":  # [heads, head_dim, width] <- [heads*head_dim, width]
        return (shape[0] * shape[1], shape[2])
    if layout in ("bias_to_heads", "bias_qkv"):
        return (int(np.prod(shape)),)
    return shape


def to_flax(tensor: np.ndarray, layout: str, num_heads: int) -> np.ndarray:
    """torch layout -> Flax layout. Linear weights are [out, in] in torch, [in, ...] here."""
    if layout == "same":
        return tensor
    if layout == "dense":
        return tensor.T
    if layout == "to_heads":  # [heads*head_dim, width] -> [width, heads, head_dim]
        return tensor.T.reshape(tensor.shape[1], num_heads, -1)
    if layout == "bias_to_heads":  # [heads*head_dim] -> [heads, head_dim]
        return tensor.reshape(num_heads, -1)
    if layout == "from_heads":  # [width, heads*head_dim] -> [heads, head_dim, width]
        return tensor.T.reshape(num_heads, -1, tensor.shape[0])
    if layout == "conv1d_qkv":
        return tensor.reshape(tensor.shape[0], 3, num_heads, -1)
    if layout == "bias_qkv":
        return tensor.reshape(3, num_heads, -1)
    if layout == "conv1d_from_heads":
        return tensor.reshape(num_heads, -1, tensor.shape[1])
    raise ValueError(f"unknown layout {layout!r}")


def to_torch(param: np.ndarray, layout: str) -> np.ndarray:
    """Flax layout -> torch layout (the inverse of `to_flax`)."""
    if layout == "same":
        return param
    if layout == "dense":
        return param.T
    if layout == "to_heads":
        return param.reshape(param.shape[0], -1).T
    if layout == "bias_to_heads":
        return param.reshape(-1)
    if layout == "from_heads":
        return param.reshape(-1, param.shape[-1]).T
    if layout == "conv1d_qkv":
        return param.reshape(param.shape[0], -1)
    if layout == "bias_qkv":
        return param.reshape(-1)
    if layout == "conv1d_from_heads":
        return param.reshape(-1, param.shape[-1])
    raise ValueError(f"unknown layout {layout!r}")


def params_from_table(
    hf_tensors: Mapping[str, np.ndarray],
    table: list[Entry],
    num_heads: int,
    source: str,
    what: str,
    more_problems: Mapping[str, list[str]] | None = None,
) -> dict:
    """The nested params tree (float32) of a weight table's entries, read from HF-named
    torch-layout tensors; num_heads: the attention heads the head layouts split into.

    Raises WeightError ("`source` does not fit the `what` config:") listing at once every
    missing, unknown and misshapen tensor (shapes in the checkpoint's layout), and
    `more_problems` (heading -> names) such as inconsistent copies.
    """
    expected = {entry.hf_name for entry in table}
    problems = {
        "missing": sorted(expected - set(hf_tensors)),
        "unknown": sorted(set(hf_tensors) - expected),
        "wrong shape": [],
        **(more_problems or {}),
    }
    params: dict = {}
    for entry in table:
        if entry.hf_name not in hf_tensors:
            continue
        value = np.asarray(hf_tensors[entry.hf_name], np.float32)
        want = torch_shape(entry)
        if value.shape != want:
            problems["wrong shape"].append(f"{entry.hf_name}: {value.shape} (expected {want})")
            continue
        node = params
        for key in entry.path[:-1]:
            node = node.setdefault(key, {})
        node[entry.path[-1]] = to_flax(value, entry.layout, num_heads)
    if any(problems.values()):
        lines = [f"{source} does not fit the {what} config:"]
        lines += [f"  {k} ({len(v)}): " + ", ".join(v) for k, v in problems.items() if v]
        raise WeightError("\n".join(lines))
    return params


def tensors_from_table(params: Mapping, table) -> Iterator[tuple[str, np.ndarray]]:
    """The reverse of `params_from_table`: (HF name, torch-layout float32 tensor) per entry
    of the table, read from the (unstacked) params tree at the entry's `path`."""
    for entry in table:
        node = params
        for key in entry.path:
            node = node[key]
        yield (
            entry.hf_name,
            np.ascontiguousarray(to_torch(np.asarray(node, np.float32), entry.layout)),
        )


def encoder_tensors(
    tensors: Mapping[str, np.ndarray], prefixes: tuple[str, ...], dropped: re.Pattern, rename=None
) -> tuple[dict, list[str]]:
    """(the tensors under the bare model's names, the names dropped): a task model's
    encoder prefixes (`bert.`, `albert.`, `transformer.`) stripped, `rename(name)` applied,
    and the names `dropped` finds (heads, buffers) left out."""
    out, left_out = {}, []
    for name, value in tensors.items():
        for prefix in prefixes:
            name = name.removeprefix(prefix)
        name = rename(name) if rename else name
        if dropped.search(name):
            left_out.append(name)
        else:
            out[name] = value
    return out, left_out


def stack_layers(params: Mapping, num_layers: int) -> dict:
    """{"layer_0": tree, ..., "layer_{n-1}": tree} -> {"layers": tree of [n, ...] arrays}."""
    params = dict(params)
    layers = [params.pop(f"layer_{i}") for i in range(num_layers)]
    params["layers"] = _tree_map(lambda *xs: np.stack(xs), *layers)
    return params


def unstack_layers(params: Mapping, num_layers: int) -> dict:
    """The inverse of `stack_layers`."""
    params = dict(params)
    stacked = params.pop("layers")
    for i in range(num_layers):
        params[f"layer_{i}"] = _tree_map(lambda x, i=i: np.asarray(x[i]), stacked)
    return params


def _tree_map(fn, *trees):
    """Maps over nested dicts of arrays (numpy only: no JAX needed to convert)."""
    if isinstance(trees[0], Mapping):
        return {key: _tree_map(fn, *(tree[key] for tree in trees)) for key in trees[0]}
    return fn(*trees)
