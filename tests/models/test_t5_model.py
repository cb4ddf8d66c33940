"""The Flax T5 network: buckets, masks, shared position bias, bf16, remat, meshes.

Parity with transformers' PyTorch T5 is in test_t5_conversion.py; here the
model is a freshly initialised cmrcx T5 (HF's initialisers, a fan-in untied head: outputs
of order 1).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
import textwrap

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.traverse_util import flatten_dict

from cmrcx.models.t5 import (
    T5Config,
    T5ForConditionalGeneration,
    relative_position_bucket,
    shift_right,
)
from cmrcx.training import partitioning
from tests.support import FAST_COMPILE

# Odd sizes, so a transposed or mis-split axis cannot line up by accident.
ODD = dict(
    vocab_size=101, d_model=48, d_kv=10, num_heads=3, d_ff=70, num_layers=2, num_decoder_layers=3
)


def batch(config: T5Config, seed: int = 0, source: int = 20, target: int = 11):
    """Token ids with padding in the encoder input and the decoder mask."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(2, config.vocab_size, [3, source])
    mask = np.ones_like(ids)
    mask[1, source - 6 :] = 0
    mask[2, source - 1 :] = 0
    decoder_ids = rng.integers(2, config.vocab_size, [3, target])
    decoder_mask = np.ones_like(decoder_ids)
    decoder_mask[0, target - 4 :] = 0
    return ids, mask, decoder_ids, decoder_mask


def init_params(config: T5Config, seed: int = 0):
    """(boxed params with logical names, plain params)."""
    ids, mask, decoder_ids, decoder_mask = batch(config)
    model = T5ForConditionalGeneration(config)
    boxed = jax.eval_shape(model.init, jax.random.key(seed), ids, mask, decoder_ids)["params"]
    init = jax.jit(
        lambda rng: nn.meta.unbox(model.init(rng, ids, mask, decoder_ids)["params"]),
        compiler_options=FAST_COMPILE,
    )
    return boxed, init(jax.random.key(seed))


def _encode_and_decode(module, ids, mask, decoder_ids, decoder_mask):
    encoded = module.encode(ids, mask)
    return encoded, module.decode(decoder_ids, encoded, mask, decoder_mask)


def run(config: T5Config, params, ids, mask, decoder_ids, decoder_mask):
    """(encoder states, logits), jitted once per config."""
    return _run(config)(params, ids, mask, decoder_ids, decoder_mask)


@functools.cache
def _run(config: T5Config):
    model = T5ForConditionalGeneration(config)
    return jax.jit(
        lambda params, *args: model.apply({"params": params}, *args, method=_encode_and_decode),
        compiler_options=FAST_COMPILE,
    )


@pytest.fixture(scope="module", params=["relu-tied", "gated-gelu-untied"])
def model_and_params(request):
    gated = request.param.startswith("gated")
    config = T5Config(
        **ODD, feed_forward_proj="gated-gelu" if gated else "relu", tie_word_embeddings=not gated
    )
    boxed, params = init_params(config)
    return config, boxed, params


def test_relative_position_buckets_match_transformers():
    torch = pytest.importorskip("torch")
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    distance = np.arange(-700, 700)
    for num_buckets, max_distance in ((32, 128), (16, 20), (48, 300)):
        for bidirectional in (True, False):
            want = t5.T5Attention._relative_position_bucket(
                torch.tensor(distance), bidirectional, num_buckets, max_distance
            ).numpy()
            got = relative_position_bucket(
                jnp.asarray(distance), bidirectional, num_buckets, max_distance
            )
            np.testing.assert_array_equal(np.asarray(got), want)
    # Causal buckets: every later key shares bucket 0 with the query itself.
    assert set(np.asarray(relative_position_bucket(jnp.arange(0, 50), False, 32, 128))) == {0}


def test_parameters_carry_logical_names_every_rule_set_knows(model_and_params):
    config, boxed, _ = model_and_params
    names = {
        "/".join(path): leaf.names
        for path, leaf in flatten_dict(boxed).items()
        if isinstance(leaf, nn.LogicallyPartitioned)
    }
    assert len(names) == len(flatten_dict(boxed))  # every parameter has names
    known = {axis for axis, _ in partitioning.logical_rules("tensor")}
    assert set().union(*names.values()) <= known
    # One relative position bias per stack, not per layer (HF's block 0, shared).
    bias = sorted(path for path in names if "relative_attention_bias" in path)
    assert bias == [
        "decoder/relative_attention_bias/embedding",
        "encoder/relative_attention_bias/embedding",
    ]
    assert names[bias[0]] == ("position", "heads")
    assert names["shared/embedding"] == ("vocab", "embed")
    assert names["decoder/layers/cross_attention/q/kernel"] == ("layers", "embed", "heads", "kv")
    assert names["encoder/layers/self_attention/o/kernel"] == ("layers", "heads", "kv", "embed")
    assert ("lm_head/kernel" in names) == (not config.tie_word_embeddings)
    mlp = "decoder/layers/mlp/" + ("wi_0" if config.is_gated else "wi") + "/kernel"
    assert names[mlp] == ("layers", "embed", "mlp")
    assert flatten_dict(boxed)[tuple(mlp.split("/"))].value.shape == (3, 48, 70)


