"""The PyTorch side's model pieces the recipes share: the cmrcx encoder written as the
family's transformers checkpoint, a cmrcx dense head copied into a torch Linear, dropout off."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import numpy as np

from cmrcx.common.errors import ConfigError


def write_encoder(config, encoder_params: dict, out: str, families: Sequence[str], recipe: str):
    """Writes the encoder to `out` with the family's HF writer; returns (family name, the
    writer module). ConfigError when the recipe (named `recipe`) does not run the family."""
    from cmrcx.models import registry

    family = registry.family_of(config).name
    if family not in families:
        raise ConfigError(f"the {recipe} recipe runs {', '.join(families)}; not {family}")
    writer = importlib.import_module(f"cmrcx.weights.{family}")
    writer.write_hf_dir(out, encoder_params, config, None)
    return family, writer


def load_dense(torch, linear, head: dict) -> None:
    """A cmrcx Dense's {"kernel" [in, out], "bias" [out]} into a torch Linear."""
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(np.asarray(head["kernel"]).T))
        linear.bias.copy_(torch.tensor(np.asarray(head["bias"])))


def without_dropout(torch, model) -> None:
    """Every torch Dropout of the model at rate 0."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
