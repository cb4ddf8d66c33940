"""ALBERT weights between cmrcx (Flax) and HuggingFace / Google / brightmart checkpoints.

The ALBERT row of `cmrcx.models.registry` (config.json model_type "albert"). Same function
names as every family's weights module (see `cmrcx.weights`): config_from_hf,
config_to_hf, weight_table, params_from_hf, hf_tensors, describe, read_dir,
write_hf_dir, vocabulary_files, verify.

Releases read:
  HuggingFace  config.json (model_type "albert") + model.safetensors or pytorch_model.bin
               + vocab.txt: transformers' AlbertModel, or a task / pretraining model
               (AlbertForMaskedLM, AlbertForPreTraining: `albert.` tensors; MLM and SOP
               heads dropped). AlbertForMaskedLM saves no pooler: it starts fresh.
  Google TF    albert_config.json + model.ckpt-best.* + vocab_chinese.txt
               (google-research/albert's albert_{base,large,xlarge,xxlarge}_zh.tar.gz),
               variables `bert/encoder/transformer/group_0/inner_group_0/attention_1/self/
               query/kernel`, `bert/encoder/embedding_hidden_mapping_in/kernel`, ...
  albert_zh TF albert_config_*.json + albert_model.ckpt.* + vocab.txt (brightmart/albert_zh,
               e.g. albert_tiny_489k.zip), variables `bert/embeddings/word_embeddings_2`,
               `bert/encoder/layer_shared/attention/self/query/kernel`, ...: the
               "albert_zh" embedding layout of `cmrcx.models.albert`.
Which TF scheme a checkpoint uses is read from its variable names. Both TF modeling.py
files compute `gelu` as the tanh approximation: a TF config's "gelu" is read as
transformers' "gelu_new". Only one shared layer (num_hidden_groups = inner_group_num = 1,
every Chinese release) is supported; anything else is an error naming the field.

One table, `weight_table(config)`, pairs each parameter with a HuggingFace AlbertModel name
(the shared layer is `encoder.albert_layer_groups.0.albert_layers.0.*`, once). TF names are
first rewritten into those (`tf_to_hf_name`); the albert_zh projection, which transformers
has no name for, is `embeddings.word_embeddings_2.weight` (torch layout [hidden, embedding]).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator, Mapping

import numpy as np

from cmrcx.models import registry
from cmrcx.models.albert import AlbertConfig
from cmrcx.models.bert import ACTIVATIONS
from cmrcx.weights import exports, hf_io, table
from cmrcx.weights.bert import DROPPED_TF
from cmrcx.weights.hf_io import PretrainedFormatError, Release
from cmrcx.weights.table import Entry, WeightError

__all__ = [  # the names of every family's weights module (cmrcx/weights/__init__.py), then ALBERT's
    "WeightError",
    "PretrainedFormatError",
    "config_from_hf",
    "config_to_hf",
    "weight_table",
    "params_from_hf",
    "hf_tensors",
    "describe",
    "read_dir",
    "vocabulary_files",
    "write_hf_dir",
    "verify",
    "Entry",
    "tf_to_hf_name",
    "tf_scheme",
    "hf_tensors_from_tf",
    "normalize_hf_names",
    "bert_tensors",
]

# HuggingFace config.json key -> AlbertConfig field.
HF_CONFIG_KEYS = {
    "vocab_size": "vocab_size",
    "embedding_size": "embedding_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_size",
    "max_position_embeddings": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "hidden_dropout_prob": "hidden_dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "classifier_dropout_prob": "classifier_dropout",
    "layer_norm_eps": "layer_norm_eps",
    "hidden_act": "hidden_act",
    "initializer_range": "initializer_range",
}
# The shared layer in transformers' AlbertModel: group 0, inner layer 0.
LAYER = "encoder.albert_layer_groups.0.albert_layers.0."
POOLER_HF = ("pooler.bias", "pooler.weight")  # AlbertForMaskedLM is built without it
RELEASE = hf_io.ReleaseFormat(
    what="ALBERT",
    vocabulary=("vocab.txt",),
    vocabulary_required=True,
    vocabulary_aliases=(("vocab_chinese.txt", "vocab.txt", "Google's"),),
    dropped="tensors outside the encoder (heads, optimizer)",
    dropped_shown=6,
    fresh=hf_io.Fresh(
        POOLER_HF, "hidden_size", "truncated_normal", "; AlbertForMaskedLM saves none"
    ),
)
# Outside the encoder: transformers' MLM / SOP heads and task heads; buffers.
DROPPED_HF = re.compile(
    r"^(predictions\.|sop_classifier\.|classifier\.|qa_outputs\.|embeddings\.position_ids$"
    r"|embeddings\.token_type_ids$)"
)
# Google's optimizer scopes besides BERT's slots (transformers' load_tf_weights_in_albert).
DROPPED_ALBERT_TF = re.compile(r"(AdamWeightDecayOptimizer|/lamb_[mv]$)")

# TF scope inside the shared layer -> its AlbertLayer name, per naming scheme.
GOOGLE_LAYER = {  # google-research/albert modeling.py, attention_ffn_block
    "attention_1/self/query": "attention.query",
    "attention_1/self/key": "attention.key",
    "attention_1/self/value": "attention.value",
    "attention_1/output/dense": "attention.dense",
    "LayerNorm": "attention.LayerNorm",
    "ffn_1/intermediate/dense": "ffn",
    "ffn_1/intermediate/output/dense": "ffn_output",
    "LayerNorm_1": "full_layer_layer_norm",
}
ALBERT_ZH_LAYER = {  # brightmart/albert_zh modeling.py, transformer_model (BERT's scopes)
    "attention/self/query": "attention.query",
    "attention/self/key": "attention.key",
    "attention/self/value": "attention.value",
    "attention/output/dense": "attention.dense",
    "attention/output/LayerNorm": "attention.LayerNorm",
    "intermediate/dense": "ffn",
    "output/dense": "ffn_output",
    "output/LayerNorm": "full_layer_layer_norm",
}
_GOOGLE_LAYER_NAME = re.compile(
    r"^bert/encoder/transformer/group_0/inner_group_0/(.+)/(kernel|bias|gamma|beta)$"
)
_ALBERT_ZH_LAYER_NAME = re.compile(r"^bert/encoder/layer_shared/(.+)/(kernel|bias|gamma|beta)$")
TF_SCHEMES = {  # embedding layout -> whose variable names a TF checkpoint has
    "albert": "Google's ALBERT (bert/encoder/transformer/group_0/...)",
    "albert_zh": "brightmart's albert_zh (bert/encoder/layer_shared/...)",
}
_LEAF = {"kernel": "weight", "gamma": "weight", "bias": "bias", "beta": "bias"}


def weight_table(config: AlbertConfig) -> list[Entry]:
    """Every encoder parameter of `config`, with its HuggingFace AlbertModel name (no
    "albert." prefix; one shared layer) and Flax shape."""
    hidden, embedding = config.hidden_size, config.embedding_size
    heads, head_dim, inner = config.num_heads, config.head_dim, config.intermediate_size
    width = embedding if config.embedding_layout == "albert" else hidden
    entries = [
        Entry(("embeddings", name, "embedding"), f"embeddings.{name}.weight", "same", (rows, size))
        for name, rows, size in (
            ("word_embeddings", config.vocab_size, embedding),
            ("position_embeddings", config.max_position_embeddings, width),
            ("token_type_embeddings", config.type_vocab_size, width),
        )
    ]
    entries += table.layer_norm(("embeddings", "LayerNorm"), "embeddings.LayerNorm", width)
    if config.embedding_layout == "albert_zh":
        entries.append(
            Entry(("embeddings", "word_embeddings_2", "kernel"),
                  "embeddings.word_embeddings_2.weight", "dense", (embedding, hidden))
        )  # fmt: skip
    else:
        mapping = ("embeddings", "embedding_hidden_mapping_in")  # transformers: in the encoder
        entries += table.dense(mapping, "encoder.embedding_hidden_mapping_in", embedding, hidden)
    ours = ("layer",)
    for proj in ("query", "key", "value"):
        path = (*ours, "attention", proj)
        entries += table.split_heads(path, f"{LAYER}attention.{proj}", hidden, heads, head_dim)
    path = (*ours, "attention", "output")
    entries += table.merge_heads(path, f"{LAYER}attention.dense", heads, head_dim, hidden)
    entries += table.layer_norm(
        (*ours, "attention_LayerNorm"), f"{LAYER}attention.LayerNorm", hidden
    )
    entries += table.dense((*ours, "intermediate"), f"{LAYER}ffn", hidden, inner)
    entries += table.dense((*ours, "output"), f"{LAYER}ffn_output", inner, hidden)
    entries += table.layer_norm(
        (*ours, "output_LayerNorm"), f"{LAYER}full_layer_layer_norm", hidden
    )
    entries += table.dense(("pooler",), "pooler", hidden, hidden)
    return entries


def params_from_hf(hf_tensors: Mapping[str, np.ndarray], config: AlbertConfig, source: str) -> dict:
    """HF-named torch-layout tensors -> the nested cmrcx `params["albert"]` tree (float32).

    Raises WeightError listing every missing, unknown and misshapen tensor at once.
    """

    entries = weight_table(config)
    return table.params_from_table(hf_tensors, entries, config.num_heads, source, RELEASE.what)


def hf_tensors(params: Mapping, config: AlbertConfig) -> Iterator[tuple[str, np.ndarray]]:
    """cmrcx `params["albert"]` -> (HF name, torch-layout float32 tensor) pairs."""
    yield from table.tensors_from_table(params, weight_table(config))


# ---------------------------------------------------------------------------
# TF checkpoints (Google's and brightmart's names) and HF state dicts


def tf_scheme(tf_names) -> str:
    """The embedding layout of a TF checkpoint's variable names: "albert_zh" for
    brightmart's (`layer_shared`, `word_embeddings_2`), else "albert" (Google's)."""
    marks = ("bert/encoder/layer_shared/", "bert/embeddings/word_embeddings_2")
    return "albert_zh" if any(name.startswith(marks) for name in tf_names) else "albert"


def tf_to_hf_name(name: str) -> str:
    """A TF variable name of either scheme -> its table name; other names unchanged (they are
    then reported as unknown).

    `bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel` and
    `bert/encoder/layer_shared/attention/self/query/kernel` ->
    `encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight`.
    """
    for pattern, scopes in (
        (_GOOGLE_LAYER_NAME, GOOGLE_LAYER),
        (_ALBERT_ZH_LAYER_NAME, ALBERT_ZH_LAYER),
    ):
        found = pattern.match(name)
        if found and found.group(1) in scopes:
            return f"{LAYER}{scopes[found.group(1)]}.{_LEAF[found.group(2)]}"
    found = re.match(r"^bert/embeddings/(\w+)$", name)
    if found:  # the tables and the albert_zh projection
        return f"embeddings.{found.group(1)}.weight"
    found = re.match(
        r"^bert/(embeddings/LayerNorm|encoder/embedding_hidden_mapping_in|pooler/dense)/"
        r"(kernel|bias|gamma|beta)$",
        name,
    )
    if found:
        scope = {"pooler/dense": "pooler"}.get(found.group(1), found.group(1))
        return f"{scope.replace('/', '.')}.{_LEAF[found.group(2)]}"
    return name


def hf_tensors_from_tf(tf_tensors: Mapping[str, np.ndarray]) -> tuple[dict, list[str]]:
    """TF checkpoint tensors -> (table-named torch-layout tensors, dropped names)."""
    out, dropped = {}, []
    for name, value in tf_tensors.items():
        if DROPPED_TF.search(name) or DROPPED_ALBERT_TF.search(name):
            dropped.append(name)
            continue
        # TF dense kernels (and albert_zh's projection) are [in, out]; torch's are [out, in].
        transpose = name.endswith("/kernel") or name == "bert/embeddings/word_embeddings_2"
        out[tf_to_hf_name(name)] = value.T if transpose else value
    return out, dropped


def normalize_hf_names(tensors: Mapping[str, np.ndarray]) -> tuple[dict, list[str]]:
    """Strips the `albert.` prefix of task / pretraining models; drops their heads."""
    return table.encoder_tensors(tensors, ("albert.",), DROPPED_HF)


def with_fresh_pooler(tensors: Mapping[str, np.ndarray], config: AlbertConfig):
    """(tensors with a fresh pooler if the source has none, names made fresh):
    `hf_io.with_fresh` of `RELEASE.fresh`, initialised as `AlbertEncoder` does
    (truncated normal, stddev initializer_range; zero bias)."""
    return hf_io.with_fresh(tensors, config, RELEASE.fresh)


# ---------------------------------------------------------------------------
# Configs and release directories


def config_from_hf(raw: Mapping, path: str = "config.json", tensors=None) -> AlbertConfig:
    """AlbertConfig from a HuggingFace config.json, or (no model_type) a TF release's
    albert_config*.json, whose `tensors` (TF names) tell Google's embedding layout from
    brightmart's. PretrainedFormatError naming the file and field for what the cmrcx
    encoder does not compute."""
    model_type = raw.get("model_type")
    if model_type is not None and model_type not in registry.family("albert").hf_model_types:
        raise PretrainedFormatError(f"{path}: model_type {model_type!r} is not 'albert'")
    for key in ("num_hidden_groups", "inner_group_num"):
        if raw.get(key, 1) != 1:
            raise PretrainedFormatError(
                f"{path}: {key} {raw[key]}; cmrcx ALBERT shares one layer across all layers "
                "(num_hidden_groups = inner_group_num = 1, as every Chinese release)"
            )
    if raw.get("ln_type", "postln") != "postln":  # brightmart's modeling_preln.py variant
        raise PretrainedFormatError(
            f"{path}: ln_type {raw['ln_type']!r}; cmrcx ALBERT is post-LayerNorm ('postln')"
        )
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise PretrainedFormatError(
            f"{path}: position_embedding_type {raw['position_embedding_type']!r}; "
            "only 'absolute' position embeddings are supported"
        )
    kwargs = {field: raw[key] for key, field in HF_CONFIG_KEYS.items() if key in raw}
    activation = kwargs.setdefault("hidden_act", "gelu_new")  # both defaults are the tanh GeLU
    if model_type is None and activation == "gelu":  # TF modeling.py's gelu: tanh approximation
        kwargs["hidden_act"] = "gelu_new"
    if kwargs["hidden_act"] not in ACTIVATIONS:
        raise PretrainedFormatError(
            f"{path}: hidden_act {activation!r}; cmrcx ALBERT has {', '.join(ACTIVATIONS)}"
        )
    layout = tf_scheme(tensors or ()) if model_type is None else "albert"
    return AlbertConfig(**kwargs, embedding_layout=layout)


def config_to_hf(config: AlbertConfig) -> dict:
    """config.json for transformers' AlbertModel; for the albert_zh layout, which transformers
    has no class for, the equivalent BertModel's (see `bert_tensors`)."""
    out = {key: getattr(config, field) for key, field in HF_CONFIG_KEYS.items()}
    if config.embedding_layout == "albert_zh":
        del out["embedding_size"], out["classifier_dropout_prob"]
        return {"architectures": ["BertModel"], "model_type": "bert", "pad_token_id": 0,
                "position_embedding_type": "absolute", **out}  # fmt: skip
    return {"architectures": ["AlbertModel"], "model_type": "albert", "pad_token_id": 0,
            "num_hidden_groups": 1, "inner_group_num": 1, **out}  # fmt: skip


