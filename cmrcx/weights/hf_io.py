"""Pretrained releases: read HuggingFace or Google TF directories, write HuggingFace.

BERT. HuggingFace: config.json + model.safetensors (or sharded, with an index) or
pytorch_model.bin, + vocab.txt; config.json `model_type` "bert", "ernie" (ERNIE 1.0
as nghuyong converted it: BERT with ReLU, ernie.* tensors) or "roberta" when the
tensors are BERT's (CLUE's roberta_chinese_*: bert.* tensors). Google: bert_config.json
(or one other bert_config*.json, as brightmart's bert_config_large.json) +
*.ckpt.* + vocab.txt.
T5 family (config.json `model_type` "t5" or "mt5": LongLM, T5 v1.0/v1.1, mT5):
config.json + model.safetensors or pytorch_model.bin, + spiece.model and the
tokenizer JSON files.

Loading never executes pickled code: safetensors is read first, and a .bin only
with `torch.load(weights_only=True)`. torch is needed for .bin files only (`pip
install 'cmrcx[convert]'`).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import shutil
from typing import NamedTuple

import numpy as np

from cmrcx.models.bert import ACTIVATIONS, BertConfig
from cmrcx.models.t5 import T5Config
from cmrcx.weights import bert as bert_weights
from cmrcx.weights import exports
from cmrcx.weights import t5 as t5_weights

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
# config.json `model_type` values read as a BERT encoder (a Google bert_config.json has
# none). "ernie": transformers' ErnieModel is BertModel plus a task-type embedding that
# ERNIE 1.0 does not use. "roberta": only with BERT-named tensors (`_check_roberta`).
BERT_MODEL_TYPES = ("bert", "ernie", "roberta")


class PretrainedFormatError(ValueError):
    """A directory is not a BERT release cmrcx can read; says what is missing."""


class PretrainedRelease(NamedTuple):
    """What `read_pretrained_dir` found in a release directory."""

    config: BertConfig
    params: dict  # the params["bert"] tree, layers stacked, float32
    dropped: list[str]  # tensors outside the encoder left out (heads, optimizer slots)
    source: str  # "safetensors", "pytorch_model.bin" or "TF checkpoint"
    fresh: list[str]  # HF names initialised fresh: the pooler, when the release has none
    model_type: str | None  # config.json `model_type` (None: a Google bert_config.json)


def config_from_hf(path: str) -> BertConfig:
    """BertConfig from a HuggingFace config.json or Google bert_config.json.

    Raises PretrainedFormatError naming the file and the field for anything the cmrcx
    encoder does not compute: another model_type, activation or position embedding,
    or ERNIE's task-type embedding switched on.
    """
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    model_type = raw.get("model_type")
    if model_type is not None and model_type not in BERT_MODEL_TYPES:
        raise PretrainedFormatError(
            f"{path}: model_type {model_type!r} is not a BERT-architecture model; "
            f"cmrcx.convert reads {', '.join(BERT_MODEL_TYPES)} and t5, mt5"
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


def config_to_hf(config: BertConfig) -> dict:
    out = {key: getattr(config, field) for key, field in HF_CONFIG_KEYS.items()}
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        **out,
    }


def _read_safetensors(directory: str) -> dict[str, np.ndarray] | None:
    from safetensors.numpy import load_file

    files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    if not files:
        return None
    tensors: dict[str, np.ndarray] = {}
    for path in files:
        tensors.update(load_file(path))
    return tensors


def _read_torch_bin(directory: str) -> dict[str, np.ndarray] | None:
    files = sorted(glob.glob(os.path.join(directory, "pytorch_model*.bin")))
    if not files:
        return None
    try:
        import torch
    except ImportError as error:
        raise PretrainedFormatError(
            f"{files[0]} is a PyTorch file: install torch (pip install 'cmrcx[convert]') "
            "or convert it to model.safetensors"
        ) from error
    tensors = {}
    for path in files:
        state = torch.load(path, map_location="cpu", weights_only=True)
        tensors.update({k: v.float().numpy() for k, v in state.items()})
    return tensors


def _read_tf_checkpoint(directory: str) -> dict[str, np.ndarray] | None:
    indexes = sorted(glob.glob(os.path.join(directory, "*.ckpt*.index")))
    if not indexes:
        return None
    from cmrcx.common import quiet_start

    tf = quiet_start.import_tensorflow()  # no CUDA start-up lines in the converter's output
    reader = tf.train.load_checkpoint(indexes[0][: -len(".index")])
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _read_hf_weights(directory: str) -> tuple[dict[str, np.ndarray], str]:
    """(tensors, source) of a HuggingFace directory: safetensors first, else .bin."""
    tensors = _read_safetensors(directory)
    source = "safetensors"
    if tensors is None:
        tensors, source = _read_torch_bin(directory), "pytorch_model.bin"
    if tensors is None:
        raise PretrainedFormatError(
            f"{directory}: config.json but no model.safetensors or pytorch_model.bin"
        )
    return tensors, source


def read_pretrained_dir(directory: str) -> PretrainedRelease:
    """The encoder of a HuggingFace or Google TF release directory (see `PretrainedRelease`).

    Raises PretrainedFormatError (not a release) or bert_weights.WeightError (tensors
    that do not fit; only a missing pooler is filled in, fresh).
    """
    directory = os.path.abspath(directory)
    hf_config = os.path.join(directory, "config.json")
    tf_config = tf_config_path(directory)
    if os.path.isfile(hf_config):
        config = config_from_hf(hf_config)
        tensors, source = _read_hf_weights(directory)
        model_type = hf_model_type(directory)
        if model_type == "roberta":
            _check_roberta(hf_config, tensors)
        named, dropped = bert_weights.normalize_hf_names(tensors)
    elif tf_config:
        config, model_type = config_from_hf(tf_config), None
        tensors, source = _read_tf_checkpoint(directory), "TF checkpoint"
        if tensors is None:
            raise PretrainedFormatError(
                f"{directory}: {os.path.basename(tf_config)} but no *.ckpt*.index"
            )
        named, dropped = bert_weights.hf_tensors_from_tf(tensors)
    else:
        raise PretrainedFormatError(
            f"{directory}: neither config.json (HuggingFace) nor bert_config.json (Google TF)"
        )
    named, fresh = bert_weights.with_fresh_pooler(named, config)
    params = bert_weights.encoder_params(named, config, f"{directory} ({source})")
    return PretrainedRelease(config, params, sorted(dropped), source, fresh, model_type)


def tf_config_path(directory: str) -> str | None:
    """A Google TF release's config: bert_config.json, else its one bert_config*.json.

    brightmart's RoBERTa-zh-Large (CLUE's RoBERTa-large) ships bert_config_large.json.
    """
    path = os.path.join(directory, "bert_config.json")
    if os.path.isfile(path):
        return path
    found = sorted(glob.glob(os.path.join(directory, "bert_config*.json")))
    if len(found) > 1:
        names = ", ".join(os.path.basename(name) for name in found)
        raise PretrainedFormatError(f"{directory}: several TF configs ({names}); keep one")
    return found[0] if found else None


def _write_hf_model(out: str, hf_config: dict, tensors) -> None:
    """config.json and model.safetensors ((HF name, array) pairs) into `out`."""
    from safetensors.numpy import save_file

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf_config, f, indent=1)
    save_file(dict(tensors), os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


def write_hf_dir(out: str, params_bert, config: BertConfig, vocab_file: str | None) -> None:
    """A HuggingFace BertModel directory: config.json, model.safetensors, vocab.txt."""
    _write_hf_model(out, config_to_hf(config), bert_weights.hf_tensors(params_bert, config))
    if vocab_file:
        with (
            open(vocab_file, encoding="utf-8") as src,
            open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as dst,
        ):
            dst.write(src.read())


def describe(config: BertConfig) -> str:
    fields = dataclasses.asdict(config)
    keys = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size")
    keys += ("max_position_embeddings", "hidden_act", "layer_norm_eps")
    return ", ".join(f"{k}={fields[k]}" for k in keys)


# ---------------------------------------------------------------------------
# T5 family: LongLM, T5 v1.0 / v1.1, mT5

T5_MODEL_TYPES = ("t5", "mt5")  # config.json model_type values read by `read_t5_dir`
# Tokenizer files a T5 release may ship; `cmrcx.convert` copies those present.
T5_TOKENIZER_FILES = (
    "spiece.model",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
)
# config.json keys that are T5Config fields of the same name.
T5_HF_CONFIG_KEYS = (
    "vocab_size",
    "d_model",
    "d_kv",
    "d_ff",
    "num_layers",
    "num_decoder_layers",
    "num_heads",
    "relative_attention_num_buckets",
    "relative_attention_max_distance",
    "dropout_rate",
    "layer_norm_epsilon",
    "feed_forward_proj",
    "pad_token_id",
    "eos_token_id",
    "decoder_start_token_id",
)


class T5Release(NamedTuple):
    """What `read_t5_dir` found in a HuggingFace T5 / mT5 directory."""

    config: T5Config
    params: dict  # the T5ForConditionalGeneration params tree, blocks stacked, float32
    dropped: list[str]  # copies of shared.weight and unused tensors left out
    source: str  # "safetensors" or "pytorch_model.bin"
    model_type: str  # config.json model_type: "t5" or "mt5"


def hf_model_type(directory: str) -> str | None:
    """config.json's `model_type` (None without a config.json or that key)."""
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("model_type")


