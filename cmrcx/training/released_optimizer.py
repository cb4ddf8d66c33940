"""The optimizer of the authors' released baseline script, reproduced exactly.

Source: `baseline/run_cmrc2019_baseline.py` (`main()`) in github.com/ymcui/cmrc2019,
with the `BertAdam` of the `pytorch_pretrained_bert` it bundles: release 0.4.0
(the bundled `modeling.py` is PyPI 0.4.0's, two `from __future__` lines commented
out; `BertAdam` is `pytorch_pretrained_bert/optimization.py` of that release).
The paper setting is `cmrcx.training.trainer.adamw_with_warmup`; this is what produced the
published baseline numbers.

With k = 0, 1, ... optimizer steps taken, T = `schedule_steps`, p = warm-up:

    w(x) = x / p if x < p else 1 - x          warmup_linear, x = k / T
    rate = lr * w(x) ** 2                      the script sets group['lr'] =
                                               lr * w(x), BertAdam.step multiplies
                                               by w(state['step'] / t_total) again
    g = g * min(1, max_norm / (|g|_2 + 1e-6))  clip_grad_norm_(p, 1.0): per tensor
    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2       no bias correction
    param -= rate * (m / (sqrt(v) + e) + wd * param)      wd 0.01, or 0 for names
                                               with 'bias'/'LayerNorm' (the
                                               script's 'weight_decay' key, which
                                               0.4.0 reads; 0.3.0 read another)
    b1 0.9, b2 0.999, e 1e-6, max_norm 1.0     BertAdam's defaults

T is `int(blanks / batch * epochs)` but the script iterates over windows (about
1.6x as many as blanks), so x passes 1 about 62% into training: the rate is 0
there and grows back as (x - 1)^2 (to ~0.36 lr at x = 1.6). Pooler parameters
are taken out of the optimizer ('pooler' in the name): never stepped nor decayed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from cmrcx.training.trainer import is_decayed, path_names

CLIP_EPSILON = 1e-6  # torch.nn.utils.clip_grad_norm_: max_norm / (total_norm + 1e-6)


class ReleasedBertAdamState(NamedTuple):
    count: jax.Array  # int32 [], steps taken: BertAdam's state['step'], the script's global_step
    mu: optax.Updates  # BertAdam's next_m
    nu: optax.Updates  # BertAdam's next_v


def script_schedule_steps(num_blanks: int, batch_size: int, num_epochs: float) -> int:
    """BertAdam's `t_total`: int(len(train_examples) / train_batch_size * num_train_epochs).

    `train_examples` holds one example per training blank (not per window).
    """
    return int(num_blanks / batch_size * num_epochs)


def script_train_steps(num_windows: int, batch_size: int, num_epochs: float) -> int:
    """Optimizer steps the script takes: `trange(int(num_train_epochs))` epochs of a
    DataLoader over the training windows with drop_last=True."""
    return int(num_epochs) * (num_windows // batch_size)


def script_learning_rate(
    count: jax.Array, learning_rate: float, schedule_steps: int, warmup_fraction: float
) -> jax.Array:
    """float32 [] effective rate at step `count` (int []): lr * warmup_linear(count / T)^2."""
    x = jnp.asarray(count, jnp.float32) / schedule_steps
    ramp = x / warmup_fraction if warmup_fraction > 0 else x  # x < warmup never holds then
    w = jnp.where(x < warmup_fraction, ramp, 1.0 - x)
    return learning_rate * w * w


def clue_mrc_learning_rate(
    count: jax.Array, learning_rate: float, total_steps: int, warmup_fraction: float
) -> jax.Array:
    """float32 [] rate at step `count` of CLUE's run_mrc.py (CMRC 2018): its BERTAdam
    (CLUEbenchmark/CLUE @2ea9046 baselines/models_pytorch/mrc_pytorch/tools/
    pytorch_optimization.py, `BERTAdam.step`) scales lr once by warmup_linear(
    state['step'] / t_total, warmup): x / warmup below the warm-up, else
    (1 - x) / (1 - warmup); t_total is run_mrc.py's total_steps, the steps it takes."""
    x = jnp.asarray(count, jnp.float32) / total_steps
    ramp = x / warmup_fraction if warmup_fraction > 0 else x  # x < 0 never holds then
    decay = (1.0 - x) / (1.0 - warmup_fraction) if warmup_fraction < 1 else 1.0 - x
    return learning_rate * jnp.where(x < warmup_fraction, ramp, decay)


