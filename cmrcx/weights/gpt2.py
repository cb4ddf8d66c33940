"""GPT-2 weights (UER's gpt2-chinese-cluecorpussmall) between cmrcx (Flax) and HuggingFace.

The GPT-2 row of `cmrcx.models.registry` (config.json model_type "gpt2"). Same function
names as every family's weights module (see `cmrcx.weights`). A release is config.json +
model.safetensors or pytorch_model.bin (GPT2LMHeadModel, or GPT2Model without the
`transformer.` prefix) + vocab.txt (UER: BERT's Chinese WordPiece vocabulary, read by
`BertTokenizer`) and the tokenizer JSON files.

transformers' Conv1D keeps its weight as [in, out], so the MLP kernels are the torch
tensors as they are; the fused q/k/v `c_attn` [n_embd, 3 n_embd] is reshaped to
[n_embd, 3, heads, head_dim] and the attention output [heads * head_dim, n_embd] to
[heads, head_dim, n_embd] (`table.to_flax` layouts "conv1d_qkv", "bias_qkv",
"conv1d_from_heads"). The LM head is `wte` (tied): a saved `lm_head.weight` equal to it
is dropped, one that differs is an error, as are the causal-mask buffers old
checkpoints save (`attn.bias`, `attn.masked_bias`), which are dropped and reported.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping

import numpy as np

from cmrcx.models import registry
from cmrcx.models.gpt2 import ACTIVATIONS, GPT2Config
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

__all__ = [
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
    "TOKENIZER_FILES",
]

TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
# config.json keys that are GPT2Config fields of the same name.
HF_CONFIG_KEYS = (
    "vocab_size",
    "n_positions",
    "n_embd",
    "n_layer",
    "n_head",
    "n_inner",
    "activation_function",
    "resid_pdrop",
    "embd_pdrop",
    "attn_pdrop",
    "layer_norm_epsilon",
    "initializer_range",
    "scale_attn_weights",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
)
PREFIX = "transformer."
LM_HEAD = "lm_head.weight"
BUFFERS = (".attn.bias", ".attn.masked_bias")  # causal-mask buffers of old checkpoints
RELEASE = hf_io.ReleaseFormat(
    what="GPT-2",
    vocabulary=TOKENIZER_FILES,
    vocabulary_required=False,  # read_dir notes a missing vocab.txt
    dropped="tied head copies and buffers",
)


def weight_table(config: GPT2Config) -> list[Entry]:
    """Every parameter of `GPT2LMHeadModel(config)`, with its HuggingFace name."""
    d, heads, hd, inner = config.n_embd, config.n_head, config.head_dim, config.n_inner
    entries = [
        Entry(("wte", "embedding"), "transformer.wte.weight", "same", (config.vocab_size, d)),
        Entry(("wpe", "embedding"), "transformer.wpe.weight", "same", (config.n_positions, d)),
    ]
    for i in range(config.n_layer):
        ours, hf = ("h", f"layer_{i}"), f"transformer.h.{i}."
        for norm in ("ln_1", "ln_2"):
            entries.append(Entry((*ours, norm, "scale"), f"{hf}{norm}.weight", "same", (d,)))
            entries.append(Entry((*ours, norm, "bias"), f"{hf}{norm}.bias", "same", (d,)))
        entries += [
            Entry((*ours, "attn", "c_attn", "kernel"), f"{hf}attn.c_attn.weight", "conv1d_qkv",
                  (d, 3, heads, hd)),
            Entry((*ours, "attn", "c_attn", "bias"), f"{hf}attn.c_attn.bias", "bias_qkv",
                  (3, heads, hd)),
            Entry((*ours, "attn", "c_proj", "kernel"), f"{hf}attn.c_proj.weight",
                  "conv1d_from_heads", (heads, hd, d)),
            Entry((*ours, "attn", "c_proj", "bias"), f"{hf}attn.c_proj.bias", "same", (d,)),
            Entry((*ours, "mlp", "c_fc", "kernel"), f"{hf}mlp.c_fc.weight", "same", (d, inner)),
            Entry((*ours, "mlp", "c_fc", "bias"), f"{hf}mlp.c_fc.bias", "same", (inner,)),
            Entry((*ours, "mlp", "c_proj", "kernel"), f"{hf}mlp.c_proj.weight", "same", (inner, d)),
            Entry((*ours, "mlp", "c_proj", "bias"), f"{hf}mlp.c_proj.bias", "same", (d,)),
        ]  # fmt: skip
    entries.append(Entry(("ln_f", "scale"), "transformer.ln_f.weight", "same", (d,)))
    entries.append(Entry(("ln_f", "bias"), "transformer.ln_f.bias", "same", (d,)))
    return entries


def normalize_hf_names(tensors: Mapping[str, np.ndarray]) -> tuple[dict, list[str], list[str]]:
    """(tensors named as GPT2LMHeadModel's without the tied head and buffers, dropped
    names, a head that differs from wte). A GPT2Model's names get the `transformer.` prefix."""
    out, dropped, differing = {}, [], []
    for name, value in tensors.items():
        if name != LM_HEAD and not name.startswith(PREFIX):
            name = PREFIX + name
        if name.endswith(BUFFERS):
            dropped.append(name)
            continue
        out[name] = value
    if LM_HEAD in out:
        head = out.pop(LM_HEAD)
        wte = out.get(PREFIX + "wte.weight")
        if wte is not None and not np.array_equal(np.asarray(head), np.asarray(wte)):
            differing.append(f"{LM_HEAD} (differs from transformer.wte.weight: untied)")
        else:
            dropped.append(LM_HEAD)
    return out, sorted(dropped), differing


