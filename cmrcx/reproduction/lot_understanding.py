"""The LongLM authors' ClozeT fine-tuning recipe, in PyTorch, for `lot_clozet_longlm_authors`.

Sources (thu-coai/LOT-LongLM @cea3543, baselines/understanding/):
  [FT]  finetune.py: SummarizationModule._step (the model's loss), training_step
  [LB]  lightning_base.py: BaseTransformer.configure_optimizers, get_lr_scheduler,
        total_steps, add_model_specific_args / add_generic_args (the defaults)
  [UT]  utils.py: Seq2SeqDataset.collate_fn (tokenizer.prepare_seq2seq_batch)
  [TR4] transformers 4.x optimization.py: AdamW, get_linear_schedule_with_warmup

What is the recipe's, line for line:
  - batch: [UT] collate_fn: prepare_seq2seq_batch(sources, targets) with its default
    padding "longest": input_ids, attention_mask and labels padded with the tokenizer's
    pad id (the `<pad>` piece);
  - the model: transformers' T5ForConditionalGeneration ([LB] __init__: AutoModelFor-
    Seq2SeqLM, mode "summarization"); [FT] _step: decoder_input_ids =
    model._shift_right(labels) (the model config's decoder_start_token_id first);
    H = decoder_hidden_states[-1]; mask1: positions whose decoder input is `<mask>`;
    mask2: positions before the first `<mask>` whose input is a sentinel (theirs:
    id >= 32000, LongLM's sentinels being its last ids 32000-32099;
    here the vocabulary's sentinel range, which is the same set for LongLM and keeps
    `<sep>`/`<mask>` out where a vocabulary appends them after the sentinels);
    logits = sum_i (H mask1)_i . (H mask2)_j, -1e20 off mask2; label = the target at
    `<mask>` (the gold sentinel); loss_cls = -mean over rows of the log-softmax at the
    positions before `<mask>` whose input is the gold; loss = 1e-20 * LM cross-entropy
    (ignore_index pad) + loss_cls;
  - optimizer: [LB] configure_optimizers: no_decay ["bias", "LayerNorm.weight"] (no T5
    parameter matches: weight decay 0, [LB]'s default, leaves every one alone), [TR4]
    AdamW(lr, eps=adam_epsilon) (`recipe_updates.adamw_step`: the same code);
  - schedule: [LB] get_lr_scheduler "linear" (its default), warmup_steps 0 (its default),
    num_training_steps = total_steps() = dataset_size / train_batch_size * max_epochs, a
    float (one GPU, no accumulation: finetune.sh); rate of update k: lr * max(0, (T - k)
    / max(1, T - warmup)) past the warm-up;
  - each update: Lightning's backward, clip_grad_norm_(parameters, gradient_clip_val)
    ([LB] --max_grad_norm, default 1.0), optimizer.step(), scheduler.step() (interval
    "step");
  - prediction: the argmax of the same logits (eval.py computes them the same way).

What the comparison substitutes: the examples are cmrcx's token ids in its seeded order
(not the DataLoader's shuffle); its real tokens are taken as prepare_seq2seq_batch's
(the layout is compared with the authors' source text in tests/benchmarks/lot/
test_lot_layouts.py, not here); the candidate and context positions and the label are
found from the ids as [FT] finds them, not taken from cmrcx. finetune.sh trains in fp16
(--fp16); both sides here run float32.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cmrcx.common.errors import ConfigError
from cmrcx.reproduction import lot_generation, recipe_updates
from cmrcx.reproduction.reference_imports import torch_and_transformers

LM_WEIGHT = 1e-20  # [FT] _step: loss = 1e-20 * loss + loss_cls
MASKED = 1e20  # [FT] _step: logits -= (1 - mask2) * 1e20


class AuthorsIds(NamedTuple):
    """The ids the authors' script reads from its tokenizer (<mask> and the sentinels'
    range from the run's `cmrcx.vocab.layouts` `T5.special_ids`)."""

    pad: int  # the tokenizer's pad id (`<pad>`): the collator's padding, the LM loss's
    # ignore_index ([FT] _step: self.tokenizer.pad_token_id)
    mask: int  # tokenizer.mask_token_id
    sentinel_low: int  # the sentinels' id range (theirs: >= 32000)
    sentinel_high: int


def collate(torch, batch: dict, pad_id: int) -> dict:
    """[UT] collate_fn on a cmrcx batch's real rows: input_ids, attention_mask, labels
    int64 (padding "longest", pad-filled)."""
    rows = np.flatnonzero(batch["example_mask"])
    if not len(rows):
        raise ConfigError("a cmrcx batch without real rows: nothing for the recipe to train on")
    sources = [batch["inputs"][r][batch["inputs_mask"][r] > 0] for r in rows]
    targets = [batch["targets"][r][batch["targets_mask"][r] > 0] for r in rows]
    mask = lot_generation.padded([np.ones(len(s), np.int64) for s in sources], 0)
    return {
        "input_ids": torch.tensor(lot_generation.padded(sources, pad_id), dtype=torch.int64),
        "attention_mask": torch.tensor(mask, dtype=torch.int64),
        "labels": torch.tensor(lot_generation.padded(targets, pad_id), dtype=torch.int64),
    }


