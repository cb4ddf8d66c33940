"""Incremental decoding of `T5ForConditionalGeneration`: greedy and sampling.

One jitted `lax.while_loop` per (config, batch, source length, max_new_tokens,
decoding options): the encoder runs once, the cross-attention keys/values are
computed once (`init_cache`), each step runs the decoder on one token per row
against the key/value cache (`decode_step`) and the loop stops as soon as every
row has produced EOS. Outputs follow transformers' `generate` without its leading
decoder start token: ids [batch, max_new_tokens], pad after a row's EOS.
Beam search is not implemented yet.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from cmrcx.models.t5 import T5Config, T5ForConditionalGeneration


class Decoded(NamedTuple):
    tokens: jax.Array  # int32 [batch, max_new_tokens]; pad_token_id after EOS
    lengths: jax.Array  # int32 [batch]; generated tokens, EOS included


def filter_logits(logits, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
    """float [..., vocab] -> logits / temperature with -inf outside the top-k / top-p set.

    HF's warper order: temperature, then top-k (exactly k tokens by rank, ties broken
    by index, so the support never exceeds k), then top-p (the smallest set of most
    likely tokens whose probability reaches top_p; always at least one).
    """
    logits = logits.astype(jnp.float32) / temperature
    order = jnp.argsort(-logits, axis=-1, stable=True)
    ranked = jnp.take_along_axis(logits, order, axis=-1)
    keep = jnp.ones(ranked.shape, bool)
    if top_k > 0:
        keep &= jnp.arange(ranked.shape[-1]) < top_k
    if top_p < 1.0:
        probs = jax.nn.softmax(jnp.where(keep, ranked, -jnp.inf), axis=-1)
        keep &= (jnp.cumsum(probs, axis=-1) - probs) < top_p
    ranked = jnp.where(keep, ranked, -jnp.inf)
    return jnp.take_along_axis(ranked, jnp.argsort(order, axis=-1), axis=-1)


def _generate(config: T5Config, max_new_tokens: int, choose, params, input_ids, mask, rng):
    """The decoding loop; choose(logits [batch, vocab], step_rng) -> int32 [batch]."""
    model = T5ForConditionalGeneration(config)
    apply = functools.partial(model.apply, {"params": params})
    encoded = apply(input_ids, mask, method="encode")
    batch = input_ids.shape[0]
    init = (
        jnp.int32(0),
        jnp.full([batch], config.decoder_start_token_id, jnp.int32),
        apply(encoded, max_new_tokens, method="init_cache"),
        jnp.full([batch, max_new_tokens], config.pad_token_id, jnp.int32),
        jnp.zeros([batch], jnp.int32),
        jnp.zeros([batch], bool),
    )

    def running(state):
        step, *_, done = state
        return (step < max_new_tokens) & ~jnp.all(done)

    def step_fn(state):
        step, last, cache, tokens, lengths, done = state
        logits, cache = apply(last, cache, step, mask, method="decode_step")
        chosen = choose(logits, jax.random.fold_in(rng, step)).astype(jnp.int32)
        chosen = jnp.where(done, config.pad_token_id, chosen)
        tokens = tokens.at[:, step].set(chosen)
        lengths = jnp.where(done, lengths, step + 1)
        return step + 1, chosen, cache, tokens, lengths, done | (chosen == config.eos_token_id)

    _, _, _, tokens, lengths, _ = jax.lax.while_loop(running, step_fn, init)
    return Decoded(tokens, lengths)


@functools.cache
def _jitted(config: T5Config, max_new_tokens: int, temperature, top_k, top_p, sampling: bool):
    if sampling:

        def choose(logits, rng):
            return jax.random.categorical(rng, filter_logits(logits, temperature, top_k, top_p))
    else:

        def choose(logits, rng):
            return jnp.argmax(logits, axis=-1)

    return jax.jit(functools.partial(_generate, config, max_new_tokens, choose))


def greedy(model: T5ForConditionalGeneration, params, input_ids, attention_mask, max_new_tokens):
    """Greedy decoding; input_ids, attention_mask: int [batch, source] -> `Decoded`.

    Token-identical to transformers' `generate(do_sample=False, num_beams=1,
    max_new_tokens=N)` (ids without the decoder start token, pad after EOS).
    """
    run = _jitted(model.config, max_new_tokens, None, None, None, False)
    return run(params, input_ids, attention_mask, jax.random.key(0))


def sample(
    model: T5ForConditionalGeneration,
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

    Step t draws with jax.random.fold_in(rng, t); rows draw independently. -> `Decoded`.
    """
    run = _jitted(model.config, max_new_tokens, float(temperature), int(top_k), float(top_p), True)
    return run(params, input_ids, attention_mask, rng)
