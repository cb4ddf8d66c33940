"""The LOT paper's candidate pointer (ClozeT, SenPos) in PyTorch, trained by the LongLM
authors' understanding recipe, for every family of Table 10 (BERT, GPT-2, T5: LongLM, mT5).

Sources:
  [PAPER] Guan et al., LOT (TACL 2022), section 5.2: "dot products between the candidate
          representations and the context representation", a softmax over candidates
  [FT]    thu-coai/LOT-LongLM @cea3543 baselines/understanding/finetune.py: _step's
          classification loss (loss_cls = -mean over rows of log_softmax at the gold)
  [LB]    the same folder's lightning_base.py: configure_optimizers, get_lr_scheduler,
          total_steps (`lot_understanding`, whose docstring cites them line by line)

Which parts are whose:
  - the recipe's ([FT], [LB]): the loss is the mean over the batch's rows of the
    cross-entropy of the pointer's softmax to the gold candidate; transformers' AdamW (no
    weight decay: [LB]'s default), a linear schedule without warm-up over Lightning's
    fractional total_steps(), the global gradient norm clipped at 1.0 before each update
    (`recipe_updates.updates`, the same loop as `lot_understanding.ClozeTAuthorsRecipe`);
  - the family's framing (cmrcx's, `cmrcx.model_api.candidate_pointer.CandidatePointerModel`
    and `cmrcx.benchmarks.lot.understanding`'s layouts; the paper gives no layout):
    which states are dotted and where the markers stand. BERT: transformers' BertModel's
    last hidden states; GPT-2: GPT2Model's last hidden states (after ln_f; causal, so the
    layouts put the context token last); T5 (LongLM, mT5): the decoder's final states
    (decoder_hidden_states[-1]) with the input fed to both stacks, the decoder reading
    [decoder_start] + input (`cmrcx.models.t5.T5TokenStates`); padded candidate slots get
    `MASKED_LOGIT` before the softmax.
  - What the LOT authors' own code did: their only released understanding script is
    LongLM's (finetune.py, `lot_clozet_longlm_authors`, `lot_understanding`); no GPT-2,
    BERT or mT5 fine-tuning code of theirs is public (LOT-LongLM @cea3543 holds T5
    scripts only), so for those families the framing above is cmrcx's reading of the
    paper, and only the optimizer, schedule and loss form are the authors'.

What the comparison substitutes: the examples are cmrcx's batches (its layout, its seeded
order), fed to the PyTorch model cut to the batch's longest row; both sides run float32
with every dropout 0.
"""

from __future__ import annotations

import numpy as np

from cmrcx.common.errors import ConfigError
from cmrcx.model_api.multiple_choice import MASKED_LOGIT
from cmrcx.reproduction import lot_generation, lot_understanding, recipe_updates
from cmrcx.reproduction.reference_imports import torch_and_transformers

FAMILIES = ("bert", "gpt2", "t5")  # the families of Table 10's gins


def reference_states(config, params: dict, out: str, model_class: str | None = None):
    """transformers' model of the family holding `params` (cmrcx's tree of the family's
    network), written to `out` by the family's HF writer: BertModel, GPT2Model, or a T5
    (`model_class`, "MT5ForConditionalGeneration" for mT5). Every dropout 0, float32."""
    import importlib

    torch, transformers = torch_and_transformers()
    from cmrcx.models import registry

    family = registry.family_of(config).name
    if family not in FAMILIES:
        raise ConfigError(
            f"the LOT candidate-pointer recipe runs {', '.join(FAMILIES)}; not {family}"
        )
    if family == "t5":
        return lot_generation.reference_t5(config, params, out, model_class)
    importlib.import_module(f"cmrcx.weights.{family}").write_hf_dir(out, params, config, None)
    transformers.logging.set_verbosity_error()
    model = transformers.AutoModel.from_pretrained(out, dtype=torch.float32)
    lot_generation.without_dropout(torch, model)
    return model


