"""Pretrained BERT conversion: outputs match transformers' PyTorch BERT to 1e-5.

Reference models are random-initialised `transformers` BertModels built here
(every parameter drawn at random, biases and LayerNorms included, so a wrong
mapping cannot hide behind zeros and ones). They are saved as safetensors,
pytorch_model.bin and a Google-style TF checkpoint written with TensorFlow's
own APIs, converted with `cmrcx.convert`, and run on the same token ids with
padding masks. Releases saved from BertForMaskedLM (or BertModel without its
pooling layer) hold no pooler: the converter starts it fresh, so only hidden
states are compared for them.
"""

from __future__ import annotations

import functools
import json
import os

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.numpy import load_file, save_file  # noqa: E402

from cmrcx import convert  # noqa: E402
from cmrcx.models.bert import BertConfig, BertEncoder  # noqa: E402
from cmrcx.weights import bert as bert_weights  # noqa: E402
from cmrcx.weights import exports  # noqa: E402
from tests.weights.hf_references import (  # noqa: E402
    random_reference,
    run_convert,
    save_hf,
    token_batch,
    torch_outputs,
    write_vocab,
)

SMALL = dict(
    vocab_size=120,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=40,
    max_position_embeddings=48,
    type_vocab_size=2,
)
BASE = dict(
    vocab_size=21128,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
    type_vocab_size=2,
)
LARGE = dict(
    BASE, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
)  # RoBERTa-wwm-ext-large (BERT architecture)


def reference_model(geometry: dict, seed: int = 0, kind: str = "BertModel"):
    """kind: a transformers class name, or "BertModel-no-pooler" (add_pooling_layer=False)."""
    config = transformers.BertConfig(**geometry, hidden_act="gelu")
    if kind == "BertModel-no-pooler":
        return random_reference(
            lambda: transformers.BertModel(config, add_pooling_layer=False), seed
        )
    return random_reference(lambda: getattr(transformers, kind)(config), seed)


def flax_outputs(export_dir, ids, types, mask):
    config = exports.read_model_config(export_dir)
    params = exports.load_params(export_dir, None)["bert"]
    hidden, pooled = encoder_apply(config)({"params": params}, ids, types, mask)
    return np.asarray(hidden), np.asarray(pooled)


@functools.cache
def encoder_apply(config: BertConfig):
    """BertEncoder(config).apply, jitted once per config: one compile, not one per op."""
    return jax.jit(BertEncoder(config).apply)


def assert_same_outputs(model, export_dir, geometry, atol=1e-5, length=24):
    """Hidden states, and the pooled output when the reference has a pooler."""
    ids, types, mask = token_batch(geometry["vocab_size"], length)
    want_hidden, want_pooled = torch_outputs(model, ids, types, mask)
    hidden, pooled = flax_outputs(export_dir, ids, types, mask)
    np.testing.assert_allclose(hidden, want_hidden, atol=atol, rtol=0)
    if want_pooled is not None:
        np.testing.assert_allclose(pooled, want_pooled, atol=atol, rtol=0)


@pytest.mark.parametrize("safetensors", [True, False], ids=["safetensors", "pytorch_bin"])
def test_small_model_parity_both_hf_formats(tmp_path, safetensors):
    model = reference_model(SMALL)
    save_hf(model, tmp_path / "hf", safetensors)
    run_convert(tmp_path / "hf", tmp_path / "out")
    assert sorted(os.listdir(tmp_path / "out")) == ["model_config.json", "params", "vocab.txt"]
    assert_same_outputs(model, str(tmp_path / "out"), SMALL)


def test_pretraining_checkpoint_drops_heads_and_reports_them(tmp_path, capsys):
    model = reference_model(SMALL, kind="BertForPreTraining")  # keys are bert.* and cls.*
    save_hf(model, tmp_path / "hf", safetensors=True)
    run_convert(tmp_path / "hf", tmp_path / "out")
    assert "tensors outside the encoder" in capsys.readouterr().out
    assert_same_outputs(model, str(tmp_path / "out"), SMALL)