def bert_tensors(tensors: Mapping[str, np.ndarray], config: AlbertConfig) -> dict:
    """albert_zh-layout table tensors -> transformers BertModel tensors computing the same:
    the word table is word_embeddings @ word_embeddings_2 ([vocab, hidden]), and every
    one of the num_layers BERT layers holds the shared layer."""
    # albert_zh's layer scopes are BERT's TF scopes: BERT's HF names with dots.
    layer_names = {ours: scope.replace("/", ".") for scope, ours in ALBERT_ZH_LAYER.items()}
    out = {}
    for name, value in tensors.items():
        if name.startswith(LAYER):
            scope, leaf = name[len(LAYER) :].rsplit(".", 1)
            for i in range(config.num_layers):
                out[f"encoder.layer.{i}.{layer_names[scope]}.{leaf}"] = value
        elif name.startswith("pooler."):
            out[name.replace("pooler.", "pooler.dense.")] = value
        elif name != "embeddings.word_embeddings_2.weight":
            out[name] = value
    projection = tensors["embeddings.word_embeddings_2.weight"]  # torch layout [hidden, emb]
    out["embeddings.word_embeddings.weight"] = (
        tensors["embeddings.word_embeddings.weight"] @ projection.T
    )
    return out


def describe(config: AlbertConfig) -> str:
    """The geometry `cmrcx.convert` prints."""
    fields = dataclasses.asdict(config)
    keys = ("vocab_size", "embedding_size", "hidden_size", "num_layers", "num_heads")
    keys += ("intermediate_size", "hidden_act", "embedding_layout")
    return ", ".join(f"{k}={fields[k]}" for k in keys) + " (one layer shared)"


