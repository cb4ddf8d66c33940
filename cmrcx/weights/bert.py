"""BERT-family weights between cmrcx (Flax) and HuggingFace / Google TF checkpoints.

The BERT row of `cmrcx.models.registry` (model_type "bert", "ernie", "roberta"). Same
function names as every family's weights module (see `cmrcx.weights`): config_from_hf,
config_to_hf, weight_table, params_from_hf, hf_tensors, describe, read_dir,
write_hf_dir, vocabulary_files, verify.

HuggingFace: config.json + model.safetensors (or sharded, with an index) or
pytorch_model.bin, + vocab.txt; config.json `model_type` "bert", "ernie" (ERNIE 1.0
as nghuyong converted it: BERT with ReLU, ernie.* tensors) or "roberta" when the
tensors are BERT's (CLUE's roberta_chinese_*: bert.* tensors). Google: bert_config.json
(or one other bert_config*.json, as brightmart's bert_config_large.json) +
*.ckpt.* + vocab.txt. pytorch_pretrained_bert (what the CMRC 2019 authors' script
reads and writes): bert_config.json + pytorch_model.bin (HuggingFace names) + vocab.txt.

One table, `weight_table(config)`, pairs every cmrcx encoder parameter with its
HuggingFace name and a layout rule (`cmrcx.weights.table`). Google's TF names are first
rewritten into HuggingFace names (`tf_to_hf_name`), so both formats share the table, and
exporting back to HuggingFace is the same table read the other way.

Tensors a source holds beyond the encoder are sorted into two kinds: known
ones outside the encoder (MLM/NSP and task heads, optimizer slots, step counters), which
are dropped and counted, and everything else, which is an error listing them.
The one tensor group a source may lack is the pooler: `with_fresh_pooler` adds
a freshly initialised one (`BertForMaskedLM` saves none); any other missing
tensor is an error.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator, Mapping

import numpy as np

from cmrcx.models import registry
from cmrcx.models.bert import ACTIVATIONS, BertConfig
from cmrcx.weights import exports, hf_io
from cmrcx.weights.hf_io import PretrainedFormatError, Release
from cmrcx.weights.table import (
    Entry,
    WeightError,
    dense,
    encoder_tensors,
    layer_norm,
    merge_heads,
    params_from_table,
    split_heads,
    stack_layers,
    tensors_from_table,
    unstack_layers,
)

__all__ = [  # the names of every family's weights module (cmrcx/weights/__init__.py), then BERT's
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
    "hf_tensors_from_tf",
    "normalize_hf_names",
    "with_fresh_pooler",
    "tf_config_path",
]

# HuggingFace config.json key -> BertConfig field.
HF_CONFIG_KEYS = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_size",
    "max_position_embeddings": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "hidden_dropout_prob": "hidden_dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "layer_norm_eps": "layer_norm_eps",
    "hidden_act": "hidden_act",
    "initializer_range": "initializer_range",
}

# Not part of the encoder; dropped (and reported) on conversion: pretraining heads (cls.),
# and the task heads of fine-tuned checkpoints (transformers' BertForSequenceClassification
# / ForMultipleChoice `classifier.`, ForQuestionAnswering `qa_outputs.`; Google's
# run_classifier.py `output_weights` / `output_bias`).
DROPPED_HF = re.compile(
    r"^(cls\.|classifier\.|qa_outputs\.|embeddings\.position_ids$|pooler\.position_ids$)"
)
DROPPED_TF = re.compile(
    r"(^cls/|^output_weights$|^output_bias$|^global_step$|/adam_[mv]$|^bad_steps$"
    r"|^good_steps$|^loss_scale$)"
)

# The pooler, which `transformers.BertForMaskedLM` (built with add_pooling_layer=False)
# does not save; many released Chinese BERTs come from it. Fine-tuning heads that
# read the pooled output then train it from this fresh start (the cloze head does not).
# Initialised as `BertEncoder` initialises its `pooler` (models/bert.py).
POOLER_HF = ("pooler.dense.bias", "pooler.dense.weight")
POOLER_SEED = hf_io.FRESH_SEED  # jax.random.key of the fresh pooler kernel
RELEASE = hf_io.ReleaseFormat(
    what="encoder",
    vocabulary=("vocab.txt",),
    vocabulary_required=True,
    dropped="tensors outside the encoder (heads, optimizer)",
    dropped_shown=6,
    fresh=hf_io.Fresh(POOLER_HF, "hidden_size", "truncated_normal", "; BertForMaskedLM saves none"),
)
# The encoder's name inside transformers' task models (BertForPreTraining, BertForMaskedLM,
# ErnieForMaskedLM, ...): its tensors are `<prefix>embeddings...`, a bare model's `embeddings...`.
ENCODER_PREFIXES = ("bert.", "ernie.")


def weight_table(config: BertConfig) -> list[Entry]:
    """Every encoder parameter of `config`, with its HuggingFace BertModel name (no "bert."
    prefix) and Flax shape."""
    hidden, heads, head_dim = config.hidden_size, config.num_heads, config.head_dim
    inner = config.intermediate_size
    entries = [
        Entry(
            ("embeddings", name, "embedding"), f"embeddings.{name}.weight", "same", (rows, hidden)
        )
        for name, rows in (
            ("word_embeddings", config.vocab_size),
            ("position_embeddings", config.max_position_embeddings),
            ("token_type_embeddings", config.type_vocab_size),
        )
    ]
    entries += layer_norm(("embeddings", "LayerNorm"), "embeddings.LayerNorm", hidden)
    for i in range(config.num_layers):
        ours, hf = (f"layer_{i}",), f"encoder.layer.{i}."
        for proj in ("query", "key", "value"):
            path = (*ours, "attention", proj)
            entries += split_heads(path, f"{hf}attention.self.{proj}", hidden, heads, head_dim)
        path = (*ours, "attention", "output")
        entries += merge_heads(path, f"{hf}attention.output.dense", heads, head_dim, hidden)
        entries += layer_norm(
            (*ours, "attention_LayerNorm"), f"{hf}attention.output.LayerNorm", hidden
        )
        entries += dense((*ours, "intermediate"), f"{hf}intermediate.dense", hidden, inner)
        entries += dense((*ours, "output"), f"{hf}output.dense", inner, hidden)
        entries += layer_norm((*ours, "output_LayerNorm"), f"{hf}output.LayerNorm", hidden)
    entries += dense(("pooler",), "pooler.dense", hidden, hidden)
    return entries


def tf_to_hf_name(name: str) -> str:
    """`bert/encoder/layer_3/attention/self/query/kernel` -> `encoder.layer.3...query.weight`."""
    name = name.removeprefix("bert/")
    name = re.sub(r"layer_(\d+)", r"layer.\1", name).replace("/", ".")
    if name in (
        "embeddings.word_embeddings",
        "embeddings.position_embeddings",
        "embeddings.token_type_embeddings",
    ):
        return name + ".weight"
    for tf_suffix, hf_suffix in ((".kernel", ".weight"), (".gamma", ".weight"), (".beta", ".bias")):
        if name.endswith(tf_suffix):
            return name[: -len(tf_suffix)] + hf_suffix
    return name


def hf_tensors_from_tf(tf_tensors: Mapping[str, np.ndarray]) -> tuple[dict, list[str]]:
    """Google TF checkpoint tensors -> (HF-named torch-layout tensors, dropped names)."""
    out, dropped = {}, []
    for name, value in tf_tensors.items():
        if DROPPED_TF.search(name):
            dropped.append(name)
            continue
        hf_name = tf_to_hf_name(name)
        # TF dense kernels are [in, out]; torch's are [out, in].
        out[hf_name] = value.T if name.endswith("/kernel") else value
    return out, dropped


def normalize_hf_names(tensors: Mapping[str, np.ndarray]) -> tuple[dict, list[str]]:
    """Strips the `bert.`/`ernie.` prefix of task models, maps legacy gamma/beta; drops heads."""
    return encoder_tensors(tensors, ENCODER_PREFIXES, DROPPED_HF, _legacy_layer_norm)


def _legacy_layer_norm(name: str) -> str:
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    return re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)


def with_fresh_pooler(
    hf_tensors: Mapping[str, np.ndarray], config: BertConfig
) -> tuple[dict, list[str]]:
    """(HF-named tensors with a fresh pooler if the source has none, names made fresh):
    `hf_io.with_fresh` of `RELEASE.fresh` (kernel truncated normal, stddev
    initializer_range, key `POOLER_SEED`, torch layout [hidden, hidden]; bias zeros)."""
    return hf_io.with_fresh(hf_tensors, config, RELEASE.fresh)


def params_from_hf(hf_tensors: Mapping[str, np.ndarray], config: BertConfig, source: str) -> dict:
    """HF-named tensors -> the nested cmrcx `params["bert"]` tree (float32).

    Raises WeightError listing every missing, unknown and misshapen tensor at once.
    """
    table = weight_table(config)
    params = params_from_table(hf_tensors, table, config.num_heads, source, RELEASE.what)
    return stack_layers(params, config.num_layers)


def hf_tensors(params: Mapping, config: BertConfig) -> Iterator[tuple[str, np.ndarray]]:
    """cmrcx `params["bert"]` -> (HF name, torch-layout float32 tensor) pairs."""
    yield from tensors_from_table(unstack_layers(params, config.num_layers), weight_table(config))


# ---------------------------------------------------------------------------
# Configs and release directories


def config_from_hf(raw: Mapping, path: str = "config.json", tensors=None) -> BertConfig:
    """BertConfig from a HuggingFace config.json or Google bert_config.json dict (at `path`,
    named in errors; `tensors` unused: config.json says it all).

    Raises PretrainedFormatError naming the file and the field for anything the cmrcx
    encoder does not compute: another model_type, activation or position embedding,
    or ERNIE's task-type embedding switched on.
    """
    model_type = raw.get("model_type")
    bert_types = registry.family("bert").hf_model_types
    if model_type is not None and model_type not in bert_types:
        others = [", ".join(row.hf_model_types) for row in registry.FAMILIES.values()]
        raise PretrainedFormatError(
            f"{path}: model_type {model_type!r} is not a BERT-architecture model; "
            f"cmrcx.convert reads {' and '.join(others)}"
        )
    activation = raw.get("hidden_act", "gelu")
    if activation not in ACTIVATIONS:
        raise PretrainedFormatError(
            f"{path}: hidden_act {activation!r}; cmrcx BERT has {', '.join(ACTIVATIONS)}"
        )
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise PretrainedFormatError(
            f"{path}: position_embedding_type {raw['position_embedding_type']!r}; "
            "only 'absolute' position embeddings are supported"
        )
    if raw.get("use_task_id"):
        # ERNIE 3.0 adds task_type_embeddings[task_type_ids] to every token; ERNIE 1.0
        # (nghuyong/ernie-1.0-base-zh) has no use_task_id, which transformers reads as false.
        raise PretrainedFormatError(
            f"{path}: use_task_id true (ERNIE's task-type embedding) is not supported; "
            "cmrcx BERT has word, position and token-type embeddings only"
        )
    kwargs = {field: raw[key] for key, field in HF_CONFIG_KEYS.items() if key in raw}
    return BertConfig(**kwargs)


def config_to_hf(config: BertConfig) -> dict:
    """config.json for transformers' BertModel."""
    out = {key: getattr(config, field) for key, field in HF_CONFIG_KEYS.items()}
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        **out,
    }


