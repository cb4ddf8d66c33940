"""Pretrained release files, whatever the family: HuggingFace directories (config.json +
model.safetensors, sharded or not, or pytorch_model*.bin), Google TF checkpoints
(*.ckpt*.index), and the skeleton every family's weights module reads and writes its
releases through:

  ReleaseFormat        what differs between families' releases: the vocabulary files,
                       the tensor pair a release may lack (`Fresh`), the notes' words
  read_release         a family's tensors and config -> `Release` (fresh tensors filled
                       in, the params tree read through the family's table, the notes)
  vocabulary_files     the vocabulary files of a release directory (`cmrcx.convert`)
  write_release        config.json + model.safetensors + the vocabulary files

Loading never executes pickled code: safetensors is read first, and a .bin only
with `torch.load(weights_only=True)`. torch is needed for .bin files only (`pip
install 'cmrcx[convert]'`).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np


class PretrainedFormatError(ValueError):
    """A directory is not a release cmrcx can read; says what is missing."""


class Release(NamedTuple):
    """What a family's `read_dir` found in a release directory."""

    config: Any  # the family's config (BertConfig, T5Config)
    params: dict  # the family's params tree (its `params[<family>]`), layers stacked, float32
    source: str  # "safetensors", "pytorch_model.bin" or "TF checkpoint"
    model_type: str | None  # config.json `model_type` (None: a Google bert_config.json)
    dropped: list[str]  # tensors left out (heads, optimizer slots, copies of a tensor)
    notes: list[str]  # what `cmrcx.convert` prints after its "read ..." line
    extra: dict  # recorded in the export's model_config.json (source_model_type, ...)


class Fresh(NamedTuple):
    """A dense layer a release may lack, initialised fresh as the network initialises it
    (BERT's and ALBERT's pooler, which *ForMaskedLM does not save; XLNet's sequence
    summary): kernel [width, width] from `initializer` (a `jax.nn.initializers` name) with
    stddev `config.initializer_range` and key `FRESH_SEED`, bias zeros."""

    names: tuple[str, str]  # its (bias, weight) names in the release, weight torch [out, in]
    width: str  # the config field of its width (hidden_size, d_model)
    initializer: str  # "truncated_normal" (BERT, ALBERT) or "normal" (XLNet)
    why: str  # the end of the note: "; BertForMaskedLM saves none"


FRESH_SEED = 0  # jax.random.key of a fresh kernel: conversions are reproducible


class ReleaseFormat(NamedTuple):
    """What a family's releases hold beyond its weight table (`<family>.RELEASE`)."""

    what: str  # the network, in WeightError's "does not fit the <what> config"
    # The vocabulary files a release carries, the run's own vocabulary file first (written
    # under that name by `write_release`; the others are copied from beside it).
    vocabulary: tuple[str, ...]
    vocabulary_required: bool  # `cmrcx.convert` refuses a release without vocabulary[0]
    dropped: str  # what the "dropped N ..." note calls the tensors dropped
    dropped_shown: int | None = None  # how many names that note lists (None: all)
    fresh: Fresh | None = None  # the tensor pair a release may lack
    # (release name, export name, whose): another name vocabulary[0] is released under
    # (Google's Chinese ALBERT: vocab_chinese.txt).
    vocabulary_aliases: tuple[tuple[str, str, str], ...] = ()


def with_fresh(tensors: Mapping[str, np.ndarray], config, fresh: Fresh | None):
    """(tensors with `fresh`'s pair added if the release has neither, names made fresh).

    A release with half the pair gets nothing added, so the table reports the other half
    missing.
    """
    if fresh is None or any(name in tensors for name in fresh.names):
        return dict(tensors), []
    import jax  # only here: the rest of the conversion is numpy

    width = getattr(config, fresh.width)
    init = getattr(jax.nn.initializers, fresh.initializer)(config.initializer_range)
    kernel = np.asarray(init(jax.random.key(FRESH_SEED), (width, width), np.float32))
    bias_name, weight_name = fresh.names
    made = {bias_name: np.zeros([width], np.float32), weight_name: kernel.T}  # torch [out, in]
    return {**tensors, **made}, sorted(made)


def read_release(
    directory: str,
    fmt: ReleaseFormat,
    config,
    tensors: Mapping[str, np.ndarray],
    params_from_hf: Callable[[Mapping, Any, str], dict],
    source: str,
    model_type: str | None,
    dropped: list[str],
    notes: list[str] | None = None,
) -> Release:
    """The `Release` of a family's release directory (absolute), given what the family read:
    its config, its tensors under the table's names (dropped: the names it left out),
    `source` ("safetensors", ...) and config.json's model_type (None: a TF release).

    Adds `fmt.fresh` when the release lacks it, reads the params tree with the family's
    `params_from_hf` (WeightError when tensors do not fit), and appends to `notes` what
    was dropped and made fresh.
    """
    tensors, fresh = with_fresh(tensors, config, fmt.fresh)
    params = params_from_hf(tensors, config, f"{directory} ({source})")
    notes, dropped = list(notes or []), sorted(dropped)
    if dropped:
        shown = dropped[: fmt.dropped_shown] if fmt.dropped_shown else dropped
        more = " ..." if len(shown) < len(dropped) else ""
        notes.append(f"dropped {len(dropped)} {fmt.dropped}: {', '.join(shown)}{more}")
    if fresh:
        why = fmt.fresh.why
        notes.append(
            f"initialised fresh ({len(fresh)}): {', '.join(fresh)} (not in the checkpoint{why})"
        )
    extra = {"source_model_type": model_type} if model_type else {}
    extra.update({"initialised_fresh": fresh} if fresh else {})
    return Release(config, params, source, model_type, dropped, notes, extra)


