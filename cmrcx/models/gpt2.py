"""GPT-2 decoder-only language model in Flax Linen (UER's gpt2-chinese-cluecorpussmall).

The semantics are transformers' `modeling_gpt2.py` (checked against 5.23): learned token
(`wte`) and position (`wpe`) embeddings, pre-LayerNorm blocks (`ln_1`, causal
self-attention with fused q/k/v `c_attn` and output `c_proj`; `ln_2`, MLP `c_fc`,
`gelu_new`, `c_proj`), a final `ln_f`, and the LM head tied to `wte`. Attention scores
are scaled by head_dim**-0.5 (`scale_attn_weights`). Position ids come from the
attention mask, as transformers' `generate` makes them: cumsum(mask) - 1 (so a
left-padded row starts at position 0 at its first real token).

The blocks are one scanned module, `layers` (parameters [layers, ...]). `GPT2LMHeadModel`
gives teacher-forced logits (`__call__`), the final states (`states`), and incremental
decoding: `prefill` (the prompt's keys/values and its next-token logits) and `decode_step`
(one token per row against the cache). `GPT2DecodeModel` offers them to the loops of
`cmrcx.models.decoding`; `GPT2TokenStates` gives the candidate pointer the last layer's
states. No gin, data, optimizer or mesh here.
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from cmrcx.models import attention
from cmrcx.models.common import (
    check_compute_options,
    kernel_init,
    low_precision_dot_general,
    scanned_layers,
    zeros_init,
)

ACTIVATIONS = {
    "gelu_new": functools.partial(nn.gelu, approximate=True),  # GPT-2's, UER's
    "gelu": functools.partial(nn.gelu, approximate=False),
    "relu": nn.relu,
}


@dataclasses.dataclass(frozen=True)
class GPT2Config:
    """Geometry of a GPT-2. Defaults: uer/gpt2-chinese-cluecorpussmall's config.json
    (GPT2-base: 12 layers of width 768, BERT's Chinese vocabulary of 21128 tokens)."""

    vocab_size: int = 21128  # UER: bert-base-chinese's vocab.txt
    n_positions: int = 1024  # longest sequence, prompt and generated tokens together
    n_embd: int = 768  # width of every token vector
    n_layer: int = 12  # transformer blocks
    n_head: int = 12  # attention heads; n_embd % n_head == 0
    n_inner: int | None = None  # MLP inner width; None: 4 * n_embd
    activation_function: str = "gelu_new"  # a key of ACTIVATIONS
    resid_pdrop: float = 0.1  # dropout on each sublayer's output
    embd_pdrop: float = 0.1  # dropout on the embeddings
    attn_pdrop: float = 0.1  # dropout on the attention probabilities
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02  # stddev of the normal init (c_proj: / sqrt(2 n_layer))
    scale_attn_weights: bool = True  # scores / sqrt(head_dim)
    # Special ids (UER: BERT's [CLS] 101 starts a text, [SEP] 102 ends it, [PAD] 0).
    bos_token_id: int = 101  # what a text starts with (cmrcx.generate's prompt prefix)
    eos_token_id: int = 102  # decoding stops at it
    pad_token_id: int = 0  # fills a row after its EOS
    dtype: str = "float32"  # compute dtype; "bfloat16": bf16 compute, float32 parameters
    remat_policy: str = "none"  # recompute layer activations in backprop: none | full | dots

    def __post_init__(self):
        if self.n_inner is None:
            object.__setattr__(self, "n_inner", 4 * self.n_embd)
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        if self.activation_function not in ACTIVATIONS:
            raise ValueError(
                f"activation_function {self.activation_function!r}: use one of "
                + ", ".join(ACTIVATIONS)
            )
        check_compute_options(self.dtype, self.remat_policy)

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def positions_of(mask) -> jax.Array:
    """int [batch, length] -> position ids cumsum(mask) - 1, 0 before the first real token."""
    return jnp.maximum(jnp.cumsum(mask, axis=-1) - 1, 0)


def _dense(cfg: GPT2Config, features, axes, name, axis=-1, std=None):
    out_axes = axes[len(axes) - (len(features) if isinstance(features, tuple) else 1) :]
    return nn.DenseGeneral(
        features,
        axis=axis,
        dtype=jnp.dtype(cfg.dtype),
        name=name,
        kernel_init=kernel_init(std or cfg.initializer_range, axes, "normal"),
        bias_init=zeros_init(out_axes),
        dot_general=low_precision_dot_general,
    )


def _layer_norm(cfg: GPT2Config, name: str):
    return nn.LayerNorm(
        epsilon=cfg.layer_norm_epsilon,
        dtype=jnp.dtype(cfg.dtype),
        name=name,
        scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
        bias_init=zeros_init(("embed",)),
    )


class GPT2Block(nn.Module):
    """One block; mode "full" (a whole sequence -> (hidden, None)), "prefill" (-> (hidden,
    this layer's key/value [batch, length, heads, head_dim])) or "step" (one token against
    this layer's cache -> (hidden, the cache with slot `slot` written))."""

    config: GPT2Config
    deterministic: bool = True
    mode: str = "full"

    @nn.compact
    def __call__(self, hidden, attention_bias, key_cache=None, value_cache=None, slot=None):
        cfg, deterministic = self.config, self.deterministic
        attention = GPT2Attention(cfg, deterministic, self.mode, name="attn")
        attended, kv = attention(
            _layer_norm(cfg, "ln_1")(hidden), attention_bias, key_cache, value_cache, slot
        )
        hidden = hidden + attended
        hidden = hidden + GPT2MLP(cfg, deterministic, name="mlp")(_layer_norm(cfg, "ln_2")(hidden))
        hidden = nn.with_logical_constraint(hidden, ("batch", "length", "embed"))
        return hidden, (None if self.mode == "full" else kv)


class GPT2Attention(nn.Module):
    """Causal self-attention: fused q/k/v `c_attn`, output `c_proj` (as transformers)."""

    config: GPT2Config
    deterministic: bool = True
    mode: str = "full"

    @nn.compact
    def __call__(self, normed, attention_bias, key_cache, value_cache, slot):
        """normed [batch, length, n_embd]; attention_bias float32 [batch, 1, length or 1,
        keys] -> (output, (key, value) [batch, keys, heads, head_dim])."""
        cfg = self.config
        qkv = _dense(cfg, (3, cfg.n_head, cfg.head_dim), ("embed", None, "heads", "kv"), "c_attn")
        query, key, value = jnp.moveaxis(qkv(normed), 2, 0)  # each [batch, length, heads, hd]
        if self.mode == "step":
            key = jax.lax.dynamic_update_slice_in_dim(
                key_cache, key.astype(key_cache.dtype), slot, 1
            )
            value = jax.lax.dynamic_update_slice_in_dim(
                value_cache, value.astype(value_cache.dtype), slot, 1
            )
        if cfg.scale_attn_weights:
            query = query * jnp.asarray(cfg.head_dim**-0.5, query.dtype)
        if attention.use_dot_product(not self.deterministic and cfg.attn_pdrop > 0):
            context = attention.dot_product_attention(query, key, value, bias=attention_bias)
        else:
            scores = jnp.einsum("bqhd,bkhd->bhqk", query, key.astype(query.dtype))
            probs = jax.nn.softmax(scores.astype(jnp.float32) + attention_bias, axis=-1)
            probs = nn.Dropout(cfg.attn_pdrop)(
                probs.astype(query.dtype), deterministic=self.deterministic
            )
            context = jnp.einsum("bhqk,bkhd->bqhd", probs, value.astype(query.dtype))
        context = nn.with_logical_constraint(context, ("batch", "length", "heads", "kv"))
        out = _dense(cfg, cfg.n_embd, ("heads", "kv", "embed"), "c_proj", (-2, -1), _proj_std(cfg))
        out = nn.Dropout(cfg.resid_pdrop)(out(context), deterministic=self.deterministic)
        return out, (key, value)


class GPT2MLP(nn.Module):
    config: GPT2Config
    deterministic: bool = True

    @nn.compact
    def __call__(self, normed):
        cfg = self.config
        inner = _dense(cfg, cfg.n_inner, ("embed", "mlp"), "c_fc")(normed)
        inner = nn.with_logical_constraint(inner, ("batch", "length", "mlp"))
        inner = ACTIVATIONS[cfg.activation_function](inner)
        out = _dense(cfg, cfg.n_embd, ("mlp", "embed"), "c_proj", std=_proj_std(cfg))(inner)
        return nn.Dropout(cfg.resid_pdrop)(out, deterministic=self.deterministic)


def _proj_std(cfg: GPT2Config) -> float:
    """transformers' GPT-2 init of the residual projections: stddev / sqrt(2 n_layer)."""
    return cfg.initializer_range / (2 * cfg.n_layer) ** 0.5


def _stacked_blocks(cfg: GPT2Config, deterministic: bool, mode: str) -> nn.Module:
    """All blocks as one scanned module `layers` (parameters [layers, ...]); "step" scans
    the caches ([layers, ...]) with the parameters. Mode "full" (training, scoring) is
    unrolled unless a remat policy is set; decoding's modes stay a loop."""
    remat_policy = cfg.remat_policy if mode == "full" else "none"
    in_axes = (nn.broadcast, 0, 0, nn.broadcast) if mode == "step" else nn.broadcast
    unrolled = mode == "full"
    layers = scanned_layers(GPT2Block, remat_policy, cfg.n_layer, in_axes, unrolled)
    return layers(cfg, deterministic, mode, name="layers")


class GPT2Blocks(nn.Module):
    """The blocks (HF's `h`): the scanned `layers` in the mode of the call."""

    config: GPT2Config

    @nn.compact
    def __call__(
        self, hidden, bias, deterministic=True, mode="full", key=None, value=None, slot=None
    ):
        stack = _stacked_blocks(self.config, deterministic, mode)
        if mode == "step":
            return stack(hidden, bias, key, value, slot)
        return stack(hidden, bias)


class GPT2LMHeadModel(nn.Module):
    """transformers' GPT2LMHeadModel (head tied to `wte`). Parameters: wte, wpe, h (the
    scanned `layers`), ln_f. Logits are float32 whatever config.dtype (the head
    accumulates in float32)."""

    config: GPT2Config

    def setup(self):
        cfg = self.config
        embed = functools.partial(nn.Embed, dtype=jnp.dtype(cfg.dtype))
        init = functools.partial(kernel_init, cfg.initializer_range, kind="normal")
        self.wte = embed(cfg.vocab_size, cfg.n_embd, embedding_init=init(("vocab", "embed")))
        self.wpe = embed(cfg.n_positions, cfg.n_embd, embedding_init=init(("position", "embed")))
        self.embd_dropout = nn.Dropout(cfg.embd_pdrop)
        self.h = GPT2Blocks(cfg)
        self.ln_f = _layer_norm(cfg, "ln_f")

    def _embed(self, input_ids, positions, deterministic):
        hidden = self.wte(input_ids) + self.wpe(positions)
        hidden = nn.with_logical_constraint(hidden, ("batch", "length", "embed"))
        return self.embd_dropout(hidden, deterministic=deterministic)

    def _bias(self, mask):
        """Additive causal + padding bias float32 [batch, 1, length, length]."""
        length = mask.shape[1]
        causal = jnp.arange(length)[None, :] <= jnp.arange(length)[:, None]
        allowed = causal[None, None] & (mask > 0)[:, None, None, :]
        return jnp.where(allowed, 0.0, jnp.finfo(jnp.float32).min)

    def states(self, input_ids, input_mask, deterministic: bool = True, mode: str = "full"):
        """input_ids, input_mask: int [batch, length] -> final states [batch, length, n_embd]
        (after ln_f); mode "prefill": (states, keys and values [layers, batch, length,
        heads, head_dim])."""
        hidden = self._embed(input_ids, positions_of(input_mask), deterministic)
        hidden, kv = self.h(hidden, self._bias(input_mask), deterministic, mode)
        hidden = self.ln_f(hidden)
        return (hidden, kv) if mode == "prefill" else hidden

    def logits(self, hidden):
        """[batch, length, n_embd] -> float32 [batch, length, vocab] (the tied head)."""
        table = self.wte.embedding.astype(hidden.dtype)
        logits = jnp.einsum("btd,vd->btv", hidden, table, preferred_element_type=jnp.float32)
        return nn.with_logical_constraint(logits, ("batch", "length", "vocab"))

    def __call__(self, input_ids, input_mask, deterministic: bool = True, positions=None):
        """Teacher-forced logits float32 [batch, length, vocab]: position t predicts t + 1.
        positions: int [batch, k] (None: all): the logits at those positions only,
        [batch, k, vocab] (an LM fine-tuned on a target scores its positions alone)."""
        hidden = self.states(input_ids, input_mask, deterministic)
        if positions is not None:
            hidden = jnp.take_along_axis(hidden, positions[:, :, None], axis=1)
        return self.logits(hidden)

    def prefill(self, input_ids, input_mask):
        """The prompt int [batch, source] (padded on either side; mask 1 = real) ->
        {"key", "value": [layers, batch, source, heads, head_dim], "logits": float32
        [batch, vocab] of the token after the last real one, "length": int32 [batch]
        real tokens}."""
        hidden, (key, value) = self.states(input_ids, input_mask, mode="prefill")
        length = jnp.sum(input_mask > 0, axis=-1).astype(jnp.int32)
        last = jnp.argmax(jnp.cumsum(input_mask > 0, axis=-1), axis=-1)  # last real token
        hidden = jnp.take_along_axis(hidden, last[:, None, None], axis=1)
        return {"key": key, "value": value, "logits": self.logits(hidden)[:, 0], "length": length}

    def decode_step(self, tokens, key_cache, value_cache, slot, position, key_mask):
        """tokens int [batch] at positions int [batch], written to cache slot `slot`
        (int32 []); key_mask bool [batch, slots] (the slot itself included) -> (float32
        logits [batch, vocab] of the next token, key cache, value cache)."""
        hidden = self._embed(tokens[:, None], position[:, None], True)
        bias = jnp.where(key_mask, 0.0, jnp.finfo(jnp.float32).min)[:, None, None, :]
        hidden, (key, value) = self.h(hidden, bias, True, "step", key_cache, value_cache, slot)
        return self.logits(self.ln_f(hidden))[:, 0], key, value


class GPT2TokenStates(GPT2LMHeadModel):
    """The last layer's states (after ln_f) of every token, for the candidate pointer
    (LOT's understanding method for decoder-only models, paper section 5.2). Called as an
    encoder is (input_ids, token_type_ids, input_mask, deterministic; token types unused).
    A causal model's state at t has read tokens 0..t only: a layout puts the context token
    after everything it must see (`cmrcx.benchmarks.lot.understanding`, causal layouts).
    Parameters are GPT2LMHeadModel's, so a GPT-2 checkpoint loads into it."""

    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        del token_type_ids
        return self.states(input_ids, input_mask, deterministic)


@dataclasses.dataclass(frozen=True)
class GPT2DecodeModel:
    """`GPT2LMHeadModel` of `config` as a `cmrcx.models.decoding.DecodeModel`.

    A decoder-only model reads its prompt in `encode` (the prefill: keys and values of
    every prompt token, and the logits after the last real one); step 0 ignores the start
    token it is fed and answers those logits, step t > 0 runs generated token t - 1 at
    cache slot source + t - 1 and position (real prompt tokens) + t - 1, which is what
    transformers' `generate` gives a left-padded batch (position ids from the mask).
    """

    config: GPT2Config

    @property
    def start_token_id(self) -> int:
        return self.config.bos_token_id  # fed at step 0, unused

    @property
    def eos_token_id(self) -> int:
        return self.config.eos_token_id

    @property
    def pad_token_id(self) -> int:
        return self.config.pad_token_id

    def _apply(self, params, *args, method: str):
        return GPT2LMHeadModel(self.config).apply({"params": params}, *args, method=method)

    def encode(self, params, input_ids, input_mask):
        return self._apply(params, input_ids, input_mask, method="prefill")

    def init_cache(self, params, encoded, max_length: int, num_beams: int = 1):
        """The prompt's keys/values followed by max_length empty slots, each row
        num_beams times (row b * num_beams + k)."""
        pad = [(0, 0), (0, 0), (0, max_length), (0, 0), (0, 0)]
        cache = {
            "key": jnp.pad(encoded["key"], pad),
            "value": jnp.pad(encoded["value"], pad),
            "logits": encoded["logits"],
            "length": encoded["length"],
        }
        if num_beams > 1:
            cache = {
                name: jnp.repeat(x, num_beams, axis=1 if name in ("key", "value") else 0)
                for name, x in cache.items()
            }
        return cache

    def decode_step(self, params, tokens, cache, index, input_mask):
        source = input_mask.shape[1]

        def first(cache):
            return cache["logits"], cache

        def later(cache):
            slots = jnp.arange(cache["key"].shape[2])
            generated = (slots >= source) & (slots < source + index)
            prompt = jnp.pad(input_mask > 0, [(0, 0), (0, cache["key"].shape[2] - source)])
            key_mask = prompt | generated[None, :]
            logits, key, value = self._apply(
                params, tokens, cache["key"], cache["value"], source + index - 1,
                cache["length"] + index - 1, key_mask, method="decode_step",
            )  # fmt: skip
            return logits, {**cache, "key": key, "value": value}

        return jax.lax.cond(index == 0, first, later, cache)

    def reorder_cache(self, cache, rows):
        return {
            name: jnp.take(x, rows, axis=1 if name in ("key", "value") else 0)
            for name, x in cache.items()
        }