def t5_config_from_hf(raw: dict, tied: bool, path: str = "config.json") -> T5Config:
    """T5Config from a config.json dict; `tied` from the tensors (`t5_weights.head_is_tied`).

    pad_token_id, eos_token_id (the first, if a list) and decoder_start_token_id are
    config.json's, whatever the tokenizer's are (LongLM's spiece.model: <pad> 5,
    </s> 2; its authors decode from 1). Absent, they are transformers' T5Config
    defaults, pad 0 and eos 1, and decoder start = pad (T5's convention).

    The d_model**-0.5 scaling of the decoder output follows transformers 5:
    mT5 never scales; T5 scales as its config says (`scale_decoder_outputs`, else
    `tie_word_embeddings`, default true). For every released checkpoint that is
    "scale exactly when tied": LongLM and T5 v1.0 tied and scaled, T5 v1.1 and
    mT5 untied and not.
    """
    model_type = raw.get("model_type")
    if model_type not in T5_MODEL_TYPES:
        raise PretrainedFormatError(f"{path}: model_type {model_type!r} is not t5 or mt5")
    proj = raw.get("feed_forward_proj", "relu")
    if proj not in ("relu", "gated-gelu"):
        raise PretrainedFormatError(
            f"{path}: feed_forward_proj {proj!r}; cmrcx T5 has 'relu' and 'gated-gelu'"
        )
    kwargs = {key: raw[key] for key in T5_HF_CONFIG_KEYS if raw.get(key) is not None}
    if isinstance(kwargs.get("eos_token_id"), list):
        kwargs["eos_token_id"] = kwargs["eos_token_id"][0]
    kwargs.setdefault("decoder_start_token_id", kwargs.get("pad_token_id", 0))
    if model_type == "mt5":
        scale = False
    else:
        scale = raw.get("scale_decoder_outputs", raw.get("tie_word_embeddings") is not False)
    return T5Config(**kwargs, tie_word_embeddings=tied, scale_decoder_outputs=bool(scale))


