"""The update loop every PyTorch recipe shares, and transformers 2.x AdamW, its default step.

Sources: CLUEbenchmark/CLUE @0059793 baselines/models_pytorch/classifier_pytorch/
  [RUN]  run_classifier.py train()
  [TF2]  transformers 2.x optimization.py `AdamW`, which [RUN] imports

The CLUE classifier recipe (`clue_classifier`), both LOT recipes (`lot_understanding`,
`lot_generation`: their Trainer and Lightning loops take the same steps) and the CLUE
reading-comprehension recipe (`clue_mrc`, with BERTAdam of `clue_mrc_optimization` in
place of AdamW) drive their model through `updates`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import NamedTuple

import numpy as np

from cmrcx.common.errors import ConfigError
from cmrcx.reproduction.reference_imports import torch_and_transformers

NO_DECAY = ("bias", "LayerNorm.weight")  # [RUN] train(): no_decay
# XLNet's: CLUE trained it with XLNet's TF scripts, whose exclude_from_weight_decay
# ["LayerNorm", "layer_norm", "bias"] cmrcx follows (trainer.is_decayed), under
# transformers' names (layer_norm; r_w_bias, r_r_bias, r_s_bias hold "bias").
XLNET_NO_DECAY = ("bias", "layer_norm")

# One optimizer update at a learning rate, from the gradients the backward pass left.
OptimizerStep = Callable[[float], None]


class RecipeRun(NamedTuple):
    learning_rates: list[float]
    losses: list[float]


def adamw_step(torch, groups: list[dict], state: dict, lr: float, eps: float) -> None:
    """One update of [TF2] AdamW (betas 0.9, 0.999, correct_bias True), in place:
    denom = sqrt(v) + eps; step = lr * sqrt(1 - b2^t) / (1 - b1^t); p -= step * m / denom;
    then p -= lr * weight_decay * p."""
    beta1, beta2 = 0.9, 0.999
    with torch.no_grad():
        for group in groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                s = state.setdefault(
                    id(p), {"step": 0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)}
                )
                s["step"] += 1
                s["m"].mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                s["v"].mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                denom = s["v"].sqrt().add_(eps)
                step_size = lr * math.sqrt(1.0 - beta2 ** s["step"]) / (1.0 - beta1 ** s["step"])
                p.addcdiv_(s["m"], denom, value=-step_size)
                if group["weight_decay"] > 0.0:
                    p.add_(p, alpha=-lr * group["weight_decay"])


def parameter_groups(model, weight_decay: float, no_decay=NO_DECAY) -> list[dict]:
    """[RUN] train(): optimizer_grouped_parameters, by the names in `no_decay`."""
    named = list(model.named_parameters())
    return [
        {"params": [p for n, p in named if not any(nd in n for nd in no_decay)],
         "weight_decay": weight_decay},
        {"params": [p for n, p in named if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]  # fmt: skip


def transformers2_adamw(model, hyper: dict) -> OptimizerStep:
    """[RUN] train()'s step: clip the global gradient norm at max_grad_norm, then [TF2]
    AdamW(eps=adam_epsilon) over `parameter_groups` (hyper's no_decay, else [RUN]'s)."""
    torch, _ = torch_and_transformers()
    groups = parameter_groups(model, hyper["weight_decay"], hyper.get("no_decay", NO_DECAY))
    state: dict = {}

    def step(lr: float) -> None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), hyper["max_grad_norm"])
        adamw_step(torch, groups, state, lr, hyper["adam_epsilon"])

    return step


def torch_adamw(model, hyper: dict) -> OptimizerStep:
    """The paper settings' step: clip the global gradient norm at max_grad_norm, then
    torch.optim.AdamW (transformers' AdamW today: Adam's bias correction, the decay
    lr * weight_decay * p) over `parameter_groups` (hyper's no_decay, else [RUN]'s)."""
    torch, _ = torch_and_transformers()
    groups = parameter_groups(model, hyper["weight_decay"], hyper.get("no_decay", NO_DECAY))
    adamw = torch.optim.AdamW(groups, lr=0.0, betas=(0.9, 0.999), eps=hyper["adam_epsilon"])

    def step(lr: float) -> None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), hyper["max_grad_norm"])
        for group in adamw.param_groups:
            group["lr"] = lr
        adamw.step()

    return step


def updates(
    model,
    batches,
    batch_loss,
    factor,
    hyper: dict,
    optimizer: Callable[..., OptimizerStep] = transformers2_adamw,
) -> RecipeRun:
    """One update per batch, as [RUN] train() (and the LOT recipes' Trainer and Lightning
    loops, the same steps): `batch_loss(batch)` forward, backward, the optimizer's step
    (`optimizer(model, hyper)`: by default clip the global norm, AdamW of transformers
    2.x) at learning_rate * factor(step), zero the gradients.

    hyper: learning_rate, and what the optimizer reads (the default: weight_decay,
    adam_epsilon, max_grad_norm).
    """
    optimizer_step = optimizer(model, hyper)
    rates, losses = [], []
    model.zero_grad()
    for step, batch in enumerate(batches):
        model.train()
        loss = batch_loss(batch)
        loss.backward()
        lr = hyper["learning_rate"] * factor(step)
        optimizer_step(lr)
        model.zero_grad()
        rates.append(lr)
        losses.append(float(loss.item()))
    return RecipeRun(rates, losses)


def matched_rows(
    recipe_keys: Iterable[tuple], batches_keys: Iterable[Iterable[tuple]], differ: str
) -> list[np.ndarray]:
    """For each cmrcx batch, the index of the first recipe row equal to each of its rows.

    recipe_keys: one key per recipe row; batches_keys: per batch, (row, key) for each of
    its real rows. ConfigError "step S, row R: " + `differ` for the first that equals none.
    """
    index: dict[tuple, int] = {}
    for i, key in enumerate(recipe_keys):
        index.setdefault(key, i)
    matched = []
    for step, keys in enumerate(batches_keys, 1):
        rows = []
        for row, key in keys:
            if key not in index:
                raise ConfigError(f"step {step}, row {row}: {differ}")
            rows.append(index[key])
        matched.append(np.array(rows))
    return matched
