"""ALBERT on 8 simulated CPU devices: the same losses as on one device under the fsdp and
tensor rule sets, the shared layer sharded like BERT's (its parameters carry the same
logical axis names, without BERT's [layers] axis)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

CHILD = textwrap.dedent(
    """
    import json
    import jax
    import numpy as np
    from cmrcx.training import partitioning
    from cmrcx.model_api.cloze import ClozeModel
    from cmrcx.models import registry
    from cmrcx.models.albert import AlbertConfig
    from cmrcx.training.trainer import Trainer, adamw_with_warmup

    rng = np.random.default_rng(0)
    batch_size, length, blanks = 8, 32, 32
    def batch():
        positions = np.zeros([batch_size, blanks], np.int32)
        positions[:, :3] = rng.integers(1, length, [batch_size, 3])
        return {"input_ids": rng.integers(1, 512, [batch_size, length]).astype(np.int32),
                "token_type_ids": np.ones([batch_size, length], np.int32),
                "input_mask": np.ones([batch_size, length], np.int32),
                "blank_positions": positions,
                "blank_in_window": (positions > 0).astype(np.int32),
                "target_blank": rng.integers(0, 3, [batch_size]).astype(np.int32),
                "example_mask": np.ones([batch_size], np.int32)}
    batches = [batch() for _ in range(3)]
    results = {}
    for layout in ("albert", "albert_zh"):
        config = AlbertConfig(vocab_size=512, embedding_size=32, hidden_size=64, num_layers=3,
                              num_heads=4, intermediate_size=128, max_position_embeddings=64,
                              embedding_layout=layout)
        for name, rules, shape in [("1x1", "data", (1, 1)), ("fsdp 8x1", "fsdp", (8, 1)),
                                   ("tensor 2x4", "tensor", (2, 4))]:
            mesh = partitioning.make_mesh(shape, jax.devices()[: shape[0] * shape[1]])
            trainer = Trainer(ClozeModel(registry.network(config, "cloze")),
                              adamw_with_warmup(1e-3, 10), mesh, batches[0],
                              rules=partitioning.logical_rules(rules), seed=0)
            state = trainer.init_state()
            losses = []
            for b in batches:
                state, metrics = trainer.train_step(state, b)
                metrics = jax.device_get(metrics)
                losses.append(float(metrics["loss_sum"] / metrics["examples"]))
            shardings = trainer.state_shardings.params["albert"]["layer"]
            results[f"{layout} {name}"] = {
                "losses": losses,
                "query_spec": str(shardings["attention"]["query"]["kernel"].spec),
                "param_bytes": partitioning.bytes_per_device(trainer.abstract_state.params),
            }
    print("RESULT" + json.dumps(results))
    """
)


@pytest.mark.slow  # six meshes compiled in a child process: ~1 minute on 2 busy cores
def test_albert_losses_match_across_meshes():
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
    result = json.loads(line[len("RESULT") :])
    for layout in ("albert", "albert_zh"):
        reference = result[f"{layout} 1x1"]
        assert reference["losses"][0] != reference["losses"][1]  # a real trajectory
        for mesh in ("fsdp 8x1", "tensor 2x4"):
            run = result[f"{layout} {mesh}"]
            np.testing.assert_allclose(run["losses"], reference["losses"], rtol=1e-5)
            assert run["param_bytes"] < 0.6 * reference["param_bytes"], (layout, mesh)
        assert "model" in result[f"{layout} tensor 2x4"]["query_spec"]
