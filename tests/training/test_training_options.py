"""Training options: bf16 compute, rematerialisation, gradient accumulation, from gin too."""

import dataclasses

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.linen import meta
from jax.extend import core as jax_core
from jax.sharding import PartitionSpec

from cmrcx.cli import launch
from cmrcx.common import errors
from cmrcx.model_api.cloze import ClozeModel
from cmrcx.models import registry
from cmrcx.models.bert import BertConfig, BertEncoder
from cmrcx.training import partitioning
from cmrcx.training.runner import Runner
from cmrcx.training.trainer import Trainer, adamw_with_warmup

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
    model = ClozeModel(registry.network(config, "cloze"))
    return Trainer(model, optimizer, mesh, batch, grad_accum_steps=grad_accum_steps)


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
        # The loss sum is float32 rounding apart (measured 1e-7 relative).
        np.testing.assert_allclose(metrics["loss_sum"], ref_metrics["loss_sum"], rtol=1e-5)
        assert (metrics["correct"], metrics["examples"]) == (ref_metrics["correct"], 7)
        _assert_same_update(update, reference)


EPS32 = float(np.finfo(np.float32).eps)
# Parameters whose true gradient is 0: a softmax ignores a shift of all its logits,
# and the cloze head's bias adds the same to every blank's logit, an attention key's
# bias the same q.b to a query's score for every key. What they get is float32
# rounding of terms that cancel, and it changes with the batch split and the CPU.
ZERO_GRADIENT = {("cloze_head", "bias"), ("bert", "layers", "attention", "key", "bias")}


def _flat(tree) -> dict:
    return {
        tuple(key.key for key in path): leaf
        for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
    }


def _assert_same_update(update, reference):
    """Same SGD update, tensor by tensor, up to float32 rounding."""
    updates = _flat(update)
    largest = max(np.max(np.abs(x)) for x in jax.tree.leaves(reference))
    for path, ref in _flat(reference).items():
        if path in ZERO_GRADIENT:
            # At the rounding level of the whole update: the head's bias sums ~30
            # probabilities whose rounding is a few eps each (measured up to 0.5 eps
            # * largest over XLA CPU variants); a real gradient would be ~1e5 times more.
            bound = 32 * EPS32 * largest
            assert max(np.max(np.abs(ref)), np.max(np.abs(updates[path]))) < bound, path
            continue
        # 1e-5 of the tensor's largest entry, not per element (small entries are sums
        # that cancel): measured at most 1.4e-6 over XLA CPU variants. Tensors with tiny
        # gradients at init (attention query bias: attention is near-uniform) cancel
        # more (5.4e-6 of their own max), so their scale is at least 1e-3 * largest.
        # The unused pooler gets exactly 0 on both sides.
        atol = 1e-5 * max(np.max(np.abs(ref)), 1e-3 * largest)
        np.testing.assert_allclose(updates[path], ref, rtol=0, atol=atol, err_msg=str(path))


def test_accumulation_needs_equal_micro_batches():
    with pytest.raises(ValueError, match="does not split into 3 micro-batches"):
        trainer_for(SMALL, grad_accum_steps=3)


