"""The transformers side of the BERT and ALBERT conversion tests: random reference models
(every parameter drawn, biases and LayerNorms included, so that a wrong mapping cannot
hide behind zeros and ones), the token batch they run on, their outputs, and their
release written as a HuggingFace directory and converted with `cmrcx.convert`.

Import it after `pytest.importorskip("torch")` (it needs torch and transformers)."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import torch

from cmrcx import convert


def random_reference(build: Callable, seed: int = 0):
    """build() -> a transformers model; it in eval mode, built after torch.manual_seed(seed)
    and with every parameter drawn from N(0, 0.05)."""
    torch.manual_seed(seed)
    model = build().eval()
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.05)
    return model


def token_batch(vocab_size: int, length: int = 24, seed: int = 1):
    """(ids, types, mask), each [3, length]: segment B from the middle; row 1 padded over
    its last 7 positions, row 2 over its last one."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab_size, [3, length])
    types = np.zeros_like(ids)
    types[:, length // 2 :] = 1
    mask = np.ones_like(ids)
    mask[1, length - 7 :] = 0  # padding
    mask[2, length - 1 :] = 0
    return ids, types, mask


def torch_outputs(model, ids, types, mask):
    """(last hidden state [batch, length, hidden], pooled [batch, hidden] or None) of the
    encoder of `model` (itself, or its `bert` / `albert` part of a task model)."""
    encoder = getattr(model, model.base_model_prefix, model)
    with torch.no_grad():
        out = encoder(
            input_ids=torch.tensor(ids),
            token_type_ids=torch.tensor(types),
            attention_mask=torch.tensor(mask),
        )
    pooled = None if out.pooler_output is None else out.pooler_output.numpy()
    return out.last_hidden_state.numpy(), pooled


def write_vocab(path, size: int) -> None:
    """A vocab.txt of `size` tokens at `path`: [PAD] [UNK] [CLS] [SEP] tok0 tok1 ..."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [f"tok{i}" for i in range(size - 4)]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")


def save_hf(model, directory, safetensors: bool = True) -> None:
    """As a release ships it: save_pretrained's safetensors, or a torch.save'd state dict;
    with a vocab.txt.

    The state dict is what save_pretrained(safe_serialization=False) wrote before
    transformers 5, which ignores that flag and always writes safetensors.
    """
    os.makedirs(directory, exist_ok=True)
    if safetensors:
        model.save_pretrained(directory)  # handles tied MLM weights
        assert os.path.isfile(os.path.join(directory, "model.safetensors"))
    else:
        model.config.to_json_file(os.path.join(directory, "config.json"))
        torch.save(model.state_dict(), os.path.join(directory, "pytorch_model.bin"))
    write_vocab(os.path.join(directory, "vocab.txt"), model.config.vocab_size)


def run_convert(source, out, *flags: str) -> None:
    assert convert.main(["--from", str(source), "--to", str(out), *flags]) == 0
