"""GPT-2: conversion from transformers' GPT2LMHeadModel (logits to 1e-5 x scale), the KV
cache against teacher forcing, and greedy / sampling / beam search token-identical to
transformers' `generate` on a random model with a left-padded batch (sampling: transformers
drawing cmrcx's Gumbel noise in place of `torch.multinomial`)."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.models import decoding, registry
from cmrcx.models.gpt2 import GPT2DecodeModel, GPT2LMHeadModel, positions_of
from cmrcx.weights import gpt2 as gpt2_weights
from tests.support import FAST_COMPILE

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# Odd sizes, so a transposed or mis-split axis cannot line up by accident.
ODD = dict(vocab_size=97, n_positions=40, n_embd=30, n_layer=2, n_head=3, n_inner=44)
PAD = 0


def reference_model(seed: int = 0, vocab_size: int = ODD["vocab_size"], bos=1, eos=2):
    """Every parameter random, logits of order several units (few ties, varied choices)."""
    geometry = {**ODD, "vocab_size": vocab_size}
    config = transformers.GPT2Config(
        **geometry, bos_token_id=bos, eos_token_id=eos, pad_token_id=PAD
    )
    torch.manual_seed(seed)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "ln_" in name and name.endswith("weight"):
                param.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                param.normal_(0.0, 0.1)
            elif "wte" in name or "wpe" in name:
                param.normal_(0.0, 0.5)
            else:
                param.normal_(0.0, param.shape[0] ** -0.5)
    return model


def prompts(seed: int = 2, batch: int = 4, length: int = 9):
    """Left-padded prompts (as transformers' generate wants a decoder-only batch)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, ODD["vocab_size"], [batch, length])
    mask = np.ones_like(ids)
    mask[1, :3] = 0
    mask[2, :6] = 0
    return np.where(mask > 0, ids, PAD), mask


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    model = reference_model()
    directory = tmp_path_factory.mktemp("gpt2")
    model.save_pretrained(directory)
    release = gpt2_weights.read_dir(str(directory))
    return model, release.config, release.params, str(directory)


def test_registry_row_and_round_trip(converted, tmp_path):
    _, config, params, directory = converted
    row = registry.family_of(config)
    assert row.name == "gpt2" and row.causal and registry.family_of_hf_type("gpt2") is row
    gpt2_weights.write_hf_dir(str(tmp_path), params, config, None)
    again = gpt2_weights.read_dir(str(tmp_path))
    assert again.config == config
    jax.tree.map(np.testing.assert_array_equal, again.params, params)
    untied = transformers.GPT2LMHeadModel.from_pretrained(tmp_path)
    assert untied.lm_head.weight.data_ptr() == untied.transformer.wte.weight.data_ptr()


def test_logits_match_transformers(converted):
    hf, config, params, _ = converted
    ids, mask = prompts()
    with torch.no_grad():
        want = hf(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
            position_ids=torch.tensor(np.asarray(positions_of(mask))),
        ).logits.numpy()  # fmt: skip
    got = np.asarray(jax.jit(GPT2LMHeadModel(config).apply)({"params": params}, ids, mask))
    real = mask > 0
    scale = np.abs(want).max()
    np.testing.assert_allclose(got[real], want[real], atol=1e-5 * scale, rtol=0)


def test_cache_steps_give_the_teacher_forced_logits(converted):
    """Prefill a right-padded prompt, then feed tokens: each step's logits are the full
    forward's at that token (the row's own positions, padding skipped)."""
    _, config, params, _ = converted
    ids, mask = prompts()
    right_ids = np.stack([np.roll(r, -int((m == 0).sum())) for r, m in zip(ids, mask, strict=True)])
    right_mask = np.stack([np.roll(m, -int((m == 0).sum())) for m in mask])
    more = np.random.default_rng(3).integers(3, ODD["vocab_size"], [4, 5])
    model = GPT2DecodeModel(config)

    # One program (not one compile per op), at XLA's optimisation level 0: the cache's
    # semantics, not codegen, are checked here (parity with transformers: above, below).
    @functools.partial(jax.jit, compiler_options=FAST_COMPILE)
    def steps_and_full(params):
        cache = model.init_cache(params, model.encode(params, right_ids, right_mask), 6)
        steps = [model.decode_step(params, jnp.full([4], 1), cache, jnp.int32(0), right_mask)[0]]
        for t in range(5):
            logits, cache = model.decode_step(
                params, more[:, t], cache, jnp.int32(t + 1), right_mask
            )
            steps.append(logits)
        full = GPT2LMHeadModel(config).apply(
            {"params": params},
            np.concatenate([ids, more], 1),
            np.pad(mask, [(0, 0), (0, 5)], constant_values=1),
        )
        return jnp.stack(steps, 1), full  # [batch, 6, vocab], [batch, 14, vocab]

    steps, full = (np.asarray(x) for x in steps_and_full(params))
    full = full[:, ids.shape[1] - 1 :]
    np.testing.assert_allclose(steps, full, atol=1e-5 * np.abs(full).max(), rtol=0)


def hf_generate(hf, ids, mask, n, **options):
    """transformers' new tokens [batch, n], pad after EOS (its beam search fills with
    `pad_token_id or eos_token_id`, i.e. EOS for pad 0; see test_beam_search.py)."""
    with torch.no_grad():
        out = hf.generate(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), max_new_tokens=n,
            pad_token_id=PAD, **options,
        ).numpy()[:, ids.shape[1] :]  # fmt: skip
    eos = options["eos_token_id"]
    out = np.where(np.cumsum(out == eos, axis=1) - (out == eos) > 0, PAD, out)
    return np.pad(out, [(0, 0), (0, n - out.shape[1])], constant_values=PAD)