def clue_mrc_train_steps(num_windows: int, batch_size: int, num_epochs: float) -> int:
    """run_mrc.py's total_steps: steps_per_epoch (its DataLoader keeps the last partial
    batch: ceil) times train_epochs (an int argument)."""
    return int(num_epochs) * -(-num_windows // batch_size)


def _clip_per_tensor(grad: jax.Array, max_grad_norm: float, stacked: bool) -> jax.Array:
    """clip_grad_norm_(p, max_grad_norm) on one torch tensor; a stacked leaf
    [num_layers, ...] holds one torch tensor per layer, each clipped alone."""
    if max_grad_norm <= 0:  # BertAdam: `if group['max_grad_norm'] > 0`
        return grad
    axes = tuple(range(1 if stacked else 0, grad.ndim))
    norm = jnp.sqrt(jnp.sum(jnp.square(grad.astype(jnp.float32)), axis=axes, keepdims=True))
    scale = jnp.minimum(1.0, max_grad_norm / (norm + CLIP_EPSILON))
    return (grad * scale).astype(grad.dtype)


def released_bert_adam(
    learning_rate: float,
    schedule_steps: int,
    warmup_fraction: float = 0.1,
    weight_decay: float = 0.01,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-6,
    max_grad_norm: float = 1.0,
    stacked_module: str = "layers",
    rate: Callable[[jax.Array], jax.Array] | None = None,
) -> optax.GradientTransformation:
    """The script's BertAdam with its outer lr schedule (formulas: module docstring).

    schedule_steps: the script's t_total, `script_schedule_steps(blanks, ...)`.
    rate: the rate at a step count in place of the CMRC 2019 script's lr * w(x)^2 (CLUE's
    run_mrc.py: `clue_mrc_learning_rate`; its BERTAdam is this one otherwise: per-tensor
    clipping, no bias correction, decay inside the update, the pooler left out).
    stacked_module: leaves under a module of this name carry a leading
    [num_layers] axis (`nn.scan`); each layer's slice is clipped on its own.
    Updates, moments and params: the same tree of float arrays.
    """

    def init_fn(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return ReleasedBertAdamState(jnp.zeros([], jnp.int32), zeros, zeros)

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("released_bert_adam needs params (weight decay reads them)")
        grads = jax.tree_util.tree_map_with_path(
            lambda path, g: _clip_per_tensor(g, max_grad_norm, stacked_module in path_names(path)),
            updates,
        )
        mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state.mu, grads)
        nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state.nu, grads)
        if rate is None:
            lr = script_learning_rate(state.count, learning_rate, schedule_steps, warmup_fraction)
        else:
            lr = rate(state.count)

        def step(path, m, v, p):
            if any("pooler" in name for name in path_names(path)):
                return jnp.zeros_like(p)  # the script drops the pooler from the optimizer
            direction = m / (jnp.sqrt(v) + eps)
            if weight_decay > 0 and is_decayed(path):
                direction = direction + weight_decay * p
            return (-lr * direction).astype(p.dtype)

        new_updates = jax.tree_util.tree_map_with_path(step, mu, nu, params)
        count = optax.safe_increment(state.count)
        return new_updates, ReleasedBertAdamState(count, mu, nu)

    return optax.GradientTransformation(init_fn, update_fn)
