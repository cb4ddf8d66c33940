"""T5 / mT5 / LongLM weights between cmrcx (Flax) and HuggingFace checkpoints.

One table, `weight_table(config)`, pairs every parameter of
`cmrcx.models.t5.T5ForConditionalGeneration` with its HuggingFace name, a layout
rule and its Flax shape. The table names block i of a stack `layer_i`; the model
holds each stack's blocks stacked under `layers` ([num_layers, ...]), and
`bert_weights.stack_layers`/`unstack_layers` convert between the two. Exporting
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

from collections.abc import Iterator, Mapping
from typing import NamedTuple

import numpy as np

from cmrcx.models.t5 import T5Config
from cmrcx.weights.bert import (
    WeightError,
    params_from_table,
    stack_layers,
    tensors_from_table,
    unstack_layers,
)

__all__ = [
    "WeightError",
    "Entry",
    "weight_table",
    "head_is_tied",
    "normalize_hf_names",
    "model_params",
    "hf_tensors",
]

# Copies of shared.weight in a HuggingFace state dict.
EMBEDDING_COPIES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
LM_HEAD = "lm_head.weight"
# Saved by old transformers versions; never used (cross-attention has no position bias).
IGNORED = ("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",)


class Entry(NamedTuple):
    path: tuple[str, ...]  # cmrcx parameter path, `layer_i` for block i of a stack
    hf_name: str  # HuggingFace T5ForConditionalGeneration state_dict key
    layout: str  # torch -> Flax: same | dense | to_heads | from_heads (see `to_flax`)
    shape: tuple[int, ...]  # the Flax shape


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


def to_flax(tensor: np.ndarray, layout: str, config: T5Config) -> np.ndarray:
    """torch layout -> Flax layout. Linear weights are [out, in] in torch, [in, ...] here."""
    if layout == "same":
        return tensor
    if layout == "dense":
        return tensor.T
    if layout == "to_heads":  # [heads*d_kv, d_model] -> [d_model, heads, d_kv]
        return tensor.T.reshape(tensor.shape[1], config.num_heads, -1)
    if layout == "from_heads":  # [d_model, heads*d_kv] -> [heads, d_kv, d_model]
        return tensor.T.reshape(config.num_heads, -1, tensor.shape[0])
    raise ValueError(f"unknown layout {layout!r}")


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


def model_params(hf_tensors: Mapping[str, np.ndarray], config: T5Config, source: str) -> dict:
    """HF-named tensors -> the nested cmrcx params tree (float32, blocks stacked).

    Copies of `shared.weight` are dropped first (`normalize_hf_names`). Raises
    WeightError listing every missing, unknown, misshapen and differing tensor.
    """
    named, _, differing = normalize_hf_names(hf_tensors, config)

    def to_param(entry, value):
        want = _torch_shape(entry)
        if value.shape != want:
            return None, f"{value.shape} (expected {want})"
        return to_flax(value, entry.layout, config), None

    more = {"inconsistent copies": list(differing)}
    params = params_from_table(named, weight_table(config), to_param, source, "T5", more)
    params["encoder"] = stack_layers(params["encoder"], config.num_layers)
    params["decoder"] = stack_layers(params["decoder"], config.num_decoder_layers)
    return params


def _torch_shape(entry: Entry) -> tuple[int, ...]:
    """The torch shape a checkpoint should hold for `entry` (the inverse of `to_flax`)."""
    shape = entry.shape
    if entry.layout == "dense":
        return shape[::-1]
    if entry.layout == "to_heads":  # [d_model, heads, d_kv] <- [heads*d_kv, d_model]
        return (shape[1] * shape[2], shape[0])
    if entry.layout == "from_heads":  # [heads, d_kv, d_model] <- [d_model, heads*d_kv]
        return (shape[2], shape[0] * shape[1])
    return shape


def hf_tensors(params: Mapping, config: T5Config) -> Iterator[tuple[str, np.ndarray]]:
    """cmrcx params -> (HF name, torch-layout float32 tensor) pairs, no copies.

    transformers re-creates `*.embed_tokens.weight` (and the tied `lm_head.weight`)
    from `shared.weight` when it loads the directory.
    """
    params = dict(params)
    params["encoder"] = unstack_layers(params["encoder"], config.num_layers)
    params["decoder"] = unstack_layers(params["decoder"], config.num_decoder_layers)
    yield from tensors_from_table(params, weight_table(config))
