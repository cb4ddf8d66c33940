"""Model API for sequence classification (single sentence or pair): CLUE's classifiers.

A batch (int32, leading axis [batch]):
  input_ids, token_type_ids, input_mask: [batch, length]
  label: [batch] class index (training)      example_mask: [batch], 0 for padding
"""

from __future__ import annotations

import jax
import numpy as np

from cmrcx.model_api.base import TOKEN_KEYS, apply_head, init_head, summed_cross_entropy
from cmrcx.models import heads


class ClassificationModel:
    """An encoder's pooled output -> dropout -> linear, softmax cross-entropy.

    network: a `heads.SequenceClassification` (`registry.network(config, "classification",
    num_classes=...)`).
    """

    score_keys = (*TOKEN_KEYS, "example_mask")
    train_keys = (*score_keys, "label")

    def __init__(self, network: heads.SequenceClassification, max_length: int):
        self.module, self.max_length = network, max_length
        self.num_classes, self.encoder_name = network.num_classes, network.encoder.name

    def example_batch(self, batch_size: int) -> dict[str, np.ndarray]:
        batch = {k: np.zeros([batch_size, self.max_length], np.int32) for k in TOKEN_KEYS}
        batch["label"] = np.zeros([batch_size], np.int32)
        batch["example_mask"] = np.ones([batch_size], np.int32)
        return batch

    def init(self, rng: jax.Array, batch: dict):
        return init_head(self.module, rng, batch)

    def _logits(self, params, batch, dropout_rng=None):
        return apply_head(self.module, params, batch, dropout_rng)

    def loss_fn(self, params, batch: dict, dropout_rng: jax.Array | None):
        """Summed cross-entropy to the label, and counts (sums over real rows)."""
        logits = self._logits(params, batch, dropout_rng)
        return summed_cross_entropy(logits, batch["label"], batch["example_mask"])

    def score_batch(self, params, batch: dict) -> jax.Array:
        """logits: float32 [batch, num_classes]."""
        return self._logits(params, batch)