def describe(config: BertConfig) -> str:
    """The geometry `cmrcx.convert` prints."""
    fields = dataclasses.asdict(config)
    keys = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size")
    keys += ("max_position_embeddings", "hidden_act", "layer_norm_eps")
    return ", ".join(f"{k}={fields[k]}" for k in keys)


def _check_roberta(path: str, tensors) -> None:
    """PretrainedFormatError unless a model_type "roberta" checkpoint is BERT-named.

    CLUE's roberta_chinese_* are BERT-architecture checkpoints (their model cards load
    them with BertModel) saved as bert.* tensors. transformers' RobertaModel is not:
    its position ids start at pad_token_id + 1. Its tensors are roberta.* (task
    models) or bare (RobertaModel), and bare BERT and RoBERTa names are the same.
    """
    if any(name.startswith("bert.") for name in tensors) and not any(
        name.startswith("roberta.") for name in tensors
    ):
        return
    raise PretrainedFormatError(
        f"{path}: model_type 'roberta' with tensors not named bert.*: a RoBERTa-"
        "architecture checkpoint (position ids from pad_token_id + 1), or a BERT one "
        "that cmrcx cannot tell from it; if it is BERT-architecture, set model_type "
        "to 'bert' in config.json"
    )


def read_dir(directory: str) -> Release:
    """The encoder of a HuggingFace or Google TF release directory (`hf_io.Release`; its
    notes: the tensors dropped and the ones initialised fresh, only ever the pooler).

    Raises PretrainedFormatError (not a release) or WeightError (tensors that do not
    fit; only a missing pooler is filled in, fresh).
    """
    directory = os.path.abspath(directory)
    hf_config = os.path.join(directory, "config.json")
    tf_config = tf_config_path(directory)
    notes = []
    if os.path.isfile(hf_config):
        raw, _ = hf_io.read_hf_config(directory)
        config = config_from_hf(raw, hf_config)
        tensors, source = hf_io.read_hf_weights(directory)
        model_type = raw.get("model_type")
        if model_type == "roberta":
            _check_roberta(hf_config, tensors)
            notes.append("config.json model_type 'roberta' with bert.* tensors: converted as BERT")
        named, dropped = normalize_hf_names(tensors)
    elif tf_config:
        with open(tf_config, encoding="utf-8") as f:
            config, model_type = config_from_hf(json.load(f), tf_config), None
        tensors, source = hf_io.read_tf_checkpoint(directory), "TF checkpoint"
        if tensors is not None:
            named, dropped = hf_tensors_from_tf(tensors)
        else:  # pytorch_pretrained_bert's release format (the CMRC 2019 authors' script)
            tensors, source = hf_io.read_torch_bin(directory), "pytorch_model.bin"
            if tensors is None:
                raise PretrainedFormatError(
                    f"{directory}: {os.path.basename(tf_config)} but no *.ckpt*.index "
                    "(Google TF) nor pytorch_model.bin (pytorch_pretrained_bert)"
                )
            named, dropped = normalize_hf_names(tensors)
    else:
        raise PretrainedFormatError(
            f"{directory}: neither config.json (HuggingFace) nor bert_config.json (Google TF)"
        )
    return hf_io.read_release(
        directory, RELEASE, config, named, params_from_hf, source, model_type, dropped, notes
    )


