"""Mesh construction and the logical-axis rules."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec

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
