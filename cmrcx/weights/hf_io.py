"""Pretrained release files, whatever the family: HuggingFace directories (config.json +
model.safetensors, sharded or not, or pytorch_model*.bin), Google TF checkpoints
(*.ckpt*.index), and the HuggingFace directory writer. The family modules
(`cmrcx.weights.bert`, `cmrcx.weights.t5`) read and write their tensors through these.

Loading never executes pickled code: safetensors is read first, and a .bin only
with `torch.load(weights_only=True)`. torch is needed for .bin files only (`pip
install 'cmrcx[convert]'`).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
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