FRESH_POOLER_LINE = (
    "initialised fresh (2): pooler.dense.bias, pooler.dense.weight "
    "(not in the checkpoint; BertForMaskedLM saves none)"
)


def fresh_report_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("initialised fresh")]


def saved_tensor_names(directory) -> list[str]:
    """Tensor names of a saved HF directory: checks what a test starts from."""
    path = os.path.join(directory, "model.safetensors")
    if os.path.isfile(path):
        return list(load_file(path))
    return list(torch.load(os.path.join(directory, "pytorch_model.bin"), weights_only=True))


@pytest.mark.parametrize(
    "kind, safetensors",
    [("BertForMaskedLM", True), ("BertForMaskedLM", False), ("BertModel-no-pooler", True)],
    ids=["mlm-safetensors", "mlm-pytorch_bin", "bertmodel-no-pooler"],
)
def test_poolerless_checkpoint_converts_with_a_fresh_pooler(tmp_path, capsys, kind, safetensors):
    model = reference_model(SMALL, kind=kind)
    save_hf(model, tmp_path / "hf", safetensors)
    names = saved_tensor_names(tmp_path / "hf")
    assert not any("pooler" in name for name in names)
    # BertForMaskedLM's names carry the "bert." prefix; BertModel's do not.
    assert all(name.startswith(("bert.", "cls.")) for name in names) == (
        kind != "BertModel-no-pooler"
    )
    run_convert(tmp_path / "hf", tmp_path / "out")
    assert fresh_report_lines(capsys.readouterr().out) == [FRESH_POOLER_LINE]
    with open(tmp_path / "out" / "model_config.json", encoding="utf-8") as f:
        assert json.load(f)["initialised_fresh"] == ["pooler.dense.bias", "pooler.dense.weight"]
    assert_same_outputs(model, str(tmp_path / "out"), SMALL)  # hidden states: no pooler to match


def test_fresh_pooler_is_bert_init_with_a_fixed_seed():
    config = BertConfig(vocab_size=8, hidden_size=64, num_layers=1, num_heads=4)
    tensors, fresh = bert_weights.with_fresh_pooler({}, config)
    again, _ = bert_weights.with_fresh_pooler({}, config)
    assert fresh == ["pooler.dense.bias", "pooler.dense.weight"]
    kernel, bias = tensors["pooler.dense.weight"], tensors["pooler.dense.bias"]
    np.testing.assert_array_equal(kernel, again["pooler.dense.weight"])  # reproducible
    assert kernel.shape == (64, 64) and bias.shape == (64,) and not bias.any()
    # BertEncoder's truncated normal: cut at 2 stddev, whose std is 0.88 stddev.
    stddev = config.initializer_range
    assert np.abs(kernel).max() <= 2 * stddev * (1 + 1e-6)
    assert 0.8 * stddev < kernel.std() < 0.95 * stddev
    half, fresh = bert_weights.with_fresh_pooler({"pooler.dense.bias": bias}, config)
    assert fresh == [] and "pooler.dense.weight" not in half  # half a pooler stays an error


