"""Task heads over any encoder: sentence cloze, classification, span, multiple choice, and
the candidate pointer over any family's token states.

An encoder is a Flax module called as
    encoder(input_ids, token_type_ids, input_mask, deterministic) -> (hidden, pooled)
with int inputs [batch, length] (mask 1 = real token), hidden [batch, length, width] and
pooled [batch, width] (BERT: tanh(Dense([CLS])), `cmrcx.models.bert.BertEncoder`). A head
is given the encoder module, named: its parameters live under that name (the family's,
"bert"), beside the head's own layer, so a checkpoint's tree is
{<encoder name>: ..., <head layer>: {kernel, bias}}. The families' registry rows
(`cmrcx.models.registry`) build the encoders and give the heads their dropout rate and
initialiser stddev.

The candidate pointer (LOT ClozeT / SenPos) runs over a family's *token states* instead:
a module called as
    states(input_ids, token_type_ids, input_mask, deterministic) -> states
with states [batch, length, width] (or an encoder's (hidden, pooled), whose hidden it
takes): the registry row's `token_states` (T5: `cmrcx.models.t5.T5TokenStates`, the
decoder's states of the input fed to both stacks), else the family's encoder.

Every head computes in float32 whatever the encoder's dtype: bfloat16 logits near 10 are
1/16 apart, so candidates closer than that would tie or swap.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from cmrcx.models.common import kernel_init, zeros_init


def _head_dense(features: int, out_axis: str, name: str, init_std: float, init: str):
    """A float32 DenseGeneral on the last axis: kernel ("embed", out_axis), zero bias."""
    return nn.DenseGeneral(
        features,
        dtype=jnp.float32,
        name=name,
        kernel_init=kernel_init(init_std, ("embed", out_axis), init),
        bias_init=zeros_init((out_axis,)),
    )


class _Head(nn.Module):
    """The encoder keeps the name it was built with (the family's), not "encoder"."""

    preserve_adopted_names = True  # flax: an adopted module keeps its own name


class SentenceCloze(_Head):
    """The CMRC 2019 paper's cloze head: a learned vector (Dense to 1) dotted with each state.

    Returns blank_logits: float32 [batch, max_blanks], the logit at the token of each
    blank marker (positions given), as in the authors' `qa_outputs` layer. The softmax
    over the window's blanks happens in the loss, masked to blanks.
    """

    encoder: nn.Module
    init_std: float  # the head kernel's truncated-normal stddev (BERT: initializer_range)

    @nn.compact
    def __call__(
        self, input_ids, token_type_ids, input_mask, blank_positions, deterministic: bool = True
    ):
        hidden, _ = self.encoder(input_ids, token_type_ids, input_mask, deterministic)
        # Only the blank markers' states are scored: gather them first, then cast.
        blank_hidden = jnp.take_along_axis(hidden, blank_positions[..., None], axis=1)
        blank_hidden = blank_hidden.astype(jnp.float32)  # [batch, max_blanks, hidden]
        head = _head_dense(1, "cloze_out", "cloze_head", self.init_std, "truncated_normal")
        return head(blank_hidden)[..., 0]  # [batch, max_blanks]


class SequenceClassification(_Head):
    """The CLUE baselines' classifier: pooled [CLS] -> dropout -> linear.

    As transformers' BertForSequenceClassification (which CLUE's PyTorch classifier
    runs) and the TF baseline's `create_model`: the pooled output, dropout (BERT: at the
    hidden dropout rate), one Dense to `num_classes`. Returns logits, float32
    [batch, num_classes].
    """

    encoder: nn.Module
    num_classes: int
    dropout_rate: float  # on the pooled output (BERT: hidden_dropout)
    init_std: float  # the classifier's truncated-normal stddev (BERT: initializer_range)

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        _, pooled = self.encoder(input_ids, token_type_ids, input_mask, deterministic)
        pooled = nn.Dropout(self.dropout_rate)(pooled, deterministic=deterministic)
        head = _head_dense(
            self.num_classes, "classes", "classifier", self.init_std, "truncated_normal"
        )
        return head(pooled.astype(jnp.float32))


class SpanExtraction(_Head):
    """Span extraction (CMRC 2018): every token's state -> linear -> start and end logits.

    As transformers' BertForQuestionAnswering and the CLUE PyTorch baseline's
    (mrc_pytorch/pytorch_modeling.py): one Dense(hidden, 2) `qa_outputs` on the last
    hidden states, no dropout before it (the baseline leaves it commented out, as
    Google's run_squad.py has none). Returns float32 [batch, 2, length]: row 0 the start
    logits, row 1 the end logits, padding positions included (neither masks them). The
    encoder's pooled output is computed (checkpoints carry the pooler) but unused, as in
    the baseline.
    """

    encoder: nn.Module
    init_std: float  # the head kernel's normal stddev (the baseline's init_bert_weights)

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        """input_ids, token_type_ids, input_mask: int [batch, length] (mask 1 = real token)."""
        hidden, _ = self.encoder(input_ids, token_type_ids, input_mask, deterministic)
        head = _head_dense(2, "classes", "qa_outputs", self.init_std, "normal")
        logits = head(hidden.astype(jnp.float32))  # [batch, length, 2]
        return jnp.moveaxis(logits, -1, 1)  # [batch, 2, length]


class MultipleChoice(_Head):
    """Multiple choice (C3, ChID): one score per (context, choice) sequence.

    As transformers' BertForMultipleChoice and the CLUE PyTorch baseline's: the
    [batch, choices, length] inputs run as [batch * choices, length] sequences, each
    pooled output -> dropout -> Dense(width, 1) `classifier`. Returns float32
    [batch, choices]; the softmax over choices (and the masking of padded choices)
    belongs to the loss.
    """

    encoder: nn.Module
    dropout_rate: float  # on the pooled output (BERT: hidden_dropout)
    init_std: float  # the classifier's normal stddev (the baseline's init_bert_weights)

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        """input_ids, token_type_ids, input_mask: int [batch, choices, length]."""
        batch, choices, length = input_ids.shape
        flat = [x.reshape(batch * choices, length) for x in (input_ids, token_type_ids, input_mask)]
        _, pooled = self.encoder(*flat, deterministic)
        pooled = nn.Dropout(self.dropout_rate)(pooled, deterministic=deterministic)
        head = _head_dense(1, "classes", "classifier", self.init_std, "normal")
        return head(pooled.astype(jnp.float32)).reshape(batch, choices)


class CandidatePointer(_Head):
    """LOT's understanding method (Guan et al. 2022, section 5.2): the input encoded once, a
    softmax over the dot products of each candidate's state with the context's state.

    ClozeT: a candidate's state is the one at the end of the candidate, the context's the
    one at the removed sentence's place; SenPos: each candidate position's state against
    the one at the end of the removed sentence (`cmrcx.benchmarks.lot.understanding` puts
    marker tokens there and gives their positions). The paper describes no layer on top
    ("dot products between the candidate representations and the context
    representation"): this head has no parameters of its own, the family's network is
    all there is (params {<family name>: ...}, so a pretrained export fills it whole).

    Returns float32 [batch, candidates]: dot(states[candidate_positions], states[context_
    position]) in float32 whatever the network's dtype. The softmax over candidates (and
    the masking of padded candidate slots) belongs to the loss.
    """

    states: nn.Module  # the family's token states (see the module docstring), named

    @nn.compact
    def __call__(
        self,
        input_ids,
        token_type_ids,
        input_mask,
        candidate_positions,
        context_position,
        deterministic: bool = True,
    ):
        """input_ids, token_type_ids, input_mask: int [batch, length]; candidate_positions:
        int [batch, candidates]; context_position: int [batch] (indices into length)."""
        states = self.states(input_ids, token_type_ids, input_mask, deterministic)
        if isinstance(states, tuple):  # an encoder's (hidden, pooled): the last layer's states
            states = states[0]
        # Only the marked states are scored: gather first, then cast.
        candidates = jnp.take_along_axis(states, candidate_positions[..., None], axis=1)
        context = jnp.take_along_axis(states, context_position[:, None, None], axis=1)[:, 0]
        return jnp.einsum(
            "bcd,bd->bc",
            candidates.astype(jnp.float32),
            context.astype(jnp.float32),
            precision=jax.lax.Precision.HIGHEST,  # TPUs multiply float32 in bf16 passes otherwise
        )