def tf_config_path(directory: str) -> str | None:
    """A TF release's config: its one albert_config*.json (Google: albert_config.json;
    brightmart: albert_config_tiny.json, ...)."""
    return hf_io.tf_release_config(directory, "albert_config*.json")


def read_dir(directory: str) -> Release:
    """The encoder of a HuggingFace ALBERT directory or a Google / albert_zh TF release
    (`hf_io.Release`; notes: the TF naming scheme, tensors dropped, a fresh pooler).

    Raises PretrainedFormatError (not a release) or WeightError (tensors that do not fit;
    only a missing pooler is filled in, fresh).
    """
    directory = os.path.abspath(directory)
    notes = []
    if os.path.isfile(os.path.join(directory, "config.json")):
        raw, path = hf_io.read_hf_config(directory)
        config = config_from_hf(raw, path)
        tensors, source = hf_io.read_hf_weights(directory)
        named, dropped = normalize_hf_names(tensors)
        model_type = raw.get("model_type")
    elif path := tf_config_path(directory):
        tf_tensors, source = hf_io.read_tf_checkpoint(directory), "TF checkpoint"
        if tf_tensors is None:
            raise PretrainedFormatError(
                f"{directory}: {os.path.basename(path)} but no *.ckpt*.index"
            )
        with open(path, encoding="utf-8") as f:
            config = config_from_hf(json.load(f), path, tf_tensors)
        named, dropped = hf_tensors_from_tf(tf_tensors)
        model_type = None
        notes.append(f"TF variable names: {TF_SCHEMES[config.embedding_layout]}")
    else:
        raise PretrainedFormatError(
            f"{directory}: neither config.json (HuggingFace) nor albert_config*.json (TF)"
        )
    return hf_io.read_release(
        directory, RELEASE, config, named, params_from_hf, source, model_type, dropped, notes
    )


