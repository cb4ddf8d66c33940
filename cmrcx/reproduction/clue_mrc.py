"""CLUE's PyTorch CMRC 2018 recipe (run_mrc.py), ported where running the script is
impractical, for BERT-family models and, with the family's own input framing, XLNet.

Sources, CLUEbenchmark/CLUE baselines/models_pytorch/mrc_pytorch/:
  [RUN] run_mrc.py @2ea9046 (the stored version; run_mrc_cmrc2018.sh @1747893 runs it with
        --train_epochs=2 --n_batch=32 --lr=3e-5 --warmup_rate=0.1 --max_seq_length=256)
  [PRE], [OUT]: preprocess/cmrc2018_preprocess.py and cmrc2018_output.py, ported in
        `clue_mrc_features`
  [OPT] tools/pytorch_optimization.py, ported in `clue_mrc_optimization`
  [MOD] pytorch_modeling.py BertForQuestionAnswering: qa_outputs on every token,
        total_loss = (CrossEntropyLoss(ignore_index=seq_len)(start) + (end)) / 2 over the
        clamped positions, the batch's mean; transformers' BertForQuestionAnswering computes
        the same and is what runs here (its encoder is the same BERT; it has no pooler,
        which [OPT] leaves out of the optimizer anyway)

What is the recipe's, for BERT (bert, roberta, ernie... any `cmrcx.models.bert` family):
  - features: [PRE] json2features on the official file with max_seq_length = the run's
    max_length, doc_stride = the run's, max_query_length 64; every window is trained on,
    one without the whole answer pointing at [CLS] (0, 0); cmrcx's rows must each equal one
    of the recipe's windows, labels included (`match_windows`), and the recipe's windows
    are what the PyTorch model is fed, padded to max_seq_length (TensorDataset, no cut);
  - the model: [MOD]'s BERT, LayerNorm epsilon 1e-5 (not the config's) and the [PAD]
    row of the word embeddings never learning (nn.Embedding(padding_idx=0), as
    transformers' BERT); cmrcx follows both (runs/clue_mrc_script.gin sets the epsilon;
    trainer.with_padding_row_frozen for every CMRC 2018 run);
  - the loss: [MOD], `loss = model(input_ids, segment_ids, input_mask, start, end)`;
  - the optimizer (RunConfig.optimizer "clue_mrc_script", runs/clue_mrc_script.gin):
    [OPT] BERTAdam over get_optimization's groups at lr * warmup_linear(step / t_total,
    warmup_rate), t_total = [RUN] total_steps = ceil(windows / n_batch) * train_epochs;
  - prediction: [RUN] evaluate(): model.eval(), logits of every dev window, [OUT]
    write_predictions with n_best 20 and max_ans_length 50, scored by the official
    evaluator (cmrcx.benchmarks.clue.cmrc2018_evaluate, its port).
For a run with RunConfig.optimizer "adamw" (the paper setting: the CLUE paper states no
optimizer; the gins follow the scripts for everything but BERTAdam's quirks) the optimizer
is the paper setting's instead: torch.optim.AdamW (transformers' AdamW) over the same
no_decay groups, the global gradient norm clipped, transformers' linear warm-up over
int(steps * warmup) steps and linear decay to 0 over the run's steps
(ceil(epochs * windows / batch)).

XLNet (CLUE's CMRC 2018 XLNet-mid row): the CLUE authors trained XLNet with the TF scripts
(baselines/models/xlnet/run_cmrc_drcd.py @2ea9046, zihangdai/xlnet's run_squad.py: its
own AdamW in model_utils.py, a beam over start/end classifiers with an answer-class head).
What is compared here is the benchmark's recipe above (loss, optimizer, schedule; for
no_decay, "bias" and "layer_norm", the names the TF script's exclude_from_weight_decay
["LayerNorm", "layer_norm", "bias"] matches: the PyTorch list would decay XLNet's
layer_norm, a name it never saw) applied to transformers' XLNetForQuestionAnsweringSimple,
with the family's input framing as cmrcx implements it (`cmrc2018_xlnet`: passage first,
<cls> last, left padding), fed cmrcx's own windows; predictions are cmrcx's XLNet decoding
(`cmrc2018_windows.predict_answers`, covered_text) of the PyTorch logits.

What the comparison substitutes: the batches are cmrcx's (its seeded order, not the
script's RandomSampler(shuffle=True)); dropout is 0 on both sides; no evaluation during
the steps (the script evaluates every half epoch and keeps the best).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

import numpy as np

from cmrcx.common.errors import ConfigError
from cmrcx.reproduction import (
    clue_classifier,
    clue_mrc_features,
    clue_mrc_optimization,
    recipe_updates,
    reference_models,
)
from cmrcx.reproduction.recipe_updates import RecipeRun, matched_rows, torch_adamw, updates
from cmrcx.reproduction.reference_imports import torch_and_transformers
from cmrcx.vocab import layouts

# transformers' span model of each family the recipe runs, by the model_type of the
# family's HF writer (ALBERT in the albert_zh layout is written as the BertModel computing
# the same, trained as ALBERT: `reference_models.share_as_albert_zh`).
HF_SPAN_MODELS = {
    "bert": "BertForQuestionAnswering",
    "albert": "AlbertForQuestionAnswering",
    "xlnet": "XLNetForQuestionAnsweringSimple",
}
FAMILIES = tuple(HF_SPAN_MODELS)  # the cmrcx families the recipe runs
XLNET_NO_DECAY = recipe_updates.XLNET_NO_DECAY  # see the module docstring
# [MOD] BertLayerNorm(hidden_size, eps=1e-5) in every layer, whatever bert_config.json says
# (its apex FusedLayerNorm is built with the same eps).
SCRIPT_LAYER_NORM_EPS = 1e-5
OPTIMIZERS = ("clue_mrc_script", "adamw")  # RunConfig.optimizer values with a recipe
# The input layouts whose windows, optimizer names and predictions are CLUE's PyTorch
# script's own (run_mrc.py's features, BERT's no_decay names, [OUT] write_predictions);
# any other (XLNet) is fed cmrcx's windows and decoded by cmrcx.
SCRIPT_LAYOUTS = (layouts.BERT,)
MATCHED = ("input_ids", "token_type_ids", "input_mask", "start_position", "end_position")


def reference_span_model(config, params: dict, encoder_name: str, out: str):
    """transformers' span model of the family holding `params` (the cmrcx tree: encoder +
    "qa_outputs"), written to `out` by the family's HF writer. Every dropout is 0."""
    return reference_models.family_model(
        config, params, encoder_name, out, FAMILIES, "CLUE CMRC 2018", HF_SPAN_MODELS,
        head="qa_outputs",
    )  # fmt: skip


