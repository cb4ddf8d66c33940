"""T5-family weights (LongLM, T5 v1.0 / v1.1, mT5) between cmrcx (Flax) and HuggingFace.

The T5 row of `cmrcx.models.registry` (config.json model_type "t5" or "mt5"). Same
function names as every family's weights module (see `cmrcx.weights`): config_from_hf,
config_to_hf, weight_table, params_from_hf, hf_tensors, describe, read_dir,
write_hf_dir, vocabulary_files, verify. A release is config.json + model.safetensors or
pytorch_model.bin, + spiece.model and the tokenizer JSON files.

One table, `weight_table(config)`, pairs every parameter of
`cmrcx.models.t5.T5ForConditionalGeneration` with its HuggingFace name, a layout
rule and its Flax shape. The table names block i of a stack `layer_i`; the model
holds each stack's blocks stacked under `layers` ([num_layers, ...]), and
`table.stack_layers`/`unstack_layers` convert between the two. Exporting
back to HuggingFace is the same table read the other way.

HuggingFace checkpoints hold some tensors twice: `encoder.embed_tokens.weight`
and `decoder.embed_tokens.weight` are `shared.weight`, and so is `lm_head.weight`
when the head is tied (torch `.bin` files always save it). Those copies, and
`decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight` (old
checkpoints; transformers ignores it too), are dropped and reported. A copy that
differs from `shared.weight` is an error, as is every missing, unknown or
misshapen tensor: one error lists them all.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping

import numpy as np

from cmrcx.models import registry
from cmrcx.models.t5 import FEED_FORWARD_PROJ, T5Config
from cmrcx.weights import exports, hf_io
from cmrcx.weights.hf_io import PretrainedFormatError, Release
from cmrcx.weights.table import (
    Entry,
    WeightError,
    params_from_table,
    stack_layers,
    tensors_from_table,
    unstack_layers,
)

__all__ = [  # the names of every family's weights module (cmrcx/weights/__init__.py), then T5's
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
    "head_is_tied",
    "normalize_hf_names",
    "TOKENIZER_FILES",
]

# Tokenizer files a T5 release may ship; `cmrcx.convert` copies those present.
TOKENIZER_FILES = (
    "spiece.model",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
)
# config.json keys that are T5Config fields of the same name.
HF_CONFIG_KEYS = (
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

# Copies of shared.weight in a HuggingFace state dict.
EMBEDDING_COPIES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
LM_HEAD = "lm_head.weight"
# Saved by old transformers versions; never used (cross-attention has no position bias).
IGNORED = ("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",)


RELEASE = hf_io.ReleaseFormat(
    what="T5",
    vocabulary=TOKENIZER_FILES,
    vocabulary_required=False,  # read_dir notes missing tokenizer files
    dropped="copies of shared.weight and unused tensors",
)


def weight_table(config: T5Config) -> list[Entry]:
    """Every parameter of `config`'s model, with its HuggingFace name."""
    d_model, heads, d_kv = config.d_model, config.num_heads, config.d_kv
    entries = [
        Entry(("shared", "embedding"), "shared.weight", "same", (config.vocab_size, d_model))
    ]
    stacks = (("encoder", config.num_layers), ("decoder", config.num_decoder_layers))
    for stack, num_layers in stacks:
        entries.append(
            Entry(
                (stack, "relative_attention_bias", "embedding"),
                f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                "same",
                (config.relative_attention_num_buckets, heads),
            )
        )
        for i in range(num_layers):
            ours, hf = (stack, f"layer_{i}"), f"{stack}.block.{i}.layer."
            sublayers = [("self_attention", "0.SelfAttention")]
            if stack == "decoder":
                sublayers.append(("cross_attention", "1.EncDecAttention"))
            for name, hf_name in sublayers:
                for proj in ("q", "k", "v"):
                    entries.append(
                        Entry(
                            (*ours, name, proj, "kernel"),
                            f"{hf}{hf_name}.{proj}.weight",
                            "to_heads",
                            (d_model, heads, d_kv),
                        )
                    )
                entries.append(
                    Entry(
                        (*ours, name, "o", "kernel"),
                        f"{hf}{hf_name}.o.weight",
                        "from_heads",
                        (heads, d_kv, d_model),
                    )
                )
                entries.append(
                    Entry(
                        (*ours, f"pre_{name}_layer_norm", "scale"),
                        f"{hf}{hf_name.split('.')[0]}.layer_norm.weight",
                        "same",
                        (d_model,),
                    )
                )
            ff = len(sublayers)  # the FFN is layer.1 (encoder) or layer.2 (decoder)
            inner = ("wi_0", "wi_1") if config.is_gated else ("wi",)
            for proj in inner:
                entries.append(
                    Entry(
                        (*ours, "mlp", proj, "kernel"),
                        f"{hf}{ff}.DenseReluDense.{proj}.weight",
                        "dense",
                        (d_model, config.d_ff),
                    )
                )
            entries.append(
                Entry(
                    (*ours, "mlp", "wo", "kernel"),
                    f"{hf}{ff}.DenseReluDense.wo.weight",
                    "dense",
                    (config.d_ff, d_model),
                )
            )
            entries.append(
                Entry(
                    (*ours, "pre_mlp_layer_norm", "scale"),
                    f"{hf}{ff}.layer_norm.weight",
                    "same",
                    (d_model,),
                )
            )
        entries.append(
            Entry(
                (stack, "final_layer_norm", "scale"),
                f"{stack}.final_layer_norm.weight",
                "same",
                (d_model,),
            )
        )
    if not config.tie_word_embeddings:
        entries.append(Entry(("lm_head", "kernel"), LM_HEAD, "dense", (d_model, config.vocab_size)))
    return entries


