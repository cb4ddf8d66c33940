"""Pretrained ALBERT conversion: outputs match transformers' PyTorch models to 1e-5.

References are random-initialised (every parameter drawn, biases and LayerNorms included)
transformers models built here: AlbertModel / AlbertForMaskedLM saved as HuggingFace
directories; the same tensors written as a Google TF release (albert_config.json,
model.ckpt-best, vocab_chinese.txt; google-research/albert's variable names); and a
brightmart albert_zh TF release (albert_config_tiny.json, albert_model.ckpt; its
`layer_shared` / `word_embeddings_2` names), whose reference is the transformers
BertModel this test builds by hand: word table = word_embeddings @ word_embeddings_2,
the shared layer copied into every layer.
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

from cmrcx.models.albert import AlbertEncoder  # noqa: E402
from cmrcx.weights import albert as albert_weights  # noqa: E402
from cmrcx.weights import exports  # noqa: E402
from tests.weights.hf_references import (  # noqa: E402
    random_reference,
    run_convert,
    save_hf,
    token_batch,
    torch_outputs,
    write_vocab,
)

TINY = dict(  # 4 layers like ALBERT-tiny, small widths
    vocab_size=120,
    embedding_size=16,
    hidden_size=36,
    num_hidden_layers=4,
    num_attention_heads=6,
    intermediate_size=48,
    max_position_embeddings=48,
    type_vocab_size=2,
)
XXLARGE = dict(  # google-research/albert's AlbertConfig defaults (albert_xxlarge), Chinese vocab
    vocab_size=21128,
    embedding_size=128,
    hidden_size=4096,
    num_hidden_layers=12,
    num_attention_heads=64,
    intermediate_size=16384,
    max_position_embeddings=512,
    type_vocab_size=2,
)


@functools.cache
def encoder_apply(config):
    """AlbertEncoder(config).apply, jitted once per config: one compile, not one per op."""
    return jax.jit(AlbertEncoder(config).apply)


def reference_model(geometry: dict, seed: int = 0, kind: str = "AlbertModel", act="gelu_new"):
    config = transformers.AlbertConfig(**geometry, hidden_act=act)
    return random_reference(lambda: getattr(transformers, kind)(config), seed)


def assert_same_outputs(model, export_dir, vocab_size, atol=1e-5):
    """Hidden states, and the pooled output when the reference has a pooler."""
    ids, types, mask = token_batch(vocab_size)
    want_hidden, want_pooled = torch_outputs(model, ids, types, mask)
    config, params = exports.read_network(str(export_dir))
    hidden, pooled = encoder_apply(config)({"params": params}, ids, types, mask)
    np.testing.assert_allclose(np.asarray(hidden), want_hidden, atol=atol, rtol=0)
    if want_pooled is not None:
        np.testing.assert_allclose(np.asarray(pooled), want_pooled, atol=atol, rtol=0)
    return config


@pytest.mark.parametrize("safetensors", [True, False], ids=["safetensors", "pytorch_bin"])
def test_tiny_parity_both_hf_formats(tmp_path, safetensors):
    model = reference_model(TINY)
    save_hf(model, tmp_path / "hf", safetensors)
    run_convert(tmp_path / "hf", tmp_path / "out")
    with open(tmp_path / "out" / "model_config.json", encoding="utf-8") as f:
        record = json.load(f)
    assert record["family"] == "albert" and record["model"]["embedding_layout"] == "albert"
    assert_same_outputs(model, tmp_path / "out", TINY["vocab_size"])


def test_masked_lm_checkpoint_drops_its_head_and_starts_a_fresh_pooler(tmp_path, capsys):
    model = reference_model(TINY, seed=2, kind="AlbertForMaskedLM")  # albert.*, predictions.*
    save_hf(model, tmp_path / "hf")
    run_convert(tmp_path / "hf", tmp_path / "out", "--verify")  # against AlbertModel
    out = capsys.readouterr().out
    assert "verify: OK" in out
    assert "initialised fresh (2): pooler.bias, pooler.weight" in out
    assert "tensors outside the encoder" in out and "predictions." in out
    assert_same_outputs(model, tmp_path / "out", TINY["vocab_size"])  # hidden states only


@pytest.mark.slow  # a 4096-wide layer: ~1 GB of float32 in each framework
def test_xxlarge_geometry_parity(tmp_path):
    model = reference_model(XXLARGE, act="relu")
    save_hf(model, tmp_path / "hf")
    run_convert(tmp_path / "hf", tmp_path / "out")
    config = assert_same_outputs(model, tmp_path / "out", XXLARGE["vocab_size"])
    assert (config.hidden_size, config.num_layers, config.num_heads) == (4096, 12, 64)


def test_one_shared_layer_in_the_export(tmp_path):
    """The checkpoint holds the layer once: as many parameters as transformers' AlbertModel,
    whatever num_layers."""
    model = reference_model(TINY)
    save_hf(model, tmp_path / "hf")
    run_convert(tmp_path / "hf", tmp_path / "out")
    _, params = exports.read_network(str(tmp_path / "out"))
    leaves = [np.asarray(x) for x in _leaves(params)]
    assert sum(x.size for x in leaves) == sum(p.numel() for p in model.parameters())
    assert params["layer"]["intermediate"]["kernel"].shape == (36, 48)  # no [layers] axis


def _leaves(tree):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _leaves(value)
    else:
        yield tree


# ---------------------------------------------------------------------------
# TF releases: Google's names and brightmart's


GOOGLE_LAYER_TF = {  # transformers' AlbertLayer -> google-research/albert attention_ffn_block
    "attention.query": "attention_1/self/query",
    "attention.key": "attention_1/self/key",
    "attention.value": "attention_1/self/value",
    "attention.dense": "attention_1/output/dense",
    "attention.LayerNorm": "LayerNorm",
    "ffn": "ffn_1/intermediate/dense",
    "ffn_output": "ffn_1/intermediate/output/dense",
    "full_layer_layer_norm": "LayerNorm_1",
}


def google_tf_name(hf_name: str) -> str:
    """transformers AlbertModel key -> google-research/albert's TF variable name."""
    scope, leaf = hf_name.rsplit(".", 1)
    norm = "LayerNorm" in scope or "layer_norm" in scope
    leaf = {"weight": "gamma" if norm else "kernel", "bias": "beta" if norm else "bias"}[leaf]
    layer = "encoder.albert_layer_groups.0.albert_layers.0."
    if scope.startswith(layer):
        tf_scope = GOOGLE_LAYER_TF[scope.removeprefix(layer)]
        return f"bert/encoder/transformer/group_0/inner_group_0/{tf_scope}/{leaf}"
    if scope.endswith("_embeddings"):
        return f"bert/{scope.replace('.', '/')}"  # the tables: no /kernel
    scope = {"pooler": "pooler/dense"}.get(scope, scope.replace(".", "/"))
    return f"bert/{scope}/{leaf}"


