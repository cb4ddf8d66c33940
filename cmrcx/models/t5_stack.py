"""The layers of a T5 in Flax Linen: `T5Config`, RMS LayerNorm, the relative position
bias, attention, the feed-forward and the block, and `T5Stack`, one encoder or decoder
stack. The whole model (its LM head, teacher forcing, incremental decoding) is
`cmrcx.models.t5`, whose docstring gives the semantics (transformers' `modeling_t5.py`).

Each stack's layers are one scanned module, `layers`, whose parameters carry a leading
[num_layers] axis; the decoder's `step` mode runs them unrolled, one token against a
key/value cache of one entry per layer, over per-layer weight slices (`cmrcx.cpu.decode`).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from cmrcx.cpu import decode as cpu_decode
from cmrcx.models import attention
from cmrcx.models.common import (
    check_compute_options,
    low_precision_dot_general,
    scanned_layers,
)

FEED_FORWARD_PROJ = ("relu", "gated-gelu")  # T5 v1.0 (LongLM) | T5 v1.1, mT5


@dataclasses.dataclass(frozen=True)
class T5Config:
    """Geometry of a T5. Defaults: transformers' T5Config (t5-small, a v1.0 model)."""

    vocab_size: int = 32128  # sentencepiece pieces + 100 sentinels (+ padding to x128)
    d_model: int = 512  # width of every token vector
    d_kv: int = 64  # width of one attention head (need not be d_model / num_heads)
    d_ff: int = 2048  # feed-forward inner width
    num_layers: int = 6  # encoder blocks
    num_decoder_layers: int | None = None  # decoder blocks; None: num_layers
    num_heads: int = 8  # attention heads
    relative_attention_num_buckets: int = 32  # rows of the relative position bias table
    relative_attention_max_distance: int = 128  # distances beyond share the last bucket
    dropout_rate: float = 0.1  # embeddings, sublayer outputs, attention probs, FFN inner
    layer_norm_epsilon: float = 1e-6  # RMS LayerNorm epsilon
    feed_forward_proj: str = "relu"  # "relu" (v1.0, LongLM) | "gated-gelu" (v1.1, mT5)
    tie_word_embeddings: bool = True  # LM head = shared embedding (v1.0) | own matrix
    scale_decoder_outputs: bool | None = None  # x d_model**-0.5 before the head; None: if tied
    # Special ids: the tokenizer's "<pad>" and "</s>" (T5: 0 and 1; LongLM's spiece.model,
    # Chinese XLNet's: 5 and 2). Padding is never found by its id: masks say what is real.
    pad_token_id: int = 0  # fills after EOS; decoder input at padded label positions
    eos_token_id: int = 1  # end of sequence "</s>": decoding stops at it
    decoder_start_token_id: int = 0  # first decoder input (shift_right); T5: pad
    dtype: str = "float32"  # compute dtype; "bfloat16": bf16 compute, float32 parameters
    remat_policy: str = "none"  # recompute layer activations in backprop: none | full | dots

    def __post_init__(self):
        if self.num_decoder_layers is None:
            object.__setattr__(self, "num_decoder_layers", self.num_layers)
        if self.scale_decoder_outputs is None:
            object.__setattr__(self, "scale_decoder_outputs", self.tie_word_embeddings)
        if self.feed_forward_proj not in FEED_FORWARD_PROJ:
            raise ValueError(
                f"feed_forward_proj {self.feed_forward_proj!r}: use one of "
                + ", ".join(FEED_FORWARD_PROJ)
            )
        check_compute_options(self.dtype, self.remat_policy)

    @property
    def is_gated(self) -> bool:
        return self.feed_forward_proj.startswith("gated-")


def normal_init(std: float, axes: tuple[str, ...]):
    return nn.with_logical_partitioning(nn.initializers.normal(std), axes)


