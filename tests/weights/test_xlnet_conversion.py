"""XLNet: the Flax encoder and heads match transformers' PyTorch XLNet to 1e-5.

Reference models are random-initialised transformers XLNet models built here, every
parameter drawn at random (biases, LayerNorms and the relative-attention biases
included, so a wrong mapping cannot hide behind zeros and ones), saved as a HuggingFace
directory and converted with `cmrcx.convert`. Inputs are left-padded, as XLNet's
tokenizer pads, in two segments and a `<cls>` segment (types 0, 1, 2), so the relative
segment term and the padding mask both count. Compared: hidden states (XLNetModel),
classification logits (XLNetForSequenceClassification: sequence summary + logits_proj
against the classification head), span logits (XLNetForQuestionAnsweringSimple) and
choice logits (XLNetForMultipleChoice).
"""

from __future__ import annotations

import functools
import json

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.numpy import load_file  # noqa: E402

from cmrcx import convert  # noqa: E402
from cmrcx.models import registry  # noqa: E402
from cmrcx.models.xlnet import XLNetConfig, XLNetEncoder  # noqa: E402
from cmrcx.weights import conversion, exports  # noqa: E402
from cmrcx.weights import xlnet as xlnet_weights  # noqa: E402

# Odd sizes, so a transposed or mis-split axis cannot line up by accident.
TINY = dict(vocab_size=97, d_model=24, n_layer=2, n_head=3, d_inner=40)
LENGTH = 13


def reference_model(kind: str = "XLNetModel", seed: int = 0, **settings):
    """A transformers XLNet `kind` with every parameter random (normal, std 0.5)."""
    torch.manual_seed(seed)
    labels = 2 if kind == "XLNetForQuestionAnsweringSimple" else 5  # start and end
    config = transformers.XLNetConfig(**TINY, num_labels=labels, **settings)
    model = getattr(transformers, kind)(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.5)
    return model


def left_padded_batch(seed: int = 0, length: int = LENGTH, rows: int = 3):
    """ids, token types (a 0, b 1, <cls> 2, padding 3 as XLNetTokenizer's) and the mask:
    row 0 full, row 1 padded by 5 on the left, row 2 by 1."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, TINY["vocab_size"], [rows, length])
    mask = np.ones_like(ids)
    types = np.zeros_like(ids)
    for row, pad in enumerate([0, 5, 1][:rows] + [2] * max(0, rows - 3)):
        mask[row, :pad] = 0
        types[row, :pad] = 3
        types[row, pad + (length - pad) // 2 :] = 1
        types[row, -1] = 2
    return ids, types, mask


def torch_inputs(ids, types, mask):
    return dict(
        input_ids=torch.tensor(ids),
        token_type_ids=torch.tensor(types),
        attention_mask=torch.tensor(mask),
    )


def converted(model, tmp_path, name="hf"):
    """(config, params["xlnet"]) of `model` saved as safetensors and converted."""
    source, out = tmp_path / name, tmp_path / f"{name}_export"
    model.save_pretrained(source)
    (source / "spiece.model").write_bytes(b"")  # a file to copy; not read here
    conversion.convert(registry.family("xlnet"), str(source), str(out))
    return exports.read_network(str(out))


@functools.cache
def encoder_apply(config: XLNetConfig):
    """XLNetEncoder(config).apply, jitted once per config: one compile, not one per op."""
    return jax.jit(XLNetEncoder(config).apply)


def head_params(model, names):
    """{cmrcx head layer: {kernel, bias}} from the torch task model's linear layers."""
    out = {}
    for ours, theirs in names.items():
        layer = getattr(model, theirs)
        out[ours] = {
            "kernel": layer.weight.detach().numpy().T,
            "bias": layer.bias.detach().numpy(),
        }
    return out


def test_hidden_states_match_xlnet_model(tmp_path):
    model = reference_model()
    config, params = converted(model, tmp_path)
    assert config == XLNetConfig(
        vocab_size=97, d_model=24, num_layers=2, num_heads=3, d_inner=40, dtype="float32"
    )
    ids, types, mask = left_padded_batch()
    with torch.no_grad():
        want = model(**torch_inputs(ids, types, mask)).last_hidden_state.numpy()
    got, _ = encoder_apply(config)({"params": params}, ids, types, mask)
    assert np.abs(want).max() > 1.0  # outputs of order 1: the tolerance means something
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=0)


def test_clamp_len_and_relu(tmp_path):
    model = reference_model(seed=1, clamp_len=4, ff_activation="relu")
    config, params = converted(model, tmp_path)
    assert (config.clamp_len, config.ff_activation) == (4, "relu")
    ids, types, mask = left_padded_batch(seed=1)
    with torch.no_grad():
        want = model(**torch_inputs(ids, types, mask)).last_hidden_state.numpy()
    got, _ = encoder_apply(config)({"params": params}, ids, types, mask)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=0)


def test_classification_logits_match_xlnet_for_sequence_classification(tmp_path):
    model = reference_model("XLNetForSequenceClassification", seed=2)
    config, params = converted(model, tmp_path)
    network = registry.network(config, "classification", num_classes=5)
    tree = {"xlnet": params, **head_params(model, {"classifier": "logits_proj"})}
    ids, types, mask = left_padded_batch(seed=2)
    with torch.no_grad():
        want = model(**torch_inputs(ids, types, mask)).logits.numpy()
    got = jax.jit(network.apply)({"params": tree}, ids, types, mask)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=0)


