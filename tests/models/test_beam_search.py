"""Beam search == transformers' `generate(num_beams=4)`, token for token.

The reference models are test_decoding_t5.py's random LongLM-shaped (v1.0, tied,
ReLU) and mT5-shaped (v1.1) models. Random models rarely choose any given token,
so the LM head row of the EOS id is moved towards the mean decoder output: EOS
then ends some rows at different steps and not others, which exercises the
finished-hypothesis bookkeeping (candidates ranked K+1..2K, rows done early,
rows whose answer is a max-length hypothesis).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cmrcx.models import decoding
from cmrcx.models.t5 import T5DecodeModel
from cmrcx.weights import t5 as t5_weights
from tests.models.test_decoding_t5 import ODD, VARIANTS, reference_model

torch = pytest.importorskip("torch")

EOS = 3
# How far the EOS row moves towards the mean decoder output (the tied LongLM head
# scales its input by d_model**-0.5, hence the larger value): chosen so that in
# every case below rows end at different steps, and without early stopping some
# rows' answers are max-length hypotheses.
EOS_PULL = {"longlm": 16.0, "mt5": 1.0}
NUM_BEAMS, MAX_NEW_TOKENS = 4, 10
# (length_penalty, early_stopping): both bounds of HF's early-stop heuristic (the
# current length; the maximum length, for "never" with a positive penalty) and stopping
# as soon as K hypotheses finished. One compilation each (~2.5 s).
CASES = [(1.0, False), (0.6, True), (2.0, "never")]


def source_batch():
    """5 rows of 13 ids, three of them padded."""
    rng = np.random.default_rng(5)
    ids = rng.integers(4, ODD["vocab_size"], [5, 13])
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    mask[3, 3:] = 0
    mask[4, 10:] = 0
    return ids, mask


def pull_eos_row(model, pull: float) -> None:
    """Adds pull * (unit mean decoder output) to the LM head's EOS row, in place."""
    ids, mask = source_batch()
    decoder_ids = np.random.default_rng(6).integers(4, ODD["vocab_size"], [5, 8])
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            decoder_input_ids=torch.tensor(decoder_ids),
            output_hidden_states=True,
        )
        mean = out.decoder_hidden_states[-1].reshape(-1, ODD["d_model"]).mean(0)
        model.lm_head.weight[EOS] += pull * mean / mean.norm()  # tied: shared.weight too


@pytest.fixture(scope="module", params=list(VARIANTS))
def converted(request, tmp_path_factory):
    model = reference_model(request.param)
    pull_eos_row(model, EOS_PULL[request.param])
    directory = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(directory)
    release = t5_weights.read_dir(str(directory))
    return model, dataclasses.replace(release.config, eos_token_id=EOS), release.params


def hf_beam_search(model, length_penalty, early_stopping):
    """transformers' ids [batch, N] without the start token, pad after EOS.

    use_cache=False: see test_decoding_t5.py. HF fills after EOS with
    `pad_token_id or eos_token_id`, i.e. EOS for pad 0, and crops to the longest row.
    """
    ids, mask = source_batch()
    with torch.no_grad():
        out = model.generate(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), do_sample=False,
            num_beams=NUM_BEAMS, max_new_tokens=MAX_NEW_TOKENS, length_penalty=length_penalty,
            early_stopping=early_stopping, use_cache=False, eos_token_id=EOS, pad_token_id=0,
        ).numpy()[:, 1:]  # fmt: skip
    after_eos = np.cumsum(out == EOS, axis=1) - (out == EOS) > 0
    out = np.where(after_eos, 0, out)
    return np.pad(out, [(0, 0), (0, MAX_NEW_TOKENS - out.shape[1])], constant_values=0)


@pytest.mark.parametrize("length_penalty, early_stopping", CASES)
def test_beam_search_is_token_identical_to_transformers(converted, length_penalty, early_stopping):
    hf, config, params = converted
    want = hf_beam_search(hf, length_penalty, early_stopping)
    ended = (want == EOS).any(1)
    eos_steps = np.where(ended, (want == EOS).argmax(1), -1)
    assert ended.any() and len(set(eos_steps)) > 1, want  # rows end at different steps
    if early_stopping is not True:
        assert not ended.all(), want  # and some rows' answers never ended
    ids, mask = source_batch()
    model = T5DecodeModel(config)
    got = decoding.beam_search(
        model, params, ids, mask, MAX_NEW_TOKENS, NUM_BEAMS, length_penalty, early_stopping
    )
    np.testing.assert_array_equal(got.tokens, want)
    lengths = np.where(ended, eos_steps + 1, MAX_NEW_TOKENS)
    np.testing.assert_array_equal(got.lengths, lengths)


def test_beams_differ_from_greedy_and_compile_once_per_shape(converted):
    _, config, params = converted
    ids, mask = source_batch()
    model = T5DecodeModel(config)
    beams = decoding.beam_search(model, params, ids, mask, MAX_NEW_TOKENS)
    greedy = decoding.greedy(model, params, ids, mask, MAX_NEW_TOKENS)
    assert (np.asarray(beams.tokens) != np.asarray(greedy.tokens)).any()
    run = decoding._beam_jitted(model, MAX_NEW_TOKENS, NUM_BEAMS, 1.0, False)
    size = run._cache_size()
    decoding.beam_search(model, params, ids[::-1].copy(), mask[::-1].copy(), MAX_NEW_TOKENS)
    assert run._cache_size() == size


def test_early_stopping_values_are_checked(converted):
    _, config, params = converted
    ids, mask = source_batch()
    with pytest.raises(ValueError, match="early_stopping"):
        decoding.beam_search(T5DecodeModel(config), params, ids, mask, 4, early_stopping="yes")