def _dense(cfg: T5Config, features, in_axes, out_axes: tuple[str, ...], std: float, name=None):
    """Bias-free DenseGeneral; kernel (*in_axes, *out_axes), normal(std) as HF initialises.

    in_axes: a logical name (contract the last input axis) or a tuple of names
    (contract that many trailing axes). name: None inside `setup` (the attribute names it).
    """
    in_axes = (in_axes,) if isinstance(in_axes, str) else in_axes
    return nn.DenseGeneral(
        features,
        axis=tuple(range(-len(in_axes), 0)),
        use_bias=False,
        dtype=jnp.dtype(cfg.dtype),
        name=name,
        kernel_init=normal_init(std, (*in_axes, *out_axes)),
        dot_general=low_precision_dot_general,
    )


class T5LayerNorm(nn.Module):
    """RMS LayerNorm: x / sqrt(mean(x^2) + eps) * scale, in float32; no mean, no bias."""

    config: T5Config

    @nn.compact
    def __call__(self, hidden):
        cfg = self.config
        scale = self.param(
            "scale",
            nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
            (cfg.d_model,),
            jnp.float32,
        )
        hidden = hidden.astype(jnp.float32)
        variance = jnp.mean(jnp.square(hidden), axis=-1, keepdims=True)
        hidden = hidden * jax.lax.rsqrt(variance + cfg.layer_norm_epsilon)
        return (scale * hidden).astype(jnp.dtype(cfg.dtype))


def relative_position_bucket(
    relative_position: jax.Array, bidirectional: bool, num_buckets: int, max_distance: int
) -> jax.Array:
    """int [...] (key position - query position) -> int32 bucket in [0, num_buckets).

    HF's `T5Attention._relative_position_bucket`, from Mesh TensorFlow: half the
    buckets (per direction when bidirectional) are exact distances 0..max_exact-1,
    the rest logarithmically wider bins up to max_distance; beyond, the last bin.
    Causal (decoder): keys after the query (positive distance) all fall in bucket 0.
    The float32 log matches torch's bucket for every distance in +-5000 (checked).
    """
    buckets = jnp.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).astype(relative_position.dtype) * num_buckets
        distance = jnp.abs(relative_position)
    else:
        distance = -jnp.minimum(relative_position, 0)
    max_exact = num_buckets // 2
    # max(distance, 1): the log branch is discarded below max_exact, but log(0) would be -inf.
    log_ratio = jnp.log(jnp.maximum(distance, 1).astype(jnp.float32) / max_exact)
    if_large = max_exact + (
        log_ratio / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).astype(relative_position.dtype)
    if_large = jnp.minimum(if_large, num_buckets - 1)
    return (buckets + jnp.where(distance < max_exact, distance, if_large)).astype(jnp.int32)


class RelativePositionBias(nn.Module):
    """The stack's learned bias table [buckets, heads] -> bias float32 [1, heads, q, k]."""

    config: T5Config
    bidirectional: bool  # True in the encoder, False (causal buckets) in the decoder

    @nn.compact
    def __call__(self, query_positions, key_positions):
        """query_positions: int [q]; key_positions: int [k] (absolute token positions)."""
        cfg = self.config
        buckets = relative_position_bucket(
            key_positions[None, :] - query_positions[:, None],
            self.bidirectional,
            cfg.relative_attention_num_buckets,
            cfg.relative_attention_max_distance,
        )
        table = self.param(
            "embedding",
            normal_init(cfg.d_model**-0.5, ("position", "heads")),
            (cfg.relative_attention_num_buckets, cfg.num_heads),
            jnp.float32,
        )
        return jnp.transpose(jnp.take(table, buckets, axis=0), (2, 0, 1))[None]  # [1, heads, q, k]


