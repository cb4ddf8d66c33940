"""XLNet encoder in Flax Linen: the fine-tuning path, with logical axis names on every parameter.

What transformers' `XLNetModel` computes when it fine-tunes (no `perm_mask`, no
`target_mapping`, no memory): the content stream only (two-stream attention is for
pretraining), bidirectional relative positional attention (`attn_type="bi"`,
`bi_data=False`) with the relative segment encoding, post-LayerNorm blocks. `mask_emb`
(the query stream's input) is not part of this network. Parameter names follow
transformers' (word_embedding, rel_attn q/k/v/o/r, r_w_bias, r_r_bias, r_s_bias,
seg_embed, layer_norm; ff layer_1/layer_2/layer_norm), so `cmrcx.weights.xlnet` is a
renaming table; the blocks are one scanned module, `layers` ([num_layers, ...]).

The encoder returns (hidden, pooled) for the task heads of `cmrcx.models.heads`. pooled
is transformers' `XLNetSequenceSummary` as XLNet's configs set it (summary_type "last",
summary_use_proj, summary_activation "tanh"): tanh(Dense(state of the last token)). The
last token is `<cls>`, inputs being left-padded (`a <sep> b <sep> <cls>`). The heads
then add the summary's last dropout (`summary_last_dropout`) and their linear layer,
which makes XLNetForSequenceClassification (logits_proj) and XLNetForMultipleChoice;
the span head on `hidden` is XLNetForQuestionAnsweringSimple (qa_outputs).

Source: transformers 5 `models/xlnet/modeling_xlnet.py` (XLNetRelativeAttention,
XLNetFeedForward, XLNetModel.relative_positional_encoding and forward,
XLNetSequenceSummary). One difference when training: transformers draws a dropout mask
for the positional encoding per example ([2L, batch, d_model]); here one mask is shared
by the batch ([2L, d_model]). Deterministic outputs are the same.
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from cmrcx.models.common import check_compute_options, kernel_init, scanned_layers, zeros_init

# Feed-forward activations by their config.json `ff_activation` name (transformers'
# ACT2FN): "gelu" is the exact erf GeLU (Chinese XLNet's xlnet_config.json), "gelu_new"
# the tanh approximation.
ACTIVATIONS = {
    "gelu": functools.partial(nn.gelu, approximate=False),
    "gelu_new": functools.partial(nn.gelu, approximate=True),
    "relu": nn.relu,
}


@dataclasses.dataclass(frozen=True)
class XLNetConfig:
    """Geometry of an XLNet encoder. Defaults: Chinese XLNet-mid (ymcui/Chinese-PreTrained-XLNet,
    hfl/chinese-xlnet-mid: 24 layers, hidden 768, 12 heads, SentencePiece 32000)."""

    vocab_size: int = 32000  # spiece.model pieces
    d_model: int = 768  # width of every token vector
    num_layers: int = 24  # transformer blocks (config.json n_layer)
    num_heads: int = 12  # attention heads (n_head); d_model % num_heads == 0
    d_inner: int = 3072  # feed-forward width
    ff_activation: str = "gelu"  # a key of ACTIVATIONS
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1  # embeddings, positional encoding, attention probs and outputs, FFN
    clamp_len: int = -1  # relative distances clamped to +-clamp_len; -1: none
    summary_last_dropout: float = 0.1  # on the sequence summary, before the task head's layer
    initializer_range: float = 0.02  # stddev of the normal init
    dtype: str = "float32"  # compute dtype; "bfloat16": bf16 compute, float32 parameters
    remat_policy: str = "none"  # recompute layer activations in backprop: none | full | dots

    def __post_init__(self):
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model {self.d_model} is not divisible by num_heads {self.num_heads}"
            )
        if self.ff_activation not in ACTIVATIONS:
            raise ValueError(
                f"ff_activation {self.ff_activation!r}: use one of {', '.join(ACTIVATIONS)}"
            )
        check_compute_options(self.dtype, self.remat_policy)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


def _init(config: XLNetConfig, axes: tuple[str, ...]):
    # transformers' XLNetPreTrainedModel._init_weights: normal(initializer_range) for every
    # weight, zero biases, LayerNorm ones.
    return kernel_init(config.initializer_range, axes, "normal")


def _dense(config: XLNetConfig, features: int, axes: tuple[str, str], name: str):
    return nn.DenseGeneral(
        features,
        dtype=jnp.dtype(config.dtype),
        name=name,
        kernel_init=_init(config, axes),
        bias_init=zeros_init(axes[1:]),
    )


def _layer_norm(config: XLNetConfig, name: str):
    return nn.LayerNorm(
        epsilon=config.layer_norm_eps,
        dtype=jnp.dtype(config.dtype),
        name=name,
        scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
        bias_init=zeros_init(("embed",)),
    )


def relative_positions(config: XLNetConfig, length: int) -> jax.Array:
    """The sinusoid encoding of the relative distances length, length-1, ..., 1-length.

    float32 [2 * length, d_model], sin then cos halves: transformers'
    `relative_positional_encoding` for attn_type "bi" without memory (klen = qlen).
    """
    inv_freq = 1.0 / (10000.0 ** (jnp.arange(0, config.d_model, 2.0) / config.d_model))
    distances = jnp.arange(length, -length, -1.0)
    if config.clamp_len > 0:
        distances = jnp.clip(distances, -config.clamp_len, config.clamp_len)
    sinusoid = distances[:, None] * inv_freq[None, :]
    return jnp.concatenate([jnp.sin(sinusoid), jnp.cos(sinusoid)], axis=-1)


def rel_shift(scores: jax.Array, length: int) -> jax.Array:
    """[b, n, i, 2L] scores against every relative distance -> [b, n, i, j] against i - j.

    transformers' `rel_shift_bnij`: the same reshapes, so the same numbers.
    """
    batch, heads, queries, positions = scores.shape
    shifted = scores.reshape(batch, heads, positions, queries)[:, :, 1:, :]
    return shifted.reshape(batch, heads, queries, positions - 1)[..., :length]


class XLNetRelativeAttention(nn.Module):
    """transformers' XLNetRelativeAttention, content stream: attention + output + LayerNorm."""

    config: XLNetConfig

    @nn.compact
    def __call__(self, hidden, positions, other_segment, may_attend, deterministic: bool):
        """hidden [b, L, d]; positions [2L, d]; other_segment, may_attend bool [b, L, L]."""
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        shape = (cfg.d_model, cfg.num_heads, cfg.head_dim)
        axes = ("embed", "heads", "kv")
        q, k, v, o, r = (
            self.param(name, _init(cfg, axes), shape, jnp.float32).astype(dtype)
            for name in ("q", "k", "v", "o", "r")
        )
        bias_shape, bias_axes = (cfg.num_heads, cfg.head_dim), ("heads", "kv")
        r_w_bias, r_r_bias, r_s_bias = (
            self.param(name, _init(cfg, bias_axes), bias_shape, jnp.float32).astype(dtype)
            for name in ("r_w_bias", "r_r_bias", "r_s_bias")
        )
        seg_embed = self.param(
            "seg_embed", _init(cfg, ("token_type", "heads", "kv")), (2, *bias_shape), jnp.float32
        ).astype(dtype)

        query = jnp.einsum("bie,end->bind", hidden, q)
        key = jnp.einsum("bje,end->bjnd", hidden, k)
        value = jnp.einsum("bje,end->bjnd", hidden, v)
        key_r = jnp.einsum("pe,end->pnd", positions.astype(dtype), r)
        query = nn.with_logical_constraint(query, ("batch", "length", "heads", "kv"))
        # Always these einsums, never `jax.nn.dot_product_attention` (cmrcx.models.attention):
        # its one query . key product plus a bias would need the position and segment terms
        # below, which depend on the query, materialised as a [b, heads, L, L] bias: the
        # size of the scores a fused kernel avoids, with their gradient through the bias.
        content = jnp.einsum("bind,bjnd->bnij", query + r_w_bias, key)
        position = rel_shift(jnp.einsum("bind,pnd->bnip", query + r_r_bias, key_r), hidden.shape[1])
        # Segment term: one score per (query, same / other segment), picked per key.
        segment = jnp.einsum("bind,snd->bnis", query + r_s_bias, seg_embed)
        segment = jnp.where(other_segment[:, None], segment[..., 1:], segment[..., :1])
        scores = (content + position + segment).astype(jnp.float32) / jnp.sqrt(cfg.head_dim)
        # transformers subtracts 1e30 where masked: zero weight after the softmax.
        scores = jnp.where(may_attend[:, None], scores, -1e30)
        probs = jax.nn.softmax(scores, axis=-1).astype(dtype)
        probs = nn.Dropout(cfg.dropout)(probs, deterministic=deterministic)
        context = jnp.einsum("bnij,bjnd->bind", probs, value)
        out = jnp.einsum("bind,end->bie", context, o)
        out = nn.Dropout(cfg.dropout)(out, deterministic=deterministic)
        return _layer_norm(cfg, "layer_norm")(out + hidden)


