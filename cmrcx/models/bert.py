"""BERT encoder in Flax Linen, with logical axis names on every parameter.

Module and parameter names follow the original BERT / HuggingFace layout
(embeddings, attention query/key/value/output, intermediate, output, pooler)
so checkpoint converters are a renaming table. The layers are one scanned
module, `layers`, whose parameters carry a leading [num_layers] axis. No gin, data,
optimizer or mesh here: sharding is the rules table in `cmrcx.training.partitioning`.
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

# What a transformer layer keeps for the backward pass (jax.checkpoint policies).
# "none": everything (fastest, most memory); "full": only the layer's input, all
# else recomputed; "dots": the outputs of the dense projections (matmuls with no
# batch dimension) are kept, attention scores, softmax, GeLU and LayerNorm recomputed.
REMAT_POLICIES = {
    "none": None,
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


# The feed-forward activations of the released BERT-shaped checkpoints, by their
# config.json `hidden_act` name: BERT, BERT-wwm and the RoBERTa-wwm models use the exact
# erf GeLU (transformers' "gelu"); ERNIE 1.0 uses ReLU (nghuyong/ernie-1.0-base-zh).
ACTIVATIONS = {
    "gelu": functools.partial(nn.gelu, approximate=False),
    "relu": nn.relu,
}


def check_compute_options(dtype: str, remat_policy: str) -> None:
    """ValueError unless dtype is float32/bfloat16 and remat_policy one of REMAT_POLICIES."""
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"dtype {dtype!r}: use 'float32' or 'bfloat16'")
    if remat_policy not in REMAT_POLICIES:
        raise ValueError(f"remat_policy {remat_policy!r}: use one of {', '.join(REMAT_POLICIES)}")


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


# Kernel initialisers by name, both with stddev initializer_range: Google's TF BERT
# draws truncated normals; the CLUE PyTorch baselines' `init_bert_weights`
# (mrc_pytorch/pytorch_modeling.py), which build the span and multiple-choice heads,
# draw plain normals.
KERNEL_INITS = {
    "truncated_normal": nn.initializers.truncated_normal,
    "normal": nn.initializers.normal,
}


def _init(config: BertConfig, axes: tuple[str, ...], kind: str = "truncated_normal"):
    return nn.with_logical_partitioning(KERNEL_INITS[kind](config.initializer_range), axes)


def _zeros(axes: tuple[str, ...]):
    return nn.with_logical_partitioning(nn.initializers.zeros_init(), axes)


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
    init: the kernel's initialiser, a key of KERNEL_INITS; the bias starts at zero.
    """
    return nn.DenseGeneral(
        features,
        axis=axis,
        dtype=jnp.dtype(dtype or config.dtype),
        name=name,
        kernel_init=_init(config, (in_axis, *out_axes), init),
        bias_init=_zeros(out_axes),
    )


