"""tools/bench.py plan: the collectives and per-device memory of a train step compiled for
N simulated CPU devices, read from the optimized HLO.

The rule sets' promises (cmrcx/training/partitioning.py), checked on a tiny BERT cloze
model compiled for 4 devices in a child process (the device count is fixed before jax
starts):
- data 4x1: the gradients are summed over `data` once per step: all-reduces only, of
  about the parameters' bytes (the pooler, unused by the cloze loss, has no gradient);
- fsdp 4x1: the weights are all-gathered where a layer needs them; per-device state is
  about 1/4. XLA:CPU writes the gradient reduction as all-reduce (+ slicing), not
  reduce-scatter as XLA:GPU/TPU's reduce-scatter creator does;
- tensor 1x4: no data axis, so no gradient reduction; the row-parallel projections'
  outputs (attention output and the MLP's second matmul) are all-reduced over `model`
  in the forward and backward pass of each layer: at least 4 per layer, each the size of
  an activation [batch, length, hidden].
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.support import REPO_ROOT

TOOLS = REPO_ROOT / "tools"
sys.path.insert(0, str(TOOLS))
from benchkit import plan  # noqa: E402

# Two layers in an nn.scan: a while loop of known trip count 2 in the HLO.
LAYERS, BATCH, LENGTH, HIDDEN = 2, 8, 16, 32
CHILD = textwrap.dedent(
    f"""
    import json, sys
    import numpy as np
    sys.path.insert(0, {str(TOOLS)!r})
    from benchkit import plan
    from cmrcx.model_api.cloze import ClozeModel
    from cmrcx.models import registry
    from cmrcx.models.bert import BertConfig
    from cmrcx.training import partitioning
    from cmrcx.training.trainer import Trainer, adamw_with_warmup

    config = BertConfig(vocab_size=256, hidden_size={HIDDEN}, num_layers={LAYERS},
                        num_heads=4, intermediate_size=64, max_position_embeddings=32)
    b, length = {BATCH}, {LENGTH}
    batch = {{key: np.ones([b, length], np.int32)
              for key in ("input_ids", "token_type_ids", "input_mask")}}
    batch.update(blank_positions=np.zeros([b, 4], np.int32),
                 blank_in_window=np.zeros([b, 4], np.int32),
                 target_blank=np.zeros([b], np.int32), example_mask=np.ones([b], np.int32))
    plans = {{}}
    for rules, shape in json.loads(sys.argv[1]):
        trainer = Trainer(ClozeModel(registry.network(config, "cloze")),
                          adamw_with_warmup(1e-3, 10), partitioning.make_mesh(shape), batch,
                          rules=partitioning.logical_rules(rules))
        plans[rules] = plan.trainer_plan(trainer)
    print("PLANS " + json.dumps(plans))
    """
)


def _plans(meshes: list[tuple[str, tuple[int, int]]]) -> dict:
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        "JAX_PLATFORMS": "cpu",
    }
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(meshes)],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("PLANS ")][-1]
    return json.loads(line[len("PLANS ") :])


def _by_kind(report: dict) -> dict:
    return {row["kind"]: row for row in report["collectives"]}


def test_data_parallel_sends_one_gradient_all_reduce_of_the_parameters():
    report = _plans([("data", (4, 1))])["data"]
    kinds = _by_kind(report)
    assert set(kinds) == {"all-reduce"}
    # One fused all-reduce of the gradients (XLA may split it into a few).
    assert 1 <= kinds["all-reduce"]["count"] <= 4
    # The pooler's gradient is zero (unused by the cloze loss) and not sent: a little short.
    assert 0.85 * report["parameter_bytes"] <= kinds["all-reduce"]["bytes"]
    assert kinds["all-reduce"]["bytes"] <= 1.05 * report["parameter_bytes"]
    # Every device holds the whole state: parameters and AdamW's two moments.
    assert report["state_bytes_per_device"] >= 3 * report["parameter_bytes"]
    assert report["memory_per_device_bytes"] > report["state_bytes_per_device"]
    assert report["devices"] == 4 and report["mesh"] == {"data": 4, "model": 1}


@pytest.mark.slow
def test_fsdp_gathers_weights_and_tensor_parallel_reduces_activations():
    plans = _plans([("data", (4, 1)), ("fsdp", (4, 1)), ("tensor", (1, 4))])
    data, fsdp, tensor = plans["data"], plans["fsdp"], plans["tensor"]
    params = data["parameter_bytes"]

    kinds = _by_kind(fsdp)
    # Weights gathered where used: at least the whole parameters' bytes once per step.
    assert kinds["all-gather"]["count"] >= LAYERS
    assert kinds["all-gather"]["bytes"] >= 0.5 * params
    # State split 4 ways along `embed` (a few small arrays without it stay whole).
    assert fsdp["state_bytes_per_device"] < 0.35 * data["state_bytes_per_device"]
    assert fsdp["memory_per_device_bytes"] < data["memory_per_device_bytes"]

    kinds = _by_kind(tensor)
    activation = BATCH * LENGTH * HIDDEN * 4
    assert kinds["all-reduce"]["count"] >= 4 * LAYERS
    # Activation-sized reductions, not a parameter-sized gradient reduction.
    assert kinds["all-reduce"]["bytes"] <= (kinds["all-reduce"]["count"] + 1) * activation
    assert tensor["state_bytes_per_device"] < 0.6 * data["state_bytes_per_device"]


HLO = """\
HloModule jit_step, num_partitions=4

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %sum = f32[] add(%x, %y)
}

