"""Seq2SeqModel's candidate scoring (the `lot` mixture's ClozeT and SenPos): the
log-probability of each candidate id as the first target token, read at the decoder's
first step whatever the targets hold, in the columns after the generated ids; the
constrained choice is the best of those among the candidates present."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.benchmarks.lot.text_to_text import constrained_choice
from cmrcx.model_api.seq2seq import Seq2SeqModel
from cmrcx.models import registry
from cmrcx.models.t5 import T5Config
from cmrcx.tasks.lot.pretraining import Decoding

CONFIG = T5Config(
    vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
    num_heads=2, relative_attention_num_buckets=8, relative_attention_max_distance=16,
    feed_forward_proj="relu", tie_word_embeddings=True, dropout_rate=0.0,
)  # fmt: skip
SOURCE, TARGET, CANDIDATES = 7, 5, 3


def make_model(decodings=()) -> Seq2SeqModel:
    network = registry.network(CONFIG, "seq2seq")
    return Seq2SeqModel(network, SOURCE, TARGET, decodings, num_candidates=CANDIDATES)


def batch(targets_seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    inputs = rng.integers(3, CONFIG.vocab_size, [3, SOURCE]).astype(np.int32)
    targets = np.random.default_rng(targets_seed).integers(3, 60, [3, TARGET]).astype(np.int32)
    return {
        "inputs": inputs,
        "inputs_mask": np.ones([3, SOURCE], np.int32),
        "targets": targets,
        "targets_mask": np.ones([3, TARGET], np.int32),
        "example_mask": np.ones([3], np.int32),
        "candidate_ids": np.array([[63, 62, 0], [63, 62, 61], [10, 11, 12]], np.int32),
        "decode_method": np.array([-1, -1, 0], np.int32),
        "example_index": np.arange(3, dtype=np.int32),
    }


@pytest.fixture(scope="module")
def params():
    return jax.jit(make_model().init)(jax.random.key(1), batch(0))["params"]


@pytest.fixture(scope="module")
def score():
    """The candidate-scoring model's score_batch, compiled once for the module."""
    return jax.jit(make_model().score_batch)


def first_step_log_probs(params, example_batch) -> np.ndarray:
    """log softmax of the decoder's logits after its start token alone: [batch, vocab]."""
    return np.asarray(
        _first_step_log_probs(params, example_batch["inputs"], example_batch["inputs_mask"])
    )


@jax.jit  # one compile for the module, not one per op
def _first_step_log_probs(params, inputs, inputs_mask):
    start = jnp.full([3, 1], CONFIG.decoder_start_token_id, jnp.int32)
    logits = registry.network(CONFIG, "seq2seq").apply(
        {"params": params["t5"]}, inputs, inputs_mask, start
    )
    return jax.nn.log_softmax(logits[:, 0].astype(jnp.float32), axis=-1)


def test_candidate_columns_are_first_token_log_probabilities(params, score):
    model = make_model()
    assert "candidate_ids" in model.score_keys and model.candidate_column == 1
    scores = np.asarray(score(params, batch(0)))
    assert scores.shape == (3, 1 + CANDIDATES)
    expected = np.take_along_axis(
        first_step_log_probs(params, batch(0)), batch(0)["candidate_ids"], axis=1
    )
    np.testing.assert_allclose(scores[:, 1:], expected, rtol=1e-5, atol=1e-5)
    # Whatever the targets hold: the first step reads the start token only.
    other = np.asarray(score(params, batch(7)))
    np.testing.assert_allclose(other[:, 1:], scores[:, 1:], rtol=1e-6, atol=1e-6)
    assert not np.allclose(other[:, 0], scores[:, 0])  # the targets' likelihood differs


def test_with_generation_the_candidates_follow_the_generated_ids(params, score):
    model = make_model([Decoding("greedy", max_new_tokens=3)])
    assert model.candidate_column == 1 + TARGET
    scores = np.asarray(jax.jit(model.score_batch)(params, batch(0)))
    assert scores.shape == (3, 1 + TARGET + CANDIDATES)
    alone = np.asarray(score(params, batch(0)))
    np.testing.assert_allclose(scores[:, model.candidate_column :], alone[:, 1:], atol=1e-6)
    assert (scores[:2, 1 : 1 + TARGET] == CONFIG.pad_token_id).all()  # rows not generated


def test_the_choice_is_the_best_candidate_present(params, score):
    log_probs = first_step_log_probs(params, batch(0))
    candidate_ids, mask = batch(0)["candidate_ids"][0], np.array([1, 1, 0])
    scores = np.asarray(score(params, batch(0)))[0, 1:]
    expected = int(np.argmax(log_probs[0, candidate_ids[:2]]))
    assert constrained_choice(scores, mask) == expected
