"""The LongLM authors' generation fine-tuning recipe (OutGen, PlotCom), in PyTorch.

Sources (thu-coai/LOT-LongLM @cea3543, longlm/):
  [FT]   finetune_trainer.py: Seq2SeqTrainer(model, training_args, data_collator=
         Seq2SeqDataCollator(tokenizer, data_args, decoder_start_token_id)), trainer.train()
  [S2S]  seq2seq_trainer.py: Seq2SeqTrainer (create_optimizer_and_scheduler, _compute_loss)
  [UT]   utils.py: Seq2SeqDataCollator, trim_batch
  [TR4]  transformers 4.x Trainer.train and optimization.py (AdamW, get_linear_schedule_
         with_warmup), the library [FT] was written against (LongLM's README: 4.6.0)

What is the recipe's, line for line:
  - batch: [UT] Seq2SeqDataCollator._encode: tokenizer.prepare_seq2seq_batch(sources,
    targets, max_length, max_target_length, padding="longest"): both sides end in `</s>`,
    padded with the tokenizer's pad id (the `<pad>` piece) to the batch's longest; labels
    are the padded target ids (pad, not -100); decoder_input_ids = _shift_right_t5(labels):
    the tokenizer's pad id first (a T5Tokenizer's collator: not the model config's
    decoder_start_token_id), then labels[:-1];
  - loss: [S2S] _compute_loss with label_smoothing 0 (Seq2SeqTrainingArguments' default)
    and ignore_pad_token_for_loss (DataTrainingArguments' default True): logits =
    model(input_ids, attention_mask, decoder_input_ids)[0], CrossEntropyLoss(
    ignore_index=config.pad_token_id): the mean over the batch's target tokens that are
    not the model config's pad id;
  - optimizer: [S2S] create_optimizer_and_scheduler: no_decay ["bias",
    "LayerNorm.weight"] (no T5 parameter matches either: every one is in the decayed
    group, which weight decay 0, TrainingArguments' default and cmrcx's, leaves alone),
    [TR4] AdamW(lr, betas (0.9, 0.999), eps), epsilon added to sqrt(v) before the bias
    correction of the step size (`recipe_updates.adamw_step`, the same code);
  - schedule: [S2S] _get_lr_scheduler "linear": get_linear_schedule_with_warmup(
    warmup_steps, num_training_steps), the rate of update k lr * k / warmup before
    warmup_steps, then lr * max(0, (T - k) / max(1, T - warmup)); [TR4] Trainer.train:
    T = max_steps if > 0, else ceil(epochs * max(1, len(train_dataloader) // accumulation));
  - each update: [TR4] loss.backward(), clip_grad_norm_(model.parameters(),
    max_grad_norm), optimizer.step(), lr_scheduler.step();
  - generation: transformers' model.generate(input_ids, attention_mask,
    decoder_start_token_id, max_new_tokens) greedy (do_sample False, num_beams 1).

What the comparison substitutes: the examples are cmrcx's token ids (its seeded order,
not [S2S] _get_train_sampler's RandomSampler); its real tokens are taken as the
collator's encoding (the ids themselves are compared with transformers 4.6's
T5Tokenizer in tests/vocab/test_sentencepiece_vocab.py, not here). The script's dtype
(finetune.sh has no --fp16) is float32 on both sides.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from cmrcx.common import tf_iterators
from cmrcx.common.errors import ConfigError
from cmrcx.reproduction import recipe_updates
from cmrcx.reproduction.reference_imports import torch_and_transformers

NO_DECAY = ("bias", "LayerNorm.weight")  # [S2S] create_optimizer_and_scheduler: no_decay


def reference_t5(config, params: dict, out: str, model_class: str | None = None):
    """transformers' T5ForConditionalGeneration (or `model_class`: "MT5ForConditional-
    Generation" for an mT5, its config.json then of model_type "mt5") holding `params`
    (cmrcx's T5 tree), written to `out` by cmrcx's HF writer; every dropout 0, float32."""
    torch, transformers = torch_and_transformers()
    from cmrcx.models import registry
    from cmrcx.weights import t5 as t5_weights

    family = registry.family_of(config).name
    if family != "t5":
        raise ConfigError(f"the LongLM authors' recipes train a T5 (LongLM); not {family}")
    t5_weights.write_hf_dir(out, params, config, None)
    model_class = model_class or "T5ForConditionalGeneration"
    if model_class.startswith("MT5"):
        _retype_config(os.path.join(out, "config.json"), "mt5", model_class)
    transformers.logging.set_verbosity_error()
    model = getattr(transformers, model_class).from_pretrained(out, dtype=torch.float32)
    return without_dropout(torch, model)


def t5_class(run) -> str:
    """The transformers class of the run's T5: MT5ForConditionalGeneration for an mT5 run
    (RunConfig.vocabulary_name "mt5", as the mT5 gins set it), else T5ForConditional-
    Generation (LongLM's own class)."""
    return (
        "MT5ForConditionalGeneration"
        if run.vocabulary_name == "mt5"
        else ("T5ForConditionalGeneration")
    )


def _retype_config(path: str, model_type: str, architecture: str) -> None:
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config.update(model_type=model_type, architectures=[architecture])
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)


def without_dropout(torch, model):
    """The model with every Dropout's rate 0 (in place; returned)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


def padded(rows: list[np.ndarray], pad_id: int) -> np.ndarray:
    """The rows right-padded with `pad_id` to the longest (padding="longest")."""
    longest = max(len(row) for row in rows)
    return np.array([np.pad(r, (0, longest - len(r)), constant_values=pad_id) for r in rows])


def collate(torch, batch: dict, pad_id: int) -> dict:
    """[UT] Seq2SeqDataCollator.__call__ on a cmrcx batch's real rows: input_ids,
    attention_mask int64 [rows, longest source]; labels, decoder_input_ids int64
    [rows, longest target] (filled with the tokenizer's `pad_id`; decoder inputs =
    pad_id + labels[:-1])."""
    rows = np.flatnonzero(batch["example_mask"])
    if not len(rows):
        raise ConfigError("a cmrcx batch without real rows: nothing for the recipe to train on")
    sources = [batch["inputs"][r][batch["inputs_mask"][r] > 0] for r in rows]
    targets = [batch["targets"][r][batch["targets_mask"][r] > 0] for r in rows]
    input_ids, labels = padded(sources, pad_id), padded(targets, pad_id)
    attention_mask = padded([np.ones(len(s), np.int64) for s in sources], 0)
    decoder_input_ids = np.full_like(labels, pad_id)  # [UT] _shift_right_t5
    decoder_input_ids[:, 1:] = labels[:, :-1]
    return {
        "input_ids": torch.tensor(input_ids, dtype=torch.int64),
        "attention_mask": torch.tensor(attention_mask, dtype=torch.int64),
        "decoder_input_ids": torch.tensor(decoder_input_ids, dtype=torch.int64),
        "labels": torch.tensor(labels, dtype=torch.int64),
    }


def linear_factor(warmup_steps: int, total: float):
    """[TR4] get_linear_schedule_with_warmup's lr_lambda: the factor of update `step`."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return float(step) / float(max(1, warmup_steps))
        return max(0.0, float(total - step) / float(max(1, total - warmup_steps)))

    return factor


def trainer_total_steps(
    train_records: int, batch_size: int, num_epochs: float, accumulation: int, max_steps: int
) -> int:
    """[TR4] Trainer.train: max_steps when > 0, else ceil(epochs * update steps per epoch),
    an epoch being len(DataLoader) // accumulation (at least 1) updates."""
    if max_steps and max_steps > 0:
        return max_steps
    per_epoch = max(1, math.ceil(train_records / batch_size) // accumulation)
    return math.ceil(num_epochs * per_epoch)


def token_loss(torch, model, inputs: dict, pad_id: int):
    """[S2S] _compute_loss (label smoothing 0, ignore_pad_token_for_loss): the mean
    cross-entropy over the non-pad labels."""
    logits = model(
        input_ids=inputs["input_ids"],
        attention_mask=inputs["attention_mask"],
        decoder_input_ids=inputs["decoder_input_ids"],
        use_cache=False,
    )[0]
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=pad_id)
    return loss_fn(logits.view(-1, logits.shape[-1]), inputs["labels"].view(-1))


def train_steps(model, batches, hyper: dict) -> recipe_updates.RecipeRun:
    """[TR4] Trainer.train over the given cmrcx batches, one update per batch.

    hyper: learning_rate, weight_decay, adam_epsilon, max_grad_norm, warmup_steps,
    total_steps, tokenizer_pad (the collator's), config_pad (the loss's ignore_index).
    """
    torch, _ = torch_and_transformers()

    def batch_loss(batch):
        inputs = collate(torch, batch, hyper["tokenizer_pad"])
        return token_loss(torch, model, inputs, hyper["config_pad"])

    factor = linear_factor(hyper["warmup_steps"], hyper["total_steps"])
    return recipe_updates.updates(model, batches, batch_loss, factor, hyper)  # same no_decay


def greedy(
    model, sources: list[np.ndarray], start_id: int | None, max_new_tokens: int, pad_id: int
):
    """transformers' greedy `generate` of each source (int ids, EOS included), one at a
    time: int64 [sources, max_new_tokens], pad after EOS (no decoder start token). A
    decoder-only model (start_id None) continues the source: its tokens after it."""
    torch, _ = torch_and_transformers()
    model.eval()
    out = np.full([len(sources), max_new_tokens], pad_id, np.int64)
    start = {} if start_id is None else {"decoder_start_token_id": start_id}
    with torch.no_grad():
        for i, source in enumerate(sources):
            ids = torch.tensor(np.asarray(source, np.int64)[None])
            tokens = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                num_beams=1,
                max_new_tokens=max_new_tokens,
                pad_token_id=pad_id,
                **start,
            )[0, 1 if start else ids.shape[1] :].numpy()
            out[i, : len(tokens)] = tokens
    return out


