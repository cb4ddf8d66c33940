"""The AdamW of transformers 2.x, which CLUE's PyTorch classifiers train with.

CLUEbenchmark/CLUE @0059793 baselines/models_pytorch/classifier_pytorch/run_classifier.py
imports `from transformers import AdamW, WarmupLinearSchedule` (transformers 2.x,
optimization.py). Its step differs from optax's `adamw` (and torch.optim.AdamW) twice:

  - epsilon is added to sqrt(v) *before* the bias correction is folded into the step
    size: p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps), i.e.
    m_hat / (sqrt(v_hat) + eps / sqrt(1 - b2^t)): a larger epsilon in the first steps;
  - the weight decay comes *after* that update, on the updated weights:
    p -= lr * weight_decay * p.

With a learning rate near 1e-3 the first steps' losses differ by ~1e-4 relative from
optax's AdamW (tests/reproduction). The global-norm clipping before it (the script's
`clip_grad_norm_`) and the schedule are the same as `adamw_with_warmup`'s.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from cmrcx.training.trainer import is_decayed, warmup_linear_decay


class Transformers2AdamState(NamedTuple):
    count: jax.Array  # int32 [], updates taken
    mu: optax.Updates  # first moment
    nu: optax.Updates  # second moment


def scale_by_transformers2_adamw(
    schedule: optax.Schedule,
    weight_decay: float,
    eps: float,
    b1: float = 0.9,
    b2: float = 0.999,
) -> optax.GradientTransformation:
    """The whole update of transformers 2.x AdamW.step (correct_bias=True), learning rate
    `schedule(count)` included; biases and layer norms (`is_decayed`) are not decayed."""

    def init(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return Transformers2AdamState(jnp.zeros([], jnp.int32), zeros, zeros)

    def update(grads, state, params):
        mu = jax.tree.map(lambda m, g: b1 * m + (1.0 - b1) * g, state.mu, grads)
        nu = jax.tree.map(lambda v, g: b2 * v + (1.0 - b2) * g * g, state.nu, grads)
        count = state.count + 1
        t = count.astype(jnp.float32)
        lr = schedule(state.count)
        step_size = lr * jnp.sqrt(1.0 - b2**t) / (1.0 - b1**t)
        adam = jax.tree.map(lambda m, v: step_size * m / (jnp.sqrt(v) + eps), mu, nu)

        def one(path, step, p):
            if not is_decayed(path):
                return -step
            return -step - lr * weight_decay * (p - step)  # decay of the updated weight

        updates = jax.tree_util.tree_map_with_path(one, adam, params)
        return updates, Transformers2AdamState(count, mu, nu)

    return optax.GradientTransformation(init, update)


def transformers2_adamw_with_warmup(
    learning_rate: float,
    num_train_steps: int,
    warmup_fraction: float = 0.1,
    weight_decay: float = 0.01,
    max_grad_norm: float = 1.0,
    adam_epsilon: float = 1e-8,
) -> optax.GradientTransformation:
    """CLUE's classifier optimizer: the global gradient norm clipped at max_grad_norm
    (run_classifier.py's `clip_grad_norm_`), then transformers 2.x AdamW at the
    warm-up / linear-decay rate of `warmup_linear_decay`."""
    schedule = warmup_linear_decay(learning_rate, num_train_steps, warmup_fraction)
    return optax.chain(
        optax.clip_by_global_norm(max_grad_norm),
        scale_by_transformers2_adamw(schedule, weight_decay, adam_epsilon),
    )