class T5Attention(nn.Module):
    """Multi-head attention without 1/sqrt(d_kv) scaling; self- or cross-attention.

    `key_value` and `attend` split the call so that a decoding step can attend
    to cached keys and values (see `T5Block`, mode "step").
    """

    config: T5Config
    deterministic: bool = True

    def setup(self):
        cfg = self.config
        heads = (cfg.num_heads, cfg.d_kv)
        d_model, inner = cfg.d_model, cfg.num_heads * cfg.d_kv
        # HF's init: q absorbs the 1/sqrt(d_kv) that T5 leaves out of the scores.
        self.q = _dense(cfg, heads, "embed", ("heads", "kv"), (d_model * cfg.d_kv) ** -0.5)
        self.k = _dense(cfg, heads, "embed", ("heads", "kv"), d_model**-0.5)
        self.v = _dense(cfg, heads, "embed", ("heads", "kv"), d_model**-0.5)
        self.o = _dense(cfg, d_model, ("heads", "kv"), ("embed",), inner**-0.5)
        self.dropout = nn.Dropout(cfg.dropout_rate)

    def key_value(self, states):
        """[batch, k, d_model] -> (key, value), each [batch, k, heads, d_kv]."""
        return self.k(states), self.v(states)

    def attend(self, hidden, key, value, position_bias, mask):
        """hidden: [batch, q, d_model]; key, value: [batch, k, heads, d_kv];
        position_bias: float32 [1, heads, q, k] or None; mask: bool [batch or 1, 1, q or 1, k]
        (True = attend). Returns [batch, q, d_model].
        """
        query = self.q(hidden)
        if attention.use_dot_product(not self.deterministic and self.config.dropout_rate > 0):
            # The relative position bias as the API's `bias` (T5 does not scale scores).
            context = attention.dot_product_attention(
                query, key, value, bias=position_bias, mask=mask
            )
        else:
            scores = jnp.einsum("bqhd,bkhd->bhqk", query, key).astype(jnp.float32)
            if position_bias is not None:
                scores = scores + position_bias
            scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
            probs = jax.nn.softmax(scores, axis=-1).astype(query.dtype)
            probs = self.dropout(probs, deterministic=self.deterministic)
            context = jnp.einsum("bhqk,bkhd->bqhd", probs, value)
        context = nn.with_logical_constraint(context, ("batch", "length", "heads", "kv"))
        return self.o(context)

    def __call__(self, hidden, key_value_states, position_bias, mask):
        """hidden: [batch, q, d_model]; key_value_states: [batch, k, d_model]; the rest as
        `attend`. Returns [batch, q, d_model].
        """
        return self.attend(hidden, *self.key_value(key_value_states), position_bias, mask)

    def attend_cached(self, hidden, keys, values, position_bias, mask):
        """`attend` against keys and values stored as a decoding cache stores them:
        keys [batch, heads, d_kv, k], values [batch, heads, k, d_kv] (`cache_layout`),
        the layouts XLA's batched matmuls read in place (keys [batch, k, heads, d_kv]
        would be transposed, copied, at every decoding step). Same products as `attend`.
        """
        query = jnp.swapaxes(self.q(hidden), 1, 2)  # [batch, heads, q, d_kv]
        scores = jnp.einsum("bhqd,bhdk->bhqk", query, keys).astype(jnp.float32)
        if position_bias is not None:
            scores = scores + position_bias
        scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
        probs = jax.nn.softmax(scores, axis=-1).astype(query.dtype)
        context = jnp.swapaxes(jnp.einsum("bhqk,bhkd->bhqd", probs, values), 1, 2)
        context = nn.with_logical_constraint(context, ("batch", "length", "heads", "kv"))
        return self.o(context)


def cache_layout(key, value):
    """key, value [batch, k, heads, d_kv] (`T5Attention.key_value`) -> the decoding
    cache's (keys [batch, heads, d_kv, k], values [batch, heads, k, d_kv])."""
    return jnp.transpose(key, (0, 2, 3, 1)), jnp.transpose(value, (0, 2, 1, 3))


