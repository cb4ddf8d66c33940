"""PyTorch and transformers for the reference recipes, or one line saying what to install."""

from __future__ import annotations

from cmrcx.common.errors import ConfigError


def torch_and_transformers():
    """(torch, transformers); ConfigError naming the `convert` extra when either is missing."""
    try:
        import torch
        import transformers
    except ImportError as error:
        raise ConfigError(
            f"the reference recipe runs in PyTorch + transformers ({error.name} is not "
            "installed): pip install 'cmrcx[convert]'"
        ) from None
    return torch, transformers
