"""Model APIs for LOT's understanding tasks (ClozeT, SenPos): a softmax over candidates.

`CandidatePointerModel` is the paper's method for every family (Guan et al. 2022,
section 5.2): the input encoded once, each candidate's state dotted with the context's
state (`cmrcx.models.heads.CandidatePointer`; encoder-decoders: the decoder's states of
the input fed to both stacks). A batch (int32, leading axis [batch]):
  input_ids, token_type_ids, input_mask: [batch, length]   (T5: token types unused)
  candidate_positions, candidate_mask: [batch, candidates] (mask 1 = a real candidate)
  context_position: [batch]
  label: [batch] index of the right candidate (training)
  example_mask: [batch], 0 for padding rows
`cmrcx.benchmarks.lot.understanding` lays the records out so (one layout per task and
vocabulary kind), and the positions index input_ids.

`LongLMAuthorsClozeModel` is the LongLM authors' released ClozeT training step
(`lot_clozet_longlm_authors`), on a seq2seq batch: inputs, inputs_mask [batch, source];
targets, targets_mask [batch, target] (targets = source + gold sentinel + EOS); the
candidate and context positions index the decoder input shift_right(targets).

Padded candidate slots get MASKED_LOGIT before the softmax, so they never win and add
nothing to the loss; losses are sums over real rows (`summed_cross_entropy`).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from cmrcx.model_api.base import TOKEN_KEYS, apply_head, init_head, summed_cross_entropy
from cmrcx.model_api.multiple_choice import MASKED_LOGIT
from cmrcx.models import heads, registry
from cmrcx.models.common import shift_right

POINTER_KEYS = ("candidate_positions", "candidate_mask", "context_position")


class CandidatePointerModel:
    """Candidates' states dotted with the context's state, softmax over real candidates.

    network: a `heads.CandidatePointer` (`registry.network(config, "candidate_pointer")`),
    for any family: its parameters are the family's network's alone, under
    params[<family name>] (`encoder_name`), which a pretrained export fills whole.
    """

    score_keys = (*TOKEN_KEYS, *POINTER_KEYS, "example_mask")
    train_keys = (*score_keys, "label")

    def __init__(self, network: heads.CandidatePointer, max_length: int, num_candidates: int):
        self.module, self.max_length, self.num_candidates = network, max_length, num_candidates
        self.encoder_name = network.states.name

    def example_batch(self, batch_size: int) -> dict[str, np.ndarray]:
        batch = {k: np.zeros([batch_size, self.max_length], np.int32) for k in TOKEN_KEYS}
        batch["candidate_positions"] = np.zeros([batch_size, self.num_candidates], np.int32)
        batch["candidate_mask"] = np.ones([batch_size, self.num_candidates], np.int32)
        for key in ("context_position", "label"):
            batch[key] = np.zeros([batch_size], np.int32)
        batch["example_mask"] = np.ones([batch_size], np.int32)
        return batch

    def init(self, rng: jax.Array, batch: dict):
        return init_head(self.module, rng, batch, "candidate_positions", "context_position")

    def _candidate_logits(self, params, batch, dropout_rng=None):
        logits = apply_head(
            self.module, params, batch, dropout_rng, "candidate_positions", "context_position"
        )
        return jnp.where(batch["candidate_mask"] > 0, logits, MASKED_LOGIT)

    def loss_fn(self, params, batch: dict, dropout_rng: jax.Array | None):
        """Summed cross-entropy over the real candidates to the label, and counts."""
        logits = self._candidate_logits(params, batch, dropout_rng)
        return summed_cross_entropy(logits, batch["label"], batch["example_mask"])

    def score_batch(self, params, batch: dict) -> jax.Array:
        """Candidate logits: float32 [batch, candidates], MASKED_LOGIT at padded slots."""
        return self._candidate_logits(params, batch)


# The authors' constants (LOT-LongLM baselines/understanding/finetune.py): the weight of the
# LM loss in the total (:211) and the logit of a non-candidate position (:184).
AUTHORS_LM_WEIGHT = 1e-20
AUTHORS_MASKED_LOGIT = -1e20
SEQ2SEQ_KEYS = ("inputs", "inputs_mask", "targets", "targets_mask")


class LongLMAuthorsClozeModel:
    """The LongLM authors' ClozeT step (LOT-LongLM `baselines/understanding/finetune.py`
    `_step`, :157-212; the same logits in `eval.py`:47-66), for `lot_clozet_longlm_authors`.

    The encoder reads the source `plot0<extra_id_1>plot1<extra_id_2>LEFT<sep>RIGHT<mask>`
    + EOS, the decoder shift_right(targets), targets = source + gold sentinel + EOS
    (`cmrcx.benchmarks.lot.understanding.clozet_longlm_authors`); no decoder padding mask,
    as theirs (causal attention keeps padding out of every real position). H = the
    decoder's final states (after the final layer norm). Logits: H at the position whose
    input is `<mask>` (context_position) dotted with H at the positions whose input is a
    sentinel before it (candidate_positions; their code finds them as ids >= 32000),
    raw, in float32; padded slots get their -1e20. Loss per batch, as theirs:
        1e-20 * LM cross-entropy (mean over the batch's real target tokens)
        + loss_cls = -mean over rows of log_softmax(logits)[gold],
    returned as a sum over real rows (examples = rows), so the trainer's mean is theirs.
    Their loss_cls sums log_softmax over every position whose input is the gold id
    before `<mask>`: one, the gold candidate. The LM term moves nothing in float32
    (1e-20 of a gradient is below its resolution, and 0 in their fp16): the signal is
    the pointer's; it is kept for parity. With gradient accumulation its token mean is
    per micro-batch.

    network: the family's encoder-decoder (`registry.network(config, "seq2seq")`, T5),
    params under params[<family name>] like `Seq2SeqModel`'s.
    """

    score_keys = (*SEQ2SEQ_KEYS, *POINTER_KEYS, "example_mask")
    train_keys = (*score_keys, "label")

    def __init__(
        self, network: nn.Module, input_length: int, target_length: int, num_candidates: int = 2
    ):
        self.module, self.config = network, network.config
        self.input_length, self.target_length = input_length, target_length
        self.num_candidates = num_candidates
        self.encoder_name = registry.family_of(self.config).name

    def example_batch(self, batch_size: int) -> dict[str, np.ndarray]:
        lengths = {"inputs": self.input_length, "targets": self.target_length}
        batch = {
            k: np.zeros([batch_size, lengths[k.split("_")[0]]], np.int32) for k in SEQ2SEQ_KEYS
        }
        batch["candidate_positions"] = np.zeros([batch_size, self.num_candidates], np.int32)
        batch["candidate_mask"] = np.ones([batch_size, self.num_candidates], np.int32)
        for key in ("context_position", "label"):
            batch[key] = np.zeros([batch_size], np.int32)
        batch["example_mask"] = np.ones([batch_size], np.int32)
        return batch

    def init(self, rng: jax.Array, batch: dict):
        variables = self.module.init(
            rng, batch["inputs"], batch["inputs_mask"], self._decoder_inputs(batch)
        )
        return {"params": {self.encoder_name: variables["params"]}}

    def _decoder_inputs(self, batch: dict) -> jax.Array:
        """shift_right(targets), as transformers' `T5ForConditionalGeneration._shift_right`."""
        return shift_right(
            batch["targets"], self.config.decoder_start_token_id, self.config.pad_token_id
        )

    def _states_and_lm_logits(self, params, batch: dict, dropout_rng=None, lm: bool = True):
        """(decoder states [batch, target, d_model], LM logits float32 [batch, target, vocab]
        or None when not `lm`)."""
        deterministic = dropout_rng is None

        def run(module, inputs, inputs_mask, decoder_inputs):
            encoded = module.encode(inputs, inputs_mask, deterministic)
            states = module.decoder_states(
                decoder_inputs, encoded, inputs_mask, None, deterministic
            )
            return states, module.logits(states) if lm else None

        return self.module.apply(
            {"params": params[self.encoder_name]},
            batch["inputs"],
            batch["inputs_mask"],
            self._decoder_inputs(batch),
            method=run,
            rngs=None if deterministic else {"dropout": dropout_rng},
        )

    @staticmethod
    def _pointer_logits(states, batch: dict) -> jax.Array:
        """float32 [batch, candidates]: H[candidate] . H[context], -1e20 at padded slots."""
        candidates = jnp.take_along_axis(states, batch["candidate_positions"][..., None], axis=1)
        context = jnp.take_along_axis(states, batch["context_position"][:, None, None], axis=1)
        logits = jnp.einsum(
            "bcd,bd->bc",
            candidates.astype(jnp.float32),
            context[:, 0].astype(jnp.float32),
            precision=jax.lax.Precision.HIGHEST,
        )
        return jnp.where(batch["candidate_mask"] > 0, logits, AUTHORS_MASKED_LOGIT)

    def loss_fn(self, params, batch: dict, dropout_rng: jax.Array | None):
        """Their loss x real rows (see the class docstring), and counts."""
        states, lm_logits = self._states_and_lm_logits(params, batch, dropout_rng)
        logits = self._pointer_logits(states, batch)
        loss_sum, metrics = summed_cross_entropy(logits, batch["label"], batch["example_mask"])
        token_weights = (batch["targets_mask"] * batch["example_mask"][:, None]).astype(jnp.float32)
        token_losses = optax.softmax_cross_entropy_with_integer_labels(lm_logits, batch["targets"])
        lm_mean = jnp.sum(token_losses * token_weights) / jnp.maximum(jnp.sum(token_weights), 1)
        loss_sum = loss_sum + AUTHORS_LM_WEIGHT * lm_mean * metrics["examples"]
        return loss_sum, {**metrics, "loss_sum": loss_sum}

    def score_batch(self, params, batch: dict) -> jax.Array:
        """Candidate logits: float32 [batch, candidates] (argmax: the predicted candidate)."""
        states, _ = self._states_and_lm_logits(params, batch, lm=False)
        return self._pointer_logits(states, batch)