def t5_config_to_hf(config: T5Config) -> dict:
    """config.json for transformers' T5ForConditionalGeneration (4.x and 5.x read it alike)."""
    out = {key: getattr(config, key) for key in T5_HF_CONFIG_KEYS}
    return {
        "architectures": ["T5ForConditionalGeneration"],
        "model_type": "t5",
        "is_encoder_decoder": True,
        "initializer_factor": 1.0,
        **out,
        "tie_word_embeddings": config.tie_word_embeddings,
        "scale_decoder_outputs": config.scale_decoder_outputs,
    }


def read_t5_dir(directory: str) -> T5Release:
    """The model of a HuggingFace T5 / mT5 directory (see `T5Release`).

    Raises PretrainedFormatError (not a T5 release) or t5_weights.WeightError
    (tensors that do not fit; nothing is filled in).
    """
    directory = os.path.abspath(directory)
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        raise PretrainedFormatError(f"{directory}: no config.json")
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    tensors, source = _read_hf_weights(directory)
    config = t5_config_from_hf(raw, t5_weights.head_is_tied(tensors, raw), path)
    _, dropped, _ = t5_weights.normalize_hf_names(tensors, config)
    params = t5_weights.model_params(tensors, config, f"{directory} ({source})")
    return T5Release(config, params, dropped, source, raw["model_type"])


def write_hf_t5_dir(params, config: T5Config, out_dir: str, tokenizer_dir: str | None = None):
    """A HuggingFace T5ForConditionalGeneration directory: config.json, model.safetensors.

    params: the T5ForConditionalGeneration tree (numpy or jax arrays). With
    `tokenizer_dir`, its tokenizer files (`T5_TOKENIZER_FILES`) are copied too.
    """
    _write_hf_model(out_dir, t5_config_to_hf(config), t5_weights.hf_tensors(params, config))
    if tokenizer_dir:
        copy_t5_tokenizer_files(tokenizer_dir, out_dir)


def copy_t5_tokenizer_files(source: str, out: str) -> list[str]:
    """Copies the `T5_TOKENIZER_FILES` that `source` holds into `out`; returns their names."""
    copied = []
    for name in T5_TOKENIZER_FILES:
        if os.path.isfile(os.path.join(source, name)):
            shutil.copyfile(os.path.join(source, name), os.path.join(out, name))
            copied.append(name)
    return copied


def read_t5_export(export_dir: str) -> tuple[T5Config, dict]:
    """(config, params as numpy) of a cmrcx T5 export (`family` "t5" in model_config.json)."""

    config = exports.read_model_config(export_dir)
    if not isinstance(config, T5Config):
        raise PretrainedFormatError(f"{export_dir}: not a T5 export (a {type(config).__name__})")
    return config, exports.load_params(export_dir, None)["t5"]


def describe_t5(config: T5Config) -> str:
    fields = dataclasses.asdict(config)
    keys = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers")
    head = "tied" if config.tie_word_embeddings else "untied"
    head += ", scaled by d_model**-0.5" if config.scale_decoder_outputs else ""
    ids = ("pad_token_id", "eos_token_id", "decoder_start_token_id")
    return (
        ", ".join(f"{k}={fields[k]}" for k in (*keys, "num_heads", "feed_forward_proj"))
        + f", lm_head {head}, "
        + ", ".join(f"{k}={fields[k]}" for k in ids)
    )