def eos_config(hf, config, ids, mask, n):
    """An EOS that greedy emits mid-way in row 0, so rows end at different steps."""
    free = hf_generate(hf, ids, mask, n, do_sample=False, eos_token_id=ODD["vocab_size"] + 5)
    eos = int(free[0, 4])
    return eos, dataclasses.replace(config, eos_token_id=eos, pad_token_id=PAD)


def test_greedy_and_top1_sampling_are_token_identical_to_generate(converted):
    hf, config, params, _ = converted
    ids, mask = prompts()
    n = 10
    eos, config = eos_config(hf, config, ids, mask, n)
    want = hf_generate(hf, ids, mask, n, do_sample=False, eos_token_id=eos)
    assert (want == eos).any(1)[0]
    got = decoding.greedy(GPT2DecodeModel(config), params, ids, mask, n)
    np.testing.assert_array_equal(got.tokens, want)
    ended = (want == eos).any(1)
    assert len(set(np.where(ended, (want == eos).argmax(1), -1))) > 1, want  # rows end apart
    np.testing.assert_array_equal(got.lengths, np.where(ended, (want == eos).argmax(1) + 1, n))
    # Sampling: top_k=1 leaves one token, so both samplers must agree whatever their RNG.
    sampled = hf_generate(hf, ids, mask, n, do_sample=True, top_k=1, eos_token_id=eos)
    ours = decoding.sample(GPT2DecodeModel(config), params, ids, mask, n, jax.random.key(0), 0.7, 1)
    np.testing.assert_array_equal(ours.tokens, sampled)


def cmrcx_noise_multinomial(rng, calls: list):
    """A stand-in for `torch.multinomial(probs, num_samples=1)` that draws what
    `decoding.sample(..., rng)` draws: call t (transformers' `_sample` makes one per step,
    for the whole batch, finished rows included) returns argmax(log probs + g_t), g_t the
    Gumbel noise of cmrcx's step t (jax.random.categorical(key, x) is argmax(x +
    gumbel(key, x.shape)): one key for the batch, or a key per row)."""

    def multinomial(probs, num_samples, *args, **kwargs):
        assert num_samples == 1 and not args and not kwargs
        keys = decoding.step_keys(rng, len(calls))
        if keys.ndim == 0:
            noise = jax.random.gumbel(keys, probs.shape, jnp.float32)
        else:
            noise = jax.vmap(lambda key: jax.random.gumbel(key, probs.shape[1:], jnp.float32))(keys)
        calls.append(probs)
        return (torch.log(probs) + torch.from_numpy(np.array(noise))).argmax(-1, keepdim=True)

    return multinomial


def test_categorical_is_gumbel_max():
    """What cmrcx_noise_multinomial relies on (jax's `_categorical`, replace=True): one key
    for the batch, and a key per row under vmap, as `decoding.sample` draws."""
    x = jax.random.normal(jax.random.key(3), [5, 97]).at[:, 10:].set(-jnp.inf)
    key = jax.random.key(4)
    one = jnp.argmax(x + jax.random.gumbel(key, x.shape, jnp.float32), -1)
    np.testing.assert_array_equal(jax.random.categorical(key, x), one)
    keys = jax.random.split(key, 5)
    noise = jax.vmap(lambda k: jax.random.gumbel(k, x.shape[1:], jnp.float32))(keys)
    per_row = jax.vmap(jax.random.categorical)(keys, x)
    np.testing.assert_array_equal(per_row, jnp.argmax(x + noise, -1))
    np.testing.assert_array_equal(per_row[2], jax.random.categorical(keys[2], x[2]))


# id -> (sample options, a key per row); one case in the default suite (one compilation
# each, ~3 s on an idle core), the others in the slow suite.
SAMPLING = {
    "top_k40_top_p0.9_t0.7": (dict(temperature=0.7, top_k=40, top_p=0.9), False),
    "top_k40_t0.7": (dict(temperature=0.7, top_k=40), False),
    "top_p0.9_row_keys": (dict(top_k=0, top_p=0.9), True),
}


SLOW = pytest.mark.slow  # default-suite budget


