"""Pretrained BERT directories: read HuggingFace or Google TF releases, write HuggingFace.

HuggingFace: config.json + model.safetensors (or sharded, with an index) or
pytorch_model.bin, + vocab.txt. Google: bert_config.json + bert_model.ckpt.* +
vocab.txt. Loading never executes pickled code: safetensors is read first, and a
.bin only with `torch.load(weights_only=True)`. torch is needed for .bin files
only (`pip install 'cmrcx[convert]'`).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from typing import NamedTuple

import numpy as np

from cmrcx import bert_weights
from cmrcx.models.bert import BertConfig

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
    "initializer_range": "initializer_range",
}


class PretrainedFormatError(ValueError):
    """A directory is not a BERT release cmrcx can read; says what is missing."""


class PretrainedRelease(NamedTuple):
    """What `read_pretrained_dir` found in a release directory."""

    config: BertConfig
    params: dict  # the params["bert"] tree, layers stacked, float32
    dropped: list[str]  # pretraining-only tensors left out (heads, optimizer slots)
    source: str  # "safetensors", "pytorch_model.bin" or "TF checkpoint"
    fresh: list[str]  # HF names initialised fresh: the pooler, when the release has none


def config_from_hf(path: str) -> BertConfig:
    """BertConfig from a HuggingFace config.json or Google bert_config.json."""
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    activation = raw.get("hidden_act", "gelu")
    if activation != "gelu":
        raise PretrainedFormatError(f"{path}: hidden_act {activation!r}; cmrcx BERT uses 'gelu'")
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise PretrainedFormatError(f"{path}: only absolute position embeddings are supported")
    kwargs = {field: raw[key] for key, field in HF_CONFIG_KEYS.items() if key in raw}
    return BertConfig(**kwargs)


def config_to_hf(config: BertConfig) -> dict:
    out = {key: getattr(config, field) for key, field in HF_CONFIG_KEYS.items()}
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_act": "gelu",
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
    from cmrcx import quiet_start

    tf = quiet_start.import_tensorflow()  # no CUDA start-up lines in the converter's output
    reader = tf.train.load_checkpoint(indexes[0][: -len(".index")])
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def read_pretrained_dir(directory: str) -> PretrainedRelease:
    """The encoder of a HuggingFace or Google TF release directory (see `PretrainedRelease`).

    Raises PretrainedFormatError (not a release) or bert_weights.WeightError (tensors
    that do not fit; only a missing pooler is filled in, fresh).
    """
    directory = os.path.abspath(directory)
    hf_config = os.path.join(directory, "config.json")
    tf_config = os.path.join(directory, "bert_config.json")
    if os.path.isfile(hf_config):
        config = config_from_hf(hf_config)
        tensors = _read_safetensors(directory)
        source = "safetensors"
        if tensors is None:
            tensors, source = _read_torch_bin(directory), "pytorch_model.bin"
        if tensors is None:
            raise PretrainedFormatError(
                f"{directory}: config.json but no model.safetensors or pytorch_model.bin"
            )
        named, dropped = bert_weights.normalize_hf_names(tensors)
    elif os.path.isfile(tf_config):
        config = config_from_hf(tf_config)
        tensors, source = _read_tf_checkpoint(directory), "TF checkpoint"
        if tensors is None:
            raise PretrainedFormatError(f"{directory}: bert_config.json but no *.ckpt*.index")
        named, dropped = bert_weights.hf_tensors_from_tf(tensors)
    else:
        raise PretrainedFormatError(
            f"{directory}: neither config.json (HuggingFace) nor bert_config.json (Google TF)"
        )
    named, fresh = bert_weights.with_fresh_pooler(named, config)
    params = bert_weights.encoder_params(named, config, f"{directory} ({source})")
    return PretrainedRelease(config, params, sorted(dropped), source, fresh)


def write_hf_dir(out: str, params_bert, config: BertConfig, vocab_file: str | None) -> None:
    """A HuggingFace BertModel directory: config.json, model.safetensors, vocab.txt."""
    from safetensors.numpy import save_file

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config_to_hf(config), f, indent=1)
    save_file(
        dict(bert_weights.hf_tensors(params_bert, config)),
        os.path.join(out, "model.safetensors"),
        metadata={"format": "pt"},
    )
    if vocab_file:
        with (
            open(vocab_file, encoding="utf-8") as src,
            open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as dst,
        ):
            dst.write(src.read())


def describe(config: BertConfig) -> str:
    fields = dataclasses.asdict(config)
    return ", ".join(
        f"{k}={fields[k]}"
        for k in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size")
    )