def test_padding_and_future_tokens_do_not_leak(model_and_params):
    config, _, params = model_and_params
    ids, mask, decoder_ids, decoder_mask = batch(config)
    _, logits = run(config, params, ids, mask, decoder_ids, decoder_mask)
    assert logits.shape == (3, 11, 101) and logits.dtype == jnp.float32
    # Padded encoder tokens change nothing.
    other_ids = np.where(mask > 0, ids, 7)
    _, other = run(config, params, other_ids, mask, decoder_ids, decoder_mask)
    np.testing.assert_array_equal(other, logits)
    # A decoder token changes only the logits at and after its position.
    changed = decoder_ids.copy()
    changed[:, 5] = (changed[:, 5] + 1) % config.vocab_size
    _, other = run(config, params, ids, mask, changed, decoder_mask)
    np.testing.assert_array_equal(other[:, :5], logits[:, :5])
    assert np.abs(np.asarray(other[:, 5:] - logits[:, 5:])).max() > 1e-3
    # __call__ is encode + decode; decoder_mask None means no target padding.
    model = T5ForConditionalGeneration(config)
    call = jax.jit(
        lambda p: model.apply({"params": p}, ids, mask, decoder_ids), compiler_options=FAST_COMPILE
    )
    _, want = run(config, params, ids, mask, decoder_ids, np.ones_like(decoder_mask))
    np.testing.assert_allclose(call(params), want, atol=1e-5, rtol=0)


def test_bfloat16_compute_stays_close_to_float32(model_and_params):
    config, _, params = model_and_params
    outputs = {
        dtype: run(dataclasses.replace(config, dtype=dtype), params, *batch(config))
        for dtype in ("float32", "bfloat16")
    }
    encoded, logits = outputs["bfloat16"]
    assert encoded.dtype == jnp.bfloat16 and logits.dtype == jnp.float32
    for got, want in zip(outputs["bfloat16"], outputs["float32"], strict=True):
        got, want = np.asarray(got, np.float32), np.asarray(want)
        scale = np.abs(want).max()
        assert np.isfinite(got).all() and scale > 0.5
        # bf16 keeps 8 bits; measured after 5 blocks: max 0.7-1%, mean 0.1-0.2% of the scale.
        assert np.abs(got - want).max() < 0.04 * scale
        assert np.abs(got - want).mean() < 0.005 * scale


@pytest.mark.parametrize("policy", ["full", pytest.param("dots", marks=pytest.mark.slow)])
def test_remat_policies_give_the_same_logits_and_gradients(policy):
    """Same code path for every policy (jax.checkpoint's policy argument): `dots` is slow."""
    config = T5Config(**ODD, feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    _, params = init_params(config)
    ids, mask, decoder_ids, decoder_mask = batch(config)
    labels = np.roll(decoder_ids, -1, axis=1)

    def loss(params, policy):
        # Dropout on: recomputation must redraw the same masks.
        model = T5ForConditionalGeneration(dataclasses.replace(config, remat_policy=policy))
        logits = model.apply(
            {"params": params},
            ids,
            mask,
            decoder_ids,
            decoder_mask,
            deterministic=False,
            rngs={"dropout": jax.random.key(3)},
        )
        xent = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
        return (xent * decoder_mask).sum(), logits

    value_and_grad = jax.jit(
        jax.value_and_grad(loss, has_aux=True), static_argnums=1, compiler_options=FAST_COMPILE
    )
    (_, want_logits), want_grads = value_and_grad(params, "none")
    (_, logits), grads = value_and_grad(params, policy)
    np.testing.assert_allclose(logits, want_logits, atol=1e-5, rtol=0)
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(want_grads), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5 * max(1.0, np.abs(want).max()))


def test_shift_right_starts_with_the_decoder_start_token():
    labels = jnp.array([[5, 6, -100], [7, -100, -100]])
    config = T5Config(**ODD, decoder_start_token_id=0)
    np.testing.assert_array_equal(shift_right(labels, config), [[0, 5, 6], [0, 7, 0]])


def test_config_rejects_unknown_variants_and_resolves_defaults():
    config = T5Config(num_layers=4)
    assert config.num_decoder_layers == 4 and config.scale_decoder_outputs is True
    assert T5Config(tie_word_embeddings=False).scale_decoder_outputs is False
    with pytest.raises(ValueError, match="feed_forward_proj"):
        T5Config(feed_forward_proj="gated-silu")
    with pytest.raises(ValueError, match="remat_policy"):
        T5Config(remat_policy="some")