def vocabulary_files(directory: str) -> list:
    """What `cmrcx.convert` copies: vocab.txt, or Google's vocab_chinese.txt as vocab.txt;
    PretrainedFormatError if there is neither."""
    return hf_io.vocabulary_files(directory, RELEASE)


def write_hf_dir(out: str, params, config: AlbertConfig, vocab_file: str | None) -> None:
    """A HuggingFace directory transformers loads: config.json, model.safetensors, vocab.txt.
    The "albert" layout as an AlbertModel; "albert_zh" as the BertModel computing the same
    (`bert_tensors`). params: the params["albert"] tree; the task head is left out."""
    tensors = dict(hf_tensors(params, config))
    if config.embedding_layout == "albert_zh":
        tensors = bert_tensors(tensors, config)
    hf_io.write_release(out, config_to_hf(config), tensors.items(), RELEASE, vocab_file)


# ---------------------------------------------------------------------------
# `cmrcx.convert --verify`: the converted encoder against transformers'


def verify(source: str, export_dir: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """[("hidden states", reference, converted)] on 3 random padded inputs of 32 tokens."""
    import torch

    from cmrcx.models.albert import AlbertEncoder

    config, params = exports.read_network(export_dir)
    length = min(32, config.max_position_embeddings)
    rng = np.random.default_rng(hf_io.VERIFY_SEED)
    ids, mask = hf_io.verification_batch(rng, config.vocab_size, length)
    types = np.zeros_like(ids)
    types[:, length // 2 :] = min(1, config.type_vocab_size - 1)
    with torch.no_grad():
        want = _torch_reference(source, config)(
            input_ids=torch.tensor(ids),
            token_type_ids=torch.tensor(types),
            attention_mask=torch.tensor(mask),
        ).last_hidden_state.numpy()
    got, _ = AlbertEncoder(config).apply({"params": params}, ids, types, mask)
    return [("hidden states", want, np.asarray(got))]


def _torch_reference(source: str, config: AlbertConfig):
    """transformers' AlbertModel of a HuggingFace directory; for a TF release, the
    AlbertModel (Google's names) or BertModel (albert_zh, `bert_tensors`) of its config
    holding its tensors (transformers 5 reads no TF checkpoints)."""
    import torch
    import transformers

    if os.path.isfile(os.path.join(source, "config.json")):
        return transformers.AlbertModel.from_pretrained(source, dtype=torch.float32).eval()
    tensors, _ = hf_tensors_from_tf(hf_io.read_tf_checkpoint(source))
    hf_config = config_to_hf(config)
    if config.embedding_layout == "albert_zh":
        model = transformers.BertModel(transformers.BertConfig(**hf_config))
        tensors = bert_tensors(tensors, config)
    else:
        model = transformers.AlbertModel(transformers.AlbertConfig(**hf_config))
    state = {name: torch.tensor(np.asarray(value)) for name, value in tensors.items()}
    model.load_state_dict(state, strict=False)
    return model.eval()