def params_from_hf(hf_tensors: Mapping[str, np.ndarray], config: GPT2Config, source: str) -> dict:
    """HF-named tensors -> the GPT2LMHeadModel params tree (float32, blocks stacked).
    Raises WeightError listing every missing, unknown, misshapen and differing tensor."""
    named, _, differing = normalize_hf_names(hf_tensors)

    more = {"inconsistent copies": differing}
    table = weight_table(config)
    params = params_from_table(named, table, config.n_head, source, RELEASE.what, more)
    params["h"] = stack_layers(params["h"], config.n_layer)
    return params


def hf_tensors(params: Mapping, config: GPT2Config) -> Iterator[tuple[str, np.ndarray]]:
    """cmrcx params -> (HF name, torch-layout float32 tensor) pairs; the tied head is not
    written (transformers ties it to wte when it loads the directory)."""
    params = dict(params)
    params["h"] = unstack_layers(params["h"], config.n_layer)
    yield from tensors_from_table(params, weight_table(config))


# ---------------------------------------------------------------------------
# Configs and release directories


def config_from_hf(raw: Mapping, path: str = "config.json", tensors=None) -> GPT2Config:
    """GPT2Config from a config.json dict (at `path`, named in errors).

    Special ids: config.json's when given and inside the vocabulary. UER's config.json
    names none (its tokenizer is BERT's: [CLS] 101 starts a text, [SEP] 102 ends it,
    [PAD] 0), and a copy re-saved by transformers carries its GPT2Config defaults,
    bos = eos = 50256, past UER's 21128 ids (a token no model of that vocabulary can
    produce); both get GPT2Config's ids, which are BERT's (`ids_outside_vocabulary` names
    the ids replaced). An OpenAI-vocabulary GPT-2 (50257 ids) keeps its 50256.
    """
    if raw.get("model_type") not in registry.family("gpt2").hf_model_types:
        raise PretrainedFormatError(f"{path}: model_type {raw.get('model_type')!r} is not gpt2")
    if raw.get("activation_function", "gelu_new") not in ACTIVATIONS:
        raise PretrainedFormatError(
            f"{path}: activation_function {raw['activation_function']!r}; cmrcx GPT-2 has "
            + ", ".join(ACTIVATIONS)
        )
    for unsupported in ("scale_attn_by_inverse_layer_idx", "add_cross_attention"):
        if raw.get(unsupported):
            raise PretrainedFormatError(f"{path}: {unsupported} is not supported by cmrcx GPT-2")
    if raw.get("tie_word_embeddings") is False:
        raise PretrainedFormatError(f"{path}: an untied LM head; cmrcx GPT-2 ties it to wte")
    kwargs = {key: raw[key] for key in HF_CONFIG_KEYS if raw.get(key) is not None}
    if isinstance(kwargs.get("eos_token_id"), list):
        kwargs["eos_token_id"] = kwargs["eos_token_id"][0]
    for key in ids_outside_vocabulary(raw):
        kwargs.pop(key)
    if "eos_token_id" in kwargs and "pad_token_id" not in kwargs:
        kwargs["pad_token_id"] = kwargs["eos_token_id"]  # transformers' generate does so
    return GPT2Config(**kwargs)


SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id")


def ids_outside_vocabulary(raw: Mapping) -> list[str]:
    """The special id keys of a config.json dict whose id is not below its vocab_size."""
    size = raw.get("vocab_size", GPT2Config.vocab_size)
    out = []
    for key in SPECIAL_IDS:
        value = raw.get(key)
        value = value[0] if isinstance(value, list) and value else value
        if isinstance(value, int) and not 0 <= value < size:
            out.append(key)
    return out


def config_to_hf(config: GPT2Config) -> dict:
    """config.json for transformers' GPT2LMHeadModel."""
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        **{key: getattr(config, key) for key in HF_CONFIG_KEYS},
        "n_ctx": config.n_positions,
        "tie_word_embeddings": True,
    }


def describe(config: GPT2Config) -> str:
    """The geometry `cmrcx.convert` prints."""
    fields = dataclasses.asdict(config)
    keys = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner")
    ids = ("bos_token_id", "eos_token_id", "pad_token_id")
    return ", ".join(f"{k}={fields[k]}" for k in (*keys, "activation_function", *ids)) + (
        ", lm_head tied to wte"
    )


def read_dir(directory: str) -> Release:
    """The model of a HuggingFace GPT-2 directory (`hf_io.Release`; notes: what was dropped,
    a missing vocab.txt). PretrainedFormatError / WeightError as every family's."""
    given, directory = directory, os.path.abspath(directory)
    raw, path = hf_io.read_hf_config(directory)
    config = config_from_hf(raw, path)
    tensors, source = hf_io.read_hf_weights(directory)
    _, dropped, _ = normalize_hf_names(tensors)
    release = hf_io.read_release(
        directory, RELEASE, config, tensors, params_from_hf, source, "gpt2", dropped
    )
    for key in ids_outside_vocabulary(raw):
        release.notes.append(
            f"note: {path}: {key} {raw[key]} is past vocab_size {config.vocab_size} "
            f"(transformers' GPT-2 default); using {getattr(config, key)}"
        )
    if "vocab.txt" not in vocabulary_files(directory):
        release.notes.append(
            f"note: {given} has no vocab.txt (UER's GPT-2 reads BERT's vocabulary)"
        )
    return release


def vocabulary_files(directory: str) -> list[str]:
    """The `TOKENIZER_FILES` a release directory holds (what `cmrcx.convert` copies)."""
    return hf_io.vocabulary_files(directory, RELEASE)


def write_hf_dir(out: str, params, config: GPT2Config, vocab_file: str | None) -> None:
    """A HuggingFace GPT2LMHeadModel directory: config.json, model.safetensors, the run's
    `vocab_file` as vocab.txt and the other `TOKENIZER_FILES` found beside it."""
    hf_io.write_release(out, config_to_hf(config), hf_tensors(params, config), RELEASE, vocab_file)


# ---------------------------------------------------------------------------
# `cmrcx.convert --verify`


def verify(source: str, export_dir: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Teacher-forced logits on 3 random inputs, left-padded with position ids from the
    mask (as transformers' `generate` runs a padded batch)."""
    import jax
    import torch
    import transformers

    from cmrcx.models.gpt2 import GPT2LMHeadModel, positions_of

    config, params = exports.read_network(export_dir)
    rng = np.random.default_rng(hf_io.VERIFY_SEED)
    ids, mask = hf_io.verification_batch(rng, config.vocab_size, 24)
    ids, mask = ids[:, ::-1].copy(), mask[:, ::-1].copy()  # left padding
    reference = transformers.GPT2LMHeadModel.from_pretrained(source, dtype=torch.float32).eval()
    with torch.no_grad():
        want = reference(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            position_ids=torch.tensor(np.asarray(positions_of(mask))),
        ).logits.numpy()
    got = jax.jit(lambda p: GPT2LMHeadModel(config).apply({"params": p}, ids, mask))(params)
    real = mask[:, :, None] > 0  # padded positions' outputs are nobody's
    return [("logits", np.where(real, want, 0.0), np.where(real, np.asarray(got), 0.0))]
