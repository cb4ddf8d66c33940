"""Incremental T5 decoding: cache parity, greedy == transformers' generate, sampling."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.models import decoding
from cmrcx.models.t5 import T5DecodeModel, T5ForConditionalGeneration
from cmrcx.weights import t5 as t5_weights

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ODD = dict(
    vocab_size=101, d_model=48, d_kv=10, num_heads=3, d_ff=70, num_layers=2, num_decoder_layers=3
)
VARIANTS = {"longlm": ("relu", True, 8, 20), "mt5": ("gated-gelu", False, 32, 128)}


def reference_model(variant: str, seed: int = 0):
    """As test_t5_conversion.py: every parameter random, outputs of order 1."""
    proj, tied, buckets, max_distance = VARIANTS[variant]
    cls = (
        transformers.T5ForConditionalGeneration
        if tied
        else transformers.MT5ForConditionalGeneration
    )
    config_cls = transformers.T5Config if tied else transformers.MT5Config
    config = config_cls(
        **ODD, feed_forward_proj=proj, tie_word_embeddings=tied,
        relative_attention_num_buckets=buckets, relative_attention_max_distance=max_distance,
        decoder_start_token_id=0,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = cls(config).eval()
    if not tied:
        model.lm_head.weight = torch.nn.Parameter(torch.empty_like(model.shared.weight))
    inner = ODD["num_heads"] * ODD["d_kv"]
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layer_norm" in name:
                param.uniform_(0.5, 1.5)
            elif "relative_attention_bias" in name or name == "shared.weight":
                param.normal_(0.0, 1.0)
            else:
                fan_in = {"o": inner, "wo": ODD["d_ff"]}.get(name.split(".")[-2], ODD["d_model"])
                param.normal_(0.0, fan_in**-0.5)
    return model


def inputs(seed=2, source=17):
    rng = np.random.default_rng(seed)
    ids = rng.integers(2, ODD["vocab_size"], [3, source])
    mask = np.ones_like(ids)
    mask[1, source - 6 :] = 0
    mask[2, source - 11 :] = 0
    return ids, mask


@pytest.fixture(scope="module", params=list(VARIANTS))
def converted(request, tmp_path_factory):
    model = reference_model(request.param)
    directory = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(directory)
    release = t5_weights.read_dir(str(directory))
    return model, release.config, release.params


def test_cache_steps_give_the_teacher_forced_logits(converted):
    _, config, params = converted
    model = T5ForConditionalGeneration(config)
    ids, mask = inputs()
    decoder_ids = np.random.default_rng(3).integers(0, ODD["vocab_size"], [3, 9])

    @jax.jit
    def both(params):
        apply = lambda *a, **k: model.apply({"params": params}, *a, **k)  # noqa: E731
        encoded = apply(ids, mask, method="encode")
        full = apply(decoder_ids, encoded, mask, method="decode")
        cache = apply(encoded, decoder_ids.shape[1], method="init_cache")
        steps = []
        for i in range(decoder_ids.shape[1]):
            logits, cache = apply(
                decoder_ids[:, i], cache, jnp.int32(i), mask, method="decode_step"
            )
            steps.append(logits)
        return full, jnp.stack(steps, 1)

    full, steps = both(params)
    scale = np.abs(np.asarray(full)).max()
    np.testing.assert_allclose(steps, full, atol=1e-5 * scale, rtol=0)


def test_greedy_is_token_identical_to_transformers_generate(converted):
    hf, config, params = converted
    ids, mask = inputs()
    n = 12
    # use_cache=False: transformers 5's T5 cache has num_layers (2), not num_decoder_layers
    # (3), entries and fails here. EOS = a token greedy emits mid-way in row 0,
    # so rows end at different steps.
    with torch.no_grad():
        free = hf.generate(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), do_sample=False,
            num_beams=1, max_new_tokens=n, use_cache=False,
            eos_token_id=ODD["vocab_size"] + 5, pad_token_id=0,
        ).numpy()[:, 1:]  # fmt: skip
    eos = int(free[0, 4])
    with torch.no_grad():
        want = hf.generate(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), do_sample=False,
            num_beams=1, max_new_tokens=n, use_cache=False, eos_token_id=eos, pad_token_id=0,
        ).numpy()[:, 1:]  # fmt: skip
    want = np.pad(want, [(0, 0), (0, n - want.shape[1])], constant_values=0)
    config = dataclasses.replace(config, eos_token_id=eos)
    model = T5DecodeModel(config)
    got = decoding.greedy(model, params, ids, mask, n)
    np.testing.assert_array_equal(got.tokens, want)
    ended = (want == eos).any(1)
    assert ended[0]
    expected_lengths = np.where(ended, (want == eos).argmax(1) + 1, n)
    np.testing.assert_array_equal(got.lengths, expected_lengths)
    # One compilation per bucket: the same shapes reuse it, new ones add one.
    run = decoding._jitted(model, n, None, None, None, False)
    size = run._cache_size()
    decoding.greedy(model, params, ids[::-1].copy(), mask[::-1].copy(), n)
    assert run._cache_size() == size


def test_filter_logits_sampling_matches_the_truncated_distribution():
    logits = jnp.log(jnp.array([0.3, 0.25, 0.2, 0.1, 0.08, 0.05, 0.02]))
    cases = [(1.0, 0, 1.0), (0.7, 3, 1.0), (1.5, 0, 0.6), (1.3, 4, 0.8)]
    draws = 40000
    for temperature, top_k, top_p in cases:
        filtered = decoding.filter_logits(logits, temperature, top_k, top_p)
        samples = jax.random.categorical(jax.random.key(0), filtered, shape=(draws,))
        counts = np.bincount(np.asarray(samples), minlength=7)
        # Expected: p**(1/T), rank-truncated, renormalised (computed here in numpy).
        p = np.asarray(jnp.exp(logits)) ** (1 / temperature)
        p /= p.sum()
        keep = np.ones(7, bool)
        if top_k:
            keep &= np.arange(7) < top_k
        q = np.where(keep, p, 0) / np.where(keep, p, 0).sum()
        if top_p < 1:
            keep &= (np.cumsum(q) - q) < top_p
        q = np.where(keep, q, 0) / np.where(keep, q, 0).sum()
        assert (counts[~keep] == 0).all()
        if top_k:
            assert (counts > 0).sum() <= top_k
        support = keep.nonzero()[0]
        chi2 = (((counts[support] - draws * q[support]) ** 2) / (draws * q[support])).sum()
        assert chi2 < 30, (temperature, top_k, top_p, chi2)  # p < 1e-4 for <= 6 dof


def test_sample_runs_and_stops_with_pad_after_eos(converted):
    _, config, params = converted
    ids, mask = inputs()
    model = T5DecodeModel(config)
    a = decoding.sample(model, params, ids, mask, 8, jax.random.key(1), 1.0, 5, 0.9)
    b = decoding.sample(model, params, ids, mask, 8, jax.random.key(1), 1.0, 5, 0.9)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    assert a.tokens.shape == (3, 8)
    for row, length in zip(np.asarray(a.tokens), np.asarray(a.lengths), strict=True):
        assert (row[length:] == config.pad_token_id).all()


def test_greedy_with_longlm_ids_and_id_0_tokens(converted):
    """LongLM's layout: pad 5, decoder start 1 (gen.py's), id 0 (<unk>) a real input
    token. Token-identical to transformers' generate with the explicit attention mask,
    pad 5 after EOS; the batch's padding id does not matter."""
    hf, config, params = converted
    ids, mask = inputs(seed=5)
    ids[np.random.default_rng(5).random(ids.shape) < 0.3] = 0
    ids = np.where(mask > 0, ids, 5)
    n = 10

    def hf_greedy(eos):
        with torch.no_grad():
            out = hf.generate(
                input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), do_sample=False,
                num_beams=1, max_new_tokens=n, use_cache=False, eos_token_id=eos,
                pad_token_id=5, decoder_start_token_id=1,
            ).numpy()  # fmt: skip
        assert (out[:, 0] == 1).all()
        return np.pad(out[:, 1:], [(0, 0), (0, n + 1 - out.shape[1])], constant_values=5)

    eos = int(hf_greedy(ODD["vocab_size"] + 5)[0, 3])  # rows end at different steps
    want = hf_greedy(eos)
    config = dataclasses.replace(config, pad_token_id=5, eos_token_id=eos, decoder_start_token_id=1)
    model = T5DecodeModel(config)
    got = decoding.greedy(model, params, ids, mask, n)
    np.testing.assert_array_equal(got.tokens, want)
    assert (want == eos).any(1)[0] and (want[0] == 5).any()
    zero_padded = decoding.greedy(model, params, np.where(mask > 0, ids, 0), mask, n)
    np.testing.assert_array_equal(zero_padded.tokens, got.tokens)
