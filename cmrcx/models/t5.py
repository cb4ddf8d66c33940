"""T5 encoder-decoder in Flax Linen: T5 v1.0 (LongLM), T5 v1.1 and mT5.

The semantics are transformers' `modeling_t5.py` (checked against 5.x): RMS
LayerNorm before every sublayer (no mean, no bias, computed in float32),
attention without the 1/sqrt(d_kv) scaling (T5 folds it into the
initialisation of q), one learned relative position bias per stack, computed
from bucketed distances and added to every self-attention layer of that stack
(HF stores it in block 0 and shares it), bidirectional buckets in the encoder
and causal ones in the decoder, no position bias in cross-attention. The FFN is
ReLU (v1.0) or gated tanh-GeLU (`gelu_new`, v1.1 / mT5); the LM head is the
shared embedding, applied to the decoder output times d_model**-0.5 (v1.0), or
a separate matrix without that scaling (v1.1 / mT5).

The layers and stacks are `cmrcx.models.t5_stack`; their public names are this module's
too (`T5Config`, `FEED_FORWARD_PROJ`, `relative_position_bucket`, `cache_layout`). Each
stack's layers are one scanned module, `layers`, whose parameters carry a leading
[num_layers] axis. No gin, data, optimizer or mesh here: sharding is the rules table in
`cmrcx.training.partitioning`. Incremental decoding
(`init_cache`, `decode_step`) runs the same parameters layer by layer over a key/value
cache of one entry per layer; `T5DecodeModel` offers them to the loops of
`cmrcx.models.decoding` (its `DecodeModel` protocol).
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from cmrcx.models.common import causal_mask, padding_mask
from cmrcx.models.common import shift_right as _shift_right
from cmrcx.models.t5_stack import (
    FEED_FORWARD_PROJ,
    T5Config,
    T5Stack,
    cache_layout,
    normal_init,
    relative_position_bucket,
)

__all__ = [
    "FEED_FORWARD_PROJ",
    "T5Config",
    "T5DecodeModel",
    "T5ForConditionalGeneration",
    "T5TokenStates",
    "cache_layout",
    "relative_position_bucket",
    "shift_right",
]


def shift_right(labels, config: T5Config) -> jax.Array:
    """Teacher forcing inputs: int [batch, length] -> decoder_start, labels[:-1], -100 -> pad."""
    return _shift_right(labels, config.decoder_start_token_id, config.pad_token_id)


class T5ForConditionalGeneration(nn.Module):
    """Encoder-decoder with an LM head (HF's T5ForConditionalGeneration / MT5...).

    Parameters: `shared` (embedding [vocab, d_model], used by both stacks and,
    when tied, as the LM head), `encoder`, `decoder`, and `lm_head` when untied.
    Methods (use `apply(..., method=...)`): `encode`, `decoder_states`, `decode`,
    `__call__` (teacher forcing), and for incremental decoding (`cmrcx.models.decoding`)
    `init_cache` and `decode_step`. Logits are float32 whatever config.dtype:
    the head multiplies in config.dtype and accumulates in float32, so bf16
    logits are not rounded to 8 bits (top-k sampling and greedy ties need them).
    """

    config: T5Config

    def setup(self):
        cfg = self.config
        self.shared = nn.Embed(
            cfg.vocab_size,
            cfg.d_model,
            dtype=jnp.dtype(cfg.dtype),
            embedding_init=normal_init(1.0, ("vocab", "embed")),
        )
        self.encoder = T5Stack(cfg, is_decoder=False)
        self.decoder = T5Stack(cfg, is_decoder=True)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Dense(
                cfg.vocab_size,
                use_bias=False,
                dtype=jnp.dtype(cfg.dtype),
                dot_general=functools.partial(
                    jax.lax.dot_general, preferred_element_type=jnp.float32
                ),
                # Mesh TF's (t5x's) fan-in init, not HF's stddev 1.0: logits of order 1.
                kernel_init=normal_init(cfg.d_model**-0.5, ("embed", "vocab")),
            )

    def encode(self, input_ids, attention_mask, deterministic: bool = True):
        """input_ids, attention_mask: int [batch, source] (mask 1 = real token)
        -> encoder states [batch, source, d_model] (config.dtype).
        """
        return self.encoder(
            self.shared(input_ids), padding_mask(attention_mask), deterministic=deterministic
        )

    def decoder_states(
        self,
        decoder_input_ids,
        encoder_hidden,
        encoder_mask,
        decoder_mask=None,
        deterministic: bool = True,
    ):
        """Final decoder states [batch, target, d_model], before the LM head.

        decoder_input_ids, decoder_mask: int [batch, target] (mask None: all real);
        encoder_hidden: [batch, source, d_model]; encoder_mask: int [batch, source].
        """
        if decoder_mask is None:
            decoder_mask = jnp.ones_like(decoder_input_ids)
        return self.decoder(
            self.shared(decoder_input_ids),
            causal_mask(decoder_mask),
            encoder_hidden,
            padding_mask(encoder_mask),
            deterministic=deterministic,
        )

    def logits(self, decoder_hidden):
        """[batch, target, d_model] -> float32 [batch, target, vocab]."""
        cfg = self.config
        if cfg.scale_decoder_outputs:
            decoder_hidden = decoder_hidden * (cfg.d_model**-0.5)
        if not cfg.tie_word_embeddings:
            logits = self.lm_head(decoder_hidden)
        else:
            table = self.shared.embedding.astype(decoder_hidden.dtype)
            logits = jnp.einsum(
                "btd,vd->btv", decoder_hidden, table, preferred_element_type=jnp.float32
            )
        return nn.with_logical_constraint(logits, ("batch", "length", "vocab"))

    def decode(
        self,
        decoder_input_ids,
        encoder_hidden,
        encoder_mask,
        decoder_mask=None,
        deterministic: bool = True,
    ):
        """Teacher-forced logits float32 [batch, target, vocab]; args as `decoder_states`."""
        return self.logits(
            self.decoder_states(
                decoder_input_ids, encoder_hidden, encoder_mask, decoder_mask, deterministic
            )
        )

    def init_cache(self, encoder_hidden, max_length: int):
        """Decoding cache for `decode_step`, three lists of one entry per decoder layer:
        "self" {"key", "value"} zeros, "cross" the same, the cross-attention keys/values
        of encoder_hidden [batch, source, d_model], and "layers" the layer's parameters
        (`cmrcx.cpu.decode`), all computed once here (what every step reads). Keys
        [batch, heads, d_kv, max_length or source], values [batch, heads, max_length or
        source, d_kv] (`cache_layout`).
        """
        cfg = self.config
        stacked, layers = self.decoder(None, None, encoder_hidden, mode="cross_cache")
        cross = []
        for key, value in zip(stacked["key"], stacked["value"], strict=True):
            key, value = cache_layout(key, value)
            cross.append({"key": key, "value": value})
        batch, heads, d_kv, _ = cross[0]["key"].shape
        dtype = cross[0]["key"].dtype
        own = {
            "key": jnp.zeros([batch, heads, d_kv, max_length], dtype),
            "value": jnp.zeros([batch, heads, max_length, d_kv], dtype),
        }
        return {"self": [own] * cfg.num_decoder_layers, "cross": cross, "layers": layers}

    def decode_step(self, decoder_input_ids, cache, index, encoder_mask):
        """One incremental decoder step; every row is at the same position.

        decoder_input_ids: int [batch] (the token at position `index`, int32 []:
        decoder_start_token_id at 0); cache: `init_cache`'s, filled up to index - 1;
        encoder_mask: int [batch, source]. Returns (float32 logits [batch, vocab] for the
        token at index + 1, the cache with position index written). Logits equal
        `decode`'s at position index (same masks, same position bias).
        """
        hidden, cache = self.decoder(
            self.shared(decoder_input_ids[:, None]),
            None,
            None,
            padding_mask(encoder_mask),
            mode="step",
            cache=cache,
            index=index,
        )
        return self.logits(hidden)[:, 0], cache

    def __call__(
        self,
        input_ids,
        attention_mask,
        decoder_input_ids,
        decoder_mask=None,
        deterministic: bool = True,
    ):
        """Encode, then teacher-forced logits float32 [batch, target, vocab]."""
        encoder_hidden = self.encode(input_ids, attention_mask, deterministic)
        return self.decode(
            decoder_input_ids, encoder_hidden, attention_mask, decoder_mask, deterministic
        )


class T5TokenStates(T5ForConditionalGeneration):
    """The decoder's final states of a token sequence fed to both stacks: a T5's token
    states for the candidate pointer (`cmrcx.models.heads.CandidatePointer`, LOT's
    understanding method, whose paper feeds encoder-decoders "the same input" in encoder
    and decoder and takes the decoder's states).

    Called as an encoder is (input_ids, token_type_ids, input_mask, deterministic; the
    token types are unused) -> states [batch, length, d_model], the decoder's last layer
    after its final layer norm (transformers' `decoder_hidden_states[-1]`, what LOT's
    authors take). The decoder reads [decoder_start] + input_ids, the encoder input_ids:
    the state returned at position t is the one whose decoder input is token t, which
    has read (causally) every token up to and including t, and the whole input through
    cross-attention. So a layout puts the context token last, after everything it must
    see. This is the authors' ClozeT convention (LOT-LongLM `baselines/understanding/
    finetune.py:162-181`: decoder input `shift_right(source + gold)`, the state at the
    position whose input is `<mask>`), here without the gold sentinel, which comes after
    every position they score.

    Parameters are `T5ForConditionalGeneration`'s (an untied `lm_head` included, created
    at init though the states never reach it), so a T5 checkpoint loads into it and a
    fine-tuned one exports as a T5.
    """

    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        del token_type_ids  # T5 has no segment embeddings
        encoded = self.encode(input_ids, input_mask, deterministic)
        start = jnp.full_like(input_ids[:, :1], self.config.decoder_start_token_id)
        decoder_input_ids = jnp.concatenate([start, input_ids], axis=1)
        decoder_mask = jnp.concatenate([jnp.ones_like(start), input_mask], axis=1)
        states = self.decoder_states(
            decoder_input_ids, encoded, input_mask, decoder_mask, deterministic
        )
        if self.is_initializing() and not self.config.tie_word_embeddings:
            self.logits(states[:, :1])  # creates lm_head: the tree of a T5 checkpoint
        return states[:, 1:]


@dataclasses.dataclass(frozen=True)
class T5DecodeModel:
    """`T5ForConditionalGeneration` of `config` as a `cmrcx.models.decoding.DecodeModel`.

    The encoder runs once (`encode`), the cross-attention keys/values are computed once
    (`init_cache`), each step runs the decoder on one token per row against the cache.
    Hashable: the decoding loops are compiled once per (model, options).
    """

    config: T5Config

    @property
    def start_token_id(self) -> int:
        return self.config.decoder_start_token_id

    @property
    def eos_token_id(self) -> int:
        return self.config.eos_token_id

    @property
    def pad_token_id(self) -> int:
        return self.config.pad_token_id

    def _apply(self, params, *args, method: str):
        network = T5ForConditionalGeneration(self.config)
        return network.apply({"params": params}, *args, method=method)

    def encode(self, params, input_ids, input_mask):
        """int [batch, source] -> encoder states [batch, source, d_model]."""
        return self._apply(params, input_ids, input_mask, method="encode")

    def init_cache(self, params, encoded, max_length: int, num_beams: int = 1):
        """`T5ForConditionalGeneration.init_cache` ([batch, ...] leaves), each row
        num_beams times (row b * num_beams + k: beam k of input b)."""
        cache = self._apply(params, encoded, max_length, method="init_cache")
        if num_beams == 1:
            return cache
        rows = {name: cache[name] for name in ("self", "cross")}
        return {**cache, **jax.tree.map(lambda x: jnp.repeat(x, num_beams, axis=0), rows)}

    def decode_step(self, params, tokens, cache, index, input_mask):
        """(float32 logits [batch, vocab] of the token after `tokens` int [batch] at
        position index, the cache with that position written)."""
        return self._apply(params, tokens, cache, index, input_mask, method="decode_step")

    def reorder_cache(self, cache, rows):
        """The self-attention cache of rows int [batch]; the cross-attention keys/values
        stay, as `rows` only moves beams among the beams of one input."""
        reordered = jax.tree.map(lambda x: jnp.take(x, rows, axis=0), cache["self"])
        return {**cache, "self": reordered}