def tf_config_path(directory: str) -> str | None:
    """A Google TF release's config: bert_config.json, else its one bert_config*.json.

    brightmart's RoBERTa-zh-Large (CLUE's RoBERTa-large) ships bert_config_large.json.
    """
    return hf_io.tf_release_config(directory, "bert_config*.json", "bert_config.json")


def vocabulary_files(directory: str) -> list[str]:
    """["vocab.txt"]: what `cmrcx.convert` copies; PretrainedFormatError if it is missing."""
    return hf_io.vocabulary_files(directory, RELEASE)


def write_hf_dir(out: str, params, config: BertConfig, vocab_file: str | None) -> None:
    """A HuggingFace BertModel directory: config.json, model.safetensors, vocab.txt.

    params: the params["bert"] tree (numpy or jax arrays); the task head is not part of
    BertModel and is left out.
    """
    hf_io.write_release(out, config_to_hf(config), hf_tensors(params, config), RELEASE, vocab_file)


# ---------------------------------------------------------------------------
# `cmrcx.convert --verify`: the converted encoder against transformers'


def verify(source: str, export_dir: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """[("hidden states", reference, converted)] on 3 random padded inputs of 32 tokens."""
    import torch

    from cmrcx.models.bert import BertEncoder

    config = exports.read_model_config(export_dir)
    params = exports.load_params(export_dir, None)["bert"]
    length = min(32, config.max_position_embeddings)
    rng = np.random.default_rng(hf_io.VERIFY_SEED)
    ids, mask = hf_io.verification_batch(rng, config.vocab_size, length)
    types = np.zeros_like(ids)
    types[:, length // 2 :] = min(1, config.type_vocab_size - 1)
    with torch.no_grad():
        want = _torch_bert(source)(
            input_ids=torch.tensor(ids),
            token_type_ids=torch.tensor(types),
            attention_mask=torch.tensor(mask),
        ).last_hidden_state.numpy()
    got, _ = BertEncoder(config).apply({"params": params}, ids, types, mask)
    return [("hidden states", want, np.asarray(got))]


def _torch_bert(source: str):
    """transformers' BertModel (ErnieModel) from a HuggingFace directory or a Google TF release.

    model_type "roberta" is read by BertModel too: `convert` takes only BERT-architecture
    checkpoints of that type (see `_check_roberta`). transformers 5 reads no TF
    checkpoints: the TF tensors are loaded into a BertModel built from the TF config under
    the names `hf_tensors_from_tf` maps them to (so --verify then checks the model, not
    the TF name mapping).
    """
    import torch
    import transformers

    if os.path.isfile(os.path.join(source, "config.json")):
        if hf_io.hf_model_type(source) == "ernie":
            model_class = transformers.ErnieModel
        else:
            model_class = transformers.BertModel
        return model_class.from_pretrained(source, dtype=torch.float32).eval()
    config = transformers.BertConfig.from_json_file(tf_config_path(source))
    model = transformers.BertModel(config).eval()
    tensors, _ = hf_tensors_from_tf(hf_io.read_tf_checkpoint(source))
    state = {name: torch.tensor(np.asarray(value)) for name, value in tensors.items()}
    model.load_state_dict(state, strict=False)
    return model