def head_is_tied(tensors: Mapping[str, np.ndarray], hf_config: Mapping) -> bool:
    """Whether the LM head is `shared.weight`, from the tensors and the config.json dict.

    No `lm_head.weight`: tied (unless the config says untied, which the table then
    reports as missing). A `lm_head.weight` equal to `shared.weight` is the tied
    head saved twice, unless the config says untied. One that differs is a head
    of its own (transformers unties such a pair whatever the config says).
    """
    if hf_config.get("tie_word_embeddings") is False:
        return False
    if LM_HEAD not in tensors or "shared.weight" not in tensors:
        return True
    return _same(tensors[LM_HEAD], tensors["shared.weight"])


def normalize_hf_names(
    tensors: Mapping[str, np.ndarray], config: T5Config
) -> tuple[dict, list[str], list[str]]:
    """(tensors without copies, dropped names, copies that differ from shared.weight).

    A checkpoint with no `shared.weight` but an `*.embed_tokens.weight` takes that
    as the shared embedding (transformers ties it the same way).
    """
    out, dropped, differing = dict(tensors), [], []
    copies = list(EMBEDDING_COPIES) + ([LM_HEAD] if config.tie_word_embeddings else [])
    if "shared.weight" not in out:
        for name in EMBEDDING_COPIES:
            if name in out:
                out["shared.weight"] = out.pop(name)
                break
    for name in copies + list(IGNORED):
        if name not in out:
            continue
        value = out.pop(name)
        if name in copies and "shared.weight" in out and not _same(value, out["shared.weight"]):
            differing.append(f"{name} (differs from shared.weight)")
        else:
            dropped.append(name)
    return out, sorted(dropped), differing


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(np.asarray(a), np.asarray(b))


def params_from_hf(hf_tensors: Mapping[str, np.ndarray], config: T5Config, source: str) -> dict:
    """HF-named tensors -> the nested cmrcx params tree (float32, blocks stacked).

    Copies of `shared.weight` are dropped first (`normalize_hf_names`). Raises
    WeightError listing every missing, unknown, misshapen and differing tensor.
    """
    named, _, differing = normalize_hf_names(hf_tensors, config)

    more = {"inconsistent copies": list(differing)}
    table = weight_table(config)
    params = params_from_table(named, table, config.num_heads, source, RELEASE.what, more)
    params["encoder"] = stack_layers(params["encoder"], config.num_layers)
    params["decoder"] = stack_layers(params["decoder"], config.num_decoder_layers)
    return params


def hf_tensors(params: Mapping, config: T5Config) -> Iterator[tuple[str, np.ndarray]]:
    """cmrcx params -> (HF name, torch-layout float32 tensor) pairs, no copies.

    transformers re-creates `*.embed_tokens.weight` (and the tied `lm_head.weight`)
    from `shared.weight` when it loads the directory.
    """
    params = dict(params)
    params["encoder"] = unstack_layers(params["encoder"], config.num_layers)
    params["decoder"] = unstack_layers(params["decoder"], config.num_decoder_layers)
    yield from tensors_from_table(params, weight_table(config))


# ---------------------------------------------------------------------------
# Configs and release directories


def config_from_hf(raw: Mapping, path: str = "config.json", tensors=None) -> T5Config:
    """T5Config from a config.json dict (at `path`, named in errors); whether the LM head is
    tied comes from the checkpoint's `tensors` (`head_is_tied`; None: the config's word).

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
    if model_type not in registry.family("t5").hf_model_types:
        raise PretrainedFormatError(f"{path}: model_type {model_type!r} is not t5 or mt5")
    proj = raw.get("feed_forward_proj", "relu")
    if proj not in FEED_FORWARD_PROJ:
        raise PretrainedFormatError(
            f"{path}: feed_forward_proj {proj!r}; cmrcx T5 has 'relu' and 'gated-gelu'"
        )
    kwargs = {key: raw[key] for key in HF_CONFIG_KEYS if raw.get(key) is not None}
    if isinstance(kwargs.get("eos_token_id"), list):
        kwargs["eos_token_id"] = kwargs["eos_token_id"][0]
    kwargs.setdefault("decoder_start_token_id", kwargs.get("pad_token_id", 0))
    if model_type == "mt5":
        scale = False
    else:
        scale = raw.get("scale_decoder_outputs", raw.get("tie_word_embeddings") is not False)
    tied = head_is_tied(tensors or {}, raw)
    return T5Config(**kwargs, tie_word_embeddings=tied, scale_decoder_outputs=bool(scale))


def config_to_hf(config: T5Config) -> dict:
    """config.json for transformers' T5ForConditionalGeneration (4.x and 5.x read it alike)."""
    out = {key: getattr(config, key) for key in HF_CONFIG_KEYS}
    return {
        "architectures": ["T5ForConditionalGeneration"],
        "model_type": "t5",
        "is_encoder_decoder": True,
        "initializer_factor": 1.0,
        **out,
        "tie_word_embeddings": config.tie_word_embeddings,
        "scale_decoder_outputs": config.scale_decoder_outputs,
    }


