"""BERT weights between cmrcx (Flax) and HuggingFace / Google TF checkpoints.

One table, `weight_table(config)`, pairs every cmrcx encoder parameter with its
HuggingFace name and a layout rule. The table names layer i `layer_i`; the model
holds the layers stacked under `layers` ([num_layers, ...]), and
`stack_layers`/`unstack_layers` convert between the two. Google's TF names are first rewritten into
HuggingFace names (`tf_to_hf_name`), so both formats share the table, and
exporting back to HuggingFace is the same table read the other way.

Tensors a source holds beyond the encoder are sorted into two kinds: known
ones outside the encoder (MLM/NSP and task heads, optimizer slots, step counters), which
are dropped and counted, and everything else, which is an error listing them.
The one tensor group a source may lack is the pooler: `with_fresh_pooler` adds
a freshly initialised one (`BertForMaskedLM` saves none); any other missing
tensor is an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import NamedTuple

import numpy as np

from cmrcx.models.bert import BertConfig

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
POOLER_HF = ("pooler.dense.bias", "pooler.dense.weight")
POOLER_SEED = 0  # jax.random.key of the fresh pooler kernel: conversions are reproducible
# The encoder's name inside transformers' task models (BertForPreTraining, BertForMaskedLM,
# ErnieForMaskedLM, ...): its tensors are `<prefix>embeddings...`, a bare model's `embeddings...`.
ENCODER_PREFIXES = ("bert.", "ernie.")


class WeightError(ValueError):
    """A checkpoint does not fit the encoder: lists every missing, unknown or misshapen tensor."""


class Entry(NamedTuple):
    path: tuple[str, ...]  # cmrcx parameter path under params["bert"]
    hf_name: str  # HuggingFace BertModel state_dict key (no "bert." prefix)
    layout: str  # how the torch [out, in] tensor becomes the Flax one (see `to_flax`)


def weight_table(config: BertConfig) -> list[Entry]:
    """Every encoder parameter of `config`, with its HuggingFace name."""
    entries = []
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        entries.append(
            Entry(("embeddings", name, "embedding"), f"embeddings.{name}.weight", "same")
        )
    entries += _layer_norm(("embeddings", "LayerNorm"), "embeddings.LayerNorm")
    for i in range(config.num_layers):
        ours, hf = (f"layer_{i}",), f"encoder.layer.{i}."
        for proj in ("query", "key", "value"):
            entries.append(
                Entry(
                    (*ours, "attention", proj, "kernel"),
                    f"{hf}attention.self.{proj}.weight",
                    "to_heads",
                )
            )
            entries.append(
                Entry(
                    (*ours, "attention", proj, "bias"),
                    f"{hf}attention.self.{proj}.bias",
                    "bias_to_heads",
                )
            )
        entries.append(
            Entry(
                (*ours, "attention", "output", "kernel"),
                f"{hf}attention.output.dense.weight",
                "from_heads",
            )
        )
        entries.append(
            Entry(
                (*ours, "attention", "output", "bias"), f"{hf}attention.output.dense.bias", "same"
            )
        )
        entries += _layer_norm((*ours, "attention_LayerNorm"), f"{hf}attention.output.LayerNorm")
        for ours_name, hf_name in (
            ("intermediate", "intermediate.dense"),
            ("output", "output.dense"),
        ):
            entries.append(Entry((*ours, ours_name, "kernel"), f"{hf}{hf_name}.weight", "dense"))
            entries.append(Entry((*ours, ours_name, "bias"), f"{hf}{hf_name}.bias", "same"))
        entries += _layer_norm((*ours, "output_LayerNorm"), f"{hf}output.LayerNorm")
    entries.append(Entry(("pooler", "kernel"), "pooler.dense.weight", "dense"))
    entries.append(Entry(("pooler", "bias"), "pooler.dense.bias", "same"))
    return entries


def _layer_norm(path: tuple[str, ...], hf: str) -> list[Entry]:
    return [
        Entry((*path, "scale"), f"{hf}.weight", "same"),
        Entry((*path, "bias"), f"{hf}.bias", "same"),
    ]


def to_flax(tensor: np.ndarray, layout: str, config: BertConfig) -> np.ndarray:
    """torch layout -> Flax layout. Dense kernels are [out, in] in torch, [in, ...] here."""
    heads, head_dim = config.num_heads, config.head_dim
    if layout == "same":
        return tensor
    if layout == "dense":
        return tensor.T
    if layout == "to_heads":  # [heads*head_dim, hidden] -> [hidden, heads, head_dim]
        return tensor.T.reshape(tensor.shape[1], heads, head_dim)
    if layout == "bias_to_heads":
        return tensor.reshape(heads, head_dim)
    if layout == "from_heads":  # [hidden, heads*head_dim] -> [heads, head_dim, hidden]
        return tensor.T.reshape(heads, head_dim, tensor.shape[0])
    raise ValueError(f"unknown layout {layout!r}")


def to_torch(param: np.ndarray, layout: str) -> np.ndarray:
    """Flax layout -> torch layout (the inverse of `to_flax`)."""
    if layout == "same":
        return param
    if layout == "dense":
        return param.T
    if layout == "to_heads":
        return param.reshape(param.shape[0], -1).T
    if layout == "bias_to_heads":
        return param.reshape(-1)
    if layout == "from_heads":
        return param.reshape(-1, param.shape[-1]).T
    raise ValueError(f"unknown layout {layout!r}")


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
    out, dropped = {}, []
    for name, value in tensors.items():
        for prefix in ENCODER_PREFIXES:
            name = name.removeprefix(prefix)
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
        if DROPPED_HF.search(name):
            dropped.append(name)
        else:
            out[name] = value
    return out, dropped


def with_fresh_pooler(
    hf_tensors: Mapping[str, np.ndarray], config: BertConfig
) -> tuple[dict, list[str]]:
    """(HF-named tensors with a fresh pooler if the source has none, names made fresh).

    Initialised as `BertEncoder` initialises its `pooler` (models/bert.py): the kernel
    truncated normal with stddev initializer_range (key `POOLER_SEED`), the bias zeros.
    The fresh kernel is [hidden, hidden] in torch layout, like a checkpoint's. A source
    with half a pooler gets nothing added, so `encoder_params` reports the other half
    missing.
    """
    if any(name in hf_tensors for name in POOLER_HF):
        return dict(hf_tensors), []
    import jax  # only here: the rest of the conversion is numpy

    hidden = config.hidden_size
    init = jax.nn.initializers.truncated_normal(config.initializer_range)
    kernel = np.asarray(init(jax.random.key(POOLER_SEED), (hidden, hidden), np.float32))
    fresh = {
        "pooler.dense.bias": np.zeros([hidden], np.float32),
        "pooler.dense.weight": to_torch(kernel, "dense"),
    }
    return {**hf_tensors, **fresh}, sorted(fresh)


def encoder_params(hf_tensors: Mapping[str, np.ndarray], config: BertConfig, source: str) -> dict:
    """HF-named tensors -> the nested cmrcx `params["bert"]` tree (float32).

    Raises WeightError listing every missing, unknown and misshapen tensor at once.
    """

    def to_param(entry, value):
        value = to_flax(value, entry.layout, config)
        want = _expected_shape(entry, config)
        return value, None if value.shape == want else f"{value.shape} (expected {want})"

    params = params_from_table(hf_tensors, weight_table(config), to_param, source, "encoder")
    return stack_layers(params, config.num_layers)


def params_from_table(
    hf_tensors: Mapping[str, np.ndarray],
    table,
    to_param,
    source: str,
    what: str,
    more_problems: Mapping[str, list[str]] | None = None,
) -> dict:
    """The nested params tree of a weight table's entries (each has `hf_name`, `path`).

    to_param(entry, float32 value) -> (param, None), or (anything, "shape problem").
    Raises WeightError listing at once every missing, unknown and misshapen tensor,
    and `more_problems` (heading -> names) such as inconsistent copies.
    """
    expected = {entry.hf_name for entry in table}
    problems = {
        "missing": sorted(expected - set(hf_tensors)),
        "unknown": sorted(set(hf_tensors) - expected),
        "wrong shape": [],
        **(more_problems or {}),
    }
    params: dict = {}
    for entry in table:
        if entry.hf_name not in hf_tensors:
            continue
        value, shape_problem = to_param(entry, np.asarray(hf_tensors[entry.hf_name], np.float32))
        if shape_problem:
            problems["wrong shape"].append(f"{entry.hf_name}: {shape_problem}")
            continue
        node = params
        for key in entry.path[:-1]:
            node = node.setdefault(key, {})
        node[entry.path[-1]] = value
    if any(problems.values()):
        lines = [f"{source} does not fit the {what} config:"]
        lines += [f"  {k} ({len(v)}): " + ", ".join(v) for k, v in problems.items() if v]
        raise WeightError("\n".join(lines))
    return params


def stack_layers(params: Mapping, num_layers: int) -> dict:
    """{"layer_0": tree, ..., "layer_{n-1}": tree} -> {"layers": tree of [n, ...] arrays}."""
    params = dict(params)
    layers = [params.pop(f"layer_{i}") for i in range(num_layers)]
    params["layers"] = _tree_map(lambda *xs: np.stack(xs), *layers)
    return params


def unstack_layers(params: Mapping, num_layers: int) -> dict:
    """The inverse of `stack_layers`."""
    params = dict(params)
    stacked = params.pop("layers")
    for i in range(num_layers):
        params[f"layer_{i}"] = _tree_map(lambda x, i=i: np.asarray(x[i]), stacked)
    return params


def _tree_map(fn, *trees):
    """Maps over nested dicts of arrays (numpy only: no JAX needed to convert)."""
    if isinstance(trees[0], Mapping):
        return {key: _tree_map(fn, *(tree[key] for tree in trees)) for key in trees[0]}
    return fn(*trees)


def _expected_shape(entry: Entry, config: BertConfig) -> tuple[int, ...]:
    hidden, heads, head_dim = config.hidden_size, config.num_heads, config.head_dim
    leaf, parent = entry.path[-1], entry.path[-2]
    if leaf == "embedding":
        rows = {
            "word_embeddings": config.vocab_size,
            "position_embeddings": config.max_position_embeddings,
            "token_type_embeddings": config.type_vocab_size,
        }[parent]
        return (rows, hidden)
    if parent in ("query", "key", "value"):
        return (hidden, heads, head_dim) if leaf == "kernel" else (heads, head_dim)
    if parent == "output" and entry.path[-3] == "attention":
        return (heads, head_dim, hidden) if leaf == "kernel" else (hidden,)
    if parent == "intermediate":
        return (
            (hidden, config.intermediate_size) if leaf == "kernel" else (config.intermediate_size,)
        )
    if parent in ("output", "pooler"):
        inner = config.intermediate_size if parent == "output" else hidden
        return (inner, hidden) if leaf == "kernel" else (hidden,)
    return (hidden,)  # LayerNorm scale and bias


def hf_tensors(params: Mapping, config: BertConfig) -> Iterator[tuple[str, np.ndarray]]:
    """cmrcx `params["bert"]` -> (HF name, torch-layout float32 tensor) pairs."""
    yield from tensors_from_table(unstack_layers(params, config.num_layers), weight_table(config))


def tensors_from_table(params: Mapping, table) -> Iterator[tuple[str, np.ndarray]]:
    """The reverse of `params_from_table`: (HF name, torch-layout float32 tensor) per entry
    of the table, read from the (unstacked) params tree at the entry's `path`."""
    for entry in table:
        node = params
        for key in entry.path:
            node = node[key]
        yield (
            entry.hf_name,
            np.ascontiguousarray(to_torch(np.asarray(node, np.float32), entry.layout)),
        )