def authors_step(torch, model, inputs: dict, ids: AuthorsIds):
    """[FT] _step (label smoothing 0): (loss, loss_cls, pointer logits float [rows, length])."""
    tgt_ids = inputs["labels"]
    decoder_input_ids = model._shift_right(tgt_ids)
    outputs = model(
        inputs["input_ids"],
        attention_mask=inputs["attention_mask"],
        decoder_input_ids=decoder_input_ids,
        output_hidden_states=True,
        use_cache=False,
    )
    hidden = outputs["decoder_hidden_states"][-1]
    mask1 = torch.eq(decoder_input_ids, ids.mask).float()
    mask2 = (decoder_input_ids >= ids.sentinel_low) & (decoder_input_ids <= ids.sentinel_high)
    mask2 = mask2.float()
    mask_tmp = torch.eq(torch.cumsum(mask1, 1).int(), 0).float()
    mask2 *= mask_tmp
    logits = torch.sum(
        torch.matmul(hidden * mask1[:, :, None], torch.transpose(hidden * mask2[:, :, None], 1, 2)),
        1,
    )
    logits = logits - (1 - mask2) * MASKED
    label = torch.sum(tgt_ids * mask1, 1).int()
    mask3 = torch.eq(decoder_input_ids, label[:, None]).float() * mask_tmp
    loss_cls = -torch.mean(torch.sum(torch.log_softmax(logits, dim=-1) * mask3, 1))
    lm_logits = outputs["logits"]
    lm_loss = torch.nn.CrossEntropyLoss(ignore_index=ids.pad)(
        lm_logits.view(-1, lm_logits.shape[-1]), tgt_ids.view(-1)
    )
    return LM_WEIGHT * lm_loss + loss_cls, loss_cls, logits


def lightning_total_steps(dataset_size: int, batch_size: int, epochs: float) -> float:
    """[LB] total_steps(): dataset_size / (batch * accumulation * devices) * max_epochs,
    one device, no accumulation; a float, not rounded."""
    return dataset_size / batch_size * epochs


def lightning_hyper(ours) -> dict:
    """[LB]'s arguments from a cmrcx run (`lot_generation.run_hyper`), T = total_steps()
    over the run's training examples (no gradient accumulation: [LB] would divide by it)."""
    run = ours.runner.run

    def total(records: int) -> float:
        return lightning_total_steps(records, run.batch_size, run.num_epochs)

    return lot_generation.run_hyper(ours, total, "LOT understanding")


def train_steps(model, batches, ids: AuthorsIds, hyper: dict) -> recipe_updates.RecipeRun:
    """The Lightning loop over the given cmrcx batches, one update per batch.

    hyper: learning_rate, weight_decay, adam_epsilon, max_grad_norm, warmup_steps,
    total_steps.
    """
    torch, _ = torch_and_transformers()

    def batch_loss(batch):
        return authors_step(torch, model, collate(torch, batch, ids.pad), ids)[0]

    factor = lot_generation.linear_factor(hyper["warmup_steps"], hyper["total_steps"])
    return recipe_updates.updates(model, batches, batch_loss, factor, hyper)


def predict(model, batches, ids: AuthorsIds) -> np.ndarray:
    """The argmax candidate of each real row (eval.py's logits): int [rows], the
    candidate's rank among the row's sentinel positions (0: the first plot)."""
    torch, _ = torch_and_transformers()
    model.eval()
    predicted = []
    with torch.no_grad():
        for batch in batches:
            inputs = collate(torch, batch, ids.pad)
            _, _, logits = authors_step(torch, model, inputs, ids)
            best = logits.argmax(dim=1).numpy()
            decoder_inputs = model._shift_right(inputs["labels"]).numpy()
            for row, position in enumerate(best):
                before = decoder_inputs[row, :position]
                in_range = (before >= ids.sentinel_low) & (before <= ids.sentinel_high)
                predicted.append(int(in_range.sum()))
    return np.array(predicted)


def _special_ids(runner):
    """The run's `<mask>` and sentinel ids (`cmrcx.vocab.layouts` `T5.special_ids`), from
    the vocabulary of its registered task."""
    import seqio

    from cmrcx.vocab import layouts

    task = seqio.get_mixture_or_task(runner.train_task)
    return layouts.T5.special_ids(task.output_features["inputs"].vocabulary)


class ClozeTAuthorsRecipe:
    """[FT] set up from a cmrcx `lot_clozet_longlm_authors` run: the same weights in
    transformers' T5, the run's hyper-parameters as [LB]'s arguments."""

    def __init__(self, ours, hf_dir: str):
        run = ours.runner.run
        self.run, self.ours = run, ours
        encoder = ours.runner.model.encoder_name
        self.model = lot_generation.reference_t5(run.model, ours.initial_params[encoder], hf_dir)
        special = _special_ids(ours.runner)
        self.ids = AuthorsIds(
            lot_generation.tokenizer_pad_id(ours.runner),
            special.mask_id,
            min(special.sentinels),
            max(special.sentinels),
        )

    def hyper(self) -> dict:
        return lightning_hyper(self.ours)

    def train(self, batches) -> recipe_updates.RecipeRun:
        return train_steps(self.model, batches, self.ids, self.hyper())

    def predictions(self, batches) -> np.ndarray:
        return predict(self.model, batches, self.ids)