def token_states(torch, model, input_ids, token_type_ids, input_mask):
    """The family's final state of every token: float [rows, length, width]."""
    if hasattr(model, "decoder"):  # T5: the decoder's states of [start] + input
        start = torch.full_like(input_ids[:, :1], model.config.decoder_start_token_id)
        outputs = model(
            input_ids=input_ids,
            attention_mask=input_mask,
            decoder_input_ids=torch.cat([start, input_ids], 1),
            decoder_attention_mask=torch.cat([torch.ones_like(start), input_mask], 1),
            output_hidden_states=True,
            use_cache=False,
        )
        return outputs.decoder_hidden_states[-1][:, 1:]
    if model.config.model_type == "gpt2":
        return model(input_ids=input_ids, attention_mask=input_mask).last_hidden_state
    return model(
        input_ids=input_ids, attention_mask=input_mask, token_type_ids=token_type_ids
    ).last_hidden_state


def pointer_logits(torch, model, batch: dict):
    """The pointer's logits of a cmrcx batch's real rows: float [rows, candidates],
    MASKED_LOGIT at padded candidate slots; and the rows' labels int64 [rows]."""
    rows = np.flatnonzero(batch["example_mask"])
    if not len(rows):
        raise ConfigError("a cmrcx batch without real rows: nothing for the recipe to train on")
    longest = int(np.max(np.sum(batch["input_mask"][rows] > 0, axis=1)))

    def tensor(key, cut=True):
        value = np.asarray(batch[key])[rows]
        return torch.tensor(value[:, :longest] if cut else value, dtype=torch.int64)

    states = token_states(
        torch, model, tensor("input_ids"), tensor("token_type_ids"), tensor("input_mask")
    )
    positions = tensor("candidate_positions", cut=False)
    index = positions[:, :, None].expand(-1, -1, states.shape[-1])
    candidates = torch.gather(states, 1, index)
    context = states[torch.arange(len(rows)), tensor("context_position", cut=False)]
    logits = torch.einsum("bcd,bd->bc", candidates, context)
    real = tensor("candidate_mask", cut=False) > 0
    logits = torch.where(real, logits, torch.full_like(logits, MASKED_LOGIT))
    return logits, tensor("label", cut=False) if "label" in batch else None


def pointer_loss(torch, model, batch: dict):
    """[FT] loss_cls: -mean over the real rows of log_softmax(logits) at the gold."""
    logits, labels = pointer_logits(torch, model, batch)
    gold = torch.log_softmax(logits, dim=-1).gather(1, labels[:, None])
    return -torch.mean(gold)


class PointerRecipe:
    """[LB]'s training of the candidate pointer, set up from a cmrcx `lot_clozet` /
    `lot_senpos` run: the same weights in transformers' model of the family."""

    def __init__(self, ours, hf_dir: str):
        run = ours.runner.run
        self.run, self.ours = run, ours
        encoder = ours.runner.model.encoder_name
        params = ours.initial_params[encoder]
        self.model = reference_states(run.model, params, hf_dir, lot_generation.t5_class(run))

    def train(self, batches) -> recipe_updates.RecipeRun:
        torch, _ = torch_and_transformers()
        hyper = lot_understanding.lightning_hyper(self.ours)
        factor = lot_generation.linear_factor(hyper["warmup_steps"], hyper["total_steps"])
        loss = lambda batch: pointer_loss(torch, self.model, batch)  # noqa: E731
        return recipe_updates.updates(self.model, batches, loss, factor, hyper)

    def predictions(self, batches) -> np.ndarray:
        """The argmax candidate of each real row: int [rows]."""
        torch, _ = torch_and_transformers()
        self.model.eval()
        with torch.no_grad():
            picked = [pointer_logits(torch, self.model, b)[0].argmax(1).numpy() for b in batches]
        return np.concatenate(picked)
