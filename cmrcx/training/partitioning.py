"""Device mesh and the one table mapping logical axis names to mesh axes.

Models name their axes (`('vocab', 'embed')`, `('embed', 'heads', 'kv')`); this
module alone decides where they live. Rule sets are data (`RULE_SETS`: data,
fsdp, tensor), chosen by name in gin (`RunConfig.partitioning`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "model")

# Every logical axis the models use, unsharded.
_LOGICAL_AXES = (
    "batch", "length", "vocab", "embed", "embed_out", "mlp", "heads", "kv",
    "position", "token_type", "cloze_out", "classes", "layers",
)  # fmt: skip


def _rules(**sharded: str) -> tuple[tuple[str, str | None], ...]:
    return tuple((axis, sharded.get(axis)) for axis in _LOGICAL_AXES)


# The rule sets, chosen by name (RunConfig.partitioning). A rule maps a logical
# axis to a mesh axis; flax gives each array dimension the first rule whose mesh
# axis is still free in that array, so under `fsdp` an activation
# ("batch", "length", "embed") puts batch on `data` and leaves embed whole.
RULE_SETS: dict[str, tuple[tuple[str, str | None], ...]] = {
    # Examples split over `data`; every parameter whole on every device.
    "data": _rules(batch="data"),
    # Also parameters and optimizer state split over `data` along their embed
    # (hidden) dimension: per-device state shrinks by the data-axis size, and
    # XLA gathers each layer's weights when it needs them (ZeRO-3 / FSDP).
    "fsdp": _rules(batch="data", embed="data"),
    # Megatron-style tensor parallelism: attention heads, the MLP's inner
    # dimension and the vocabulary split over `model`, examples over `data`.
    "tensor": _rules(batch="data", heads="model", mlp="model", vocab="model"),
}
DEFAULT_RULES = RULE_SETS["data"]


def logical_rules(name: str) -> tuple[tuple[str, str | None], ...]:
    """The rule set called `name` (data | fsdp | tensor)."""
    if name not in RULE_SETS:
        raise ValueError(f"partitioning {name!r}: use one of {', '.join(RULE_SETS)}")
    return RULE_SETS[name]


def make_mesh(
    mesh_shape: Sequence[int] = (-1, 1), devices=None, dcn_mesh_shape: Sequence[int] | None = None
) -> Mesh:
    """A (data, model) mesh; one -1 entry takes the remaining devices.

    The devices are placed by `jax.make_mesh`, which on a TPU slice follows its physical
    torus (the ring that makes an all-reduce over `data` cheap) and on GPUs orders them by
    id. dcn_mesh_shape (several TPU slices, or GPU hosts joined by a slower network): the
    (data, model) sizes across slices, mesh_shape being one slice's; the mesh is
    `mesh_utils.create_hybrid_device_mesh`'s, each slice a block of it, so that only the
    axis split across slices (data, normally) crosses the slow network. Devices with no
    slice index (GPUs, CPUs) take each process as a slice. Axes are `AxisType.Auto`:
    shardings come from `jit`'s and the models' logical constraints.

    On 8 devices, ``make_mesh((-1, 2)).shape`` is ``{'data': 4, 'model': 2}``; on 2 slices
    of 8, ``make_mesh((-1, 2), dcn_mesh_shape=(2, 1)).shape`` is ``{'data': 8, 'model': 2}``
    (tests/training/test_partitioning.py builds such meshes on simulated devices).
    """
    devices = list(devices if devices is not None else jax.devices())
    axis_types = (AxisType.Auto,) * len(MESH_AXES)
    return Mesh(device_array(mesh_shape, devices, dcn_mesh_shape), MESH_AXES, axis_types)


def device_array(mesh_shape: Sequence[int], devices, dcn_mesh_shape=None) -> np.ndarray:
    """The devices as make_mesh lays them out: [data, model] (see there)."""
    if dcn_mesh_shape is None:
        shape = _mesh_sizes(mesh_shape, len(devices), "mesh_shape")
        # jax.make_mesh lays out the devices; its own Mesh would default to explicit axes.
        return jax.make_mesh(shape, MESH_AXES, devices=devices).devices
    dcn = _mesh_sizes(dcn_mesh_shape, None, "dcn_mesh_shape")
    slices = math.prod(dcn)
    if len(devices) % slices:
        raise ValueError(f"dcn_mesh_shape {tuple(dcn_mesh_shape)}: {len(devices)} devices")
    ici = _mesh_sizes(mesh_shape, len(devices) // slices, "mesh_shape (one slice)")
    by_process = not hasattr(devices[0], "slice_index")
    return mesh_utils.create_hybrid_device_mesh(ici, dcn, devices, process_is_granule=by_process)


def _mesh_sizes(mesh_shape: Sequence[int], devices: int | None, name: str) -> list[int]:
    """mesh_shape with its -1 filled from `devices` (None: no -1 allowed), checked."""
    shape = list(mesh_shape)
    if len(shape) != len(MESH_AXES):
        raise ValueError(f"{name} {tuple(mesh_shape)} needs one size per axis {MESH_AXES}")
    if devices is None and -1 in shape:
        raise ValueError(f"{name} {tuple(mesh_shape)}: give every size (no -1 across slices)")
    if shape.count(-1) > 1:
        raise ValueError(f"{name} {tuple(mesh_shape)}: at most one -1")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        shape[shape.index(-1)] = devices // known
    if devices is not None and math.prod(shape) != devices:
        raise ValueError(f"{name} {tuple(mesh_shape)} does not fit {devices} devices")
    return shape


def state_shardings(abstract_boxed_state, mesh: Mesh, rules=DEFAULT_RULES):
    """NamedShardings for a state whose parameters carry logical partitioning boxes.

    Leaves without a box (step counters, optimizer counts) are replicated.
    """
    specs = nn.get_partition_spec(abstract_boxed_state)
    return nn.logical_to_mesh_sharding(specs, mesh, rules)


def batch_sharding(mesh: Mesh, leading_axes: int = 0) -> NamedSharding:
    """Examples split over the `data` axis, everything else replicated.

    leading_axes: unsplit axes before the example axis ([micro_batch, batch, ...]: 1).
    """
    return NamedSharding(mesh, PartitionSpec(*[None] * leading_axes, "data"))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def bytes_per_device(shaped_tree) -> int:
    """Bytes one device holds of a tree of sharded arrays or ShapeDtypeStructs.

    With even splits every device holds the same; this is device 0's share.
    """
    total = 0
    for leaf in jax.tree.leaves(shaped_tree):
        shape = leaf.sharding.shard_shape(leaf.shape) if leaf.sharding else leaf.shape
        total += math.prod(shape) * np.dtype(leaf.dtype).itemsize
    return total
