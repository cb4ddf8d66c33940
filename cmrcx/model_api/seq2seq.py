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
  example_index: [batch] the example's number in the split: row i samples with the key
    fold_in(key(sampling_seed), example_index[i]), so its generation does not depend on
    the batch it is in
and, when the model scores candidate first tokens (`num_candidates` > 0; the `lot`
mixture's ClozeT and SenPos, `cmrcx.benchmarks.lot.text_to_text`):
  candidate_ids: [batch, num_candidates] ids whose log-probability as the first target
    token score_batch returns (padding slots: any id; the caller masks them)

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

import dataclasses
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
CANDIDATE_KEYS = ("candidate_ids",)
SAMPLING_SEED = 0  # default seed of the sampling keys: fold_in(key(seed), example_index)


class Seq2SeqModel:
    """An encoder-decoder, token cross-entropy to the targets under teacher forcing.

    decodings: how score_batch generates for rows with decode_method k: objects with
    `method` ("greedy" | "sample"), `top_k`, `temperature` and `max_new_tokens` (None:
    target_length) (`cmrcx.tasks.lot.pretraining.Decoding`). Empty: score_batch returns
    log-likelihoods only.
    generation_start_token_id: the decoder's first input when generating
    (transformers' `generate(decoder_start_token_id=...)`); None: the config's
    decoder_start_token_id, which teacher forcing always shifts with.
    sampling_seed: the sampling keys' seed (see `example_index` above).
    num_candidates: > 0: score_batch also returns the log-probability of each
    `candidate_ids` entry as the first target token (see `score_batch`).
    """

    train_keys = (*TOKEN_KEYS, "example_mask")

    def __init__(
        self,
        network: nn.Module,
        input_length: int,
        target_length: int,
        decodings: Sequence[Any] = (),
        *,
        generation_start_token_id: int | None = None,
        sampling_seed: int = SAMPLING_SEED,
        num_candidates: int = 0,
    ):
        self.module, self.config = network, network.config
        self.input_length, self.target_length = input_length, target_length
        self.encoder_name = registry.family_of(self.config).name
        self.decoder = registry.decode_model(self.config)  # teacher forcing's shift_right
        generation_config = self.config
        if generation_start_token_id is not None:
            generation_config = dataclasses.replace(
                self.config, decoder_start_token_id=generation_start_token_id
            )
        self.generator = registry.decode_model(generation_config)  # generates in score_batch
        self.sampling_seed = sampling_seed
        self.decodings = tuple(decodings)
        for method in self.decodings:
            if method.method not in ("greedy", "sample"):
                raise ValueError(f"decoding method {method.method!r}: use greedy or sample")
            if not 0 < (method.max_new_tokens or target_length) <= target_length:
                raise ValueError(
                    f"max_new_tokens {method.max_new_tokens}: 1 to target_length {target_length}"
                )
        self.num_candidates = num_candidates
        self.score_keys = (
            *self.train_keys,
            *(DECODE_KEYS if self.decodings else ()),
            *(CANDIDATE_KEYS if num_candidates else ()),
        )
        # score_batch's column of the first candidate's log-probability.
        self.candidate_column = 1 + (target_length if self.decodings else 0)

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

        With `decodings` or `num_candidates`: float32 [batch, columns], column 0 that
        log-likelihood, then with `decodings` target_length columns, the generated ids
        (pad after EOS; exact in float32) of rows with decode_method >= 0, pad
        elsewhere; then with `num_candidates` that many columns (from
        `candidate_column` on), the log-probability of each candidate id as the first
        target token: the decoder's first step, read from the start token (the one
        teacher forcing shifts with) and the input, whatever the targets are.
        """
        log_likelihoods, logits = self._token_log_likelihoods(params, batch)
        scores = jnp.sum(log_likelihoods * self._target_weights(batch), axis=-1)
        columns = [scores[:, None]]
        if self.decodings:
            columns.append(self.generate(params, batch).astype(jnp.float32))
        if self.num_candidates:
            first = jax.nn.log_softmax(logits[:, 0, :].astype(jnp.float32), axis=-1)
            columns.append(jnp.take_along_axis(first, batch["candidate_ids"], axis=1))
        return scores if len(columns) == 1 else jnp.concatenate(columns, axis=1)

    def generate(self, params, batch: dict) -> jax.Array:
        """int32 [batch, target_length]: each row decoded by decodings[decode_method]
        (pad for -1, and after a method's max_new_tokens). Each method runs only when
        some row of the batch asks for it."""
        network_params, method_of_row = params[self.encoder_name], batch["decode_method"]
        pad = self.generator.pad_token_id
        generated = jnp.full([method_of_row.shape[0], self.target_length], pad, jnp.int32)
        seed = jax.random.key(self.sampling_seed)
        row_keys = jax.vmap(lambda i: jax.random.fold_in(seed, i))(batch["example_index"])
        for index, method in enumerate(self.decodings):

            def run(method=method):
                args = (self.generator, network_params, batch["inputs"], batch["inputs_mask"])
                steps = method.max_new_tokens or self.target_length
                if method.method == "greedy":
                    tokens = decoding.greedy(*args, steps).tokens
                else:
                    tokens = decoding.sample(
                        *args,
                        steps,
                        row_keys,
                        temperature=method.temperature,
                        top_k=method.top_k,
                    ).tokens
                padding = [(0, 0), (0, self.target_length - steps)]
                return jnp.pad(tokens, padding, constant_values=pad)

            rows = method_of_row == index
            tokens = jax.lax.cond(jnp.any(rows), lambda _: run(), lambda kept: kept, generated)
            generated = jnp.where(rows[:, None], tokens, generated)
        return generated