def run_hyper(ours, total_steps, recipe: str) -> dict:
    """A LOT recipe's arguments from a cmrcx run (`cmrcx_steps.CmrcxSteps`): its rate,
    epsilon, weight decay and clipping; total_steps = `total_steps(training examples)`,
    warmup_steps = int(total * warmup_fraction) (the scripts take a step count, cmrcx's
    gin a fraction). ConfigError with gradient accumulation, which neither recipe here
    runs (`recipe` names the one refusing)."""
    run = ours.runner.run
    if run.grad_accum_steps != 1:
        raise ConfigError(
            f"the {recipe} recipe runs without gradient accumulation: "
            f"RunConfig.grad_accum_steps is {run.grad_accum_steps}"
        )
    total = total_steps(ours.runner._training_examples())
    return {
        "learning_rate": run.learning_rate,
        "weight_decay": run.weight_decay,
        "adam_epsilon": run.adam_epsilon,
        "max_grad_norm": run.max_grad_norm,
        "warmup_steps": int(total * run.warmup_fraction),
        "total_steps": total,
    }


def tokenizer_pad_id(runner) -> int:
    """The id of the run vocabulary's `<pad>` piece: T5Tokenizer's pad_token_id, what the
    authors' collators pad with (`cmrcx.vocab.sentencepiece`'s `pad_id`)."""
    import seqio

    name = getattr(runner.task, "row_task", runner.train_task)  # generation: the text task
    return int(seqio.get_mixture_or_task(name).output_features["inputs"].vocabulary.pad_id)