class T5FeedForward(nn.Module):
    """wo(act(wi(x))) (ReLU, v1.0) or wo(gelu_new(wi_0(x)) * wi_1(x)) (gated, v1.1)."""

    config: T5Config
    deterministic: bool = True

    @nn.compact
    def __call__(self, hidden):
        cfg = self.config
        std_in = cfg.d_model**-0.5
        if cfg.is_gated:
            # HF's "gated-gelu" is gelu_new: the tanh approximation.
            gate = _dense(cfg, cfg.d_ff, "embed", ("mlp",), std_in, "wi_0")(hidden)
            linear = _dense(cfg, cfg.d_ff, "embed", ("mlp",), std_in, "wi_1")(hidden)
            inner = nn.gelu(gate, approximate=True) * linear
        else:
            inner = nn.relu(_dense(cfg, cfg.d_ff, "embed", ("mlp",), std_in, "wi")(hidden))
        inner = nn.with_logical_constraint(inner, ("batch", "length", "mlp"))
        inner = nn.Dropout(cfg.dropout_rate)(inner, deterministic=self.deterministic)
        return _dense(cfg, cfg.d_model, "mlp", ("embed",), cfg.d_ff**-0.5, "wo")(inner)


class T5Block(nn.Module):
    """One encoder block (self-attention, FFN) or decoder block (+ cross-attention).

    Returns (hidden, per-layer output) so that `nn.scan` can stack the blocks; the
    position bias and masks are the same for every block (broadcast). Modes:
    "full" (whole sequences; output None), "cross_cache" (decoder: only this
    block's cross-attention keys/values of the encoder states; hidden passes
    through) and "step" (decoder: one new token attending to this block's cached
    keys/values; output the self-attention cache with the new token written in).
    """

    config: T5Config
    is_decoder: bool = False
    deterministic: bool = True
    mode: str = "full"  # "full" | "cross_cache" | "step"

    @nn.compact
    def __call__(
        self,
        hidden,
        position_bias,
        self_mask,
        encoder_hidden,
        cross_mask,
        self_cache=None,
        cross_cache=None,
        index=None,
    ):
        """hidden: [batch, length (step: 1), d_model]. Step mode only: self_cache
        {"key" [batch, heads, d_kv, max_length], "value" [batch, heads, max_length, d_kv]}
        (`cache_layout`), cross_cache the same over the source, index: int32 [] (the new
        token's position, where it is written).
        """
        cfg, deterministic = self.config, self.deterministic
        if self.mode == "cross_cache":
            key, value = T5Attention(cfg, name="cross_attention").key_value(encoder_hidden)
            return hidden, {"key": key, "value": value}

        def residual(hidden, update):
            update = nn.Dropout(cfg.dropout_rate)(update, deterministic=deterministic)
            return nn.with_logical_constraint(hidden + update, ("batch", "length", "embed"))

        normed = T5LayerNorm(cfg, name="pre_self_attention_layer_norm")(hidden)
        self_attention = T5Attention(cfg, deterministic, name="self_attention")
        if self.mode == "step":
            key, value = cache_layout(*self_attention.key_value(normed))
            dtype = self_cache["key"].dtype
            self_cache = {  # written in place: the caller's buffers are the loop's
                "key": jax.lax.dynamic_update_slice_in_dim(
                    self_cache["key"], key.astype(dtype), index, axis=3
                ),
                "value": jax.lax.dynamic_update_slice_in_dim(
                    self_cache["value"], value.astype(dtype), index, axis=2
                ),
            }
            attended = self_attention.attend_cached(
                normed, self_cache["key"], self_cache["value"], position_bias, self_mask
            )
        else:
            attended = self_attention(normed, normed, position_bias, self_mask)
        hidden = residual(hidden, attended)
        if self.is_decoder:
            normed = T5LayerNorm(cfg, name="pre_cross_attention_layer_norm")(hidden)
            cross_attention = T5Attention(cfg, deterministic, name="cross_attention")
            if self.mode == "step":
                attended = cross_attention.attend_cached(
                    normed, cross_cache["key"], cross_cache["value"], None, cross_mask
                )
            else:
                attended = cross_attention(normed, encoder_hidden, None, cross_mask)
            hidden = residual(hidden, attended)
        normed = T5LayerNorm(cfg, name="pre_mlp_layer_norm")(hidden)
        hidden = residual(hidden, T5FeedForward(cfg, deterministic, name="mlp")(normed))
        return hidden, (self_cache if self.mode == "step" else None)


