"""What the trainer and runner ask of a Model API, and the batches of each problem type.

A Model API is one class per problem type (DESIGN.md, "Benchmarks as data"): it
knows what a batch holds and what the loss is; the trainer owns jit and sharding,
the runner owns data and files. It is given its network (built for the run's model
family by `cmrcx.models.registry.network`), never builds one of a given family. Every
batch is a dict of int32 arrays with a leading [batch] axis and an `example_mask`
([batch], 0 for padding rows). Losses and metrics are sums over real rows: the host
divides.

Problem types and their batches (the ones without a class yet are filled by the
issues that add their tasks; their key layout is fixed here so the runner and
input pipeline need no change):

  sentence cloze (`cloze.ClozeModel`, CMRC 2019)
      input_ids, token_type_ids, input_mask [b, length]; blank_positions,
      blank_in_window [b, max_blanks]; target_blank [b] -> blank logits [b, max_blanks]
  classification (`classification.ClassificationModel`, CLUE)
      input_ids, token_type_ids, input_mask [b, length]; label [b] -> logits [b, classes]
  multiple choice (C3, ChID)
      input_ids, token_type_ids, input_mask [b, choices, length]; choice_mask
      [b, choices]; label [b] -> choice logits [b, choices]
  span extraction (CMRC 2018)
      input_ids, token_type_ids, input_mask [b, length]; start_position,
      end_position [b] -> start and end logits [b, 2, length]
  candidate pointer (`candidate_pointer.CandidatePointerModel`, LOT ClozeT, SenPos)
      input_ids, token_type_ids, input_mask [b, length]; candidate_positions,
      candidate_mask [b, candidates]; context_position [b]; label [b]
      -> candidate logits [b, candidates]
  the LongLM authors' ClozeT (`candidate_pointer.LongLMAuthorsClozeModel`)
      inputs, inputs_mask [b, source]; targets, targets_mask [b, target];
      candidate_positions, candidate_mask [b, candidates]; context_position [b];
      label [b] -> candidate logits [b, candidates]
  seq2seq (LongLM pretraining, LOT generation)
      inputs, inputs_mask [b, source]; targets, targets_mask [b, target]
      -> per-example log-likelihood [b] (scoring) or tokens (decoding)
"""

from __future__ import annotations

from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np
import optax


class ModelApi(Protocol):
    """The interface `cmrcx.training.trainer.Trainer` and the runner use."""

    # The batch keys the device gets when training / when scoring (example_mask included).
    train_keys: tuple[str, ...]
    score_keys: tuple[str, ...]
    # The parameter subtree a pretrained checkpoint fills (the family's name: "bert"), or None.
    encoder_name: str | None

    def example_batch(self, batch_size: int) -> dict[str, np.ndarray]:
        """Zeros of a training batch's shapes and dtypes (to build state from shapes)."""

    def init(self, rng: jax.Array, batch: dict):
        """Boxed (logically partitioned) variables for a batch of this shape."""

    def loss_fn(self, params, batch: dict, dropout_rng: jax.Array | None):
        """(loss_sum [], {"loss_sum", "correct", "examples"}) summed over real rows."""

    def score_batch(self, params, batch: dict) -> jax.Array:
        """The scores evaluation decodes (float32, [batch, ...]) for a scoring batch."""


# The encoder inputs of every encoder problem type, in the heads' argument order
# (`cmrcx.models.heads`).
TOKEN_KEYS = ("input_ids", "token_type_ids", "input_mask")


def init_head(network, rng: jax.Array, batch: dict, *extra_keys: str):
    """``network.init`` on a batch's encoder inputs (then ``extra_keys``), without dropout."""
    inputs = [batch[k] for k in (*TOKEN_KEYS, *extra_keys)]
    return network.init(rng, *inputs, deterministic=True)


def apply_head(network, params, batch: dict, dropout_rng, *extra_keys: str):
    """``network.apply`` on a batch's encoder inputs (then ``extra_keys``): dropout on when
    ``dropout_rng`` is given (training), off when it is None (scoring)."""
    deterministic = dropout_rng is None
    return network.apply(
        {"params": params},
        *(batch[k] for k in (*TOKEN_KEYS, *extra_keys)),
        deterministic=deterministic,
        rngs=None if deterministic else {"dropout": dropout_rng},
    )


def summed_cross_entropy(logits: jax.Array, labels: jax.Array, example_mask: jax.Array):
    """Softmax cross-entropy of logits [batch, n] to int labels [batch], summed over rows
    with example_mask 1. Returns (loss_sum [], {"loss_sum", "correct", "examples"})."""
    weights = example_mask.astype(jnp.float32)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    loss_sum = jnp.sum(losses * weights)
    correct = jnp.sum((jnp.argmax(logits, -1) == labels) * weights)
    return loss_sum, {"loss_sum": loss_sum, "correct": correct, "examples": jnp.sum(weights)}