# Slow (half a minute): remat policies are also checked, on T5, by
# tests/models/test_t5_model.py::test_remat_policies_give_the_same_logits_and_gradients.
@pytest.mark.slow
def test_remat_changes_memory_not_results():
    """Same loss and update with each policy; "full" needs less temporary memory."""
    config = dataclasses.replace(SMALL, num_layers=3, max_position_embeddings=64)
    batch = make_batch(batch=4, length=64)
    results, temp_bytes = {}, {}
    for policy in ("none", "full", "dots"):
        cfg = dataclasses.replace(config, remat_policy=policy)
        # SGD with a large rate, as above: with a small one, (1 + update) - 1 on the
        # LayerNorm scales is quantized by their float32 spacing (1.2e-7).
        results[policy] = one_update(cfg, optax.sgd(1000.0), 1, batch)
        compiled = trainer_for(cfg, batch=batch).compile_train_step()
        temp_bytes[policy] = compiled.memory_analysis().temp_size_in_bytes
    reference_update, reference_metrics = results["none"]
    for policy in ("full", "dots"):
        update, metrics = results[policy]
        np.testing.assert_allclose(metrics["loss_sum"], reference_metrics["loss_sum"], rtol=1e-6)
        _assert_same_update(update, reference_update)
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
    # The encoder's matmuls really run in bf16; the cloze head's (the one dot with
    # its [hidden, 1] kernel) runs in float32, as everything after it.
    jaxpr = jax.make_jaxpr(lambda p: trainer.model.score_batch(p, batch))(state.params)
    dots = _dots(jaxpr.jaxpr)
    head = [dtypes for dtypes, kernel in dots if kernel == (cfg.hidden_size, 1)]
    encoder = [dtypes for dtypes, kernel in dots if kernel != (cfg.hidden_size, 1)]
    assert head == [{jnp.dtype("float32")}], head
    assert len(encoder) >= 6 and all(d == {jnp.dtype("bfloat16")} for d in encoder), encoder
    # And the result stays close to float32 compute on the same parameters (each scored by
    # one jitted program, not op by op: a hundred compilations fewer).
    f32_model = ClozeModel(registry.network(SMALL, "cloze"))
    f32_logits = jax.jit(f32_model.score_batch)(state.params, batch)
    bf16_logits = jax.jit(trainer.model.score_batch)(state.params, batch)
    assert bf16_logits.dtype == jnp.float32
    in_window = batch["blank_in_window"] > 0
    # bf16 keeps 8 significant bits: through 2 layers the logits move by ~0.5% of
    # their scale (measured 0.43-0.52% over XLA CPU variants); 5% is 10 times that,
    # while wrong computation would move them by about their whole scale.
    scale = np.max(np.abs(f32_logits[in_window]))
    np.testing.assert_allclose(bf16_logits, f32_logits, rtol=0, atol=0.05 * scale)
    assert np.isfinite(float(metrics["loss_sum"]))


def test_bf16_keeps_the_float32_order_of_close_candidates():
    """The head scores bf16 hidden states in float32: logits 1/16 apart or closer still rank."""
    cfg = dataclasses.replace(SMALL, dtype="bfloat16")
    batch = make_batch()
    model = ClozeModel(registry.network(cfg, "cloze"))
    # Initialised by one jitted program (op by op, it compiles each op: ~60 programs). The
    # hidden states and scores below stay op by op: each op rounds its bf16 output as the
    # expected figures assume (a fused program may keep float32 between ops).
    params = meta.unbox(jax.jit(model.init)(jax.random.key(0), batch)["params"])
    # Logits near 10, where bf16 steps by 1/16, spread by only ~0.01 between blanks.
    kernel = params["cloze_head"]["kernel"] * 0.05
    params["cloze_head"] = {"kernel": kernel, "bias": jnp.full([1], 10.0)}
    hidden, _ = BertEncoder(cfg).apply(
        {"params": params["bert"]},
        batch["input_ids"],
        batch["token_type_ids"],
        batch["input_mask"],
    )
    assert hidden.dtype == jnp.bfloat16
    blank_hidden = np.take_along_axis(
        np.asarray(hidden.astype(jnp.float32), np.float64), batch["blank_positions"][..., None], 1
    )
    in_window = batch["blank_in_window"] > 0
    expected = (blank_hidden @ np.asarray(kernel, np.float64)[:, 0] + 10.0)[in_window]
    as_bf16 = np.asarray(jnp.asarray(expected, jnp.bfloat16), np.float64)
    assert len(set(as_bf16)) < len(set(expected)) // 4  # a bf16 head would tie most of them
    scores = model.score_batch(params, batch)
    assert scores.dtype == jnp.float32
    scores = np.asarray(scores)[in_window]
    # float32 rounding of logits near 10 (one ulp is 9.5e-7; measured 4e-7 apart).
    atol = 8 * EPS32 * np.max(np.abs(expected))
    np.testing.assert_allclose(scores, expected, rtol=0, atol=atol)
    # Every pair of candidates (blanks in windows; 496 pairs) further apart than that keeps
    # its order.
    apart = expected[:, None] - expected[None, :] > 2 * atol
    assert apart.sum() > 400 and np.all((scores[:, None] > scores[None, :])[apart])