def describe(config: T5Config) -> str:
    """The geometry `cmrcx.convert` prints."""
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


def read_dir(directory: str) -> Release:
    """The model of a HuggingFace T5 / mT5 directory (`hf_io.Release`; its notes: the
    copies dropped, and a missing tokenizer).

    Raises PretrainedFormatError (not a T5 release) or WeightError (tensors that do
    not fit; nothing is filled in).
    """
    given, directory = directory, os.path.abspath(directory)
    raw, path = hf_io.read_hf_config(directory)
    tensors, source = hf_io.read_hf_weights(directory)
    config = config_from_hf(raw, path, tensors)
    _, dropped, _ = normalize_hf_names(tensors, config)
    release = hf_io.read_release(
        directory, RELEASE, config, tensors, params_from_hf, source, raw["model_type"], dropped
    )
    if not vocabulary_files(directory):
        release.notes.append(
            f"note: {given} has no tokenizer files ({', '.join(TOKENIZER_FILES)}): runs from "
            "this export need --gin.VOCAB_FILE=\"'.../spiece.model'\""
        )
    _check_spiece(directory)
    return release


def _check_spiece(directory: str) -> None:
    """PretrainedFormatError when the release's spiece.model is not one the T5 tasks can
    read (no <pad>, </s> or <unk> piece): an export with it would convert, then fail in
    every run."""
    path = os.path.join(directory, "spiece.model")
    if not os.path.isfile(path):
        return
    from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary

    try:
        T5SentencePieceVocabulary(path)
    except ValueError as error:
        raise PretrainedFormatError(
            f"{error} (cmrcx.vocab.sentencepiece reads T5's layouts)"
        ) from None


def vocabulary_files(directory: str) -> list[str]:
    """The `TOKENIZER_FILES` a release directory holds (what `cmrcx.convert` copies)."""
    return hf_io.vocabulary_files(directory, RELEASE)


def write_hf_dir(out: str, params, config: T5Config, vocab_file: str | None) -> None:
    """A HuggingFace T5ForConditionalGeneration directory: config.json, model.safetensors,
    the run's `vocab_file` as spiece.model and the other `TOKENIZER_FILES` found beside it.

    params: the T5ForConditionalGeneration tree (numpy or jax arrays).
    """
    hf_io.write_release(out, config_to_hf(config), hf_tensors(params, config), RELEASE, vocab_file)


# ---------------------------------------------------------------------------
# `cmrcx.convert --verify`: the converted model against transformers'


def verify(source: str, export_dir: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Encoder states and teacher-forced logits on 3 random padded (source, target) pairs."""
    import jax
    import torch
    import transformers

    from cmrcx.models.t5 import T5ForConditionalGeneration

    config, params = exports.read_network(export_dir)
    rng = np.random.default_rng(hf_io.VERIFY_SEED)
    ids, mask = hf_io.verification_batch(rng, config.vocab_size, 24)
    decoder_ids, decoder_mask = hf_io.verification_batch(rng, config.vocab_size, 16)
    if hf_io.hf_model_type(source) == "mt5":
        reference_class = transformers.MT5ForConditionalGeneration
    else:
        reference_class = transformers.T5ForConditionalGeneration
    reference = reference_class.from_pretrained(source, dtype=torch.float32).eval()
    with torch.no_grad():
        out = reference(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            decoder_input_ids=torch.tensor(decoder_ids),
            decoder_attention_mask=torch.tensor(decoder_mask),
        )
    model = T5ForConditionalGeneration(config)

    def encode_and_decode(module):
        encoded = module.encode(ids, mask)
        return encoded, module.decode(decoder_ids, encoded, mask, decoder_mask)

    encoded, logits = jax.jit(lambda p: model.apply({"params": p}, method=encode_and_decode))(
        params
    )
    return [
        ("encoder states", out.encoder_last_hidden_state.numpy(), np.asarray(encoded)),
        ("logits", out.logits.numpy(), np.asarray(logits)),
    ]
