"""BERT encoder in Flax Linen, with logical axis names on every parameter.

Module and parameter names follow the original BERT / HuggingFace layout
(embeddings, attention query/key/value/output, intermediate, output, pooler)
so checkpoint converters are a renaming table. The layers are one scanned
module, `layers`, whose parameters carry a leading [num_layers] axis. The task heads
(cloze, classification, span, multiple choice) are `cmrcx.models.heads` over
`BertEncoder`, which the registry row (`cmrcx.models.registry`) names "bert". No gin,
data, optimizer or mesh here: sharding is the rules table in `cmrcx.training.partitioning`.
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from cmrcx.cpu import inference as cpu_inference
from cmrcx.models import attention
from cmrcx.models.common import (
    check_compute_options,
    kernel_init,
    low_precision_dot_general,
    scanned_layers,
    zeros_init,
)

# The feed-forward activations of the released BERT-shaped checkpoints, by their
# config.json `hidden_act` name: BERT, BERT-wwm and the RoBERTa-wwm models use the exact
# erf GeLU (transformers' "gelu"); ERNIE 1.0 uses ReLU (nghuyong/ernie-1.0-base-zh). ALBERT
# (cmrcx.models.albert, which runs this module's layer) adds transformers' "gelu_new", the
# tanh approximation that the `gelu` of Google's and brightmart's ALBERT modeling.py computes.
ACTIVATIONS = {
    "gelu": functools.partial(nn.gelu, approximate=False),
    "relu": nn.relu,
    "gelu_new": functools.partial(nn.gelu, approximate=True),
}


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Geometry of a BERT encoder. Defaults: bert-base-chinese's config.json."""

    vocab_size: int = 21128  # bert-base-chinese vocab.txt
    hidden_size: int = 768  # width of every token vector
    num_layers: int = 12  # transformer blocks
    num_heads: int = 12  # attention heads; hidden_size % num_heads == 0
    intermediate_size: int = 3072  # feed-forward width (4 x hidden in BERT)
    max_position_embeddings: int = 512  # longest input, in tokens
    type_vocab_size: int = 2  # segment ids: 0 = candidate, 1 = passage
    hidden_dropout: float = 0.1  # after embeddings, attention output and FFN
    attention_dropout: float = 0.1  # on attention probabilities
    layer_norm_eps: float = 1e-12  # BERT's LayerNorm epsilon (ERNIE 1.0: 1e-5)
    hidden_act: str = "gelu"  # feed-forward activation, a key of ACTIVATIONS (ERNIE 1.0: "relu")
    initializer_range: float = 0.02  # stddev of the truncated-normal init
    dtype: str = "float32"  # compute dtype; "bfloat16": bf16 compute, float32 parameters
    remat_policy: str = "none"  # recompute layer activations in backprop: none | full | dots

    def __post_init__(self):
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act {self.hidden_act!r}: use one of {', '.join(ACTIVATIONS)}")
        check_compute_options(self.dtype, self.remat_policy)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


def _init(config: BertConfig, axes: tuple[str, ...], kind: str = "truncated_normal"):
    return kernel_init(config.initializer_range, axes, kind)


def _dense(
    config: BertConfig,
    features,
    in_axis: str,
    out_axes: tuple[str, ...],
    name: str,
    axis=-1,
    dtype: str | None = None,
    init: str = "truncated_normal",
):
    """DenseGeneral with logical names on kernel (in_axis, *out_axes) and bias.

    dtype: compute dtype, config.dtype unless given (parameters are float32 either way).
    init: the kernel's initialiser, a key of `common.KERNEL_INITS`; the bias starts at zero.
    """
    return nn.DenseGeneral(
        features,
        axis=axis,
        dtype=jnp.dtype(dtype or config.dtype),
        name=name,
        kernel_init=_init(config, (in_axis, *out_axes), init),
        bias_init=zeros_init(out_axes),
        dot_general=low_precision_dot_general,
    )