class GenerationRecipe:
    """[FT] set up from a cmrcx seq2seq run (`cmrcx_steps.CmrcxSteps`): the same weights
    in transformers' T5, the run's hyper-parameters as Seq2SeqTrainingArguments."""

    def __init__(self, ours, hf_dir: str):
        run = ours.runner.run
        self.run, self.ours = run, ours
        encoder = ours.runner.model.encoder_name
        params = ours.initial_params[encoder]
        self.model = reference_t5(run.model, params, hf_dir, t5_class(run))
        self.pad_id = int(self.model.config.pad_token_id)
        self.tokenizer_pad = tokenizer_pad_id(ours.runner)

    def hyper(self) -> dict:
        """TrainingArguments from the run: warmup_steps = int(T * warmup_fraction) (the
        script takes a step count; cmrcx's gin a fraction), max_steps = the run's
        num_train_steps when set, no gradient accumulation."""
        run = self.run

        def total(records: int) -> int:
            return trainer_total_steps(
                records, run.batch_size, run.num_epochs, 1, run.num_train_steps or 0
            )

        hyper = run_hyper(self.ours, total, "generation")
        return {**hyper, "tokenizer_pad": self.tokenizer_pad, "config_pad": self.pad_id}

    def train(self, batches) -> recipe_updates.RecipeRun:
        return train_steps(self.model, batches, self.hyper())

    def greedy(self, sources: list[np.ndarray], max_new_tokens: int) -> np.ndarray:
        """The trained model's greedy generations, started as cmrcx's generation starts
        (RunConfig.generation_start_token_id, else the config's decoder start)."""
        start = self.run.generation_start_token_id
        if start is None:
            start = self.run.model.decoder_start_token_id
        return greedy(self.model, sources, start, max_new_tokens, self.pad_id)


def first_sources(runner, split: str, count: int) -> list[np.ndarray]:
    """The first `count` inputs of `split` in file order, as cmrcx's run task encodes
    them (ids, EOS included, unpadded)."""
    import seqio

    dataset = seqio.get_mixture_or_task(runner.task.row_task).get_dataset(
        sequence_length=None, split=split, shuffle=False
    )
    examples = tf_iterators.numpy_iterator(dataset.take(count))
    return [np.asarray(example["inputs"]) for example in examples]


def cmrcx_greedy(runner, params, sources: list[np.ndarray], max_new_tokens: int) -> np.ndarray:
    """cmrcx's greedy generation (`cmrcx.models.decoding.greedy` with the run's generation
    start) of the sources as one right-padded batch: int [sources, max_new_tokens], pad
    after EOS."""
    from cmrcx.models import decoding

    model = runner.model
    ids = padded([np.asarray(s, np.int32) for s in sources], model.generator.pad_token_id)
    mask = padded([np.ones(len(s), np.int32) for s in sources], 0)
    decoded = decoding.greedy(
        model.generator, params[model.encoder_name], ids, mask, max_new_tokens
    )
    return np.asarray(decoded.tokens, np.int64)
