"""XLNet weights between cmrcx (Flax) and HuggingFace checkpoints.

The XLNet row of `cmrcx.models.registry` (config.json model_type "xlnet"). Same function
names as every family's weights module (see `cmrcx.weights`): config_from_hf,
config_to_hf, weight_table, params_from_hf, hf_tensors, describe, read_dir,
write_hf_dir, vocabulary_files, verify.

A release is a HuggingFace directory: config.json + model.safetensors or
pytorch_model.bin, + spiece.model (hfl/chinese-xlnet-mid and -base: Chinese XLNet,
ymcui/Chinese-PreTrained-XLNet, converted by its authors). It may hold an `XLNetModel`
(bare tensor names), an `XLNetLMHeadModel` or any XLNetFor* task model (`transformer.`
prefix). Google-style TF checkpoints (xlnet_model.ckpt, the CLUE baseline's download)
are not read: convert them with transformers' XLNet TF converter first.

One table, `weight_table(config)`, pairs every parameter of
`cmrcx.models.xlnet.XLNetEncoder` with its HuggingFace name. The encoder's sequence
summary (`sequence_summary`) is transformers' `sequence_summary.summary` of
XLNetForSequenceClassification / ForMultipleChoice; a checkpoint without one
(XLNetModel, XLNetLMHeadModel) gets a fresh one, reported (as BERT's missing pooler).
Dropped and reported: `mask_emb` (the query stream's input, pretraining only), the LM
head (`lm_loss.*`, tied to the embedding) and the task layers (`logits_proj.*`,
`qa_outputs.*`, XLNetForQuestionAnswering's `start_logits.*`, `end_logits.*`,
`answer_class.*`): a cmrcx export is the encoder, the task head starts fresh.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator, Mapping

import numpy as np

from cmrcx.models import registry
from cmrcx.models.xlnet import ACTIVATIONS, XLNetConfig
from cmrcx.weights import exports, hf_io
from cmrcx.weights.hf_io import PretrainedFormatError, Release
from cmrcx.weights.table import (
    Entry,
    WeightError,
    dense,
    encoder_tensors,
    layer_norm,
    params_from_table,
    stack_layers,
    tensors_from_table,
    unstack_layers,
)

__all__ = [  # the names of every family's weights module (cmrcx/weights/__init__.py)
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
    "normalize_hf_names",
    "with_fresh_summary",
]

# HuggingFace config.json key -> XLNetConfig field.
HF_CONFIG_KEYS = {
    "vocab_size": "vocab_size",
    "d_model": "d_model",
    "n_layer": "num_layers",
    "n_head": "num_heads",
    "d_inner": "d_inner",
    "ff_activation": "ff_activation",
    "layer_norm_eps": "layer_norm_eps",
    "dropout": "dropout",
    "clamp_len": "clamp_len",
    "summary_last_dropout": "summary_last_dropout",
    "initializer_range": "initializer_range",
}
# What the fine-tuning network computes; a config.json saying otherwise is refused
# (transformers' XLNetConfig defaults on the right).
REQUIRED_SETTINGS = {
    "attn_type": "bi",
    "bi_data": False,
    "summary_type": "last",
    "summary_use_proj": True,
    "summary_activation": "tanh",
    "summary_proj_to_labels": False,  # not an XLNetConfig field; its absence is false
}

# The encoder's name inside transformers' XLNet task models (base_model_prefix).
ENCODER_PREFIX = "transformer."
SUMMARY_HF = ("sequence_summary.summary.bias", "sequence_summary.summary.weight")
SUMMARY_SEED = hf_io.FRESH_SEED  # jax.random.key of a fresh summary kernel
DROPPED_HF = re.compile(
    r"^(mask_emb$|lm_loss\.|logits_proj\.|qa_outputs\.|start_logits\.|end_logits\.|answer_class\.)"
)
RELEASE = hf_io.ReleaseFormat(
    what="XLNet",
    vocabulary=("spiece.model",),
    vocabulary_required=True,
    dropped="tensors outside the fine-tuning encoder (mask_emb, LM and task layers)",
    # Initialised as `XLNetEncoder` initialises `sequence_summary`.
    fresh=hf_io.Fresh(
        SUMMARY_HF,
        "d_model",
        "normal",
        ": XLNetModel and XLNetLMHeadModel save no sequence summary",
    ),
)


def weight_table(config: XLNetConfig) -> list[Entry]:
    """Every encoder parameter of `config`, with its HuggingFace name (XLNetModel's; the
    summary: XLNetForSequenceClassification's) and Flax shape."""
    d, heads, head_dim, inner = config.d_model, config.num_heads, config.head_dim, config.d_inner
    entries = [Entry(("word_embedding", "embedding"), "word_embedding.weight", "same",
                     (config.vocab_size, d))]  # fmt: skip
    # q, k, v, o, r are [d_model, heads, head_dim] nn.Parameters in transformers too.
    attention = {name: (d, heads, head_dim) for name in ("q", "k", "v", "o", "r")}
    attention.update({name: (heads, head_dim) for name in ("r_r_bias", "r_s_bias", "r_w_bias")})
    attention["seg_embed"] = (2, heads, head_dim)
    for i in range(config.num_layers):
        ours, hf = (f"layer_{i}",), f"layer.{i}."
        for name, shape in attention.items():
            entries.append(Entry((*ours, "rel_attn", name), f"{hf}rel_attn.{name}", "same", shape))
        entries += layer_norm((*ours, "rel_attn", "layer_norm"), f"{hf}rel_attn.layer_norm", d)
        entries += dense((*ours, "layer_1"), f"{hf}ff.layer_1", d, inner)
        entries += dense((*ours, "layer_2"), f"{hf}ff.layer_2", inner, d)
        entries += layer_norm((*ours, "ff_layer_norm"), f"{hf}ff.layer_norm", d)
    entries += dense(("sequence_summary",), "sequence_summary.summary", d, d)
    return entries


def normalize_hf_names(tensors: Mapping[str, np.ndarray]) -> tuple[dict, list[str]]:
    """(tensors under XLNetModel's names plus the summary, names dropped): strips the task
    models' `transformer.` prefix; drops `DROPPED_HF` (mask_emb, LM and task layers)."""
    named, dropped = encoder_tensors(tensors, (ENCODER_PREFIX,), DROPPED_HF)
    return named, sorted(dropped)


def with_fresh_summary(
    hf_tensors: Mapping[str, np.ndarray], config: XLNetConfig
) -> tuple[dict, list[str]]:
    """(tensors with a fresh sequence summary if the source has none, names made fresh):
    `hf_io.with_fresh` of `RELEASE.fresh` (kernel normal with stddev initializer_range,
    key `SUMMARY_SEED`; bias zeros)."""
    return hf_io.with_fresh(hf_tensors, config, RELEASE.fresh)


def params_from_hf(hf_tensors: Mapping[str, np.ndarray], config: XLNetConfig, source: str) -> dict:
    """HF-named tensors (XLNetModel names + the summary) -> `params["xlnet"]` (float32).

    Raises WeightError listing every missing, unknown and misshapen tensor at once.
    """
    table = weight_table(config)
    params = params_from_table(hf_tensors, table, config.num_heads, source, RELEASE.what)
    return stack_layers(params, config.num_layers)


def hf_tensors(params: Mapping, config: XLNetConfig) -> Iterator[tuple[str, np.ndarray]]:
    """cmrcx `params["xlnet"]` -> (HF name, torch-layout float32 tensor) pairs."""
    yield from tensors_from_table(unstack_layers(params, config.num_layers), weight_table(config))


# ---------------------------------------------------------------------------
# Configs and release directories


def config_from_hf(raw: Mapping, path: str = "config.json", tensors=None) -> XLNetConfig:
    """XLNetConfig from a HuggingFace config.json dict (at `path`, named in errors;
    `tensors` unused). PretrainedFormatError for what the fine-tuning network does not
    compute: another model_type or activation, `attn_type` "uni", `bi_data`, a summary
    other than tanh(projection(last token))."""
    model_type = raw.get("model_type")
    if model_type not in registry.family("xlnet").hf_model_types:
        raise PretrainedFormatError(f"{path}: model_type {model_type!r} is not xlnet")
    activation = raw.get("ff_activation", "gelu")
    if activation not in ACTIVATIONS:
        raise PretrainedFormatError(
            f"{path}: ff_activation {activation!r}; cmrcx XLNet has {', '.join(ACTIVATIONS)}"
        )
    for key, value in REQUIRED_SETTINGS.items():
        if raw.get(key, value) != value:
            raise PretrainedFormatError(
                f"{path}: {key} {raw[key]!r}; the cmrcx XLNet encoder (fine-tuning) computes "
                f"{key} {value!r} only"
            )
    d_head = raw.get("d_head")
    if d_head is not None and d_head * raw.get("n_head", 16) != raw.get("d_model", 1024):
        raise PretrainedFormatError(f"{path}: d_head {d_head} is not d_model / n_head")
    return XLNetConfig(**{field: raw[key] for key, field in HF_CONFIG_KEYS.items() if key in raw})


def config_to_hf(config: XLNetConfig) -> dict:
    """config.json for transformers' XLNetModel (and its task models)."""
    out = {key: getattr(config, field) for key, field in HF_CONFIG_KEYS.items()}
    return {
        "architectures": ["XLNetForSequenceClassification"],
        "model_type": "xlnet",
        "d_head": config.head_dim,
        **{k: v for k, v in REQUIRED_SETTINGS.items() if k != "summary_proj_to_labels"},
        "mem_len": None,
        "pad_token_id": 5,  # Chinese XLNet's spiece.model: <pad> 5, <s> 1, </s> 2
        "bos_token_id": 1,
        "eos_token_id": 2,
        **out,
    }


def describe(config: XLNetConfig) -> str:
    """The geometry `cmrcx.convert` prints."""
    fields = dataclasses.asdict(config)
    keys = ("vocab_size", "d_model", "num_layers", "num_heads", "d_inner", "ff_activation")
    return ", ".join(f"{k}={fields[k]}" for k in (*keys, "layer_norm_eps", "clamp_len"))


def read_dir(directory: str) -> Release:
    """The encoder of a HuggingFace XLNet directory (`hf_io.Release`; its notes: the tensors
    dropped, and a summary initialised fresh).

    Raises PretrainedFormatError (not an XLNet release) or WeightError (tensors that do
    not fit; only a missing sequence summary is filled in, fresh).
    """
    directory = os.path.abspath(directory)
    raw, path = hf_io.read_hf_config(directory)
    config = config_from_hf(raw, path)
    tensors, source = hf_io.read_hf_weights(directory)
    named, dropped = normalize_hf_names(tensors)
    return hf_io.read_release(
        directory, RELEASE, config, named, params_from_hf, source, "xlnet", dropped
    )


def vocabulary_files(directory: str) -> list[str]:
    """["spiece.model"]: what `cmrcx.convert` copies; PretrainedFormatError if missing."""
    return hf_io.vocabulary_files(directory, RELEASE)


def write_hf_dir(out: str, params, config: XLNetConfig, vocab_file: str | None) -> None:
    """A HuggingFace XLNet directory: config.json, model.safetensors, spiece.model (the
    run's vocabulary file under the name XLNetTokenizer reads).

    The encoder under `transformer.` and the sequence summary, as
    XLNetForSequenceClassification names them (its logits_proj, a task layer, is left
    out: transformers starts it fresh, and XLNetModel reads the `transformer.` tensors).
    `mask_emb` (pretraining only) is not written either. params: `params["xlnet"]`.
    """
    tensors = (
        (name if name in SUMMARY_HF else ENCODER_PREFIX + name, value)
        for name, value in hf_tensors(params, config)
    )
    hf_io.write_release(out, config_to_hf(config), tensors, RELEASE, vocab_file)


# ---------------------------------------------------------------------------
# `cmrcx.convert --verify`: the converted encoder against transformers'


def verify(source: str, export_dir: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """[("hidden states", reference, converted)] on 3 random left-padded inputs of 32
    tokens in two segments and a `<cls>` segment."""
    import torch
    import transformers

    from cmrcx.models.xlnet import XLNetEncoder

    config, params = exports.read_network(export_dir)
    length = 32
    rng = np.random.default_rng(hf_io.VERIFY_SEED)
    ids, mask = hf_io.verification_batch(rng, config.vocab_size, length)
    mask = mask[:, ::-1].copy()  # XLNet pads on the left
    types = np.zeros_like(ids)
    types[:, length // 2 :] = 1
    types[:, -1] = 2  # <cls>
    reference = transformers.XLNetModel.from_pretrained(source, dtype=torch.float32).eval()
    with torch.no_grad():
        want = reference(
            input_ids=torch.tensor(ids),
            token_type_ids=torch.tensor(types),
            attention_mask=torch.tensor(mask),
        ).last_hidden_state.numpy()
    got, _ = XLNetEncoder(config).apply({"params": params}, ids, types, mask)
    return [("hidden states", want, np.asarray(got))]