def _layer_norm(config: BertConfig, name: str):
    return nn.LayerNorm(
        epsilon=config.layer_norm_eps,
        dtype=jnp.dtype(config.dtype),
        name=name,
        scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
        bias_init=_zeros(("embed",)),
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


class BertSelfAttention(nn.Module):
    config: BertConfig

    @nn.compact
    def __call__(self, hidden, attention_bias, deterministic: bool):
        """hidden: [batch, length, hidden]; attention_bias: [batch, 1, 1, length]."""
        cfg = self.config
        shape = (cfg.num_heads, cfg.head_dim)
        query, key, value = (
            _dense(cfg, shape, "embed", ("heads", "kv"), name)(hidden)
            for name in ("query", "key", "value")
        )
        query = query / jnp.sqrt(cfg.head_dim).astype(query.dtype)
        scores = jnp.einsum("bqhd,bkhd->bhqk", query, key) + attention_bias.astype(query.dtype)
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
            bias_init=_zeros(("embed",)),
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
        inner = ACTIVATIONS[cfg.hidden_act](inner)
        out = _dense(cfg, cfg.hidden_size, "mlp", ("embed",), "output")(inner)
        out = nn.Dropout(cfg.hidden_dropout)(out, deterministic=deterministic)
        hidden = _layer_norm(cfg, "output_LayerNorm")(hidden + out)
        return nn.with_logical_constraint(hidden, ("batch", "length", "embed")), None


def _stacked_layers(cfg: BertConfig, deterministic: bool, name: str) -> nn.Module:
    """All `num_layers` blocks as one scanned module: parameters [layers, ...].

    A scan compiles the block once (not once per layer), and with a remat
    policy the backward pass keeps only what the policy saves per layer, which
    XLA honours on every backend (unrolled remat is free to be undone on CPU).
    """
    block = BertLayer
    if cfg.remat_policy != "none":
        block = nn.remat(block, policy=REMAT_POLICIES[cfg.remat_policy], prevent_cse=False)
    return nn.scan(
        block,
        variable_axes={"params": 0},
        split_rngs={"params": True, "dropout": True},
        in_axes=nn.broadcast,
        length=cfg.num_layers,
        metadata_params={nn.PARTITION_NAME: "layers"},
    )(cfg, deterministic, name=name)


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


class BertForSentenceCloze(nn.Module):
    """The paper's cloze head: a learned vector (Dense to 1) dotted with each state.

    Returns blank_logits: float32 [batch, max_blanks], the logit at the token of
    each blank marker (positions given), as in the authors' `qa_outputs` layer.
    The softmax over the window's blanks happens in the loss, masked to blanks.

    The head computes in float32 whatever config.dtype is: bfloat16 logits near 10
    are 1/16 apart, so candidates closer than that would tie or swap.
    """

    config: BertConfig

    @nn.compact
    def __call__(
        self, input_ids, token_type_ids, input_mask, blank_positions, deterministic: bool = True
    ):
        hidden, _ = BertEncoder(self.config, name="bert")(
            input_ids, token_type_ids, input_mask, deterministic
        )
        # Only the blank markers' states are scored: gather them first, then cast.
        blank_hidden = jnp.take_along_axis(hidden, blank_positions[..., None], axis=1)
        blank_hidden = blank_hidden.astype(jnp.float32)  # [batch, max_blanks, hidden]
        head = _dense(self.config, 1, "embed", ("cloze_out",), "cloze_head", dtype="float32")
        return head(blank_hidden)[..., 0]  # [batch, max_blanks]


class BertForSequenceClassification(nn.Module):
    """The CLUE baselines' classifier: pooled [CLS] -> dropout -> linear.

    As transformers' BertForSequenceClassification (which CLUE's PyTorch classifier
    runs) and the TF baseline's `create_model`: the pooler's tanh(Dense([CLS])), dropout
    at the hidden dropout rate, one Dense to `num_classes`. Returns logits, float32
    [batch, num_classes]; the head computes in float32 whatever config.dtype is.
    """

    config: BertConfig
    num_classes: int

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        _, pooled = BertEncoder(self.config, name="bert")(
            input_ids, token_type_ids, input_mask, deterministic
        )
        pooled = nn.Dropout(self.config.hidden_dropout)(pooled, deterministic=deterministic)
        head = _dense(
            self.config, self.num_classes, "embed", ("classes",), "classifier", dtype="float32"
        )
        return head(pooled.astype(jnp.float32))


class BertForQuestionAnswering(nn.Module):
    """Span extraction (CMRC 2018): every token's state -> linear -> start and end logits.

    As transformers' BertForQuestionAnswering and the CLUE PyTorch baseline's
    (mrc_pytorch/pytorch_modeling.py): one Dense(hidden, 2) `qa_outputs` on the last
    hidden states, no dropout before it (the baseline leaves it commented out, as
    Google's run_squad.py has none). Returns float32 [batch, 2, length]: row 0 the start
    logits, row 1 the end logits, padding positions included (neither masks them). The
    head computes in float32 whatever config.dtype is. The encoder's pooler is built
    (checkpoints carry it) but unused, as in the baseline.
    """

    config: BertConfig

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        """input_ids, token_type_ids, input_mask: int [batch, length] (mask 1 = real token)."""
        hidden, _ = BertEncoder(self.config, name="bert")(
            input_ids, token_type_ids, input_mask, deterministic
        )
        head = _dense(
            self.config, 2, "embed", ("classes",), "qa_outputs", dtype="float32", init="normal"
        )
        logits = head(hidden.astype(jnp.float32))  # [batch, length, 2]
        return jnp.moveaxis(logits, -1, 1)  # [batch, 2, length]


class BertForMultipleChoice(nn.Module):
    """Multiple choice (C3, ChID): one score per (context, choice) sequence.

    As transformers' BertForMultipleChoice and the CLUE PyTorch baseline's: the
    [batch, choices, length] inputs run as [batch * choices, length] sequences, each
    pooled [CLS] -> dropout (hidden dropout rate) -> Dense(hidden, 1) `classifier`.
    Returns float32 [batch, choices]; the softmax over choices (and the masking of
    padded choices) belongs to the loss. The head computes in float32.
    """

    config: BertConfig

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        """input_ids, token_type_ids, input_mask: int [batch, choices, length]."""
        batch, choices, length = input_ids.shape
        flat = [x.reshape(batch * choices, length) for x in (input_ids, token_type_ids, input_mask)]
        _, pooled = BertEncoder(self.config, name="bert")(*flat, deterministic)
        pooled = nn.Dropout(self.config.hidden_dropout)(pooled, deterministic=deterministic)
        head = _dense(
            self.config, 1, "embed", ("classes",), "classifier", dtype="float32", init="normal"
        )
        return head(pooled.astype(jnp.float32)).reshape(batch, choices)