%body (p: (s32[], f32[8,8])) -> (s32[], f32[8,8]) {
  %p = (s32[], /*index=1*/f32[8,8]{1,0}) parameter(0)
  %w = f32[8,8]{1,0} get-tuple-element(%p), index=1
  %gathered = f32[32,8]{1,0} all-gather(%w), channel_id=2, dimensions={0}
  %ags = (bf16[2,8]{1,0}, bf16[8,8]{1,0}) all-gather-start(%h), channel_id=3
  %agd = bf16[8,8]{1,0} all-gather-done(%ags)
  ROOT %t = (s32[], f32[8,8]{1,0}) tuple(%i, %w)
}

%cond (p: (s32[], f32[8,8])) -> pred[] {
  ROOT %lt = pred[] constant(true)
}

ENTRY %main (a: f32[8,8], b: bf16[2,8]) -> f32[8,8] {
  %a = f32[8,8]{1,0} parameter(0), sharding={replicated}
  %h = bf16[2,8]{1,0} parameter(1)
  %ar = f32[8,8]{1,0} all-reduce(%a), channel_id=1, to_apply=%add
  %rs = f32[2,8]{1,0} reduce-scatter(%ar), channel_id=4, dimensions={0}, to_apply=%add
  %loop = (s32[], f32[8,8]{1,0}) while(%t0), condition=%cond, body=%body, \
backend_config={"known_trip_count":{"n":"3"}}
  ROOT %out = f32[8,8]{1,0} get-tuple-element(%loop), index=1
}
"""


def test_collectives_read_from_hlo_text_count_loop_bodies_by_trip_count():
    rows = {row["kind"]: (row["count"], row["bytes"]) for row in plan.collectives(HLO)}
    assert rows == {
        "all-reduce": (1, 8 * 8 * 4),
        # The operand's 256 bytes become 64 per device: the larger side counts.
        "reduce-scatter": (1, 8 * 8 * 4),
        # 3 trips x (the f32 gather's 32x8 result + the async bf16 gather's 8x8 result).
        "all-gather": (6, 3 * (32 * 8 * 4 + 8 * 8 * 2)),
    }
    assert plan.shape_bytes("(f32[8,4]{1,0}, bf16[2])") == 132


@pytest.mark.slow
def test_plan_command_compiles_a_gin_files_run_for_simulated_devices():
    proc = subprocess.run(
        [sys.executable, str(TOOLS / "bench.py"), "plan", "--json", "--devices", "2",
         "--gin_file=cmrc2019_tiny.gin", "--gin_file=partitioning/fsdp.gin"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["devices"] == 2 and report["partitioning"] == "fsdp"
    assert report["parameter_bytes"] > 0 and report["memory_per_device_bytes"] > 0
    assert {"all-gather"} <= {row["kind"] for row in report["collectives"]}
    assert all(set(row) == {"kind", "count", "bytes"} for row in report["collectives"])