def vocabulary_files(directory: str, fmt: ReleaseFormat) -> list:
    """The vocabulary files of a release directory that `cmrcx.convert` copies: names, or
    (release name, export name) for an alias; PretrainedFormatError when a required one
    is missing. Every family's vocabulary rule is here (its `ReleaseFormat` says which)."""
    found: list = [name for name in fmt.vocabulary if os.path.isfile(os.path.join(directory, name))]
    first = fmt.vocabulary[0]
    for alias, name, _ in fmt.vocabulary_aliases:
        if name not in found and os.path.isfile(os.path.join(directory, alias)):
            found.append((alias, name))
    exported = [name if isinstance(name, str) else name[1] for name in found]
    if fmt.vocabulary_required and first not in exported:
        aliases = "".join(f" (or {whose} {alias})" for alias, _, whose in fmt.vocabulary_aliases)
        raise PretrainedFormatError(f"{directory}: no {first}{aliases}")
    return found


def write_release(
    out: str, hf_config: dict, tensors, fmt: ReleaseFormat, vocab_file: str | None
) -> None:
    """A HuggingFace directory: config.json, model.safetensors ((HF name, array) pairs),
    and with `vocab_file` (the run's vocabulary) the release's vocabulary files: that file
    as `fmt.vocabulary[0]`, and the others found beside it."""
    write_hf_model(out, hf_config, tensors)
    if not vocab_file:
        return
    first, *others = fmt.vocabulary
    shutil.copyfile(vocab_file, os.path.join(out, first))
    copy_files(os.path.dirname(vocab_file), out, others)


def read_hf_config(directory: str) -> tuple[dict, str]:
    """(config.json as a dict, its path); PretrainedFormatError if there is none."""
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        raise PretrainedFormatError(f"{directory}: no config.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f), path


def hf_model_type(directory: str) -> str | None:
    """config.json's `model_type` (None without a config.json or that key)."""
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("model_type")


def _read_safetensors(directory: str) -> dict[str, np.ndarray] | None:
    from safetensors.numpy import load_file

    files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    if not files:
        return None
    tensors: dict[str, np.ndarray] = {}
    for path in files:
        tensors.update(load_file(path))
    return tensors


def read_torch_bin(directory: str) -> dict[str, np.ndarray] | None:
    """The tensors of a directory's pytorch_model*.bin files (float32); None if none."""
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


def tf_release_config(directory: str, pattern: str, preferred: str | None = None) -> str | None:
    """A TF release's config file: `preferred` when the directory holds it, else its one
    match of `pattern` (None: none); PretrainedFormatError when several match."""
    if preferred and os.path.isfile(os.path.join(directory, preferred)):
        return os.path.join(directory, preferred)
    found = sorted(glob.glob(os.path.join(directory, pattern)))
    if len(found) > 1:
        names = ", ".join(os.path.basename(name) for name in found)
        raise PretrainedFormatError(f"{directory}: several TF configs ({names}); keep one")
    return found[0] if found else None


def read_tf_checkpoint(directory: str) -> dict[str, np.ndarray] | None:
    """The tensors of a directory's (first) *.ckpt*.index TF checkpoint; None if none."""
    indexes = sorted(glob.glob(os.path.join(directory, "*.ckpt*.index")))
    if not indexes:
        return None
    from cmrcx.common import quiet_start

    tf = quiet_start.import_tensorflow()  # no CUDA start-up lines in the converter's output
    reader = tf.train.load_checkpoint(indexes[0][: -len(".index")])
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def read_hf_weights(directory: str) -> tuple[dict[str, np.ndarray], str]:
    """(tensors, source) of a HuggingFace directory: safetensors first, else .bin."""
    tensors = _read_safetensors(directory)
    source = "safetensors"
    if tensors is None:
        tensors, source = read_torch_bin(directory), "pytorch_model.bin"
    if tensors is None:
        raise PretrainedFormatError(
            f"{directory}: config.json but no model.safetensors or pytorch_model.bin"
        )
    return tensors, source


def write_hf_model(out: str, hf_config: dict, tensors) -> None:
    """config.json and model.safetensors ((HF name, array) pairs) into `out`."""
    from safetensors.numpy import save_file

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf_config, f, indent=1)
    save_file(dict(tensors), os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


def copy_files(source: str, out: str, names) -> list[str]:
    """Copies the files of `names` that `source` holds into `out`; returns their names."""
    copied = []
    for name in names:
        if os.path.isfile(os.path.join(source, name)):
            shutil.copyfile(os.path.join(source, name), os.path.join(out, name))
            copied.append(name)
    return copied


VERIFY_SEED = 0  # `cmrcx.convert --verify`'s random inputs are the same on every run


def verification_batch(rng: np.random.Generator, vocab_size: int, length: int):
    """`cmrcx.convert --verify`'s inputs: ids int [3, length] and a mask with padding
    (none, the last 7, the last 1)."""
    ids = rng.integers(0, vocab_size, [3, length])
    mask = np.ones_like(ids)
    mask[1, length - 7 :] = 0
    mask[2, length - 1 :] = 0
    return ids, mask