def write_tf_checkpoint(variables: dict, path: str):
    """TF1 variables saved by tf.compat.v1.train.Saver, as both releases were."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        made = [
            tf.compat.v1.get_variable(name, initializer=value) for name, value in variables.items()
        ]
        saver = tf.compat.v1.train.Saver(made)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, path)


def test_google_tf_release_parity_and_verify(tmp_path, capsys):
    model = reference_model(TINY, seed=3)  # "gelu_new": what TF's "gelu" computes
    variables = {}
    for name, value in model.state_dict().items():
        if name.endswith(("position_ids", "token_type_ids")):
            continue
        tf_name = google_tf_name(name)
        value = value.numpy()
        variables[tf_name] = value.T if tf_name.endswith("/kernel") else value
    assert "bert/encoder/embedding_hidden_mapping_in/kernel" in variables
    assert "bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma" in variables
    variables["cls/predictions/output_bias"] = np.zeros([7], np.float32)
    variables["global_step"] = np.int64(3)
    release = tmp_path / "albert_tiny_zh_google"
    os.makedirs(release)
    write_tf_checkpoint(variables, str(release / "model.ckpt-best"))
    google_config = {  # google-research/albert's albert_config.json keys
        **{k: v for k, v in TINY.items()},
        "hidden_act": "gelu", "hidden_dropout_prob": 0, "attention_probs_dropout_prob": 0,
        "initializer_range": 0.02, "num_hidden_groups": 1, "net_structure_type": 0,
        "gap_size": 0, "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1,
    }  # fmt: skip
    (release / "albert_config.json").write_text(json.dumps(google_config))
    write_vocab(release / "vocab_chinese.txt", TINY["vocab_size"])
    run_convert(release, tmp_path / "out", "--verify")
    out = capsys.readouterr().out
    assert "TF variable names: Google's ALBERT" in out and "verify: OK" in out
    assert "dropped 2 tensors" in out
    assert (tmp_path / "out" / "vocab.txt").is_file()  # vocab_chinese.txt, renamed
    config = assert_same_outputs(model, tmp_path / "out", TINY["vocab_size"])
    assert config.hidden_act == "gelu_new" and config.embedding_layout == "albert"


def albert_zh_release(directory, seed=4):
    """A brightmart albert_zh TF release of TINY's shape: (variables, config dict)."""
    rng = np.random.default_rng(seed)
    vocab, emb, hidden = TINY["vocab_size"], TINY["embedding_size"], TINY["hidden_size"]
    inner = TINY["intermediate_size"]
    layer = "bert/encoder/layer_shared/"
    shapes = {
        "bert/embeddings/word_embeddings": (vocab, emb),
        "bert/embeddings/word_embeddings_2": (emb, hidden),  # x @ W: [embedding, hidden]
        "bert/embeddings/position_embeddings": (TINY["max_position_embeddings"], hidden),
        "bert/embeddings/token_type_embeddings": (2, hidden),
        "bert/embeddings/LayerNorm/gamma": (hidden,),
        "bert/embeddings/LayerNorm/beta": (hidden,),
        **{
            f"{layer}attention/self/{p}/kernel": (hidden, hidden) for p in ("query", "key", "value")
        },
        **{f"{layer}attention/self/{p}/bias": (hidden,) for p in ("query", "key", "value")},
        f"{layer}attention/output/dense/kernel": (hidden, hidden),
        f"{layer}attention/output/dense/bias": (hidden,),
        f"{layer}attention/output/LayerNorm/gamma": (hidden,),
        f"{layer}attention/output/LayerNorm/beta": (hidden,),
        f"{layer}intermediate/dense/kernel": (hidden, inner),
        f"{layer}intermediate/dense/bias": (inner,),
        f"{layer}output/dense/kernel": (inner, hidden),
        f"{layer}output/dense/bias": (hidden,),
        f"{layer}output/LayerNorm/gamma": (hidden,),
        f"{layer}output/LayerNorm/beta": (hidden,),
        "bert/pooler/dense/kernel": (hidden, hidden),
        "bert/pooler/dense/bias": (hidden,),
    }
    variables = {n: rng.normal(0, 0.05, s).astype(np.float32) for n, s in shapes.items()}
    config = {  # brightmart's albert_config/albert_config_tiny.json keys
        **{k: v for k, v in TINY.items() if k != "embedding_size"},
        "embedding_size": emb, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0, "initializer_range": 0.02, "directionality": "bidi",
        "pooler_type": "first_token_transform", "ln_type": "postln",
    }  # fmt: skip
    os.makedirs(directory)
    write_tf_checkpoint(variables, str(directory / "albert_model.ckpt"))
    (directory / "albert_config_tiny.json").write_text(json.dumps(config))
    write_vocab(directory / "vocab.txt", vocab)
    return variables


