"""Mesh construction and the logical-axis rules."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, PartitionSpec

from cmrcx.training import partitioning


def test_make_mesh_fills_minus_one_and_rejects_bad_shapes():
    mesh = partitioning.make_mesh((-1, 1))
    assert mesh.axis_names == ("data", "model")
    assert mesh.devices.size == jax.device_count()
    with pytest.raises(ValueError, match="at most one -1"):
        partitioning.make_mesh((-1, -1))
    with pytest.raises(ValueError, match="does not fit"):
        partitioning.make_mesh((jax.device_count() + 1, 1))
    with pytest.raises(ValueError, match="one size per axis"):
        partitioning.make_mesh((1,))


def test_rule_sets():
    data, fsdp, tensor = (dict(partitioning.logical_rules(n)) for n in ("data", "fsdp", "tensor"))
    assert {axis for axis, mesh_axis in data.items() if mesh_axis} == {"batch"}
    assert data["batch"] == fsdp["batch"] == tensor["batch"] == "data"
    assert fsdp["embed"] == "data" and fsdp["heads"] is None
    assert tensor["heads"] == tensor["mlp"] == tensor["vocab"] == "model"
    assert tensor["embed"] is None
    with pytest.raises(ValueError, match="use one of data, fsdp, tensor"):
        partitioning.logical_rules("zero3")
    mesh = partitioning.make_mesh((-1, 1))
    assert partitioning.batch_sharding(mesh).spec == PartitionSpec("data")
    assert partitioning.batch_sharding(mesh, leading_axes=1).spec == PartitionSpec(None, "data")
    assert partitioning.replicated(mesh).spec == PartitionSpec()


def test_bytes_per_device_counts_each_devices_share():
    mesh = partitioning.make_mesh((1, 1), jax.devices()[:1])
    leaf = jax.ShapeDtypeStruct((4, 6), jnp.float32, sharding=partitioning.replicated(mesh))
    assert partitioning.bytes_per_device({"a": leaf, "b": leaf}) == 2 * 4 * 6 * 4


def test_meshes_come_from_jax_make_mesh_with_auto_axes(monkeypatch):
    """jax.make_mesh places the devices (the topology-aware layout on TPU); the axes stay
    Auto (make_mesh's own default, Explicit, would change how shardings propagate)."""
    called = []
    real = jax.make_mesh

    def recorded(shape, names, **kwargs):
        called.append(tuple(shape))
        return real(shape, names, **kwargs)

    monkeypatch.setattr(partitioning.jax, "make_mesh", recorded)
    mesh = partitioning.make_mesh((-1, 1))
    assert called == [(jax.device_count(), 1)]
    assert mesh.axis_types == (AxisType.Auto, AxisType.Auto)
    assert list(mesh.devices.flat) == jax.devices()


@dataclasses.dataclass(frozen=True)
class FakeDevice:
    """What create_hybrid_device_mesh reads of a device on a multi-slice job."""

    id: int
    slice_index: int
    process_index: int = 0
    platform: str = "cpu"
    device_kind: str = "cpu"


def test_the_hybrid_mesh_keeps_each_slice_a_block_of_data_rows():
    """2 slices of 4 devices, (data, model) = (2, 2) in a slice and (2, 1) across: each
    slice's devices fill whole rows of `data`, so only `data` crosses between slices."""
    devices = [FakeDevice(i, slice_index=i // 4) for i in (4, 0, 5, 1, 6, 2, 7, 3)]
    array = partitioning.device_array((-1, 2), devices, dcn_mesh_shape=(2, 1))
    assert array.shape == (4, 2)
    assert [[d.slice_index for d in row] for row in array] == [[0, 0], [0, 0], [1, 1], [1, 1]]
    assert sorted(d.id for d in array[:2].flat) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="Number of slices 2 must equal"):
        partitioning.device_array((-1, 1), devices, dcn_mesh_shape=(4, 1))
    with pytest.raises(ValueError, match="no -1 across slices"):
        partitioning.device_array((-1, 1), devices, dcn_mesh_shape=(-1, 1))
    with pytest.raises(ValueError, match="does not fit 4 devices"):
        partitioning.device_array((3, 1), devices, dcn_mesh_shape=(2, 1))


def test_the_hybrid_mesh_on_one_process_takes_it_as_one_slice():
    """CPU devices have no slice index: each process is a slice."""
    mesh = partitioning.make_mesh((-1, 1), dcn_mesh_shape=(1, 1))
    assert mesh.shape == {"data": jax.device_count(), "model": 1}
    assert mesh.axis_types == (AxisType.Auto, AxisType.Auto)


# The meshes on eight simulated devices: tests/training/test_sharding.py's child, whose
# process has them, checks their layout.