def _dots(jaxpr) -> list[tuple[set, tuple]]:
    """(operand dtypes, right operand's shape) of every matmul in a jaxpr, nested ones too."""
    dots = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            lhs, rhs = (var.aval for var in eqn.invars)
            dots.append(({lhs.dtype, rhs.dtype}, tuple(rhs.shape)))
        for sub in jax_core.jaxprs_in_params(eqn.params):
            dots += _dots(sub)
    return dots


def test_config_rejects_unknown_options():
    with pytest.raises(ValueError, match="remat_policy 'some'"):
        BertConfig(remat_policy="some")
    with pytest.raises(ValueError, match="dtype 'float16'"):
        BertConfig(dtype="float16")


def test_options_from_gin(clean_gin, tmp_path, cmrc2019_tfds):
    """fsdp + bf16 + remat + accumulation, all from gin files and bindings: train and eval."""
    launch.parse_gin(
        ["cmrc2019_tiny.gin", "partitioning/fsdp.gin", "precision/bf16.gin", "precision/remat.gin"],
        [
            f"MODEL_DIR = '{tmp_path}'",
            "RunConfig.num_train_steps = 2",
            "RunConfig.grad_accum_steps = 2",
            f"RunConfig.tfds_cache_dir = '{cmrc2019_tfds}'",
        ],
    )
    run = launch.run_config_from_gin()
    runner = Runner(run)
    assert (run.model.dtype, run.model.remat_policy) == ("bfloat16", "dots")
    assert runner.trainer.grad_accum_steps == 2
    embedding = runner.trainer.state_shardings.params["bert"]["embeddings"]["word_embeddings"]
    assert embedding["embedding"].spec == PartitionSpec(None, "data")  # fsdp: split on embed
    state, losses = runner.train()
    assert [step for step, _ in losses] == [1, 2]  # step 1: orbax's first save, logged
    assert all(np.isfinite(loss) for _, loss in losses)
    assert {leaf.dtype for leaf in jax.tree.leaves(state.params)} == {jnp.dtype("float32")}
    results = runner.evaluate(state, 2)
    assert 0 <= results["qac/paper"] <= 100


def test_bad_options_are_config_errors(clean_gin, tmp_path):
    for binding, message in [
        ("RunConfig.partitioning = 'zero3'", "use one of data, fsdp, tensor"),
        ("RunConfig.attention_implementation = 'flash'", "use one of auto, einsum, dot_product"),
        ("RunConfig.grad_accum_steps = 3", "does not split into grad_accum_steps 3"),
    ]:
        gin.clear_config()
        launch.parse_gin(["cmrc2019_tiny.gin"], [f"MODEL_DIR = '{tmp_path}'", binding])
        with pytest.raises(errors.ConfigError, match=message):
            launch.run_config_from_gin()


def test_scoring_on_one_cpu_device_runs_the_attention_by_head(monkeypatch):
    """The trainer's score step (one CPU device here) traces the encoder with
    `attention_by_head`; its train step and anything outside keep the einsums. (On a mesh
    of several devices the trainer leaves it off: tests/training/test_sharding.py.)"""
    from cmrcx.cpu import inference

    calls, attention_by_head = [], inference.attention_by_head

    def counted(*args):
        calls.append(args[0].shape)
        return attention_by_head(*args)

    monkeypatch.setattr("cmrcx.cpu.inference.attention_by_head", counted)
    trainer = trainer_for(SMALL)
    state = trainer.init_state()
    state, _ = trainer.train_step(state, make_batch())
    assert calls == []
    scores = trainer.score(state.params, make_batch())
    assert calls and set(calls) == {(8, 32, 4, 16)} and np.isfinite(scores).all()
    assert not inference.enabled()


