"""Training options: bf16 compute, rematerialisation, gradient accumulation, from gin too."""

import dataclasses

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.extend import core as jax_core
from jax.sharding import PartitionSpec

from cmrcx import launch, partitioning
from cmrcx.cloze_model import ClozeModel
from cmrcx.models.bert import BertConfig
from cmrcx.runner import Cmrc2019Runner
from cmrcx.trainer import Trainer, adamw_with_warmup

SMALL = BertConfig(
    vocab_size=300,
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    intermediate_size=128,
    max_position_embeddings=32,
    hidden_dropout=0.0,
    attention_dropout=0.0,
)


def make_batch(batch=8, length=32, blanks=32, seed=0):
    rng = np.random.default_rng(seed)
    positions = np.zeros([batch, blanks], np.int32)
    positions[:, :4] = np.sort(rng.choice(np.arange(1, length), [batch, 4]), axis=1)
    example_mask = np.ones([batch], np.int32)
    example_mask[-1] = 0  # a padding row: must count nowhere
    return {
        "input_ids": rng.integers(1, 300, [batch, length]).astype(np.int32),
        "token_type_ids": np.ones([batch, length], np.int32),
        "input_mask": np.ones([batch, length], np.int32),
        "blank_positions": positions,
        "blank_in_window": (positions > 0).astype(np.int32),
        "target_blank": rng.integers(0, 4, [batch]).astype(np.int32),
        "example_mask": example_mask,
    }


def trainer_for(config, optimizer=None, grad_accum_steps=1, batch=None):
    mesh = partitioning.make_mesh((1, 1), jax.devices()[:1])
    optimizer = optimizer or adamw_with_warmup(1e-3, 10)
    batch = make_batch() if batch is None else batch
    return Trainer(ClozeModel(config), optimizer, mesh, batch, grad_accum_steps=grad_accum_steps)


def one_update(config, optimizer, grad_accum_steps, batch):
    """(parameter update of one step, metric sums) as numpy."""
    trainer = trainer_for(config, optimizer, grad_accum_steps, batch)
    state = trainer.init_state()
    before = jax.device_get(state.params)
    state, metrics = trainer.train_step(state, batch)
    after = jax.device_get(state.params)
    return jax.tree.map(np.subtract, after, before), jax.device_get(metrics)


def test_accumulation_gives_the_one_batch_update():
    """k micro-batches give the update of one k-times-larger batch (relative 1e-5).

    Plain SGD, so the update is the gradient itself (Adam's first step would be
    about lr * sign(gradient) and hide a wrongly scaled sum); a large rate, so the
    update is not lost in float32 rounding of (parameter + update) - parameter.
    """
    batch = make_batch()
    sgd = optax.sgd(1000.0)
    reference, ref_metrics = one_update(SMALL, sgd, 1, batch)
    for grad_accum_steps in (2, 4):
        update, metrics = one_update(SMALL, sgd, grad_accum_steps, batch)
        _assert_same_update(update, metrics, reference, ref_metrics)


def _assert_same_update(update, metrics, reference, ref_metrics):
    for key in ("loss_sum", "correct", "examples"):
        np.testing.assert_allclose(metrics[key], ref_metrics[key], rtol=1e-5)
    assert metrics["examples"] == 7  # the padding row counted nowhere
    updates = dict(jax.tree_util.tree_leaves_with_path(update))
    largest = max(np.max(np.abs(x)) for x in jax.tree.leaves(reference))
    for path, ref in jax.tree_util.tree_leaves_with_path(reference):
        # Relative to each tensor's largest entry. The floor is for tensors whose
        # true gradient is 0 and which hold only rounding noise: the attention key
        # bias and the last LayerNorm's bias (softmaxes ignore a shift of all logits).
        scale = max(np.max(np.abs(ref)), 1e-3 * largest)
        np.testing.assert_allclose(updates[path], ref, rtol=0, atol=1e-5 * scale, err_msg=str(path))


def test_accumulation_needs_equal_micro_batches():
    with pytest.raises(ValueError, match="does not split into 3 micro-batches"):
        trainer_for(SMALL, grad_accum_steps=3)