def match_windows(batches: Sequence[dict], windows: dict) -> list[np.ndarray]:
    """For each cmrcx batch, the indices of the recipe's windows its real rows equal
    (MATCHED arrays). ConfigError naming the step and row of the first that equals none."""

    def key(arrays, row) -> tuple:
        return tuple(np.asarray(arrays[name][row], np.int64).tobytes() for name in MATCHED)

    return matched_rows(
        (key(windows, i) for i in range(len(windows["input_ids"]))),
        ([(row, key(batch, row)) for row in np.flatnonzero(batch["example_mask"])]
         for batch in batches),
        "cmrcx's window is none of the CMRC 2018 recipe's (token ids, segments, mask or "
        "answer positions differ)",
    )  # fmt: skip


def train_steps(model, windows: dict, batches_rows, hyper: dict) -> RecipeRun:
    """[RUN] the training loop over the given batches of window indices.

    hyper: optimizer ("clue_mrc_script" | "adamw"), learning_rate, warmup_proportion,
    t_total, weight_decay, adam_epsilon, max_grad_norm, no_decay.
    """
    torch, _ = torch_and_transformers()

    def batch_loss(rows):
        inputs = {name: torch.tensor(np.asarray(windows[key])[rows], dtype=torch.long)
                  for name, key in (("input_ids", "input_ids"), ("attention_mask", "input_mask"),
                                    ("token_type_ids", "token_type_ids"),
                                    ("start_positions", "start_position"),
                                    ("end_positions", "end_position"))}  # fmt: skip
        return model(**inputs).loss

    total, warmup = hyper["t_total"], hyper["warmup_proportion"]
    if hyper["optimizer"] == "clue_mrc_script":

        def bert_adam(model, hyper):
            return clue_mrc_optimization.bert_adam(model, hyper, hyper["no_decay"])

        def factor(step):
            return clue_mrc_optimization.warmup_linear(step / total, warmup)

        return updates(model, batches_rows, batch_loss, factor, hyper, bert_adam)
    factor = clue_classifier.warmup_linear(int(total * warmup), total)
    return updates(model, batches_rows, batch_loss, factor, hyper, torch_adamw)


