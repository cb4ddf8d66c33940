"""Model API for a decoder-only language model fine-tuned on seq2seq batches (GPT-2 on LOT
PlotCom and OutGen): the input, then the target, read as one left-to-right text.

The batch is `cmrcx.model_api.seq2seq`'s (inputs, inputs_mask [batch, input_length];
targets, targets_mask [batch, target_length]; example_mask; decode_method and
example_index when decoding). The network (`registry.network(config, "causal_lm")`) reads
[inputs | targets] under one mask: padding between them is masked out and position ids
come from the mask, so the row is its real input tokens followed by its real target
tokens. Target token k is predicted at the last real input token (k = 0) or at target
token k - 1; the loss is the cross-entropy of the target tokens alone (the input is
context, as an LM fine-tuned on `prompt -> continuation` is trained), summed over real
target tokens. Decoding continues the input (`registry.decode_model`: the prompt's keys
and values once, then one token per step), as `Seq2SeqModel` generates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from cmrcx.model_api.seq2seq import SAMPLING_SEED, Seq2SeqModel


def joined(batch: dict) -> tuple[jax.Array, jax.Array]:
    """[inputs | targets] and their masks, int [batch, input_length + target_length]."""
    ids = jnp.concatenate([batch["inputs"], batch["targets"]], axis=1)
    return ids, jnp.concatenate([batch["inputs_mask"], batch["targets_mask"]], axis=1)


def target_predictors(inputs_mask, target_length: int) -> jax.Array:
    """int32 [batch, target_length]: the position in `joined` whose logits predict target
    token k: the last real input token for k = 0, target token k - 1 after it."""
    length = inputs_mask.shape[1]
    positions = jnp.arange(length)
    last_input = jnp.max(jnp.where(inputs_mask > 0, positions[None, :], 0), axis=1)
    after = length + jnp.arange(target_length) - 1
    return jnp.where(jnp.arange(target_length)[None, :] == 0, last_input[:, None], after[None, :])


class CausalLMModel(Seq2SeqModel):
    """A decoder-only LM, token cross-entropy of the targets after the inputs.

    decodings, sampling_seed: as `Seq2SeqModel`'s (generation starts after the input: a
    decoder-only model has no decoder start token to choose).
    """

    def __init__(
        self,
        network: nn.Module,
        input_length: int,
        target_length: int,
        decodings: Sequence[Any] = (),
        *,
        sampling_seed: int = SAMPLING_SEED,
    ):
        super().__init__(
            network, input_length, target_length, decodings, sampling_seed=sampling_seed
        )

    def init(self, rng: jax.Array, batch: dict):
        variables = self.module.init(rng, *joined(batch))
        return {"params": {self.encoder_name: variables["params"]}}

    def _token_log_likelihoods(self, params, batch: dict, dropout_rng=None):
        """(log p(target token) float32 [batch, target], logits [batch, target, vocab])."""
        deterministic = dropout_rng is None
        ids, mask = joined(batch)
        logits = self.module.apply(
            {"params": params[self.encoder_name]},
            ids,
            mask,
            deterministic=deterministic,
            positions=target_predictors(batch["inputs_mask"], batch["targets"].shape[1]),
            rngs=None if deterministic else {"dropout": dropout_rng},
        )
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
        return -losses, logits
