"""Model API for sentence cloze (CMRC 2019): loss and scoring on batches.

Between the network (`cmrcx.models.bert`) and the trainer: it knows what a
batch holds and what the loss is, not how it is jitted or sharded.

A batch (all int32, leading axis [batch]):
  input_ids, token_type_ids, input_mask: [batch, length]
  blank_positions, blank_in_window: [batch, max_blanks]
  target_blank: [batch] (training)      example_mask: [batch], 0 for padding
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from cmrcx.models.bert import BertConfig, BertForSentenceCloze

# The authors' head adds (1 - mask) * -10000 to non-blank logits before the
# softmax (run_cmrc2019_baseline.py); we mask the same way, over blanks only.
MASKED_LOGIT = -10000.0


class ClozeModel:
    """BERT + the paper's pointer head over blank markers."""

    def __init__(self, config: BertConfig):
        self.config = config
        self.module = BertForSentenceCloze(config)

    def init(self, rng: jax.Array, batch: dict):
        """Boxed (logically partitioned) variables for a batch of this shape."""
        return self.module.init(
            rng,
            batch["input_ids"],
            batch["token_type_ids"],
            batch["input_mask"],
            batch["blank_positions"],
            deterministic=True,
        )

    def _blank_logits(self, params, batch, dropout_rng=None):
        deterministic = dropout_rng is None
        logits = self.module.apply(
            {"params": params},
            batch["input_ids"],
            batch["token_type_ids"],
            batch["input_mask"],
            batch["blank_positions"],
            deterministic=deterministic,
            rngs=None if deterministic else {"dropout": dropout_rng},
        )
        return jnp.where(batch["blank_in_window"] > 0, logits, MASKED_LOGIT)

    def loss_fn(self, params, batch: dict, dropout_rng: jax.Array | None):
        """Summed cross-entropy to the gold blank, and counts.

        Returns (loss_sum: float32 [], metrics: {"loss_sum", "correct", "examples"}),
        all sums over real (unmasked) examples: the host divides.
        """
        logits = self._blank_logits(params, batch, dropout_rng)
        weights = batch["example_mask"].astype(jnp.float32)
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["target_blank"])
        loss_sum = jnp.sum(losses * weights)
        correct = jnp.sum((jnp.argmax(logits, -1) == batch["target_blank"]) * weights)
        return loss_sum, {"loss_sum": loss_sum, "correct": correct, "examples": jnp.sum(weights)}

    def score_batch(self, params, batch: dict) -> jax.Array:
        """blank_logits: float32 [batch, max_blanks], masked outside the window."""
        return self._blank_logits(params, batch)