def test_span_logits_match_xlnet_for_question_answering_simple(tmp_path):
    model = reference_model("XLNetForQuestionAnsweringSimple", seed=3)
    config, params = converted(model, tmp_path)
    network = registry.network(config, "span")
    tree = {"xlnet": params, **head_params(model, {"qa_outputs": "qa_outputs"})}
    ids, types, mask = left_padded_batch(seed=3)
    with torch.no_grad():
        out = model(**torch_inputs(ids, types, mask))
    got = np.asarray(jax.jit(network.apply)({"params": tree}, ids, types, mask))
    np.testing.assert_allclose(got[:, 0], out.start_logits.numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(got[:, 1], out.end_logits.numpy(), atol=1e-5, rtol=0)


def test_choice_logits_match_xlnet_for_multiple_choice(tmp_path):
    model = reference_model("XLNetForMultipleChoice", seed=4)
    config, params = converted(model, tmp_path)
    network = registry.network(config, "multiple_choice")
    tree = {"xlnet": params, **head_params(model, {"classifier": "logits_proj"})}
    ids, types, mask = (x.reshape(2, 3, LENGTH) for x in left_padded_batch(seed=4, rows=6))
    with torch.no_grad():
        want = model(**{k: v for k, v in torch_inputs(ids, types, mask).items()}).logits.numpy()
    got = jax.jit(network.apply)({"params": tree}, ids, types, mask)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=0)


def test_xlnet_model_gets_a_fresh_summary_and_drops_mask_emb(tmp_path, capsys):
    config, params = converted(reference_model(), tmp_path)
    printed = capsys.readouterr().out
    assert "dropped 1 tensors outside the fine-tuning encoder (mask_emb, " in printed
    assert "initialised fresh (2): sequence_summary.summary.bias" in printed
    assert np.all(params["sequence_summary"]["bias"] == 0)
    saved = json.loads((tmp_path / "hf_export" / "model_config.json").read_text())
    assert saved["family"] == "xlnet"
    assert saved["initialised_fresh"] == list(xlnet_weights.SUMMARY_HF)


def test_lm_head_model_converts_and_drops_its_head(tmp_path, capsys):
    model = reference_model("XLNetLMHeadModel", seed=5)
    config, params = converted(model, tmp_path)
    assert "lm_loss.bias" in capsys.readouterr().out
    ids, types, mask = left_padded_batch(seed=5)
    with torch.no_grad():
        want = model.transformer(**torch_inputs(ids, types, mask)).last_hidden_state.numpy()
    got, _ = encoder_apply(config)({"params": params}, ids, types, mask)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=0)


def test_export_to_hf_and_back_is_the_same_model(tmp_path):
    """write_hf_dir (cmrcx.export --format hf) -> transformers reads it -> convert again."""
    model = reference_model("XLNetForSequenceClassification", seed=6)
    config, params = converted(model, tmp_path)
    out = tmp_path / "written"
    xlnet_weights.write_hf_dir(str(out), params, config, None)
    names = set(load_file(str(out / "model.safetensors")))
    assert "transformer.layer.1.rel_attn.seg_embed" in names
    assert "sequence_summary.summary.weight" in names
    reread = transformers.XLNetForSequenceClassification.from_pretrained(out, num_labels=5)
    reread = reread.eval()
    with torch.no_grad():
        reread.logits_proj.load_state_dict(model.logits_proj.state_dict())
        ids, types, mask = left_padded_batch(seed=6)
        want = model(**torch_inputs(ids, types, mask)).logits.numpy()
        got = reread(**torch_inputs(ids, types, mask)).logits.numpy()
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
    again = xlnet_weights.read_dir(str(out))
    assert again.config == config
    jax.tree.map(np.testing.assert_array_equal, again.params, params)


def test_verify_compares_with_transformers(tmp_path, capsys):
    model = reference_model(seed=7)
    source, out = tmp_path / "hf", tmp_path / "export"
    model.save_pretrained(source)
    (source / "spiece.model").write_bytes(b"")
    assert convert.main(["--from", str(source), "--to", str(out), "--verify"]) == 0
    assert "verify: OK" in capsys.readouterr().out


def test_config_json_that_the_network_does_not_compute_is_refused():
    raw = {"model_type": "xlnet", **TINY}
    with pytest.raises(xlnet_weights.PretrainedFormatError, match="attn_type 'uni'"):
        xlnet_weights.config_from_hf({**raw, "attn_type": "uni"})
    with pytest.raises(xlnet_weights.PretrainedFormatError, match="bi_data True"):
        xlnet_weights.config_from_hf({**raw, "bi_data": True})
    with pytest.raises(xlnet_weights.PretrainedFormatError, match="ff_activation 'swish'"):
        xlnet_weights.config_from_hf({**raw, "ff_activation": "swish"})


def test_missing_and_misshapen_tensors_are_listed(tmp_path):
    model = reference_model()
    config = XLNetConfig(vocab_size=97, d_model=24, num_layers=2, num_heads=3, d_inner=40)
    tensors = {k: v.numpy() for k, v in model.state_dict().items()}
    named, _ = xlnet_weights.normalize_hf_names(tensors)
    named, _ = xlnet_weights.with_fresh_summary(named, config)
    del named["layer.1.rel_attn.r_s_bias"]
    named["layer.0.ff.layer_1.weight"] = named["layer.0.ff.layer_1.weight"][:, :5]
    with pytest.raises(xlnet_weights.WeightError) as error:
        xlnet_weights.params_from_hf(named, config, "src")
    assert "missing (1): layer.1.rel_attn.r_s_bias" in str(error.value)
    assert "layer.0.ff.layer_1.weight: (40, 5) (expected (40, 24))" in str(error.value)