class XLNetLayer(nn.Module):
    """One block (relative attention, then the feed-forward); (hidden, None) for `nn.scan`."""

    config: XLNetConfig
    deterministic: bool = True

    @nn.compact
    def __call__(self, hidden, positions, other_segment, may_attend):
        cfg, deterministic = self.config, self.deterministic
        hidden = XLNetRelativeAttention(cfg, name="rel_attn")(
            hidden, positions, other_segment, may_attend, deterministic
        )
        inner = _dense(cfg, cfg.d_inner, ("embed", "mlp"), "layer_1")(hidden)
        inner = nn.with_logical_constraint(inner, ("batch", "length", "mlp"))
        inner = nn.Dropout(cfg.dropout)(ACTIVATIONS[cfg.ff_activation](inner), deterministic)
        out = _dense(cfg, cfg.d_model, ("mlp", "embed"), "layer_2")(inner)
        out = nn.Dropout(cfg.dropout)(out, deterministic=deterministic)
        hidden = _layer_norm(cfg, "ff_layer_norm")(out + hidden)
        return nn.with_logical_constraint(hidden, ("batch", "length", "embed")), None


def _stacked_layers(cfg: XLNetConfig, deterministic: bool, name: str) -> nn.Module:
    """All `num_layers` blocks as one scanned module: parameters [layers, ...] (as BERT's)."""
    in_axes = (nn.broadcast, nn.broadcast, nn.broadcast)
    layers = scanned_layers(XLNetLayer, cfg.remat_policy, cfg.num_layers, in_axes)
    return layers(cfg, deterministic, name=name)


