"""Model API for span extraction (CMRC 2018): start and end logits over a window's tokens.

A batch (int32, leading axis [batch]):
  input_ids, token_type_ids, input_mask: [batch, length]  ([CLS] question [SEP] passage [SEP])
  start_position, end_position: [batch] token indices of the answer (training)
  example_mask: [batch], 0 for padding rows

The loss is the CLUE PyTorch baseline's (CLUEbenchmark/CLUE
baselines/models_pytorch/mrc_pytorch/pytorch_modeling.py `BertForQuestionAnswering`,
trained by run_mrc.py; transformers' class computes the same):
(CE(start logits, start_position) + CE(end logits, end_position)) / 2, each softmax over
every token of the window, padding included. Positions are clamped to [0, length] and
a position equal to `length` drops its term (torch's `ignore_index=length`); a negative
one becomes 0, [CLS]. The baseline's preprocessing (cmrc2018_preprocess.py) already
points windows that miss the answer at [CLS] (0, 0), so the clamp is only a safety net.
One difference, only when a term is dropped: torch averages each of the start and end
terms over its own non-dropped rows, where here every row's sum is divided by the count
of real rows (the protocol's sums; the host divides).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from cmrcx.model_api.base import TOKEN_KEYS, apply_head, init_head
from cmrcx.models import heads


def position_cross_entropy(logits: jax.Array, positions: jax.Array):
    """Per-row softmax cross-entropy of logits [batch, length] to positions [batch].

    Positions are clamped to [0, length] as the baseline does; a row whose position is
    then `length` (past the window) has loss 0.
    """
    length = logits.shape[-1]
    positions = jnp.clip(positions, 0, length)
    kept = positions < length
    losses = optax.softmax_cross_entropy_with_integer_labels(
        logits, jnp.minimum(positions, length - 1)
    )
    return jnp.where(kept, losses, 0.0)


class SpanExtractionModel:
    """An encoder + a Dense(width, 2) on every token: start and end logits.

    network: a `heads.SpanExtraction` (`registry.network(config, "span")`).
    """

    score_keys = (*TOKEN_KEYS, "example_mask")
    train_keys = (*score_keys, "start_position", "end_position")

    def __init__(self, network: heads.SpanExtraction, max_length: int):
        self.module, self.max_length = network, max_length
        self.encoder_name = network.encoder.name

    def example_batch(self, batch_size: int) -> dict[str, np.ndarray]:
        batch = {k: np.zeros([batch_size, self.max_length], np.int32) for k in TOKEN_KEYS}
        batch["start_position"] = np.zeros([batch_size], np.int32)
        batch["end_position"] = np.zeros([batch_size], np.int32)
        batch["example_mask"] = np.ones([batch_size], np.int32)
        return batch

    def init(self, rng: jax.Array, batch: dict):
        return init_head(self.module, rng, batch)

    def _logits(self, params, batch, dropout_rng=None):
        return apply_head(self.module, params, batch, dropout_rng)

    def loss_fn(self, params, batch: dict, dropout_rng: jax.Array | None):
        """Summed (start CE + end CE) / 2 over real rows, and counts.

        Returns (loss_sum [], {"loss_sum", "correct", "examples"}): `correct` counts the
        real rows whose start and end argmaxes are both the gold positions.
        """
        logits = self._logits(params, batch, dropout_rng)  # [batch, 2, length]
        weights = batch["example_mask"].astype(jnp.float32)
        start_loss = position_cross_entropy(logits[:, 0], batch["start_position"])
        end_loss = position_cross_entropy(logits[:, 1], batch["end_position"])
        loss_sum = jnp.sum((start_loss + end_loss) / 2 * weights)
        predicted = jnp.argmax(logits, axis=-1)  # [batch, 2]
        gold = jnp.stack([batch["start_position"], batch["end_position"]], axis=-1)
        correct = jnp.sum(jnp.all(predicted == gold, axis=-1) * weights)
        return loss_sum, {"loss_sum": loss_sum, "correct": correct, "examples": jnp.sum(weights)}

    def score_batch(self, params, batch: dict) -> jax.Array:
        """Start and end logits: float32 [batch, 2, length] (row 0 start, row 1 end)."""
        return self._logits(params, batch)