def _layer_norm(config: BertConfig, name: str):
    return nn.LayerNorm(
        epsilon=config.layer_norm_eps,
        dtype=jnp.dtype(config.dtype),
        name=name,
        scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
        bias_init=zeros_init(("embed",)),
    )


class BertEmbeddings(nn.Module):
    config: BertConfig

    @nn.compact
    def __call__(self, input_ids, token_type_ids, deterministic: bool):
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        positions = jnp.arange(input_ids.shape[-1])[None, :]
        embeds = [
            nn.Embed(
                size,
                cfg.hidden_size,
                dtype=dtype,
                name=name,
                embedding_init=_init(cfg, (axis, "embed")),
            )(ids)
            for name, size, axis, ids in (
                ("word_embeddings", cfg.vocab_size, "vocab", input_ids),
                ("position_embeddings", cfg.max_position_embeddings, "position", positions),
                ("token_type_embeddings", cfg.type_vocab_size, "token_type", token_type_ids),
            )
        ]
        hidden = _layer_norm(cfg, "LayerNorm")(embeds[0] + embeds[1] + embeds[2])
        hidden = nn.with_logical_constraint(hidden, ("batch", "length", "embed"))
        return nn.Dropout(cfg.hidden_dropout)(hidden, deterministic=deterministic)


class _ProjectionParams(nn.Module):
    """The kernel [embed, heads, kv] and bias [heads, kv] of one attention projection,
    as `_dense(config, (heads, kv), "embed", ("heads", "kv"), name)` declares them: same
    names, logical axes and initial values (the kernel drawn [embed, heads * kv] and
    reshaped, as DenseGeneral does)."""

    config: BertConfig

    @nn.compact
    def __call__(self):
        cfg = self.config
        shape = (cfg.hidden_size, cfg.num_heads, cfg.head_dim)
        init = _init(cfg, ("embed", "heads", "kv"))

        def kernel_init(rng, shape, dtype=jnp.float32):
            flat = init(rng, (shape[0], shape[1] * shape[2]), dtype)
            return nn.meta.replace_boxed(flat, flat.unbox().reshape(shape))

        kernel = self.param("kernel", kernel_init, shape, jnp.float32)
        return kernel, self.param("bias", zeros_init(("heads", "kv")), shape[1:], jnp.float32)


def _fused_projection(config: BertConfig, hidden, params):
    """Several attention projections of one input as one matmul.

    hidden: [batch, length, embed]; params: (kernel [embed, heads, kv], bias [heads, kv])
    of each projection. Returns one [batch, length, heads, kv] per projection.

    The parameters stay one module per projection (the checkpoints' layout); their
    kernels are concatenated along the heads axis, so the step runs one [tokens, embed] x
    [embed, n * embed] matmul (and one of each in backprop) instead of n narrower ones,
    which XLA on CPU runs nearer the matmul peak. Each output element is the same dot
    product as before.
    """
    dtype = jnp.dtype(config.dtype)
    kernel = jnp.concatenate([kernel for kernel, _ in params], axis=1).astype(dtype)
    bias = jnp.concatenate([bias for _, bias in params], axis=0).astype(dtype)
    fused = low_precision_dot_general(hidden.astype(dtype), kernel, (((2,), (0,)), ((), ())))
    fused = fused + bias
    return jnp.split(fused, len(params), axis=2)


