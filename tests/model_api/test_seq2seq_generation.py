"""Seq2SeqModel's generation while scoring (LOT PlotCom / OutGen): each row samples with
its own key, fold_in(key(seed), example_index), so its output does not depend on the
batch it is in; the decoder start token of generation is selectable apart from the one
teacher forcing shifts with; a decoding's max_new_tokens pads the rest."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from cmrcx.model_api.seq2seq import Seq2SeqModel
from cmrcx.models import registry
from cmrcx.models.t5 import T5Config, T5DecodeModel
from cmrcx.tasks.lot.pretraining import Decoding

CONFIG = T5Config(
    vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
    num_heads=2, relative_attention_num_buckets=8, relative_attention_max_distance=16,
    feed_forward_proj="relu", tie_word_embeddings=True, dropout_rate=0.0,
)  # fmt: skip
SOURCE, TARGET, STEPS = 7, 8, 6
# Temperature 3: the random model's distributions are flat enough for samples to vary.
PAPER_LIKE = Decoding("sample", top_k=40, temperature=3.0, max_new_tokens=STEPS)


def make_model(**options) -> Seq2SeqModel:
    network = registry.network(CONFIG, "seq2seq")
    return Seq2SeqModel(network, SOURCE, TARGET, [PAPER_LIKE], **options)


def batch(rows) -> dict[str, np.ndarray]:
    """Rows `rows` of 4 fixed inputs (ragged, padded), each with its example_index."""
    rng = np.random.default_rng(3)
    inputs = rng.integers(3, CONFIG.vocab_size, [4, SOURCE]).astype(np.int32)
    mask = (np.arange(SOURCE)[None, :] < np.array([[7], [4], [6], [2]])).astype(np.int32)
    rows = list(rows)
    return {
        "inputs": inputs[rows] * mask[rows],
        "inputs_mask": mask[rows],
        "targets": np.zeros([len(rows), TARGET], np.int32),
        "targets_mask": np.ones([len(rows), TARGET], np.int32),
        "example_mask": np.ones([len(rows)], np.int32),
        "decode_method": np.zeros([len(rows)], np.int32),
        "example_index": np.array(rows, np.int32),
    }


@pytest.fixture(scope="module")
def params():
    return jax.jit(make_model().init)(jax.random.key(0), batch(range(4)))["params"]


def test_rows_do_not_depend_on_their_batch(params):
    generate = jax.jit(make_model().generate)
    whole = np.asarray(generate(params, batch(range(4))))
    assert whole.shape == (4, TARGET)
    assert (whole[:, STEPS:] == CONFIG.pad_token_id).all()  # max_new_tokens 6 of 8
    assert len({tuple(row) for row in whole}) > 1
    reordered = np.asarray(generate(params, batch([2, 0, 3, 1])))
    np.testing.assert_array_equal(reordered, whole[[2, 0, 3, 1]])
    halves = [np.asarray(generate(params, batch(rows))) for rows in ([3, 1], [0, 2])]
    np.testing.assert_array_equal(np.concatenate(halves), whole[[3, 1, 0, 2]])


def test_generation_start_token_is_separate_from_teacher_forcing():
    """Generation decodes through `generator` (start 1, as the authors' gen.py), teacher
    forcing shifts with the config's start token (0). (Its outputs against
    `decoding.greedy` from id 1: tests/cli/test_generate_lot_cli.py.)"""
    model = make_model(generation_start_token_id=1)
    assert model.generator == T5DecodeModel(dataclasses.replace(CONFIG, decoder_start_token_id=1))
    assert (model.decoder.start_token_id, model.generator.start_token_id) == (0, 1)
    targets = batch(range(4))["targets"] + 7
    assert np.asarray(model._shift_right(targets))[:, 0].tolist() == [0] * 4
    assert make_model().generator == make_model().decoder


def test_max_new_tokens_longer_than_the_targets_is_refused():
    with pytest.raises(ValueError, match="max_new_tokens 9: 1 to target_length 8"):
        Seq2SeqModel(
            registry.network(CONFIG, "seq2seq"), SOURCE, TARGET,
            [dataclasses.replace(PAPER_LIKE, max_new_tokens=9)],
        )  # fmt: skip