def _stacked_blocks(
    cfg: T5Config, is_decoder: bool, deterministic: bool, mode: str = "full"
) -> nn.Module:
    """All blocks of a stack as one scanned module `layers`: parameters [layers, ...].

    `common.scanned_layers`, remat in mode "full" only. Modes "full" and "cross_cache"
    (a decoding step runs the same parameters layer by layer: `T5Stack`, mode "step").
    """
    remat_policy = cfg.remat_policy if mode == "full" else "none"
    length = cfg.num_decoder_layers if is_decoder else cfg.num_layers
    layers = scanned_layers(T5Block, remat_policy, length)
    return layers(cfg, is_decoder, deterministic, mode, name="layers")


class T5Stack(nn.Module):
    """Embedded tokens -> final states of the encoder or the decoder [batch, length, d_model]."""

    config: T5Config
    is_decoder: bool = False

    @nn.compact
    def __call__(
        self,
        embedded,
        self_mask,
        encoder_hidden=None,
        cross_mask=None,
        deterministic=True,
        mode="full",
        cache=None,
        index=None,
    ):
        """embedded: [batch, length, d_model]; self_mask: bool [batch, 1, length or 1, length];
        encoder_hidden: [batch, source, d_model] and cross_mask: bool [batch, 1, 1, source]
        (decoder only). Decoder modes (see `T5Block`): "cross_cache" returns the stacked
        cross-attention {"key", "value"} [layers, batch, source, heads, d_kv] of
        encoder_hidden (other inputs unused) and the blocks' weight slices, one tree per
        layer (`cmrcx.cpu.decode.layer_slices`); "step" takes one token
        [batch, 1, d_model] at position `index` (int32 []), the cache of
        `T5ForConditionalGeneration.init_cache` (self_mask unused) and returns (states
        [batch, 1, d_model], updated cache).
        """
        cfg = self.config
        if mode == "cross_cache":
            _, cross = _stacked_blocks(cfg, True, True, mode)(
                jnp.zeros(()), None, None, encoder_hidden, None
            )
            layers = self.variables["params"]["layers"]
            return cross, cpu_decode.layer_slices(layers, cfg.num_decoder_layers)
        bias = RelativePositionBias(cfg, not self.is_decoder, name="relative_attention_bias")
        if mode == "step":
            # The new token (query at `index`) against every cache slot; later slots masked.
            key_positions = jnp.arange(cache["self"][0]["key"].shape[-1])
            position_bias = bias(jnp.reshape(index, [1]), key_positions)
            self_mask = (key_positions <= index)[None, None, None, :]
            # The blocks unrolled over the cache's weight slices (cmrcx.cpu.decode).
            hidden, self_cache = cpu_decode.unrolled_layers(
                functools.partial(T5Block, cfg, is_decoder=True, mode="step"),
                cache["layers"],
                embedded,
                {"self_cache": cache["self"], "cross_cache": cache["cross"]},
                position_bias=position_bias,
                self_mask=self_mask,
                encoder_hidden=None,
                cross_mask=cross_mask,
                index=index,
            )
            hidden = T5LayerNorm(cfg, name="final_layer_norm")(hidden)
            return hidden, {**cache, "self": self_cache}
        positions = jnp.arange(embedded.shape[1])
        position_bias = bias(positions, positions)
        hidden = nn.Dropout(cfg.dropout_rate)(embedded, deterministic=deterministic)
        hidden = nn.with_logical_constraint(hidden, ("batch", "length", "embed"))
        hidden, _ = _stacked_blocks(cfg, self.is_decoder, deterministic)(
            hidden, position_bias, self_mask, encoder_hidden, cross_mask
        )
        hidden = T5LayerNorm(cfg, name="final_layer_norm")(hidden)
        return nn.Dropout(cfg.dropout_rate)(hidden, deterministic=deterministic)
