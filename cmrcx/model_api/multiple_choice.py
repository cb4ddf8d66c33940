"""Model API for multiple choice (C3, ChID): one score per (context, choice) sequence.

A batch (int32, leading axis [batch]):
  input_ids, token_type_ids, input_mask: [batch, choices, length], one sequence per choice
  choice_mask: [batch, choices], 1 for a real choice, 0 for a padded slot
  label: [batch] index of the answer among the choices (training)
  example_mask: [batch], 0 for padding rows

The softmax runs over real choices only: padded slots get MASKED_LOGIT before it, so
they never win and add nothing to the loss. The CLUE PyTorch baselines do not mask:
run_c3.py (CLUEbenchmark/CLUE baselines/models_pytorch/mrc_pytorch) fills questions
with fewer than 4 choices with a filler choice ("无效答案" @65dae35, '' @0964517) and
scores it, in the softmax of training and in the argmax of evaluation, and
run_multichoice_mrc.py (ChID) builds `choice_masks` but never passes them to the model.
So the baseline scores the filler choices as candidates; we mask them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from cmrcx.model_api.base import TOKEN_KEYS, apply_head, init_head, summed_cross_entropy
from cmrcx.models import heads

# The logit of a padded choice: exp(MASKED_LOGIT - any real logit) is 0 in float32,
# so the softmax and its cross-entropy are those of the real choices alone.
MASKED_LOGIT = -1e9


class MultipleChoiceModel:
    """An encoder's pooled output -> dropout -> Dense(width, 1) per choice, softmax over
    choices.

    network: a `heads.MultipleChoice` (`registry.network(config, "multiple_choice")`).
    """

    score_keys = (*TOKEN_KEYS, "choice_mask", "example_mask")
    train_keys = (*score_keys, "label")

    def __init__(self, network: heads.MultipleChoice, num_choices: int, max_length: int):
        self.module, self.num_choices, self.max_length = network, num_choices, max_length
        self.encoder_name = network.encoder.name

    def example_batch(self, batch_size: int) -> dict[str, np.ndarray]:
        shape = [batch_size, self.num_choices, self.max_length]
        batch = {k: np.zeros(shape, np.int32) for k in TOKEN_KEYS}
        batch["choice_mask"] = np.ones([batch_size, self.num_choices], np.int32)
        batch["label"] = np.zeros([batch_size], np.int32)
        batch["example_mask"] = np.ones([batch_size], np.int32)
        return batch

    def init(self, rng: jax.Array, batch: dict):
        return init_head(self.module, rng, batch)

    def _choice_logits(self, params, batch, dropout_rng=None):
        logits = apply_head(self.module, params, batch, dropout_rng)
        return jnp.where(batch["choice_mask"] > 0, logits, MASKED_LOGIT)

    def loss_fn(self, params, batch: dict, dropout_rng: jax.Array | None):
        """Summed cross-entropy over the real choices to the label, and counts."""
        logits = self._choice_logits(params, batch, dropout_rng)
        return summed_cross_entropy(logits, batch["label"], batch["example_mask"])

    def score_batch(self, params, batch: dict) -> jax.Array:
        """Choice logits: float32 [batch, choices], MASKED_LOGIT at padded choices."""
        return self._choice_logits(params, batch)