class BertSelfAttention(nn.Module):
    config: BertConfig

    @nn.compact
    def __call__(self, hidden, attention_bias, deterministic: bool):
        """hidden: [batch, length, hidden]; attention_bias: [batch, 1, 1, length]."""
        cfg = self.config
        projections = [_ProjectionParams(cfg, name=name)() for name in ("query", "key", "value")]
        query, key, value = _fused_projection(cfg, hidden, projections)
        query = query / jnp.sqrt(cfg.head_dim).astype(query.dtype)
        if attention.use_dot_product(not deterministic and cfg.attention_dropout > 0):
            # GPU/TPU (or as configured): the fused kernel; query is already scaled.
            context = attention.dot_product_attention(query, key, value, bias=attention_bias)
        elif cpu_inference.applies(deterministic):
            # Scoring on one CPU device (cmrcx.cpu): a few heads at a time.
            context = cpu_inference.attention_by_head(query, key, value, attention_bias)
        else:
            scores = jnp.einsum("bqhd,bkhd->bhqk", query, key)
            scores = scores + attention_bias.astype(query.dtype)
            probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(query.dtype)
            probs = nn.Dropout(cfg.attention_dropout)(probs, deterministic=deterministic)
            context = jnp.einsum("bhqk,bkhd->bqhd", probs, value)
        context = nn.with_logical_constraint(context, ("batch", "length", "heads", "kv"))
        out = nn.DenseGeneral(
            cfg.hidden_size,
            axis=(-2, -1),
            dtype=jnp.dtype(cfg.dtype),
            name="output",
            kernel_init=_init(cfg, ("heads", "kv", "embed")),
            bias_init=zeros_init(("embed",)),
            dot_general=low_precision_dot_general,
        )(context)
        return nn.Dropout(cfg.hidden_dropout)(out, deterministic=deterministic)


class BertLayer(nn.Module):
    """One transformer block; (hidden, None) so that `nn.scan` can stack the layers."""

    config: BertConfig
    deterministic: bool = True

    @nn.compact
    def __call__(self, hidden, attention_bias):
        cfg, deterministic = self.config, self.deterministic
        attended = BertSelfAttention(cfg, name="attention")(hidden, attention_bias, deterministic)
        hidden = _layer_norm(cfg, "attention_LayerNorm")(hidden + attended)
        inner = _dense(cfg, cfg.intermediate_size, "embed", ("mlp",), "intermediate")(hidden)
        inner = nn.with_logical_constraint(inner, ("batch", "length", "mlp"))
        if cpu_inference.applies(deterministic):  # scoring on one CPU device (cmrcx.cpu)
            inner = cpu_inference.activation_apart(ACTIVATIONS[cfg.hidden_act], inner)
        else:
            inner = ACTIVATIONS[cfg.hidden_act](inner)
        out = _dense(cfg, cfg.hidden_size, "mlp", ("embed",), "output")(inner)
        out = nn.Dropout(cfg.hidden_dropout)(out, deterministic=deterministic)
        hidden = _layer_norm(cfg, "output_LayerNorm")(hidden + out)
        return nn.with_logical_constraint(hidden, ("batch", "length", "embed")), None


def _stacked_layers(cfg: BertConfig, deterministic: bool, name: str) -> nn.Module:
    """All `num_layers` blocks as one scanned module: parameters [layers, ...]
    (`common.scanned_layers`), unrolled unless a remat policy is set."""
    layers = scanned_layers(BertLayer, cfg.remat_policy, cfg.num_layers, unrolled=True)
    return layers(cfg, deterministic, name=name)


class BertEncoder(nn.Module):
    """Token ids -> (hidden states [batch, length, hidden], pooled [batch, hidden])."""

    config: BertConfig

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        """input_ids, token_type_ids, input_mask: int [batch, length] (mask 1 = real token)."""
        cfg = self.config
        hidden = BertEmbeddings(cfg, name="embeddings")(input_ids, token_type_ids, deterministic)
        # Additive mask: 0 where attended, the most negative float where padding.
        attention_bias = jnp.where(
            input_mask[:, None, None, :] > 0, 0.0, jnp.finfo(jnp.dtype(cfg.dtype)).min
        )
        hidden, _ = _stacked_layers(cfg, deterministic, "layers")(hidden, attention_bias)
        pooled = nn.tanh(
            _dense(cfg, cfg.hidden_size, "embed", ("embed_out",), "pooler")(hidden[:, 0])
        )
        return hidden, pooled
