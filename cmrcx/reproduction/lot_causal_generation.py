"""GPT-2 on LOT's generation tasks (OutGen, PlotCom) in PyTorch: transformers'
GPT2LMHeadModel fine-tuned on prompt -> continuation, trained by finetune_trainer.py's
recipe (`lot_generation`: transformers' Trainer defaults as that script sets them).

Which parts are whose:
  - the recipe's (longlm/finetune_trainer.py, thu-coai/LOT-LongLM @cea3543; `lot_generation`
    cites it line by line): transformers' AdamW (no weight decay), the linear schedule
    with the run's warm-up over the Trainer's step count, the global gradient norm
    clipped before each update, the loss the model returns for `labels` (the mean
    cross-entropy over the batch's labelled tokens), greedy `generate`;
  - the family's framing (cmrcx's, `cmrcx.model_api.causal_lm`; the paper gives no GPT-2
    input format and the LOT authors released no GPT-2 code, LOT-LongLM @cea3543 holding
    T5 scripts only): the row is the prompt (cmrcx's inputs, `[CLS] SOURCE [SEP]`) then the
    continuation (its targets, `TARGET [SEP]`), labels on the continuation alone (-100 on
    the prompt and the padding, transformers' ignore index), right-padded; generation
    continues the prompt.

What the comparison substitutes: the examples are cmrcx's batches (its token ids, its
seeded order); both sides run float32 with every dropout 0.
"""

from __future__ import annotations

import numpy as np

from cmrcx.common.errors import ConfigError
from cmrcx.reproduction import lot_generation, recipe_updates
from cmrcx.reproduction.reference_imports import torch_and_transformers

IGNORE_INDEX = -100  # transformers' CrossEntropyLoss ignore_index for `labels`


def reference_gpt2(config, params: dict, out: str):
    """transformers' GPT2LMHeadModel holding `params` (cmrcx's GPT-2 tree), written to
    `out` by cmrcx's HF writer; every dropout 0, float32."""
    torch, transformers = torch_and_transformers()
    from cmrcx.models import registry
    from cmrcx.weights import gpt2 as gpt2_weights

    family = registry.family_of(config).name
    if family != "gpt2":
        raise ConfigError(f"the LOT prompt -> continuation recipe trains GPT-2; not {family}")
    gpt2_weights.write_hf_dir(out, params, config, None)
    transformers.logging.set_verbosity_error()
    model = transformers.GPT2LMHeadModel.from_pretrained(out, dtype=torch.float32)
    return lot_generation.without_dropout(torch, model)


def collate(torch, batch: dict, pad_id: int) -> dict:
    """A cmrcx seq2seq batch's real rows as prompt + continuation: input_ids,
    attention_mask, labels int64 [rows, longest row] (labels -100 off the continuation)."""
    rows = np.flatnonzero(batch["example_mask"])
    if not len(rows):
        raise ConfigError("a cmrcx batch without real rows: nothing for the recipe to train on")
    ids, labels = [], []
    for r in rows:
        prompt = batch["inputs"][r][batch["inputs_mask"][r] > 0]
        continuation = batch["targets"][r][batch["targets_mask"][r] > 0]
        ids.append(np.concatenate([prompt, continuation]))
        labels.append(np.concatenate([np.full(len(prompt), IGNORE_INDEX), continuation]))
    mask = [np.ones(len(row), np.int64) for row in ids]
    return {
        "input_ids": torch.tensor(lot_generation.padded(ids, pad_id), dtype=torch.int64),
        "attention_mask": torch.tensor(lot_generation.padded(mask, 0), dtype=torch.int64),
        "labels": torch.tensor(lot_generation.padded(labels, IGNORE_INDEX), dtype=torch.int64),
    }


class CausalGenerationRecipe:
    """finetune_trainer.py's training of GPT-2 on prompt -> continuation, set up from a
    cmrcx `lot_outgen` / `lot_plotcom` GPT-2 run."""

    def __init__(self, ours, hf_dir: str):
        run = ours.runner.run
        self.run, self.ours = run, ours
        self.model = reference_gpt2(run.model, ours.initial_params["gpt2"], hf_dir)
        self.pad_id = int(run.model.pad_token_id)

    def train(self, batches) -> recipe_updates.RecipeRun:
        torch, _ = torch_and_transformers()
        run = self.run

        def total(records: int) -> int:
            return lot_generation.trainer_total_steps(
                records, run.batch_size, run.num_epochs, 1, run.num_train_steps or 0
            )

        hyper = lot_generation.run_hyper(self.ours, total, "generation")
        factor = lot_generation.linear_factor(hyper["warmup_steps"], hyper["total_steps"])

        def loss(batch):
            return self.model(**collate(torch, batch, self.pad_id)).loss

        return recipe_updates.updates(self.model, batches, loss, factor, hyper)

    def greedy(self, sources: list[np.ndarray], max_new_tokens: int) -> np.ndarray:
        """transformers' greedy continuation of each prompt (`lot_generation.greedy`)."""
        return lot_generation.greedy(self.model, sources, None, max_new_tokens, self.pad_id)
