"""ALBERT encoder in Flax Linen: factorised embeddings, one layer shared by every layer.

ALBERT (Lan et al., ICLR 2020) is BERT with two changes that matter here: the token
embeddings are `embedding_size` wide (128) and projected to the hidden width, and one set
of transformer-layer parameters is applied `num_layers` times. The layer is BERT's
(`cmrcx.models.bert.BertLayer`: post-LayerNorm attention and feed-forward), run by an
`nn.scan` whose parameters are broadcast, not stacked: one copy in memory and in
checkpoints, whatever the depth.

The two Chinese releases the CLUE paper fine-tunes place the projection differently
(`embedding_layout`):

  "albert"     Google's ALBERT (google-research/albert modeling.py; transformers'
               AlbertModel): word, position and token-type embeddings all
               `embedding_size` wide, summed, LayerNorm, then a Dense with bias
               (`embedding_hidden_mapping_in`) to the hidden width.
  "albert_zh"  brightmart/albert_zh modeling.py (`embedding_lookup_factorized`): the word
               embedding alone is projected by a bias-free [embedding_size, hidden]
               matrix (`word_embeddings_2`); position and token-type embeddings are
               hidden-wide and added after it, then LayerNorm over the hidden width.

The task heads are `cmrcx.models.heads` over `AlbertEncoder`, which the registry row names
"albert". No gin, data, optimizer or mesh here.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax.numpy as jnp

from cmrcx.models.bert import ACTIVATIONS, BertConfig, BertLayer
from cmrcx.models.common import (
    REMAT_POLICIES,
    check_compute_options,
    kernel_init,
    low_precision_dot_general,
    zeros_init,
)

EMBEDDING_LAYOUTS = ("albert", "albert_zh")


@dataclasses.dataclass(frozen=True)
class AlbertConfig:
    """Geometry of an ALBERT encoder. Defaults: Google's albert_xxlarge_zh (albert_config.json
    of google-research/albert's Chinese release; see gin_configs/models/albert/xxlarge.gin)."""

    vocab_size: int = 21128  # Google's Chinese BERT vocab.txt (both Chinese ALBERT releases)
    embedding_size: int = 128  # width of the factorised token embeddings
    hidden_size: int = 4096  # width of every token vector after the projection
    num_layers: int = 12  # times the one shared layer is applied
    num_heads: int = 64  # attention heads; hidden_size % num_heads == 0
    intermediate_size: int = 16384  # feed-forward width
    max_position_embeddings: int = 512  # longest input, in tokens
    type_vocab_size: int = 2  # segment ids
    hidden_dropout: float = 0.0  # after embeddings, attention output and FFN (releases: 0)
    attention_dropout: float = 0.0  # on attention probabilities (releases: 0)
    classifier_dropout: float = 0.1  # before a task head (transformers' classifier_dropout_prob)
    layer_norm_eps: float = 1e-12
    hidden_act: str = "relu"  # a key of bert.ACTIVATIONS: relu | gelu (erf) | gelu_new (tanh)
    initializer_range: float = 0.02  # stddev of the truncated-normal init
    embedding_layout: str = "albert"  # "albert" (Google, transformers) | "albert_zh" (brightmart)
    dtype: str = "float32"  # compute dtype; "bfloat16": bf16 compute, float32 parameters
    remat_policy: str = "none"  # recompute the layer's activations in backprop: none | full | dots

    def __post_init__(self):
        if self.embedding_layout not in EMBEDDING_LAYOUTS:
            raise ValueError(
                f"embedding_layout {self.embedding_layout!r}: use one of "
                f"{', '.join(EMBEDDING_LAYOUTS)}"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act {self.hidden_act!r}: use one of {', '.join(ACTIVATIONS)}")
        check_compute_options(self.dtype, self.remat_policy)
        self.layer_config()  # hidden_size % num_heads

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def layer_config(self) -> BertConfig:
        """The shared layer's geometry, as the BERT layer it is."""
        return BertConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            hidden_dropout=self.hidden_dropout,
            attention_dropout=self.attention_dropout,
            layer_norm_eps=self.layer_norm_eps,
            hidden_act=self.hidden_act,
            initializer_range=self.initializer_range,
            dtype=self.dtype,
            remat_policy=self.remat_policy,
        )