def test_remat_changes_memory_not_results():
    """Same loss and update with each policy; "full" needs less temporary memory."""
    config = dataclasses.replace(SMALL, num_layers=3, max_position_embeddings=64)
    batch = make_batch(batch=4, length=64)
    results, temp_bytes = {}, {}
    for policy in ("none", "full", "dots"):
        cfg = dataclasses.replace(config, remat_policy=policy)
        results[policy] = one_update(cfg, optax.sgd(0.5), 1, batch)
        trainer = trainer_for(cfg, batch=batch)
        batch_shapes = {
            k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=trainer.batch_sharding)
            for k, v in batch.items()
        }
        compiled = trainer._train_step.lower(trainer.abstract_state, batch_shapes).compile()
        temp_bytes[policy] = compiled.memory_analysis().temp_size_in_bytes
    reference_update, reference_metrics = results["none"]
    for policy in ("full", "dots"):
        update, metrics = results[policy]
        np.testing.assert_allclose(metrics["loss_sum"], reference_metrics["loss_sum"], rtol=1e-6)
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
            update,
            reference_update,
        )
    assert temp_bytes["full"] < temp_bytes["none"], temp_bytes


def test_bf16_computes_in_bf16_and_keeps_float32_state():
    cfg = dataclasses.replace(SMALL, dtype="bfloat16")
    batch = make_batch()
    trainer = trainer_for(cfg, batch=batch)
    state = trainer.init_state()
    state, metrics = trainer.train_step(state, batch)
    state, metrics = trainer.train_step(state, batch)
    dtypes = {leaf.dtype for leaf in jax.tree.leaves((state.params, state.opt_state))}
    assert dtypes <= {jnp.dtype("float32"), jnp.dtype("int32")}, dtypes
    # The matmuls really run in bf16.
    jaxpr = jax.make_jaxpr(lambda p: trainer.model.score_batch(p, batch))(state.params)
    dot_dtypes = _dot_dtypes(jaxpr.jaxpr)
    assert dot_dtypes == {jnp.dtype("bfloat16")}, dot_dtypes
    # And the result stays close to float32 compute on the same parameters.
    f32_logits = ClozeModel(SMALL).score_batch(state.params, batch)
    bf16_logits = trainer.model.score_batch(state.params, batch)
    assert bf16_logits.dtype == jnp.float32
    np.testing.assert_allclose(bf16_logits, f32_logits, atol=0.1)
    assert np.isfinite(float(metrics["loss_sum"]))


def _dot_dtypes(jaxpr) -> set:
    """Operand dtypes of every matmul in a jaxpr, nested jaxprs included."""
    dtypes = set()
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            dtypes.add(eqn.invars[0].aval.dtype)
        for sub in jax_core.jaxprs_in_params(eqn.params):
            dtypes |= _dot_dtypes(sub)
    return dtypes


def test_config_rejects_unknown_options():
    with pytest.raises(ValueError, match="remat_policy 'some'"):
        BertConfig(remat_policy="some")
    with pytest.raises(ValueError, match="dtype 'float16'"):
        BertConfig(dtype="float16")


@pytest.fixture
def clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def test_options_from_gin(clean_gin, tmp_path):
    """fsdp + bf16 + remat + accumulation, all from gin files and bindings: train and eval."""
    launch.parse_gin(
        ["cmrc2019_tiny.gin", "partitioning/fsdp.gin", "precision/bf16.gin", "precision/remat.gin"],
        [
            f"MODEL_DIR = '{tmp_path}'",
            "RunConfig.num_train_steps = 2",
            "RunConfig.grad_accum_steps = 2",
            f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
        ],
    )
    run = launch.run_config_from_gin()
    runner = Cmrc2019Runner(run)
    assert (run.model.dtype, run.model.remat_policy) == ("bfloat16", "dots")
    assert runner.trainer.grad_accum_steps == 2
    embedding = runner.trainer.state_shardings.params["bert"]["embeddings"]["word_embeddings"]
    assert embedding["embedding"].spec == PartitionSpec(None, "data")  # fsdp: split on embed
    state, losses = runner.train()
    assert [step for step, _ in losses] == [2] and np.isfinite(losses[0][1])
    assert {leaf.dtype for leaf in jax.tree.leaves(state.params)} == {jnp.dtype("float32")}
    results = runner.evaluate(state, 2)
    assert 0 <= results["qac/paper"] <= 100


def test_bad_options_are_config_errors(clean_gin, tmp_path):
    for binding, message in [
        ("RunConfig.partitioning = 'zero3'", "use one of data, fsdp, tensor"),
        ("RunConfig.grad_accum_steps = 3", "does not split into grad_accum_steps 3"),
    ]:
        gin.clear_config()
        launch.parse_gin(["cmrc2019_tiny.gin"], [f"MODEL_DIR = '{tmp_path}'", binding])
        with pytest.raises(launch.ConfigError, match=message):
            launch.run_config_from_gin()