class XLNetEncoder(nn.Module):
    """Token ids -> (hidden states [batch, length, d_model], sequence summary [batch, d_model])."""

    config: XLNetConfig

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        """input_ids, token_type_ids, input_mask: int [batch, length] (mask 1 = real token).

        token_type_ids only say which tokens share a segment (the relative segment
        encoding): XLNet's 0 (a), 1 (b), 2 (`<cls>`); padding's value does not matter.
        Inputs are left-padded, so that the last token is `<cls>` (the summary's).
        """
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        length = input_ids.shape[1]
        embed = nn.Embed(
            cfg.vocab_size,
            cfg.d_model,
            dtype=dtype,
            name="word_embedding",
            embedding_init=_init(cfg, ("vocab", "embed")),
        )
        hidden = nn.Dropout(cfg.dropout)(embed(input_ids), deterministic=deterministic)
        hidden = nn.with_logical_constraint(hidden, ("batch", "length", "embed"))
        positions = nn.Dropout(cfg.dropout)(
            relative_positions(cfg, length), deterministic=deterministic
        )
        other_segment = token_type_ids[:, :, None] != token_type_ids[:, None, :]
        # A query attends to every real token, and to itself even when it is padding
        # (transformers' non_tgt_mask for the content stream).
        may_attend = (input_mask[:, None, :] > 0) | jnp.eye(length, dtype=bool)[None]
        hidden, _ = _stacked_layers(cfg, deterministic, "layers")(
            hidden, positions, other_segment, may_attend
        )
        hidden = nn.Dropout(cfg.dropout)(hidden, deterministic=deterministic)
        summary = _dense(cfg, cfg.d_model, ("embed", "embed_out"), "sequence_summary")
        return hidden, nn.tanh(summary(hidden[:, -1]))
