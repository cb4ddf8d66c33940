"""mT5-base at its real geometry converts with parity (slow).

The tiny-geometry parity is `test_t5_conversion.py`; this is the same check at google/
mt5-base's geometry exactly as `models/t5/mt5_base.gin` binds it (vocab 250112, d_model
768, d_kv 64, d_ff 2048, 12 + 12 blocks, 12 heads, 32 buckets up to distance 128,
gated-GeLU, own lm_head): a random-init transformers `MT5ForConditionalGeneration`
(float32, every parameter drawn as `reference_model` draws them, q scaled as T5 does so
that attention logits too stay of order 1), saved as the release ships (safetensors,
`tie_word_embeddings: false`, the tokenizer files), converted by `cmrcx.convert`. The
converted config is the gin's, the parameter count transformers', and on a padded batch
the logits and the candidate pointer's decoder states (LOT understanding) are
transformers' to 1e-5 x their largest value. Memory: one float32 copy is ~2.3 GB; the
torch model is freed before the conversion, which peaks near 7.5 GB RSS (about three
float32 copies at once), and before the JAX model.
"""

from __future__ import annotations

import gc
import resource
import time

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cmrcx import convert  # noqa: E402
from cmrcx.cli import launch  # noqa: E402
from cmrcx.models import registry  # noqa: E402
from cmrcx.models.t5 import T5ForConditionalGeneration  # noqa: E402
from cmrcx.weights import exports  # noqa: E402
from tests.weights.test_t5_conversion import save_release, torch_outputs  # noqa: E402

# google/mt5-base's config.json (the values models/t5/mt5_base.gin copies).
MT5_BASE = dict(
    vocab_size=250112, d_model=768, d_kv=64, d_ff=2048, num_layers=12, num_decoder_layers=12,
    num_heads=12, relative_attention_num_buckets=32, relative_attention_max_distance=128,
    dropout_rate=0.1, layer_norm_epsilon=1e-6, feed_forward_proj="gated-gelu",
    tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
)  # fmt: skip
RTOL = 1e-5  # x the largest reference value, as test_t5_conversion


def reference_mt5_base(seed: int = 0):
    """A float32 transformers MT5ForConditionalGeneration at mT5-base's geometry, every
    parameter random at the scales of `test_t5_conversion.reference_model`."""
    config = transformers.MT5Config(**MT5_BASE)
    torch.manual_seed(seed)
    model = transformers.MT5ForConditionalGeneration(config).eval()
    # transformers 5 ties at construction; the release's own head unties it.
    model.lm_head.weight = torch.nn.Parameter(torch.empty_like(model.shared.weight))
    inner = MT5_BASE["num_heads"] * MT5_BASE["d_kv"]
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layer_norm" in name:
                param.uniform_(0.5, 1.5)
            elif "relative_attention_bias" in name or name == "shared.weight":
                param.normal_(0.0, 1.0)
            else:  # inputs of order 1 give outputs of order 1
                layer = name.split(".")[-2]
                fan_in = {"o": inner, "wo": MT5_BASE["d_ff"]}.get(layer, MT5_BASE["d_model"])
                # T5 has no 1/sqrt(d_kv) in attention: its q init carries it (as T5's own
                # init does). Without it the attention logits have stddev sqrt(d_kv) = 8,
                # the softmaxes are near-argmax, and float32 rounding alone (torch float32
                # against float64) moves the logits by 0.04 after 24 blocks.
                scale = MT5_BASE["d_kv"] ** -0.5 if layer == "q" else 1.0
                param.normal_(0.0, scale * fan_in**-0.5)
    return model


def padded_batch(seed: int = 1, source: int = 32, target: int = 16):
    """(ids, mask, decoder_ids, decoder_mask) of 2 rows, each padded in one mask."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(2, MT5_BASE["vocab_size"], [2, source])
    mask = np.ones_like(ids)
    mask[1, source - 9 :] = 0
    decoder_ids = rng.integers(2, MT5_BASE["vocab_size"], [2, target])
    decoder_mask = np.ones_like(decoder_ids)
    decoder_mask[0, target - 4 :] = 0
    return ids, mask, decoder_ids, decoder_mask


def torch_pointer_states(model, ids, mask):
    """transformers' decoder_hidden_states[-1] (after the final layer norm) with the
    decoder reading [decoder_start] + ids, the encoder ids: [batch, length, d_model]."""
    start = np.full([ids.shape[0], 1], MT5_BASE["decoder_start_token_id"])
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            decoder_input_ids=torch.tensor(np.concatenate([start, ids], 1)),
            decoder_attention_mask=torch.tensor(np.concatenate([np.ones_like(start), mask], 1)),
            output_hidden_states=True,
        )
    return out.decoder_hidden_states[-1][:, 1:].numpy()


def gin_mt5_base_config():
    """The T5Config `models/t5/mt5_base.gin` binds."""
    launch.parse_gin(["models/t5/mt5_base.gin"], [])
    return gin.get_configurable("cmrcx.T5Config")()


def max_error(name: str, want: np.ndarray, got: np.ndarray) -> float:
    """Asserts |got - want| <= RTOL x max|want| (of order 1); the max abs difference."""
    scale = float(np.abs(want).max())
    assert 0.5 < scale < 20, f"{name}: reference scale {scale} is not of order 1"
    np.testing.assert_allclose(got, want, atol=RTOL * scale, rtol=0, err_msg=name)
    error = float(np.abs(got - want).max())
    print(f"{name}: max |diff| {error:.3g} (scale {scale:.3g}, {error / scale:.3g} of it)")
    return error


@pytest.mark.slow
def test_mt5_base_converts_with_parity(tmp_path, capsys):
    began = time.monotonic()
    ids, mask, decoder_ids, decoder_mask = batch = padded_batch()
    model = reference_mt5_base()
    torch_count = sum(p.numel() for p in model.parameters())  # shared counted once
    save_release(model, tmp_path / "hf", "mt5", safetensors=True)
    _, want_logits = torch_outputs(model, *batch)
    want_states = torch_pointer_states(model, ids, mask)
    del model
    gc.collect()

    assert convert.main(["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    config, params = exports.read_network(str(tmp_path / "out"))
    assert config == gin_mt5_base_config()
    assert sum(leaf.size for leaf in jax.tree.leaves(params)) == torch_count
    assert 580e6 < torch_count < 585e6  # mT5 paper (Xue et al. 2021) Table 1: 580M

    params = jax.device_put(params)
    gc.collect()
    seq2seq = T5ForConditionalGeneration(config)

    def encode_and_decode(module, ids, mask, decoder_ids, decoder_mask):
        return module.decode(decoder_ids, module.encode(ids, mask), mask, decoder_mask)

    logits = jax.jit(
        lambda params, *inputs: seq2seq.apply({"params": params}, *inputs, method=encode_and_decode)
    )(params, ids, mask, decoder_ids, decoder_mask)
    pointer = registry.network(config, "candidate_pointer")

    def token_states(module, ids, mask):
        return module.states(ids, None, mask)

    states = jax.jit(
        lambda params, ids, mask: pointer.apply({"params": params}, ids, mask, method=token_states)
    )({"t5": params}, jnp.asarray(ids), jnp.asarray(mask))

    with capsys.disabled():
        print()
        max_error("logits", want_logits, np.asarray(logits))
        max_error("pointer decoder states", want_states, np.asarray(states))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
        seconds = time.monotonic() - began
        print(f"{torch_count:,} parameters; {seconds:.0f} s, peak RSS {peak:.1f} GB")