def albert_zh_reference(variables):
    """transformers BertModel computing brightmart's modeling.py: built by hand from the TF
    variables (word table = word_embeddings @ word_embeddings_2; layer i = layer_shared)."""
    geometry = {k: v for k, v in TINY.items() if k != "embedding_size"}
    model = transformers.BertModel(transformers.BertConfig(**geometry, hidden_act="gelu_new"))
    bert_names = {  # brightmart scope -> BertLayer scope (the same: BERT's modeling.py)
        "attention/self/query": "attention.self.query",
        "attention/self/key": "attention.self.key",
        "attention/self/value": "attention.self.value",
        "attention/output/dense": "attention.output.dense",
        "attention/output/LayerNorm": "attention.output.LayerNorm",
        "intermediate/dense": "intermediate.dense",
        "output/dense": "output.dense",
        "output/LayerNorm": "output.LayerNorm",
    }
    leaves = {"kernel": "weight", "gamma": "weight", "bias": "bias", "beta": "bias"}
    state = {
        "embeddings.word_embeddings.weight": variables["bert/embeddings/word_embeddings"]
        @ variables["bert/embeddings/word_embeddings_2"],
        "embeddings.position_embeddings.weight": variables["bert/embeddings/position_embeddings"],
        "embeddings.token_type_embeddings.weight": variables[
            "bert/embeddings/token_type_embeddings"
        ],
        "embeddings.LayerNorm.weight": variables["bert/embeddings/LayerNorm/gamma"],
        "embeddings.LayerNorm.bias": variables["bert/embeddings/LayerNorm/beta"],
        "pooler.dense.weight": variables["bert/pooler/dense/kernel"].T,
        "pooler.dense.bias": variables["bert/pooler/dense/bias"],
    }
    for name, value in variables.items():
        if name.startswith("bert/encoder/layer_shared/"):
            scope, leaf = name.removeprefix("bert/encoder/layer_shared/").rsplit("/", 1)
            for i in range(TINY["num_hidden_layers"]):
                key = f"encoder.layer.{i}.{bert_names[scope]}.{leaves[leaf]}"
                state[key] = value.T if leaf == "kernel" else value
    model.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in state.items()}, strict=False)
    return model.eval()