CHILD = textwrap.dedent(
    """
    import json
    import sys
    import jax
    import numpy as np
    import optax
    from cmrcx.training import partitioning
    from cmrcx.models.t5 import T5Config, T5ForConditionalGeneration
    from cmrcx.training.trainer import Trainer, adamw_with_warmup

    class Seq2SeqLM:
        # The Model API shape Trainer needs: init, loss_fn (sums), score_batch.
        def __init__(self, config):
            self.module = T5ForConditionalGeneration(config)

        def init(self, rng, batch):
            return self.module.init(rng, batch["inputs"], batch["input_mask"],
                                    batch["decoder_inputs"], batch["target_mask"])

        def loss_fn(self, params, batch, dropout_rng):
            logits = self.module.apply(
                {"params": params}, batch["inputs"], batch["input_mask"],
                batch["decoder_inputs"], batch["target_mask"], deterministic=False,
                rngs={"dropout": dropout_rng})
            xent = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
            loss_sum = (xent * batch["target_mask"]).sum()
            return loss_sum, {"loss_sum": loss_sum, "examples": batch["example_mask"].sum()}

        def score_batch(self, params, batch):
            raise NotImplementedError

    # Sizes divide every mesh axis; no dropout (its masks across meshes: test_sharding.py).
    config = T5Config(vocab_size=128, d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2,
                      num_decoder_layers=2, feed_forward_proj="gated-gelu",
                      tie_word_embeddings=False, dropout_rate=0.0)
    rng = np.random.default_rng(0)
    def batch():
        targets = rng.integers(2, 128, [8, 12]).astype(np.int32)
        mask = np.ones([8, 16], np.int32)
        mask[::3, 10:] = 0
        target_mask = np.ones([8, 12], np.int32)
        target_mask[1::2, 9:] = 0
        decoder_inputs = np.concatenate([np.zeros([8, 1], np.int32), targets[:, :-1]], 1)
        return {"inputs": rng.integers(2, 128, [8, 16]).astype(np.int32), "input_mask": mask,
                "decoder_inputs": decoder_inputs, "targets": targets,
                "target_mask": target_mask, "example_mask": np.ones([8], np.int32)}
    batches = [batch() for _ in range(2)]
    results = {}
    for name in ["1x1 data", *json.loads(sys.argv[1])]:
        shape, rules = name.split()
        shape = tuple(int(n) for n in shape.split("x"))
        mesh = partitioning.make_mesh(shape, jax.devices()[: shape[0] * shape[1]])
        trainer = Trainer(Seq2SeqLM(config), adamw_with_warmup(1e-3, 10), mesh, batches[0],
                          rules=partitioning.logical_rules(rules), seed=0)
        state = trainer.init_state()
        losses = []
        for b in batches:
            state, metrics = trainer.train_step(state, b)
            metrics = jax.device_get(metrics)
            losses.append(float(metrics["loss_sum"] / metrics["examples"]))
        shardings = trainer.state_shardings.params
        results[name] = {
            "losses": losses,
            "q_spec": str(shardings["decoder"]["layers"]["self_attention"]["q"]["kernel"].spec),
            "shared_spec": str(shardings["shared"]["embedding"].spec),
        }
    print("RESULT" + json.dumps({"devices": jax.device_count(), **results}))
    """
)


@pytest.mark.parametrize(
    "meshes",
    [
        pytest.param(["4x2 tensor"], id="tensor"),
        pytest.param(
            ["8x1 data", "4x2 data", "8x1 fsdp", "4x2 fsdp", "4x2 tensor"],
            id="all",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_same_losses_on_one_device_and_on_meshes(meshes):
    """2 training steps (Trainer, AdamW) on 1 device and on 8 simulated ones."""
    env = {
        **os.environ,
        # Semantics, not codegen: optimisation level 0 halves the compile time.
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0",
        "JAX_PLATFORMS": "cpu",
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(meshes)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
    result = json.loads(line[len("RESULT") :])
    assert result["devices"] == 8
    reference = np.array(result["1x1 data"]["losses"])
    assert reference[0] != reference[1]  # the optimizer moved: a real trajectory
    for mesh in meshes:
        np.testing.assert_allclose(result[mesh]["losses"], reference, rtol=1e-5, err_msg=mesh)
        specs = result[mesh]["q_spec"] + result[mesh]["shared_spec"]
        # The rule sets really split the T5 parameters: tensor over `model`, fsdp over `data`.
        assert ("model" in specs) == mesh.endswith("tensor"), mesh
        assert ("data" in specs) == mesh.endswith("fsdp"), mesh