def _dense(cfg: AlbertConfig, features: int, axes: tuple[str, str], name: str, use_bias=True):
    return nn.Dense(
        features,
        use_bias=use_bias,
        dtype=jnp.dtype(cfg.dtype),
        name=name,
        kernel_init=kernel_init(cfg.initializer_range, axes),
        bias_init=zeros_init(axes[1:]),
        dot_general=low_precision_dot_general,
    )


class AlbertEmbeddings(nn.Module):
    """Token ids -> [batch, length, hidden]: factorised embeddings, LayerNorm, projection."""

    config: AlbertConfig

    @nn.compact
    def __call__(self, input_ids, token_type_ids, deterministic: bool):
        cfg = self.config
        dtype = jnp.dtype(cfg.dtype)
        # The position and token-type tables are as wide as what they are added to.
        width = cfg.embedding_size if cfg.embedding_layout == "albert" else cfg.hidden_size

        def embed(name, rows, axis, features):
            return nn.Embed(
                rows,
                features,
                dtype=dtype,
                name=name,
                embedding_init=kernel_init(cfg.initializer_range, (axis, "embed")),
            )

        def project(name, use_bias=True):  # embedding_size -> hidden_size
            return _dense(cfg, cfg.hidden_size, ("embed", "embed_out"), name, use_bias)

        hidden = embed("word_embeddings", cfg.vocab_size, "vocab", cfg.embedding_size)(input_ids)
        if cfg.embedding_layout == "albert_zh":  # brightmart: the word embedding alone
            hidden = project("word_embeddings_2", use_bias=False)(hidden)
        positions = jnp.arange(input_ids.shape[-1])[None, :]
        position = embed("position_embeddings", cfg.max_position_embeddings, "position", width)
        token_type = embed("token_type_embeddings", cfg.type_vocab_size, "token_type", width)
        hidden = hidden + position(positions) + token_type(token_type_ids)
        hidden = nn.LayerNorm(
            epsilon=cfg.layer_norm_eps,
            dtype=dtype,
            name="LayerNorm",
            scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
            bias_init=zeros_init(("embed",)),
        )(hidden)
        hidden = nn.Dropout(cfg.hidden_dropout)(hidden, deterministic=deterministic)
        if cfg.embedding_layout == "albert":  # Google: the normalised sum
            hidden = project("embedding_hidden_mapping_in")(hidden)
        return nn.with_logical_constraint(hidden, ("batch", "length", "embed"))


def _shared_layer(cfg: AlbertConfig, deterministic: bool, name: str) -> nn.Module:
    """BERT's layer applied `num_layers` times with one set of parameters.

    `variable_broadcast="params"`: the scan reads the same parameters at every step (no
    [num_layers] axis), so ALBERT's sharing holds in memory and in checkpoints; dropout
    still draws a fresh mask per layer. The scan compiles the layer once; a remat policy
    applies per layer as in BERT.
    """
    block = BertLayer
    if cfg.remat_policy != "none":
        block = nn.remat(block, policy=REMAT_POLICIES[cfg.remat_policy], prevent_cse=False)
    return nn.scan(
        block,
        variable_broadcast="params",
        split_rngs={"params": False, "dropout": True},
        in_axes=nn.broadcast,
        length=cfg.num_layers,
    )(cfg.layer_config(), deterministic, name=name)


class AlbertEncoder(nn.Module):
    """Token ids -> (hidden states [batch, length, hidden], pooled [batch, hidden])."""

    config: AlbertConfig

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        """input_ids, token_type_ids, input_mask: int [batch, length] (mask 1 = real token)."""
        cfg = self.config
        hidden = AlbertEmbeddings(cfg, name="embeddings")(input_ids, token_type_ids, deterministic)
        # Additive mask: 0 where attended, the most negative float where padding.
        attention_bias = jnp.where(
            input_mask[:, None, None, :] > 0, 0.0, jnp.finfo(jnp.dtype(cfg.dtype)).min
        )
        hidden, _ = _shared_layer(cfg, deterministic, "layer")(hidden, attention_bias)
        pooled = nn.tanh(
            _dense(cfg, cfg.hidden_size, ("embed", "embed_out"), "pooler")(hidden[:, 0])
        )
        return hidden, pooled
