"""Model API for sentence cloze (CMRC 2019): loss and scoring on batches.

Between the network (`cmrcx.models.heads.SentenceCloze` over a family's encoder) and
the trainer: it knows what a batch holds and what the loss is, not how it is jitted or
sharded.

A batch (all int32, leading axis [batch]):
  input_ids, token_type_ids, input_mask: [batch, length]
  blank_positions, blank_in_window: [batch, max_blanks]
  target_blank: [batch] (training)      example_mask: [batch], 0 for padding
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from cmrcx.model_api.base import TOKEN_KEYS, apply_head, init_head, summed_cross_entropy
from cmrcx.models import heads

# The authors' head adds (1 - mask) * -10000 to non-blank logits before the
# softmax (run_cmrc2019_baseline.py); we mask the same way, over blanks only.
MASKED_LOGIT = -10000.0


class ClozeModel:
    """An encoder + the paper's pointer head over blank markers.

    network: a `heads.SentenceCloze` (`registry.network(config, "cloze")`).
    """

    score_keys = (*TOKEN_KEYS, "blank_positions", "blank_in_window", "example_mask")
    train_keys = (*score_keys, "target_blank")

    def __init__(self, network: heads.SentenceCloze, max_length: int = 512, max_blanks: int = 32):
        self.module, self.max_length, self.max_blanks = network, max_length, max_blanks
        self.encoder_name = network.encoder.name

    def example_batch(self, batch_size: int) -> dict[str, np.ndarray]:
        def width(key):
            if key in TOKEN_KEYS:
                return [self.max_length]
            return [self.max_blanks] if key.startswith("blank_") else []

        return {k: np.zeros([batch_size, *width(k)], np.int32) for k in self.train_keys}

    def init(self, rng: jax.Array, batch: dict):
        """Boxed (logically partitioned) variables for a batch of this shape."""
        return init_head(self.module, rng, batch, "blank_positions")

    def _blank_logits(self, params, batch, dropout_rng=None):
        logits = apply_head(self.module, params, batch, dropout_rng, "blank_positions")
        return jnp.where(batch["blank_in_window"] > 0, logits, MASKED_LOGIT)

    def loss_fn(self, params, batch: dict, dropout_rng: jax.Array | None):
        """Summed cross-entropy to the gold blank, and counts.

        Returns (loss_sum: float32 [], metrics: {"loss_sum", "correct", "examples"}),
        all sums over real (unmasked) examples: the host divides.
        """
        logits = self._blank_logits(params, batch, dropout_rng)
        return summed_cross_entropy(logits, batch["target_blank"], batch["example_mask"])

    def score_batch(self, params, batch: dict) -> jax.Array:
        """blank_logits: float32 [batch, max_blanks], masked outside the window."""
        return self._blank_logits(params, batch)