@pytest.fixture(scope="module")
def cmrc2019_tfds(tmp_path_factory):
    """One prepared-data cache for the module's cmrc2019_tiny.gin runs (a store is keyed by
    the data it holds): the sample is prepared once."""
    return tmp_path_factory.mktemp("tfds")


@pytest.mark.parametrize("optimizer", ["adamw", "released_script"])
def test_metric_lines_carry_each_steps_learning_rate(
    tiny_runner, tmp_path, optimizer, cmrc2019_tfds
):
    """metrics.jsonl's train lines hold the rate the line's last update used: the paper
    schedule's after k updates (adamw), lr * warmup_linear(k / t_total)^2 (the script's)."""
    import json

    from cmrcx.training import released_optimizer
    from cmrcx.training.trainer import warmup_linear_decay

    runner = tiny_runner(
        "cmrc2019_tiny.gin",
        "RunConfig.num_train_steps = 3",
        "RunConfig.log_every = 2",
        "RunConfig.warmup_fraction = 0.5",
        f"RunConfig.optimizer = '{optimizer}'",
        f"RunConfig.tfds_cache_dir = '{cmrc2019_tfds}'",
    )
    runner.train()
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").open()]
    rates = {x["step"]: x["learning_rate"] for x in lines if x["split"] == "train"}
    lr = runner.run.learning_rate
    if optimizer == "adamw":  # warm-up over int(3 * 0.5) = 1 step, then decay over 2
        schedule = warmup_linear_decay(lr, 3, 0.5)
        assert [float(schedule(k)) for k in (0, 1, 2)] == pytest.approx([0.0, lr, lr / 2])
        expected = {step: float(schedule(step - 1)) for step in rates}
    else:
        blanks = runner.task.count_training_blanks()
        t_total = released_optimizer.script_schedule_steps(blanks, runner.run.batch_size, 10.0)

        def rate(k):  # warmup_linear(k / t_total, 0.5) applied twice
            x = k / t_total
            return lr * (x / 0.5 if x < 0.5 else 1 - x) ** 2

        expected = {step: rate(step - 1) for step in rates}
    assert {2, 3} <= set(rates) and rates[3] > 0
    assert rates == pytest.approx(expected, rel=1e-6)


def test_the_trainer_traces_its_steps_with_the_runs_attention(monkeypatch):
    """attention_implementation "dot_product": the score step (inference) goes through
    jax.nn.dot_product_attention, the train step too once attention dropout is off; "auto"
    on CPU: neither."""
    import dataclasses

    from cmrcx.models import attention

    calls = []
    real = jax.nn.dot_product_attention
    monkeypatch.setattr(
        attention.jax.nn, "dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    no_dropout = dataclasses.replace(SMALL, attention_dropout=0.0)
    for implementation, expected in (("auto", False), ("dot_product", True)):
        model = ClozeModel(registry.network(no_dropout, "cloze"))
        mesh = partitioning.make_mesh((1, 1), jax.devices()[:1])
        trainer = Trainer(
            model, adamw_with_warmup(1e-3, 10), mesh, make_batch(),
            attention_implementation=implementation,
        )  # fmt: skip
        state = trainer.init_state()
        calls.clear()
        state, _ = trainer.train_step(state, make_batch())
        assert bool(calls) is expected
        calls.clear()
        trainer.score(state.params, make_batch())
        assert bool(calls) is expected
    assert attention.current_implementation() == "auto"
