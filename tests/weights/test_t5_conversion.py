"""T5 / mT5 / LongLM conversion: outputs match transformers' PyTorch T5 to 1e-5.

Reference models are random-initialised `transformers` models built here, with
every parameter drawn at random (layer norms and relative position biases
included, so a wrong mapping cannot hide behind ones and zeros) at stddevs
that keep encoder states and logits of order 1; tolerances are 1e-5 times the
largest reference value. Two variants at odd geometry (d_model 48, d_kv 10,
3 heads, d_ff 70, 2 encoder and 3 decoder blocks, vocab 101):
- LongLM-shaped T5 v1.0: ReLU FFN, LM head tied to the shared embedding and
  scaled by d_model**-0.5, config.json as transformers 4 wrote it (LongLM's);
- mT5-shaped v1.1: gated-GeLU FFN, own lm_head, no scaling, config.json with
  `tie_word_embeddings: false` (google/mt5-base's).
Inputs have padding in the encoder and the decoder mask.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.numpy import load_file, save_file  # noqa: E402

from cmrcx import convert  # noqa: E402
from cmrcx.common.paths import package_path  # noqa: E402
from cmrcx.models.t5 import T5Config, T5ForConditionalGeneration  # noqa: E402
from cmrcx.weights import exports  # noqa: E402
from cmrcx.weights import t5 as t5_weights  # noqa: E402

ODD = dict(
    vocab_size=101, d_model=48, d_kv=10, num_heads=3, d_ff=70, num_layers=2, num_decoder_layers=3
)
# (model_type, feed_forward_proj, tied, buckets, max distance): 8 buckets up to distance
# 20 put the 24-token inputs into the logarithmic and the clipped buckets.
VARIANTS = {
    "longlm": ("t5", "relu", True, 8, 20),
    "mt5": ("mt5", "gated-gelu", False, 32, 128),
}
# A real SentencePiece model (LongLM's layout: the bundled tiny one): convert reads it.
SPIECE = pathlib.Path(package_path("data/longlm_tiny/spiece.model")).read_bytes()
TOKENIZER_FILES = {"spiece.model": SPIECE, "tokenizer_config.json": b"{}"}


def reference_model(variant: str, seed: int = 0):
    """A transformers T5/MT5ForConditionalGeneration with every parameter random."""
    model_type, proj, tied, buckets, max_distance = VARIANTS[variant]
    config_class, model_class = {
        "t5": (transformers.T5Config, transformers.T5ForConditionalGeneration),
        "mt5": (transformers.MT5Config, transformers.MT5ForConditionalGeneration),
    }[model_type]
    config = config_class(
        **ODD,
        feed_forward_proj=proj,
        tie_word_embeddings=tied,
        relative_attention_num_buckets=buckets,
        relative_attention_max_distance=max_distance,
        decoder_start_token_id=0,
    )
    torch.manual_seed(seed)
    model = model_class(config).eval()
    if not tied:  # transformers 5 ties at construction; a release's own head unties it
        model.lm_head.weight = torch.nn.Parameter(torch.empty_like(model.shared.weight))
    d_model, d_ff, inner = ODD["d_model"], ODD["d_ff"], ODD["num_heads"] * ODD["d_kv"]
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layer_norm" in name:
                param.uniform_(0.5, 1.5)
            elif "relative_attention_bias" in name or name == "shared.weight":
                param.normal_(0.0, 1.0)
            else:  # inputs of order 1 give outputs of order 1
                fan_in = {"o": inner, "wo": d_ff}.get(name.split(".")[-2], d_model)
                param.normal_(0.0, fan_in**-0.5)
    return model


def save_release(model, directory, variant: str, safetensors: bool):
    """As the release ships: model files, the original config.json, tokenizer files.

    transformers 5 writes `tie_word_embeddings: true` and `scale_decoder_outputs`
    whatever the head; the released configs are rewritten as they are on the hub.
    """
    os.makedirs(directory, exist_ok=True)
    if safetensors:
        model.save_pretrained(directory)
    else:  # transformers 5 always writes safetensors; a torch.save'd state dict is the .bin
        model.config.to_json_file(os.path.join(directory, "config.json"))
        torch.save(model.state_dict(), os.path.join(directory, "pytorch_model.bin"))
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        config = json.load(f)
    config.pop("scale_decoder_outputs", None)
    if variant == "longlm":
        config.pop("tie_word_embeddings")  # LongLM's config.json has no such key
    else:
        config["tie_word_embeddings"] = False
    with open(path, "w") as f:
        json.dump(config, f)
    for name, content in TOKENIZER_FILES.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(content)


def batch(seed: int = 1, source: int = 24, target: int = 13):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, ODD["vocab_size"], [3, source])
    mask = np.ones_like(ids)
    mask[1, source - 7 :] = 0
    mask[2, source - 1 :] = 0
    decoder_ids = rng.integers(0, ODD["vocab_size"], [3, target])
    decoder_mask = np.ones_like(decoder_ids)
    decoder_mask[0, target - 5 :] = 0
    decoder_mask[2, target - 1 :] = 0
    return ids, mask, decoder_ids, decoder_mask


def torch_outputs(model, ids, mask, decoder_ids, decoder_mask):
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            decoder_input_ids=torch.tensor(decoder_ids),
            decoder_attention_mask=torch.tensor(decoder_mask),
        )
    return out.encoder_last_hidden_state.numpy(), out.logits.numpy()


def flax_outputs(config: T5Config, params, ids, mask, decoder_ids, decoder_mask):
    encoded, logits = _encode_and_decode(config)(params, ids, mask, decoder_ids, decoder_mask)
    return np.asarray(encoded), np.asarray(logits)


@functools.cache
def _encode_and_decode(config: T5Config):
    """Jitted (params, ids, mask, decoder_ids, decoder_mask) -> (encoder states, logits)."""
    model = T5ForConditionalGeneration(config)

    def run(module, ids, mask, decoder_ids, decoder_mask):
        encoded = module.encode(ids, mask)
        return encoded, module.decode(decoder_ids, encoded, mask, decoder_mask)

    return jax.jit(lambda params, *inputs: model.apply({"params": params}, *inputs, method=run))


def assert_same_outputs(model, config, params, rtol=1e-5) -> list[float]:
    """Encoder states and logits within rtol x the largest reference value; the errors."""
    inputs = batch()
    errors = []
    for name, want, got in zip(
        ("encoder states", "logits"),
        torch_outputs(model, *inputs),
        flax_outputs(config, params, *inputs),
        strict=True,
    ):
        scale = np.abs(want).max()
        assert 0.5 < scale < 20, f"{name}: reference scale {scale} is not of order 1"
        np.testing.assert_allclose(got, want, atol=rtol * scale, rtol=0, err_msg=name)
        errors.append(float(np.abs(got - want).max() / scale))
    return errors


@pytest.mark.parametrize(
    "variant, safetensors",
    [("longlm", True), ("longlm", False), ("mt5", True), ("mt5", False)],
    ids=["longlm-safetensors", "longlm-pytorch_bin", "mt5-safetensors", "mt5-pytorch_bin"],
)
def test_convert_cli_parity(tmp_path, capsys, variant, safetensors):
    model = reference_model(variant)
    save_release(model, tmp_path / "hf", variant, safetensors)
    assert convert.main(["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "out")]) == 0
    stdout = capsys.readouterr().out
    assert sorted(os.listdir(tmp_path / "out")) == sorted(
        ["model_config.json", "params", *TOKENIZER_FILES]
    )
    for name, content in TOKENIZER_FILES.items():
        assert (tmp_path / "out" / name).read_bytes() == content
    with open(tmp_path / "out" / "model_config.json") as f:
        saved = json.load(f)
    assert saved["family"] == "t5" and saved["source_model_type"] == VARIANTS[variant][0]
    config, params = exports.read_network(str(tmp_path / "out"))
    tied = variant == "longlm"
    assert config.tie_word_embeddings == config.scale_decoder_outputs == tied
    assert config.feed_forward_proj == VARIANTS[variant][1]
    if not safetensors:  # state_dict() holds shared.weight 3 (tied: 4) times
        copies = 3 if tied else 2
        assert f"dropped {copies} copies of shared.weight" in stdout
    errors = assert_same_outputs(model, config, params)
    print(f"{variant} {'safetensors' if safetensors else 'bin'}: max error / scale {errors}")


@pytest.mark.parametrize("decoder_start", [1, 5, None], ids=["start1", "start5", "no_start"])
def test_special_ids_come_from_config_json(tmp_path, capsys, decoder_start):
    """LongLM's layout in config.json (pad 5, eos 2 or [2], decoder start 1 or 5, or
    none: then pad's): the export and its HF copy carry those ids."""
    model = reference_model("longlm")
    save_release(model, tmp_path / "hf", "longlm", safetensors=True)
    path = tmp_path / "hf" / "config.json"
    raw = json.loads(path.read_text())
    raw.update(pad_token_id=5, eos_token_id=[2] if decoder_start == 5 else 2)
    raw.pop("decoder_start_token_id")
    if decoder_start is not None:
        raw["decoder_start_token_id"] = decoder_start
    path.write_text(json.dumps(raw))
    assert convert.main(["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "out")]) == 0
    start = 5 if decoder_start is None else decoder_start
    expected = f"pad_token_id=5, eos_token_id=2, decoder_start_token_id={start}"
    assert expected in capsys.readouterr().out
    config, params = exports.read_network(str(tmp_path / "out"))
    ids = (config.pad_token_id, config.eos_token_id, config.decoder_start_token_id)
    assert ids == (5, 2, start)
    t5_weights.write_hf_dir(str(tmp_path / "back"), params, config, None)
    back = transformers.T5Config.from_pretrained(str(tmp_path / "back"))
    assert (back.pad_token_id, back.eos_token_id, back.decoder_start_token_id) == ids


def test_read_t5_dir_drops_unused_and_reports_inconsistent_copies(tmp_path):
    model = reference_model("longlm")
    save_release(model, tmp_path / "hf", "longlm", safetensors=True)
    path = str(tmp_path / "hf" / "model.safetensors")
    tensors = load_file(path)
    # Old checkpoints carry a cross-attention bias no one uses (transformers ignores it).
    unused = "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"
    tensors[unused] = np.zeros([8, 3], np.float32)
    tensors["encoder.embed_tokens.weight"] = tensors["shared.weight"].copy()
    save_file(tensors, path, metadata={"format": "pt"})
    release = t5_weights.read_dir(str(tmp_path / "hf"))
    assert release.dropped == [unused, "encoder.embed_tokens.weight"]
    tensors["decoder.embed_tokens.weight"] = tensors["shared.weight"] + 1.0
    with pytest.raises(t5_weights.WeightError, match="inconsistent copies .1.: decoder"):
        t5_weights.params_from_hf(tensors, release.config, "ckpt")


def test_missing_unknown_and_misshapen_tensors_are_one_error(tmp_path, capsys):
    model = reference_model("mt5")
    save_release(model, tmp_path / "hf", "mt5", safetensors=True)
    release = t5_weights.read_dir(str(tmp_path / "hf"))
    tensors = dict(t5_weights.hf_tensors(release.params, release.config))
    del tensors["decoder.block.2.layer.1.EncDecAttention.k.weight"]
    del tensors["lm_head.weight"]
    tensors["encoder.block.1.layer.0.SelfAttention.rotary.weight"] = np.zeros(3, np.float32)
    tensors["encoder.block.0.layer.0.SelfAttention.o.weight"] = np.zeros([48, 48], np.float32)
    tensors["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = np.zeros(
        [3, 32], np.float32
    )
    with pytest.raises(t5_weights.WeightError) as error:
        t5_weights.params_from_hf(tensors, release.config, "ckpt")
    message = str(error.value)
    assert (
        "missing (2): decoder.block.2.layer.1.EncDecAttention.k.weight, lm_head.weight" in message
    )
    assert "unknown (1): encoder.block.1.layer.0.SelfAttention.rotary.weight" in message
    assert "wrong shape (2): encoder.block.0.layer.0.SelfAttention.o.weight: (48, 48) " in message
    assert "relative_attention_bias.weight: (3, 32) (expected (32, 3))" in message
    # The CLI prints the one error and writes nothing.
    save_file(tensors, str(tmp_path / "hf" / "model.safetensors"), metadata={"format": "pt"})
    assert convert.main(["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "out")]) == 2
    assert "missing (2)" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_a_spiece_model_the_t5_tasks_cannot_read_is_refused(tmp_path, capsys):
    save_release(reference_model("longlm"), tmp_path / "hf", "longlm", True)
    (tmp_path / "hf" / "spiece.model").write_bytes(b"\x00not a model")
    assert convert.main(["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "out")]) == 2
    assert "spiece.model: not a SentencePiece model" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_config_variants_follow_transformers():
    longlm = {"model_type": "t5", "feed_forward_proj": "relu", "d_model": 48, "num_heads": 3}
    tied = {"shared.weight": np.ones(2)}
    untied = {"shared.weight": np.ones(2), "lm_head.weight": np.zeros(2)}
    assert t5_weights.config_from_hf(longlm, tensors=tied).scale_decoder_outputs is True
    v11 = {**longlm, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
    config = t5_weights.config_from_hf(v11, tensors=untied)
    assert not config.tie_word_embeddings and not config.scale_decoder_outputs
    assert config.num_decoder_layers == config.num_layers  # absent: symmetric
    # transformers 5 writes tie_word_embeddings true for every T5, with the scaling apart.
    resaved = {**v11, "tie_word_embeddings": True, "scale_decoder_outputs": False}
    assert t5_weights.config_from_hf(resaved, tensors=untied).scale_decoder_outputs is False
    mt5 = {**v11, "model_type": "mt5", "tie_word_embeddings": True}
    assert t5_weights.config_from_hf(mt5, tensors=untied).scale_decoder_outputs is False
    assert t5_weights.head_is_tied({"shared.weight": np.ones(2)}, {"model_type": "t5"})
    assert not t5_weights.head_is_tied(
        {"shared.weight": np.ones(2), "lm_head.weight": np.zeros(2)}, {"model_type": "t5"}
    )


@pytest.mark.parametrize("variant", ["longlm", "mt5"])
def test_hf_export_loads_in_transformers_with_the_same_logits(tmp_path, variant):
    model = reference_model(variant, seed=3)
    save_release(model, tmp_path / "hf", variant, safetensors=True)
    release = t5_weights.read_dir(str(tmp_path / "hf"))
    spiece = str(tmp_path / "hf" / "spiece.model")  # its tokenizer files are copied
    t5_weights.write_hf_dir(str(tmp_path / "back"), release.params, release.config, spiece)
    assert sorted(os.listdir(tmp_path / "back")) == sorted(
        ["config.json", "model.safetensors", *TOKENIZER_FILES]
    )
    reloaded, info = transformers.T5ForConditionalGeneration.from_pretrained(
        str(tmp_path / "back"), output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert not info["mismatched_keys"]
    assert (reloaded.lm_head.weight is reloaded.shared.weight) == (variant == "longlm")
    inputs = batch(seed=4)
    for want, got in zip(
        torch_outputs(model, *inputs), torch_outputs(reloaded.eval(), *inputs), strict=True
    ):
        np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max(), rtol=0)


def corrupt_exports(monkeypatch, path: tuple[str, ...]):
    """Makes `exports.export_params` write params[path] x 1.1 + 0.05: a converter bug.

    (Not only a shift: softmax ignores a constant added to every position bias.)
    """
    export = exports.export_params

    def corrupted(export_dir, params, config, extra=None):
        params = jax.tree.map(np.array, params)
        node = params
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = node[path[-1]] * 1.1 + 0.05
        export(export_dir, params, config, extra)

    monkeypatch.setattr(exports, "export_params", corrupted)


def test_verify_passes_a_good_t5_conversion_and_fails_a_corrupted_one(
    tmp_path, capsys, monkeypatch
):
    model = reference_model("mt5", seed=5)
    save_release(model, tmp_path / "hf", "mt5", safetensors=True)
    args = ["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "good"), "--verify"]
    assert convert.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "verify: OK (--verify_atol 0.0001)"
    assert lines[-3].startswith("  encoder states: max |diff| ")
    assert lines[-2].startswith("  logits: max |diff| ")
    print("\n".join(lines[-3:]))
    corrupt_exports(monkeypatch, ("t5", "decoder", "relative_attention_bias", "embedding"))
    args = ["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "bad"), "--verify"]
    assert convert.main(args) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "verify: FAILED (--verify_atol 0.0001)"
    assert lines[-2].endswith("> 0.0001")  # the logits; the encoder does not use that bias
    assert not lines[-3].endswith("> 0.0001")
    print("\n".join(lines[-3:]))


def test_verify_passes_a_good_bert_conversion_and_fails_a_corrupted_one(
    tmp_path, capsys, monkeypatch
):
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=120,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=40,
        max_position_embeddings=48,
    )
    model = transformers.BertModel(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.05)
    model.save_pretrained(tmp_path / "hf")
    (tmp_path / "hf" / "vocab.txt").write_text("\n".join(f"t{i}" for i in range(120)) + "\n")
    args = ["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "good"), "--verify"]
    assert convert.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("  hidden states: max |diff| ")
    assert lines[-1] == "verify: OK (--verify_atol 0.0001)"
    print("\n".join(lines[-2:]))
    corrupt_exports(monkeypatch, ("bert", "layers", "output_LayerNorm", "bias"))
    args = ["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "bad"), "--verify"]
    args += ["--verify_atol", "1e-3"]
    assert convert.main(args) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "verify: FAILED (--verify_atol 0.001)"
    print("\n".join(lines[-2:]))
