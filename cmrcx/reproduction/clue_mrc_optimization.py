"""The optimizer of CLUE's PyTorch reading-comprehension scripts, ported.

Source: CLUEbenchmark/CLUE @2ea9046 baselines/models_pytorch/mrc_pytorch/tools/
pytorch_optimization.py ([OPT]), which run_mrc.py (CMRC 2018), run_multichoice_mrc.py
(ChID) and run_c3.py (C3) call as `get_optimization(model, float16=False, ...)`:

  - parameters: get_optimization(opt_pooler=False) leaves every name with 'pooler' out;
    no_decay = ['bias', 'LayerNorm.bias', 'LayerNorm.weight'] (substrings of the name)
    get weight_decay_rate 0, the others weight_decay_rate;
  - BERTAdam.step, per parameter: clip_grad_norm_(p, max_grad_norm) (each tensor on its
    own), next_m = b1 m + (1 - b1) g, next_v = b2 v + (1 - b2) g^2 (no bias correction),
    update = next_m / (sqrt(next_v) + e) + weight_decay_rate * p,
    p -= lr * warmup_linear(state['step'] / t_total, warmup) * update; b1 0.9, b2 0.999,
    e 1e-6 (its defaults; the scripts pass none of them);
  - warmup_linear(x, warmup) = x / warmup if x < warmup else (1 - x) / (1 - warmup).

`state['step']` counts the updates a parameter has had; every parameter of the models
here gets a gradient at every step, so it is the loop's step index (`recipe_updates.
updates` passes lr * warmup_linear(step / t_total) as the rate).
"""

from __future__ import annotations

from cmrcx.reproduction.recipe_updates import OptimizerStep, parameter_groups
from cmrcx.reproduction.reference_imports import torch_and_transformers

NO_DECAY = ("bias", "LayerNorm.bias", "LayerNorm.weight")  # [OPT] get_optimization
LEFT_OUT = "pooler"  # [OPT] get_optimization(opt_pooler=False)
BETA1, BETA2, EPSILON = 0.9, 0.999, 1e-6  # [OPT] BERTAdam defaults


def warmup_linear(x: float, warmup: float) -> float:
    """[OPT] warmup_linear: the factor of the rate at x = step / t_total."""
    if x < warmup:
        return x / warmup
    return (1.0 - x) / (1.0 - warmup)


def bert_adam_groups(model, weight_decay: float, no_decay=NO_DECAY) -> list[dict]:
    """[OPT] get_optimization's optimizer_parameters: the pooler left out, no_decay at 0."""
    left_out = {id(p) for name, p in model.named_parameters() if LEFT_OUT in name}
    return [
        {**group, "params": [p for p in group["params"] if id(p) not in left_out]}
        for group in parameter_groups(model, weight_decay, no_decay)
    ]


def bert_adam(model, hyper: dict, no_decay=NO_DECAY) -> OptimizerStep:
    """[OPT] BERTAdam over `bert_adam_groups`; the returned step takes the scheduled rate.

    hyper: weight_decay, max_grad_norm (adam_epsilon, when given, for e).
    """
    torch, _ = torch_and_transformers()
    groups = bert_adam_groups(model, hyper["weight_decay"], no_decay)
    eps = hyper.get("adam_epsilon", EPSILON)
    state: dict = {}

    def step(lr: float) -> None:
        for group in groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if hyper["max_grad_norm"] > 0:
                    torch.nn.utils.clip_grad_norm_(p, hyper["max_grad_norm"])
                with torch.no_grad():
                    s = state.setdefault(id(p), (torch.zeros_like(p), torch.zeros_like(p)))
                    next_m, next_v = s
                    next_m.mul_(BETA1).add_(p.grad, alpha=1 - BETA1)
                    next_v.mul_(BETA2).addcmul_(p.grad, p.grad, value=1 - BETA2)
                    update = next_m / (next_v.sqrt() + eps)
                    if group["weight_decay"] > 0.0:
                        update += group["weight_decay"] * p
                    p.add_(-lr * update)

    return step