def predict_logits(model, windows: dict, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """[RUN] evaluate(): model.eval(), windows in order: start, end logits [windows, L]."""
    torch, _ = torch_and_transformers()
    model.eval()
    starts, ends = [], []
    with torch.no_grad():
        for first in range(0, len(windows["input_ids"]), batch_size):
            rows = slice(first, first + batch_size)
            out = model(
                input_ids=torch.tensor(np.asarray(windows["input_ids"][rows], np.int64)),
                attention_mask=torch.tensor(np.asarray(windows["input_mask"][rows], np.int64)),
                token_type_ids=torch.tensor(np.asarray(windows["token_type_ids"][rows], np.int64)),
            )
            starts.append(out.start_logits.numpy())
            ends.append(out.end_logits.numpy())
    return np.concatenate(starts), np.concatenate(ends)


def recipe_windows(features: clue_mrc_features.MrcFeatures) -> dict:
    """The recipe's features under cmrcx's batch names."""
    return {"input_ids": features.input_ids, "token_type_ids": features.segment_ids,
            "input_mask": features.input_mask, "start_position": features.start_position,
            "end_position": features.end_position}  # fmt: skip


class ClueMrcRecipe:
    """The CMRC 2018 recipe set up from a cmrcx run (`check.check_reproduction`)."""

    def __init__(self, ours, hf_dir: str):
        run = ours.runner.run
        if run.optimizer not in OPTIMIZERS:
            raise ConfigError(
                f"RunConfig.optimizer {run.optimizer!r}: the CMRC 2018 recipe compares "
                f"{' or '.join(OPTIMIZERS)}"
            )
        self.run, self.task = run, ours.runner.task
        self.script = self.task.layout in SCRIPT_LAYOUTS
        self.model = reference_span_model(
            run.model, ours.initial_params, ours.runner.model.encoder_name, hf_dir
        )
        if self.script and run.optimizer == "clue_mrc_script":
            torch, _ = torch_and_transformers()
            for module in self.model.modules():
                if isinstance(module, torch.nn.LayerNorm):
                    module.eps = SCRIPT_LAYER_NORM_EPS
        if self.script:
            self.tokenizer = clue_classifier.tokenizer_for(run.vocab_file, run.lower_case)
            self.train_features = self.features(run.train_split)
            self.train_windows = recipe_windows(self.train_features)
        else:  # XLNet: the family's framing, cmrcx's windows
            self.train_windows = self.task.windows(run.train_split)

    def path(self, split: str) -> str:
        from cmrcx.benchmarks.clue import cmrc2018_format

        return os.path.join(self.run.data_dir, cmrc2018_format.SPLIT_FILES[split])

    def features(self, split: str) -> clue_mrc_features.MrcFeatures:
        return clue_mrc_features.json2features(
            self.path(split),
            self.tokenizer,
            is_training=split == self.run.train_split,
            max_seq_length=self.run.max_length,
            doc_stride=self.run.doc_stride,
        )

    def train(self, batches) -> RecipeRun:
        run = self.run
        windows = len(self.train_windows["input_ids"])
        if run.optimizer == "clue_mrc_script":
            total = run.num_train_steps or int(run.num_epochs) * math.ceil(windows / run.batch_size)
        else:
            total = run.num_train_steps or math.ceil(run.num_epochs * windows / run.batch_size)
        hyper = {
            "optimizer": run.optimizer,
            "learning_rate": run.learning_rate,
            "warmup_proportion": run.warmup_fraction,
            "t_total": total,
            "weight_decay": run.weight_decay,
            "adam_epsilon": run.adam_epsilon,
            "max_grad_norm": run.max_grad_norm,
            "no_decay": clue_mrc_optimization.NO_DECAY if self.script else XLNET_NO_DECAY,
        }
        rows = match_windows(batches, self.train_windows)
        return train_steps(self.model, self.train_windows, rows, hyper)

    def predictions(self, split: str) -> dict[str, str]:
        """{qid: answer} of the model on a split: [OUT] write_predictions (BERT), cmrcx's
        XLNet decoding of the PyTorch logits (XLNet)."""
        if self.script:
            features = self.features(split)
            starts, ends = predict_logits(
                self.model, recipe_windows(features), self.run.eval_batch_size
            )
            basic = self.tokenizer.basic_tokenizer
            return clue_mrc_features.write_predictions(features, starts, ends, basic)
        from cmrcx.benchmarks.clue import cmrc2018_windows

        windows = self.task.windows(split)
        starts, ends = predict_logits(self.model, windows, self.run.eval_batch_size)
        questions = self.task.records(split)
        return cmrc2018_windows.predict_answers(
            questions, windows, starts, ends, (), covered_text=self.task.layout.answers_cover_pieces
        )


def write_json(predictions: dict, path: str) -> str:
    """The predictions file the official evaluator reads."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(predictions, f, ensure_ascii=False, indent=1)
    return path
