"""Same losses on 1 device and on 8 simulated CPU devices, in every mesh and rule set.

The mesh needs XLA_FLAGS set before JAX starts, so the training runs in a child
process; it prints the per-step losses of each mesh as JSON, and the layout of the meshes
cmrcx.training.partitioning builds there (the one process of 8 devices these tests start).
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

CHILD = textwrap.dedent(
    """
    import json
    import jax
    import flax.linen as nn
    import numpy as np
    from flax.traverse_util import flatten_dict
    from cmrcx.training import partitioning
    from cmrcx.model_api.cloze import ClozeModel
    from cmrcx.models import registry
    from cmrcx.models.bert import BertConfig
    from cmrcx.training.trainer import Trainer, adamw_with_warmup

    config = BertConfig(vocab_size=512, hidden_size=64, num_layers=2, num_heads=4,
                        intermediate_size=128, max_position_embeddings=64)
    rng = np.random.default_rng(0)
    batch_size, length, blanks = 8, 32, 32
    def batch():
        positions = np.zeros([batch_size, blanks], np.int32)
        positions[:, :3] = rng.integers(1, length, [batch_size, 3])
        in_window = (positions > 0).astype(np.int32)
        return {"input_ids": rng.integers(1, 512, [batch_size, length]).astype(np.int32),
                "token_type_ids": np.ones([batch_size, length], np.int32),
                "input_mask": np.ones([batch_size, length], np.int32),
                "blank_positions": positions, "blank_in_window": in_window,
                "target_blank": rng.integers(0, 3, [batch_size]).astype(np.int32),
                "example_mask": np.ones([batch_size], np.int32)}
    batches = [batch() for _ in range(3)]

    # (-1, 2) on 8 devices, and a hybrid mesh of this one process (one slice).
    mesh = partitioning.make_mesh((-1, 2))
    hybrid = partitioning.make_mesh((-1, 2), dcn_mesh_shape=(1, 1))
    layout = {"shape": dict(mesh.shape), "ids": [[d.id for d in row] for row in mesh.devices],
              "hybrid_is_the_mesh": bool((hybrid.devices == mesh.devices).all())}

    def expected_bytes(logical_specs, shapes, split):
        # Per-device bytes if each array is divided by split(its logical axis names).
        specs = flatten_dict(logical_specs)
        return sum(leaf.size * leaf.dtype.itemsize // split(tuple(specs[path] or ()))
                   for path, leaf in flatten_dict(shapes).items())

    # Each rule set's promise, written out by hand: what divides each parameter.
    splits = {
        "data": lambda axes, data, model: 1,
        "fsdp": lambda axes, data, model: data if "embed" in axes else 1,
        "tensor": lambda axes, data, model: model if {"heads", "mlp", "vocab"} & set(axes) else 1,
    }
    results = {}
    for name, rules, shape, accum in [
        ("1x1", "data", (1, 1), 1),
        ("data 8x1", "data", (8, 1), 1),
        ("data 4x2", "data", (4, 2), 1),
        ("fsdp 8x1", "fsdp", (8, 1), 1),
        ("tensor 2x4", "tensor", (2, 4), 1),
        ("1x1 accum 2", "data", (1, 1), 2),
        ("fsdp 4x2 accum 2", "fsdp", (4, 2), 2),
    ]:
        devices = jax.devices()[: shape[0] * shape[1]]
        mesh = partitioning.make_mesh(shape, devices)
        model = ClozeModel(registry.network(config, "cloze"))
        trainer = Trainer(model, adamw_with_warmup(1e-3, 10), mesh,
                          batches[0], rules=partitioning.logical_rules(rules), seed=0,
                          grad_accum_steps=accum)
        state = trainer.init_state()
        losses = []
        for b in batches:
            state, metrics = trainer.train_step(state, b)
            metrics = jax.device_get(metrics)
            losses.append(float(metrics["loss_sum"] / metrics["examples"]))
        params = trainer.abstract_state.params
        boxed = jax.eval_shape(trainer._init_boxed, jax.random.key(0))
        logical = nn.get_partition_spec(boxed.params)
        spec = trainer.state_shardings.params["bert"]["layers"]["attention"]["query"]["kernel"]
        results[name] = {
            "losses": losses,
            "query_spec": str(spec.spec),
            "param_bytes": partitioning.bytes_per_device(params),
            "opt_bytes": partitioning.bytes_per_device(trainer.abstract_state.opt_state),
            "all_param_bytes": sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(params)),
            "expected_param_bytes": expected_bytes(
                logical, params, lambda axes: splits[rules](axes, *shape)
            ),
            "live_param_bytes": sum(
                shard.data.nbytes for leaf in jax.tree.leaves(state.params)
                for shard in leaf.addressable_shards if shard.device == devices[0]),
        }
    print("LAYOUT" + json.dumps(layout))
    print("RESULT" + json.dumps({"devices": jax.device_count(), **results}))
    """
)


def test_losses_match_across_meshes():
    """Also test_partitioning.py's meshes on eight simulated devices, merged here (one child
    of 8 devices): (-1, 2) is 4 x 2 in device order, and a hybrid mesh of that one process
    is the same mesh."""
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
    result = json.loads(line[len("RESULT") :])
    assert result["devices"] == 8
    line = next(x for x in out.stdout.splitlines() if x.startswith("LAYOUT"))
    layout = json.loads(line[len("LAYOUT") :])
    assert layout["shape"] == {"data": 4, "model": 2}, layout["shape"]
    assert layout["ids"] == [[0, 1], [2, 3], [4, 5], [6, 7]], layout["ids"]
    assert layout["hybrid_is_the_mesh"]
    reference = np.array(result["1x1"]["losses"])
    assert reference[0] != reference[1]  # the optimizer moved: a real trajectory
    for mesh in ("data 8x1", "data 4x2", "fsdp 8x1", "tensor 2x4"):
        np.testing.assert_allclose(result[mesh]["losses"], reference, rtol=1e-5, err_msg=mesh)
    # Accumulation on a mesh: the same trajectory as on one device.
    np.testing.assert_allclose(
        result["fsdp 4x2 accum 2"]["losses"], result["1x1 accum 2"]["losses"], rtol=1e-5
    )
    # Each rule set holds the promised bytes per device, and the arrays really
    # are that size on device 0.
    for name, run in result.items():
        if name == "devices":
            continue
        assert run["param_bytes"] == run["expected_param_bytes"] == run["live_param_bytes"], name
    everything = result["1x1"]["all_param_bytes"]
    assert result["data 8x1"]["param_bytes"] == everything
    assert result["fsdp 8x1"]["param_bytes"] < 0.2 * everything
    assert result["fsdp 8x1"]["opt_bytes"] < 0.2 * result["1x1"]["opt_bytes"]
    assert result["tensor 2x4"]["param_bytes"] < 0.5 * everything
    assert "model" in result["tensor 2x4"]["query_spec"]
    assert "model" not in result["data 4x2"]["query_spec"]