@pytest.mark.parametrize(
    "kind, removed",
    [
        ("BertForMaskedLM", "bert.encoder.layer.1.output.dense.weight"),
        ("BertModel", "pooler.dense.bias"),
    ],
    ids=["layer-weight", "half-pooler"],
)
def test_only_a_whole_pooler_may_be_missing(tmp_path, capsys, kind, removed):
    model = reference_model(SMALL, kind=kind)
    save_hf(model, tmp_path / "hf", safetensors=True)
    path = str(tmp_path / "hf" / "model.safetensors")
    tensors = load_file(path)
    del tensors[removed]
    save_file(tensors, path, metadata={"format": "pt"})
    assert convert.main(["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "out")]) == 2
    out = capsys.readouterr()
    assert f"missing (1): {removed.removeprefix('bert.')}\n" in out.err + "\n"
    assert not fresh_report_lines(out.out) and not (tmp_path / "out").exists()


def test_poolerless_conversion_exports_back_to_transformers(tmp_path):
    """convert -> cmrcx export -> write_hf_dir (`export --format hf`) -> transformers."""
    model = reference_model(SMALL, seed=7, kind="BertForMaskedLM")
    save_hf(model, tmp_path / "hf", safetensors=True)
    run_convert(tmp_path / "hf", tmp_path / "out")
    config = exports.read_model_config(str(tmp_path / "out"))
    params = exports.load_params(str(tmp_path / "out"), None)["bert"]
    bert_weights.write_hf_dir(
        str(tmp_path / "back"), params, config, str(tmp_path / "out" / "vocab.txt")
    )
    assert sorted(os.listdir(tmp_path / "back")) == [
        "config.json",
        "model.safetensors",
        "vocab.txt",
    ]
    reloaded, info = transformers.BertModel.from_pretrained(
        str(tmp_path / "back"), output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]  # the fresh pooler went out
    ids, types, mask = token_batch(SMALL["vocab_size"])
    want_hidden, want_pooled = torch_outputs(reloaded.eval(), ids, types, mask)
    hidden, pooled = flax_outputs(str(tmp_path / "out"), ids, types, mask)
    np.testing.assert_allclose(hidden, want_hidden, atol=1e-5, rtol=0)
    np.testing.assert_allclose(pooled, want_pooled, atol=1e-5, rtol=0)
    original_hidden, _ = torch_outputs(model, ids, types, mask)
    np.testing.assert_allclose(want_hidden, original_hidden, atol=1e-5, rtol=0)


def test_bert_base_geometry_parity(tmp_path):
    model = reference_model(BASE)
    save_hf(model, tmp_path / "hf", safetensors=True)
    run_convert(tmp_path / "hf", tmp_path / "out")
    assert_same_outputs(model, str(tmp_path / "out"), BASE)


@pytest.mark.slow
def test_roberta_wwm_ext_large_geometry_parity(tmp_path):
    model = reference_model(LARGE)
    save_hf(model, tmp_path / "hf", safetensors=True)
    run_convert(tmp_path / "hf", tmp_path / "out")
    assert_same_outputs(model, str(tmp_path / "out"), LARGE)


def hf_to_tf_name(name: str) -> str:
    """HF BertModel key -> Google's original TF variable name (the inverse mapping)."""
    name = name.replace(".weight", "/kernel").replace(".bias", "/bias")
    for table in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        name = name.replace(f"embeddings.{table}/kernel", f"embeddings.{table}")
    name = name.replace("LayerNorm/kernel", "LayerNorm/gamma").replace(
        "LayerNorm/bias", "LayerNorm/beta"
    )
    name = name.replace("layer.", "layer_").replace(".", "/")
    return "bert/" + name


def write_google_tf_checkpoint(model, directory):
    """A bert_model.ckpt as Google released them: TF1 variables saved by tf.compat.v1.Saver."""
    import tensorflow as tf

    os.makedirs(directory, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for name, value in model.state_dict().items():
            value = value.numpy()
            tf_name = hf_to_tf_name(name)
            if tf_name.endswith("/kernel"):
                value = value.T  # TF dense kernels are [in, out]
            variables.append(tf.compat.v1.get_variable(tf_name, initializer=value))
        variables.append(
            tf.compat.v1.get_variable(
                "cls/predictions/output_bias", initializer=np.zeros([7], np.float32)
            )
        )
        variables.append(tf.compat.v1.get_variable("global_step", initializer=np.int64(3)))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, os.path.join(directory, "bert_model.ckpt"))
    config = {
        k: v for k, v in model.config.to_dict().items() if k in transformers.BertConfig().to_dict()
    }
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        json.dump(config, f)
    write_vocab(os.path.join(directory, "vocab.txt"), model.config.vocab_size)


@pytest.mark.parametrize("kind", ["BertModel", "BertModel-no-pooler"])
def test_google_tf_checkpoint_parity(tmp_path, capsys, kind):
    model = reference_model(SMALL, seed=3, kind=kind)
    write_google_tf_checkpoint(model, tmp_path / "tf")
    assert (tmp_path / "tf" / "bert_model.ckpt.index").is_file()
    run_convert(tmp_path / "tf", tmp_path / "out")
    want_lines = [] if kind == "BertModel" else [FRESH_POOLER_LINE]
    assert fresh_report_lines(capsys.readouterr().out) == want_lines
    assert_same_outputs(model, str(tmp_path / "out"), SMALL)


def test_unknown_missing_and_misshapen_tensors_are_listed(tmp_path):
    model = reference_model(SMALL)
    save_hf(model, tmp_path / "hf", safetensors=True)
    release = bert_weights.read_dir(str(tmp_path / "hf"))
    config, params = release.config, release.params
    tensors = dict(bert_weights.hf_tensors(params, config))
    tensors["encoder.layer.0.attention.self.rotary.weight"] = np.zeros(3, np.float32)
    del tensors["encoder.layer.1.output.dense.bias"]
    tensors["pooler.dense.weight"] = np.zeros([5, 5], np.float32)
    with pytest.raises(bert_weights.WeightError) as error:
        bert_weights.params_from_hf(tensors, config, "ckpt")
    message = str(error.value)
    assert "unknown (1): encoder.layer.0.attention.self.rotary.weight" in message
    assert "missing (1): encoder.layer.1.output.dense.bias" in message
    assert "wrong shape (1): pooler.dense.weight" in message


def test_convert_cli_reports_bad_directories(tmp_path, capsys):
    assert convert.main(["--from", str(tmp_path), "--to", str(tmp_path / "o")]) == 2
    assert "neither config.json" in capsys.readouterr().err


def test_hf_export_loads_in_transformers_with_the_same_outputs(tmp_path):
    model = reference_model(SMALL, seed=5)
    save_hf(model, tmp_path / "hf", safetensors=True)
    release = bert_weights.read_dir(str(tmp_path / "hf"))
    config, params = release.config, release.params
    bert_weights.write_hf_dir(
        str(tmp_path / "back"), params, config, str(tmp_path / "hf" / "vocab.txt")
    )
    reloaded = transformers.BertModel.from_pretrained(str(tmp_path / "back")).eval()
    ids, types, mask = token_batch(SMALL["vocab_size"])
    want = torch_outputs(reloaded, ids, types, mask)
    got = BertEncoder(config).apply({"params": jax.device_get(params)}, ids, types, mask)
    np.testing.assert_allclose(np.asarray(got[0]), want[0], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(got[1]), want[1], atol=1e-5, rtol=0)


def test_pytorch_pretrained_bert_format_converts(tmp_path, capsys):
    """pytorch_pretrained_bert's release (the CMRC 2019 authors' script reads and writes
    it): bert_config.json, a torch.save'd state dict of bert.* tensors (here with the
    script's qa_outputs head, dropped and reported), vocab.txt."""
    model = reference_model(SMALL, seed=3)
    release = tmp_path / "authors"
    release.mkdir()
    state = {f"bert.{k}": v for k, v in model.state_dict().items() if "position_ids" not in k}
    state["qa_outputs.weight"] = torch.zeros([1, SMALL["hidden_size"]])
    state["qa_outputs.bias"] = torch.zeros([1])
    torch.save(state, release / "pytorch_model.bin")
    config = dict(SMALL, hidden_act="gelu", hidden_dropout_prob=0.1, initializer_range=0.02)
    (release / "bert_config.json").write_text(json.dumps(config), encoding="utf-8")
    write_vocab(release / "vocab.txt", SMALL["vocab_size"])
    run_convert(release, tmp_path / "out")
    assert "dropped 2 tensors outside the encoder" in capsys.readouterr().out
    assert_same_outputs(model, str(tmp_path / "out"), SMALL)
    (release / "pytorch_model.bin").unlink()
    assert convert.main(["--from", str(release), "--to", str(tmp_path / "o")]) == 2
    assert "nor pytorch_model.bin (pytorch_pretrained_bert)" in capsys.readouterr().err