def test_albert_zh_tf_release_parity_and_verify(tmp_path, capsys):
    variables = albert_zh_release(tmp_path / "albert_tiny_489k")
    run_convert(tmp_path / "albert_tiny_489k", tmp_path / "out", "--verify")
    out = capsys.readouterr().out
    assert "TF variable names: brightmart's albert_zh" in out and "verify: OK" in out
    reference = albert_zh_reference(variables)
    ids, types, mask = token_batch(TINY["vocab_size"])
    with torch.no_grad():
        want = reference(
            input_ids=torch.tensor(ids),
            token_type_ids=torch.tensor(types),
            attention_mask=torch.tensor(mask),
        )
    config, params = exports.read_network(str(tmp_path / "out"))
    assert config.embedding_layout == "albert_zh" and config.hidden_act == "gelu_new"
    hidden, pooled = encoder_apply(config)({"params": params}, ids, types, mask)
    np.testing.assert_allclose(
        np.asarray(hidden), want.last_hidden_state.numpy(), atol=1e-5, rtol=0
    )
    np.testing.assert_allclose(np.asarray(pooled), want.pooler_output.numpy(), atol=1e-5, rtol=0)


def test_hf_export_of_both_layouts_loads_in_transformers(tmp_path):
    """`cmrcx.export --format hf`: AlbertModel for Google's layout, the equivalent BertModel
    for albert_zh's (transformers has no class for it)."""
    model = reference_model(TINY, seed=5)
    save_hf(model, tmp_path / "hf")
    albert_zh_release(tmp_path / "zh")
    ids, types, mask = token_batch(TINY["vocab_size"])
    for source, reloaded_class in (("hf", "AlbertModel"), ("zh", "BertModel")):
        release = albert_weights.read_dir(str(tmp_path / source))
        back = str(tmp_path / f"{source}_back")
        albert_weights.write_hf_dir(
            back, release.params, release.config, str(tmp_path / source / "vocab.txt")
        )
        assert sorted(os.listdir(back)) == ["config.json", "model.safetensors", "vocab.txt"]
        reloaded, info = getattr(transformers, reloaded_class).from_pretrained(
            back, output_loading_info=True
        )
        assert not info["missing_keys"] and not info["unexpected_keys"]
        want_hidden, want_pooled = torch_outputs(reloaded.eval(), ids, types, mask)
        got = encoder_apply(release.config)({"params": release.params}, ids, types, mask)
        np.testing.assert_allclose(np.asarray(got[0]), want_hidden, atol=1e-5, rtol=0)
        np.testing.assert_allclose(np.asarray(got[1]), want_pooled, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"num_hidden_groups": 2}, "num_hidden_groups 2; cmrcx ALBERT shares one layer"),
        ({"inner_group_num": 2}, "inner_group_num 2"),
        ({"ln_type": "preln"}, "ln_type 'preln'; cmrcx ALBERT is post-LayerNorm"),
        ({"hidden_act": "swish"}, "hidden_act 'swish'"),
        ({"model_type": "bert"}, "model_type 'bert' is not 'albert'"),
    ],
)
def test_configs_cmrcx_does_not_compute_are_named(change, message):
    raw = {"model_type": "albert", **TINY, **change}
    with pytest.raises(albert_weights.PretrainedFormatError, match=message) as error:
        albert_weights.config_from_hf(raw, "dir/config.json")
    assert str(error.value).startswith("dir/config.json: ")


def test_missing_and_misshapen_tensors_are_listed(tmp_path):
    release_model = reference_model(TINY)
    save_hf(release_model, tmp_path / "hf")
    release = albert_weights.read_dir(str(tmp_path / "hf"))
    tensors = dict(albert_weights.hf_tensors(release.params, release.config))
    del tensors["encoder.albert_layer_groups.0.albert_layers.0.ffn.bias"]
    tensors["encoder.albert_layer_groups.1.albert_layers.0.ffn.bias"] = np.zeros(48, np.float32)
    tensors["pooler.weight"] = np.zeros([5, 5], np.float32)
    with pytest.raises(albert_weights.WeightError) as error:
        albert_weights.params_from_hf(tensors, release.config, "ckpt")
    message = str(error.value)
    assert "missing (1): encoder.albert_layer_groups.0.albert_layers.0.ffn.bias" in message
    assert "unknown (1): encoder.albert_layer_groups.1.albert_layers.0.ffn.bias" in message
    assert "wrong shape (1): pooler.weight" in message


def test_the_registry_row_finds_this_module_with_every_family_function():
    from cmrcx.models import registry
    from cmrcx.weights import FAMILY_FUNCTIONS

    assert registry.weights(registry.family("albert")) is albert_weights
    assert [n for n in FAMILY_FUNCTIONS if not callable(getattr(albert_weights, n, None))] == []
