"""Incremental decoding of any `DecodeModel`: greedy, sampling, beam search.

A `DecodeModel` is an autoregressive network seen through four calls: `encode` (once
per batch), `init_cache`, `decode_step` (one token per row against the cache) and
`reorder_cache` (beam search); T5 implements it (`cmrcx.models.t5.T5DecodeModel`), and
so does GPT-2 (`cmrcx.models.gpt2.GPT2DecodeModel`), a decoder-only model: its `encode`
reads the prompt (keys and values once) and its step 0 ignores the start token it is fed
and answers the prompt's next-token logits. No family is imported here.

One jitted `lax.while_loop` per (model, batch, source length, max_new_tokens,
decoding options): the model encodes once, builds its cache once, each step
decodes one token per row and the loop stops as soon as every row has produced EOS
(beam search: as soon as no row's best hypothesis can change). Beam search folds the
beams into the batch axis (row b * num_beams + k) and reorders the cache by parent
beam each step. Outputs follow transformers' `generate` without its leading decoder
start token: ids [batch, max_new_tokens], pad after a row's EOS.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np


class DecodeModel(Protocol):
    """What the decoding loops ask of a network. Hashable: the loops are compiled once
    per (model, options), so equal models share them (a frozen dataclass of the config)."""

    start_token_id: int  # the token every row is fed first (T5: decoder_start_token_id)
    eos_token_id: int  # a row ends when it produces this token
    pad_token_id: int  # fills a row after its EOS

    def encode(self, params, input_ids, input_mask) -> Any:
        """What every step reads of the inputs int [batch, source], computed once."""

    def init_cache(self, params, encoded, max_length: int, num_beams: int = 1) -> Any:
        """The step state before the first token, for max_length steps; each row
        num_beams times (row b * num_beams + k: beam k of input b)."""

    def decode_step(self, params, tokens, cache, index, input_mask) -> tuple[jax.Array, Any]:
        """tokens int [batch] at position index (int32 []) -> (float32 logits
        [batch, vocab] of the next token, the cache with position index written)."""

    def reorder_cache(self, cache, rows) -> Any:
        """The cache of rows int [batch] (row i takes row rows[i]); beam search only
        moves beams among the beams of one input."""


class Decoded(NamedTuple):
    tokens: jax.Array  # int32 [batch, max_new_tokens]; pad_token_id after EOS
    lengths: jax.Array  # int32 [batch]; generated tokens, EOS included


def filter_logits(logits, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
    """float [..., vocab] -> logits / temperature with -inf outside the top-k / top-p set.

    HF's warper order: temperature, then top-k (exactly k tokens by rank, ties broken
    by index, so the support never exceeds k), then top-p (the smallest set of most
    likely tokens whose probability reaches top_p; always at least one).
    With top-k, `jax.lax.top_k` ranks (same ties) and nothing sorts the vocabulary;
    top-p alone sorts it once. Either way the result is the same array, bit for bit.
    """
    logits = logits.astype(jnp.float32) / temperature
    vocab = logits.shape[-1]
    if 0 < top_k < vocab:
        # Ranked as the sort ranks: -0.0 as 0.0, NaN below every number (top_k alone
        # puts -0.0 below 0.0 and NaN first).
        key = jnp.where(logits == 0.0, 0.0, jnp.where(jnp.isnan(logits), -jnp.inf, logits))
        _, order = jax.lax.top_k(key, top_k)
        ranked = jnp.take_along_axis(logits, order, axis=-1)
    else:
        order = jnp.argsort(-logits, axis=-1, stable=True)
        ranked = jnp.take_along_axis(logits, order, axis=-1)
    if top_p < 1.0:
        # The softmax and cumsum run over the whole vocabulary (-inf past the top k), as
        # they always did: the same reductions, so the same roundings.
        everything = jnp.full(logits.shape, -jnp.inf, jnp.float32)
        everything = jax.lax.dynamic_update_slice_in_dim(everything, ranked, 0, axis=-1)
        probs = jax.nn.softmax(everything, axis=-1)
        keep = (jnp.cumsum(probs, axis=-1) - probs)[..., : ranked.shape[-1]] < top_p
        ranked = jnp.where(keep, ranked, -jnp.inf)
    filtered = jnp.full(logits.shape, -jnp.inf, jnp.float32)
    return jnp.put_along_axis(filtered, order, ranked, axis=-1, inplace=False)


def first_argmax(x) -> jax.Array:
    """`jnp.argmax(x, axis=-1)` (the first maximum; a NaN is the maximum) as two
    vectorised reductions: XLA's CPU argmax, one reduce over (value, index) pairs, takes
    several times longer over a 32,128-token vocabulary. int32 [...]."""
    top = jnp.max(x, axis=-1, keepdims=True)  # NaN if any
    hits = (x == top) | jnp.isnan(x)
    return jnp.min(jnp.where(hits, jnp.arange(x.shape[-1]), x.shape[-1]), axis=-1)


def categorical(rng, logits) -> jax.Array:
    """`jax.random.categorical(rng, logits)`, or `vmap` of it over a key per row
    (rng [batch]): the same Gumbel noise, argmax(noise + logits) by `first_argmax`."""
    if rng.ndim == 0:  # one key: the rows draw together
        noise = jax.random.gumbel(rng, logits.shape, logits.dtype)
    else:  # a key per row
        noise = jax.vmap(lambda key: jax.random.gumbel(key, logits.shape[1:], logits.dtype))(rng)
    return first_argmax(noise + logits)


def _generate(
    model: DecodeModel, max_new_tokens: int, choose, params, input_ids, mask, rng
) -> Decoded:
    """The decoding loop; choose(logits [batch, vocab], step_rng) -> int32 [batch]."""
    encoded = model.encode(params, input_ids, mask)
    batch = input_ids.shape[0]
    init = (
        jnp.int32(0),
        jnp.full([batch], model.start_token_id, jnp.int32),
        model.init_cache(params, encoded, max_new_tokens),
        jnp.full([batch, max_new_tokens], model.pad_token_id, jnp.int32),
        jnp.zeros([batch], jnp.int32),
        jnp.zeros([batch], bool),
    )

    def running(state):
        step, *_, done = state
        return (step < max_new_tokens) & ~jnp.all(done)

    def step_fn(state):
        step, last, cache, tokens, lengths, done = state
        logits, cache = model.decode_step(params, last, cache, step, mask)
        chosen = choose(logits, step_keys(rng, step)).astype(jnp.int32)
        chosen = jnp.where(done, model.pad_token_id, chosen)
        tokens = tokens.at[:, step].set(chosen)
        lengths = jnp.where(done, lengths, step + 1)
        return step + 1, chosen, cache, tokens, lengths, done | (chosen == model.eos_token_id)

    _, _, _, tokens, lengths, _ = jax.lax.while_loop(running, step_fn, init)
    return Decoded(tokens, lengths)


def step_keys(rng, step):
    """The keys `sample` draws step `step` with: fold_in(rng, step) for one key; for a key
    per row (rng [batch]), fold_in(rng[i], step) for row i. Step t draws
    jax.random.categorical(key, filtered), i.e. argmax(filtered + jax.random.gumbel(key,
    filtered.shape)) (jax's Gumbel-max), with filtered the rows' `filter_logits` [batch,
    vocab] for one key, and each row's [vocab] for a key per row."""
    if rng.ndim == 0:
        return jax.random.fold_in(rng, step)
    return jax.vmap(jax.random.fold_in, in_axes=(0, None))(rng, step)


@functools.cache
def _jitted(model: DecodeModel, max_new_tokens: int, temperature, top_k, top_p, sampling: bool):
    if sampling:

        def choose(logits, rng):
            return categorical(rng, filter_logits(logits, temperature, top_k, top_p))
    else:

        def choose(logits, rng):
            return first_argmax(logits)

    return jax.jit(functools.partial(_generate, model, max_new_tokens, choose))


def greedy(model: DecodeModel, params, input_ids, attention_mask, max_new_tokens):
    """Greedy decoding; input_ids, attention_mask: int [batch, source] -> `Decoded`.

    Token-identical to transformers' `generate(do_sample=False, num_beams=1,
    max_new_tokens=N)` (ids without the decoder start token, pad after EOS).
    """
    run = _jitted(model, max_new_tokens, None, None, None, False)
    return run(params, input_ids, attention_mask, jax.random.key(0))


def sample(
    model: DecodeModel,
    params,
    input_ids,
    attention_mask,
    max_new_tokens: int,
    rng,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
):
    """Ancestral sampling from `filter_logits(logits, temperature, top_k, top_p)`.

    rng: one key, and step t draws every row with jax.random.fold_in(rng, t); or a key
    per row (a key array [batch]), and row i draws step t with fold_in(rng[i], t), so a
    row's tokens do not depend on the other rows of its batch. -> `Decoded`.

    Token-identical to transformers' `generate(do_sample=True, temperature=...,
    top_k=..., top_p=..., max_new_tokens=N)` when its `torch.multinomial` draws the same
    Gumbel noise (`step_keys`; tests/models/test_gpt2_model.py, left-padded batches).
    """
    run = _jitted(model, max_new_tokens, float(temperature), int(top_k), float(top_p), True)
    return run(params, input_ids, attention_mask, rng)


# ---------------------------------------------------------------------------
# Beam search

EARLY_STOPPING = (False, True, "never")  # transformers' `early_stopping` values


class _Beams(NamedTuple):
    """The beam search loop state; K = num_beams, N = max_new_tokens."""

    step: jax.Array  # int32 []: tokens generated so far (the next one goes to column step)
    cache: Any  # decode_step's cache; row b * K + k is beam k of row b
    running: jax.Array  # int32 [batch, K, N]: live hypotheses (no EOS), pad after step
    running_scores: jax.Array  # float32 [batch, K]: their summed log-probs, best first
    finished: jax.Array  # int32 [batch, K, N]: the best ended hypotheses, best first
    finished_scores: jax.Array  # float32 [batch, K]: sum / length**penalty; -inf = empty slot
    finished_lengths: jax.Array  # int32 [batch, K]: generated tokens, EOS included
    done: jax.Array  # bool [batch]: the row's finished set can no longer change


def _candidates(beams: _Beams, log_probs, num_beams: int):
    """The 2K best one-token extensions of the running beams, best first.

    log_probs: float32 [batch, K, vocab]. Returns (scores float32 [batch, 2K], the
    extended hypotheses int32 [batch, 2K, N], their tokens and parent beams int32 [batch, 2K]).
    2K, as transformers keeps (1 + number of EOS ids) * K: at most K of them end in
    EOS (one per parent), so at least K live ones remain.
    """
    batch, _, vocab = log_probs.shape
    totals = (log_probs + beams.running_scores[:, :, None]).reshape(batch, num_beams * vocab)
    scores, index = jax.lax.top_k(totals, 2 * num_beams)
    parents, tokens = index // vocab, (index % vocab).astype(jnp.int32)
    extended = jnp.take_along_axis(beams.running, parents[:, :, None], axis=1)
    extended = extended.at[:, :, beams.step].set(tokens)
    return scores, extended, tokens, parents


def _keep_finished(beams: _Beams, scores, extended, ended, penalties, num_beams: int):
    """The K best of the finished set and the candidates that end now, best first.

    A candidate joins only if it ended (EOS, or the last step), ranks among the first
    K of the 2K, and its row is not done; its score is divided by penalties[step].
    """
    first_k = jnp.arange(2 * num_beams) < num_beams
    joins = ended & first_k[None, :] & ~beams.done[:, None]
    scores = jnp.where(joins, scores / penalties[beams.step], -jnp.inf)
    lengths = jnp.full(scores.shape, beams.step + 1, jnp.int32)
    merged_scores = jnp.concatenate([beams.finished_scores, scores], axis=1)
    finished_scores, keep = jax.lax.top_k(merged_scores, num_beams)
    finished = jnp.take_along_axis(
        jnp.concatenate([beams.finished, extended], axis=1), keep[:, :, None], axis=1
    )
    lengths = jnp.take_along_axis(
        jnp.concatenate([beams.finished_lengths, lengths], axis=1), keep, axis=1
    )
    return finished, finished_scores, lengths


def _beam_search(
    model: DecodeModel,
    max_new_tokens: int,
    num_beams: int,
    length_penalty: float,
    early_stopping,
    params,
    input_ids,
    mask,
):
    """The beam search loop (semantics: `beam_search`) -> `Decoded`."""
    batch, n = input_ids.shape[0], max_new_tokens
    # Length penalties of 1..N generated tokens: float64 powers rounded to float32,
    # as torch divides a float32 tensor by a Python float.
    penalties = jnp.asarray(np.arange(1, n + 1, dtype=np.float64) ** length_penalty, jnp.float32)
    # HF's `_check_early_stop_heuristic`: the best a running beam may still reach is its
    # score over the current length, or with "never" and a positive penalty the maximum.
    bound_at_max = early_stopping == "never" and length_penalty > 0.0
    cache = model.init_cache(params, model.encode(params, input_ids, mask), n, num_beams)
    mask = jnp.repeat(mask, num_beams, axis=0)
    empty = jnp.full([batch, num_beams, n], model.pad_token_id, jnp.int32)
    no_scores = jnp.full([batch, num_beams], -jnp.inf, jnp.float32)
    init = _Beams(
        step=jnp.int32(0),
        cache=cache,
        running=empty,
        # One live beam at first, so the first step does not pick the same token K times.
        running_scores=no_scores.at[:, 0].set(0.0),
        finished=empty,
        finished_scores=no_scores,
        finished_lengths=jnp.zeros([batch, num_beams], jnp.int32),
        done=jnp.zeros([batch], bool),
    )

    def unfinished(beams):
        return (beams.step < n) & ~jnp.all(beams.done)

    def step_fn(beams):
        previous = jax.lax.dynamic_index_in_dim(
            beams.running, jnp.maximum(beams.step - 1, 0), axis=2, keepdims=False
        )
        last = jnp.where(beams.step == 0, model.start_token_id, previous)
        logits, cache = model.decode_step(params, last.reshape(-1), beams.cache, beams.step, mask)
        log_probs = jax.nn.log_softmax(logits).reshape(batch, num_beams, -1)
        scores, extended, tokens, parents = _candidates(beams, log_probs, num_beams)
        ended = (tokens == model.eos_token_id) | (beams.step == n - 1)
        running_scores, pick = jax.lax.top_k(jnp.where(ended, -jnp.inf, scores), num_beams)
        parents = jnp.take_along_axis(parents, pick, axis=1)
        rows = (jnp.arange(batch)[:, None] * num_beams + parents).reshape(-1)
        cache = model.reorder_cache(cache, rows)
        finished, finished_scores, finished_lengths = _keep_finished(
            beams, scores, extended, ended, penalties, num_beams
        )
        bound = penalties[n - 1] if bound_at_max else penalties[beams.step]
        # finished_scores[:, -1] is the worst kept score (-inf while a slot is empty).
        improvable = running_scores[:, 0] / bound > finished_scores[:, -1]
        done = beams.done | ~improvable
        if early_stopping is True:
            done |= jnp.all(finished_scores > -jnp.inf, axis=1)
        return _Beams(
            beams.step + 1,
            cache,
            jnp.take_along_axis(extended, pick[:, :, None], axis=1),
            running_scores,
            finished,
            finished_scores,
            finished_lengths,
            done,
        )

    beams = jax.lax.while_loop(unfinished, step_fn, init)
    return Decoded(beams.finished[:, 0], beams.finished_lengths[:, 0])


@functools.cache
def _beam_jitted(model, max_new_tokens, num_beams, length_penalty, early_stopping):
    return jax.jit(
        functools.partial(
            _beam_search, model, max_new_tokens, num_beams, length_penalty, early_stopping
        )
    )


def beam_search(
    model: DecodeModel,
    params,
    input_ids,
    attention_mask,
    max_new_tokens: int,
    num_beams: int = 4,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
):
    """Beam search; input_ids, attention_mask: int [batch, source] -> `Decoded`, the best
    hypothesis of each row.

    Token-identical to transformers' `generate(num_beams=K, do_sample=False,
    max_new_tokens=N, length_penalty=..., early_stopping=...)` (checked against
    transformers 5.23, `GenerationMixin._beam_search`; tests/models/test_beam_search.py):
    - Each step extends the K running beams by every token, keeps the 2K best by summed
      log-prob (log_softmax of the float32 logits), and of those the K best that did not
      end become the running beams (the first step starts from one beam).
    - A candidate ends when its token is EOS or it reaches N tokens (HF's max-length
      stopping criterion: at the last step every candidate ends). It joins the row's
      finished set only if it is among the first K of the 2K, with score
      sum log-probs / length ** length_penalty, where length counts the generated tokens,
      EOS included, decoder start token not; the set keeps the K best.
    - A row is done, and its finished set frozen, once no running beam can beat the
      worst of K finished hypotheses: the best running sum over (tokens so far) ** penalty
      (early_stopping False or True), or over N ** penalty ("never" with a positive
      penalty) is not above it; early_stopping True: as soon as K hypotheses finished.
      The loop ends when every row is done, or after N steps.
    - The answer is the best finished hypothesis. When no hypothesis of a row ended in
      EOS, that is the best of the K best N-token ones, scored with length N.
    Unlike HF, which fills after EOS with `pad_token_id or eos_token_id` (EOS for T5's
    pad 0), tokens after a row's EOS are pad, as `greedy`'s. Needs vocab >= 2K.
    """
    if early_stopping not in EARLY_STOPPING:
        raise ValueError(f"early_stopping {early_stopping!r}: use one of {EARLY_STOPPING}")
    early_stopping = early_stopping if early_stopping == "never" else bool(early_stopping)
    run = _beam_jitted(model, max_new_tokens, int(num_beams), float(length_penalty), early_stopping)
    return run(params, input_ids, attention_mask)