@pytest.mark.parametrize(
    "case", [case if i == 0 else pytest.param(case, marks=SLOW) for i, case in enumerate(SAMPLING)]
)
def test_sampling_is_token_identical_to_generate(converted, monkeypatch, case):
    """Sampling with transformers drawing cmrcx's noise: the same tokens, on a left-padded
    batch of rows of 9, 6, 3 and 9 prompt tokens, some rows ending at EOS early."""
    hf, config, params, _ = converted
    options, row_keys = SAMPLING[case]
    ids, mask = prompts()
    n = 10
    rng = jax.random.key(7)
    if row_keys:
        rng = jax.random.split(rng, ids.shape[0])

    def hf_sample(eos):
        calls = []
        monkeypatch.setattr(torch, "multinomial", cmrcx_noise_multinomial(rng, calls))
        out = hf_generate(hf, ids, mask, n, do_sample=True, eos_token_id=eos, **options)
        return out, np.stack([(p > 0).sum(-1).numpy() for p in calls])  # [steps, batch]

    # The EOS: a token row 0 samples mid-way (none of the vocabulary ends a row here).
    free, support = hf_sample(ODD["vocab_size"] + 5)
    assert len(support) == n and support.max() > 1  # real draws, one call per step
    if options.get("top_p", 1.0) < 1.0:  # top-p cuts below top-k (or the vocabulary)
        assert support.min() < (options["top_k"] or ODD["vocab_size"]), support
    eos = int(next(t for t in free[0, 3:] if t != PAD))
    want, support = hf_sample(eos)
    ended = (want == eos).any(1)
    assert ended[0] and len(support) == max(np.where(ended, (want == eos).argmax(1) + 1, n))
    assert len(set(np.where(ended, (want == eos).argmax(1), -1))) > 1, want  # rows end apart
    config = dataclasses.replace(config, eos_token_id=eos, pad_token_id=PAD)
    got = decoding.sample(GPT2DecodeModel(config), params, ids, mask, n, rng, **options)
    np.testing.assert_array_equal(got.tokens, want)
    np.testing.assert_array_equal(got.lengths, np.where(ended, (want == eos).argmax(1) + 1, n))


@pytest.mark.parametrize("length_penalty, early_stopping", [(1.0, False), (0.6, True)])
def test_beam_search_is_token_identical_to_generate(converted, length_penalty, early_stopping):
    hf, config, params, _ = converted
    ids, mask = prompts()
    n = 8
    eos, config = eos_config(hf, config, ids, mask, n)
    want = hf_generate(
        hf, ids, mask, n, do_sample=False, num_beams=4, eos_token_id=eos,
        length_penalty=length_penalty, early_stopping=early_stopping,
    )  # fmt: skip
    got = decoding.beam_search(
        GPT2DecodeModel(config), params, ids, mask, n, 4, length_penalty, early_stopping
    )
    np.testing.assert_array_equal(got.tokens, want)
    ended = (want == eos).any(1)
    assert len(set(np.where(ended, (want == eos).argmax(1), -1))) > 1, want  # rows end apart
    np.testing.assert_array_equal(got.lengths, np.where(ended, (want == eos).argmax(1) + 1, n))


def test_uer_config_ids():
    """UER's config.json names no special ids; a copy re-saved by transformers 4.x has
    its GPT-2 defaults (50256), past the 21128 ids: both read as BERT's [CLS] [SEP] [PAD]."""
    uer = {
        "model_type": "gpt2",
        "vocab_size": 21128,
        "n_layer": 12,
        "tokenizer_class": "BertTokenizer",
    }
    resaved = {**uer, "bos_token_id": 50256, "eos_token_id": 50256}
    for raw in (uer, resaved):
        config = gpt2_weights.config_from_hf(raw)
        assert (config.bos_token_id, config.eos_token_id, config.pad_token_id) == (101, 102, 0)
    assert gpt2_weights.ids_outside_vocabulary(resaved) == ["bos_token_id", "eos_token_id"]
    openai = gpt2_weights.config_from_hf({**resaved, "vocab_size": 50257})
    assert (openai.eos_token_id, openai.pad_token_id) == (50256, 50256)


@pytest.mark.slow  # default-suite budget (15 min on 2 cores)
def test_bf16_remat_and_logical_axes():
    """bf16 compute with remat trains (finite gradients, float32 logits), and every
    parameter's logical axes resolve under the tensor-parallel rules."""
    import flax.linen as nn

    from cmrcx.models.gpt2 import GPT2Config
    from cmrcx.training import partitioning

    config = GPT2Config(**ODD, dtype="bfloat16", remat_policy="full")
    model = GPT2LMHeadModel(config)
    ids, mask = prompts()
    boxed = jax.eval_shape(lambda: model.init(jax.random.key(0), ids, mask))["params"]
    specs = nn.get_partition_spec(boxed)
    rules = partitioning.logical_rules("tensor")
    assert jax.tree.leaves(nn.logical_to_mesh(specs, rules))  # every name is known
    params = nn.meta.unbox(model.init(jax.random.key(0), ids, mask))["params"]

    def loss(p):
        logits = model.apply({"params": p}, ids, mask, False, rngs={"dropout": jax.random.key(1)})
        assert logits.dtype == jnp.float32
        return jnp.mean(jax.nn.logsumexp(logits, -1))

    grads = jax.jit(jax.grad(loss))(params)
    assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grads))
