"""Model API for sequence-to-sequence problems: LongLM pretraining (and LOT generation).

A batch (int32, leading axis [batch]):
  inputs, inputs_mask: [batch, input_length]     (mask 1 = real token)
  targets, targets_mask: [batch, target_length]  (targets end in EOS)
  example_mask: [batch], 0 for padding rows
The masks alone say which positions are real: padding may hold any id (the pipelines
pad with 0, which is <unk>, a real token, in LongLM's spiece.model), and no id is ever
taken for padding, so an id 0 inside a text is attended and scored like any other.
and, when the model decodes while scoring (`decodings` given):
  decode_method: [batch] index into `decodings`; -1: do not generate for this row
  example_index: [batch] the example's number in the split (seeds sampling)

Teacher forcing as transformers' T5ForConditionalGeneration(labels=...): the decoder
reads [decoder_start_token_id] + targets[:-1] (`cmrcx.models.common.shift_right`) under
a causal mask, padding positions as the config's pad_token_id (HF: label -100, read as
pad); padding positions are masked out of the loss (HF: label -100).

The network is a family's encoder-decoder (`registry.network(config, "seq2seq")`: T5),
decoded through the family's `DecodeModel`. Its parameters live under params[<family>]
(`encoder_name`, "t5"): the whole network comes from a pretrained export (a converted
LongLM holds the bare tree; a cmrcx export of a run of this Model API holds
{"t5": ...}); `Runner` accepts both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from cmrcx.models import decoding, registry
from cmrcx.models.common import shift_right

TOKEN_KEYS = ("inputs", "inputs_mask", "targets", "targets_mask")
DECODE_KEYS = ("decode_method", "example_index")
SAMPLING_SEED = 0  # decoding.sample's key: fold_in(key(SAMPLING_SEED), first example_index)


class Seq2SeqModel:
    """An encoder-decoder, token cross-entropy to the targets under teacher forcing.

    decodings: how score_batch generates for rows with decode_method k: objects with
    `method` ("greedy" | "sample"), `top_k`, `temperature` (`cmrcx.tasks.lot.pretraining.Decoding`).
    Empty: score_batch returns log-likelihoods only.
    """

    train_keys = (*TOKEN_KEYS, "example_mask")

    def __init__(
        self,
        network: nn.Module,
        input_length: int,
        target_length: int,
        decodings: Sequence[Any] = (),
    ):
        self.module, self.config = network, network.config
        self.input_length, self.target_length = input_length, target_length
        self.encoder_name = registry.family_of(self.config).name
        self.decoder = registry.decode_model(self.config)  # generates in `score_batch`
        self.decodings = tuple(decodings)
        for method in self.decodings:
            if method.method not in ("greedy", "sample"):
                raise ValueError(f"decoding method {method.method!r}: use greedy or sample")
        self.score_keys = (*self.train_keys, *(DECODE_KEYS if self.decodings else ()))

    def example_batch(self, batch_size: int) -> dict[str, np.ndarray]:
        lengths = {"inputs": self.input_length, "targets": self.target_length}
        batch = {k: np.zeros([batch_size, lengths[k.split("_")[0]]], np.int32) for k in TOKEN_KEYS}
        batch["example_mask"] = np.ones([batch_size], np.int32)
        return batch

    def init(self, rng: jax.Array, batch: dict):
        variables = self.module.init(
            rng, batch["inputs"], batch["inputs_mask"], self._shift_right(batch["targets"])
        )
        return {"params": {self.encoder_name: variables["params"]}}

    def _token_log_likelihoods(self, params, batch: dict, dropout_rng=None):
        """(log p(target token) float32 [batch, target], logits [batch, target, vocab])."""
        deterministic = dropout_rng is None
        labels = jnp.where(batch["targets_mask"] > 0, batch["targets"], -100)  # as HF's
        logits = self.module.apply(
            {"params": params[self.encoder_name]},
            batch["inputs"],
            batch["inputs_mask"],
            self._shift_right(labels),
            deterministic=deterministic,
            rngs=None if deterministic else {"dropout": dropout_rng},
        )
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
        return -losses, logits

    def _shift_right(self, labels) -> jax.Array:
        """The decoder inputs of labels int [batch, target] (-100: pad)."""
        return shift_right(labels, self.decoder.start_token_id, self.decoder.pad_token_id)

    def _target_weights(self, batch: dict) -> jax.Array:
        """float32 [batch, target]: 1 on the real target tokens of real rows."""
        return (batch["targets_mask"] * batch["example_mask"][:, None]).astype(jnp.float32)

    def loss_fn(self, params, batch: dict, dropout_rng: jax.Array | None):
        """Cross-entropy summed over real target tokens; "examples" counts those tokens,
        so the trainer's mean is HF's per-token mean over the batch (labels=..., -100 pad)."""
        log_likelihoods, logits = self._token_log_likelihoods(params, batch, dropout_rng)
        weights = self._target_weights(batch)
        loss_sum = -jnp.sum(log_likelihoods * weights)
        correct = jnp.sum((jnp.argmax(logits, -1) == batch["targets"]) * weights)
        return loss_sum, {"loss_sum": loss_sum, "correct": correct, "examples": jnp.sum(weights)}

    def score_batch(self, params, batch: dict) -> jax.Array:
        """Summed log-likelihood of each row's targets (natural log), float32 [batch].

        With `decodings`: float32 [batch, 1 + target_length], column 0 that
        log-likelihood, columns 1: the generated ids (pad after EOS; exact in float32)
        of rows with decode_method >= 0, pad elsewhere.
        """
        log_likelihoods, _ = self._token_log_likelihoods(params, batch)
        scores = jnp.sum(log_likelihoods * self._target_weights(batch), axis=-1)
        if not self.decodings:
            return scores
        generated = self.generate(params, batch).astype(jnp.float32)
        return jnp.concatenate([scores[:, None], generated], axis=1)

    def generate(self, params, batch: dict) -> jax.Array:
        """int32 [batch, target_length]: each row decoded by decodings[decode_method]
        (pad for -1). Each method runs only when some row of the batch asks for it."""
        network_params, method_of_row = params[self.encoder_name], batch["decode_method"]
        pad = self.decoder.pad_token_id
        generated = jnp.full([method_of_row.shape[0], self.target_length], pad, jnp.int32)
        rng = jax.random.fold_in(jax.random.key(SAMPLING_SEED), batch["example_index"][0])
        for index, method in enumerate(self.decodings):

            def run(method=method):
                args = (self.decoder, network_params, batch["inputs"], batch["inputs_mask"])
                if method.method == "greedy":
                    return decoding.greedy(*args, self.target_length).tokens
                return decoding.sample(
                    *args,
                    self.target_length,
                    rng,
                    temperature=method.temperature,
                    top_k=method.top_k,
                ).tokens

            rows = method_of_row == index
            tokens = jax.lax.cond(jnp.any(rows), lambda _: run(), lambda kept: kept, generated)
            generated = jnp.where(rows[:, None], tokens, generated)
        return generated
