"""CMRC 2019's two reference recipes: the authors' released script, and the paper setting.

Sources:
  [RUN]  ymcui/cmrc2019 @f3808ee baseline/run_cmrc2019_baseline.py, and the
         `pytorch_pretrained_bert` 0.4.0 it ships (baseline/pytorch_pretrained_bert/)
  [PAPER] Cui et al., COLING 2020, sec. 5: "3 epochs ... initial learning rate of 3e-5,
         a maximum sequence length of 512, and a batch size of 24 ... PyTorch with
         Transformers library"
  [TF2]  transformers 2.x AdamW and linear warm-up (`recipe_updates.adamw_step`,
         `clue_classifier.warmup_linear`)

`ReleasedScriptRecipe` (a gin with runs/released_script.gin) *runs the authors' code*,
loaded from the folder the user gives (`--reference_dir` or CMRCX_CMRC2019_REFERENCE):
[RUN]'s own read_squad_examples and convert_examples_to_features build the training
windows, its BertForQuestionAnswering (the pointer head: logits + (1 - answer_mask) *
-10000, CrossEntropyLoss over the window) computes the loss, its BertAdam (per-tensor
clipping, no bias correction, the schedule applied inside it) steps, and [RUN] main()'s
loop lines are repeated here: the pooler left out of the optimizer, weight decay 0.01 off
`no_decay`, t_total = int(len(train_examples) / batch * epochs) (examples are blanks),
lr_this_step = lr * warmup_linear(global_step / t_total, warmup_proportion) set into
every group before each step. Each cmrcx row must equal one of the script's own
windows (token ids, mask, segments, blank mask, answer position: `match_rows`); the
script's window is what its model is fed. What the comparison substitutes: the batches'
order is cmrcx's (the script's RandomSampler draws from torch's generator), dropout is 0.

`PaperRecipe` (a paper gin, e.g. cmrc2019_bert.gin): the setting [PAPER] states, in
PyTorch: transformers' BertModel with the same pointer head as [RUN] (a Linear(hidden,
1) over the window, (1 - answer_mask) * -10000, mean cross-entropy), transformers'
AdamW with global-norm clipping and linear warm-up then decay over the run's steps
([TF2], through `recipe_updates.updates`, the CLUE and LOT recipes' loop). No authors'
code exists for it: it is fed cmrcx's windows as they are.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import types

import numpy as np

from cmrcx.common.errors import ConfigError, DataFormatError
from cmrcx.datasets.cmrc2019 import SPLIT_FILES
from cmrcx.reproduction import clue_classifier, recipe_updates
from cmrcx.reproduction.reference_imports import torch_and_transformers

REFERENCE_ENV = "CMRCX_CMRC2019_REFERENCE"
SCRIPT_NAME = "run_cmrc2019_baseline.py"
SCRIPT_WEIGHT_DECAY = 0.01  # [RUN] main(): optimizer_grouped_parameters
SCRIPT_NO_DECAY = ("bias", "LayerNorm.bias", "LayerNorm.weight")  # [RUN] main(): no_decay
MASKED_LOGIT = -10000.0  # [RUN] BertForQuestionAnswering.forward


# ---------------------------------------------------------------- the authors' code


def reference_dir_of(reference_dir: str | None) -> str:
    """The folder holding [RUN] and its pytorch_pretrained_bert/: `reference_dir`, else
    $CMRCX_CMRC2019_REFERENCE; ConfigError saying how to give it when absent."""
    folder = reference_dir or os.environ.get(REFERENCE_ENV)
    how = (
        "the released-script recipe runs the CMRC 2019 authors' own code: give the folder "
        f"holding {SCRIPT_NAME} and its pytorch_pretrained_bert/ (ymcui/cmrc2019 baseline/) "
        f"with --reference_dir or ${REFERENCE_ENV}"
    )
    if not folder:
        raise ConfigError(how)
    for needed in (SCRIPT_NAME, os.path.join("pytorch_pretrained_bert", "optimization.py")):
        if not os.path.isfile(os.path.join(folder, needed)):
            raise ConfigError(f"{folder}: no {needed}; {how}")
    return folder


def _stand_ins() -> None:
    """pytorch_pretrained_bert/file_utils.py imports boto3, botocore.exceptions.ClientError
    and requests at module level, for downloads no comparison makes: empty modules for
    those that are not installed."""
    botocore = types.ModuleType("botocore")
    botocore.exceptions = types.ModuleType("botocore.exceptions")
    botocore.exceptions.ClientError = type("ClientError", (Exception,), {})
    modules = {
        "boto3": types.ModuleType("boto3"),
        "botocore": botocore,
        "botocore.exceptions": botocore.exceptions,
        "requests": types.ModuleType("requests"),
    }
    for name, module in modules.items():
        try:
            importlib.import_module(name)
        except ImportError:
            sys.modules[name] = module


def load_script(reference_dir: str | None):
    """[RUN] imported as a module (its main() does not run), its folder first on sys.path
    for the pytorch_pretrained_bert it ships. Its INFO log (a few examples' features) is
    turned down to warnings."""
    folder = os.path.abspath(reference_dir_of(reference_dir))
    name = "cmrc2019_released_script"
    if name in sys.modules:
        return sys.modules[name]
    torch_and_transformers()
    _stand_ins()
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, os.path.join(folder, SCRIPT_NAME))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    sys.modules[name] = script
    logging.getLogger(name).setLevel(logging.WARNING)
    return script


# ---------------------------------------------------------------- features and batches

SCRIPT_FIELDS = ("input_ids", "input_mask", "segment_ids", "answer_mask", "positions")


def script_features(script, run) -> dict[str, np.ndarray]:
    """The training windows [RUN] main() builds from the run's training file
    (read_squad_examples, then convert_examples_to_features with the run's length,
    stride and candidate cap), as int64 arrays [windows, ...] named SCRIPT_FIELDS, and
    "examples" (len(train_examples): blanks)."""
    path = os.path.join(run.data_dir, SPLIT_FILES[run.train_split])
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        raise DataFormatError(f"{path}: {error}") from None
    examples = script.read_squad_examples(document, is_training=True)
    tokenizer = script.BertTokenizer(vocab_file=run.vocab_file, do_lower_case=True)
    features = script.convert_examples_to_features(
        examples=examples,
        tokenizer=tokenizer,
        max_seq_length=run.max_length,
        doc_stride=run.doc_stride,
        max_query_length=run.max_candidate_tokens,
        is_training=True,
    )
    columns = {
        "input_ids": [f.input_ids for f in features],
        "input_mask": [f.input_mask for f in features],
        "segment_ids": [f.segment_ids for f in features],
        "answer_mask": [f.answer_position_mask for f in features],
        "positions": [f.position for f in features],
    }
    out = {name: np.array(values, np.int64) for name, values in columns.items()}
    out["examples"] = np.array(len(examples))
    return out


def script_rows(batch: dict) -> dict[str, np.ndarray]:
    """A cmrcx batch's real rows as [RUN]'s model inputs: the blank mask over the window's
    tokens (1 at each blank inside it) and the answer's token position. int64."""
    rows = np.flatnonzero(batch["example_mask"])
    ids = np.asarray(batch["input_ids"], np.int64)[rows]
    answer_mask = np.zeros_like(ids)
    positions = np.asarray(batch["blank_positions"], np.int64)[rows]
    inside = np.asarray(batch["blank_in_window"])[rows] > 0
    for i in range(len(rows)):
        answer_mask[i, positions[i][inside[i]]] = 1
    target = np.asarray(batch["target_blank"], np.int64)[rows]
    return {
        "input_ids": ids,
        "input_mask": np.asarray(batch["input_mask"], np.int64)[rows],
        "segment_ids": np.asarray(batch["token_type_ids"], np.int64)[rows],
        "answer_mask": answer_mask,
        "positions": positions[np.arange(len(rows)), target],
    }


def match_rows(batches, features: dict) -> list[np.ndarray]:
    """For each cmrcx batch, the indices of the script's windows its real rows equal
    (SCRIPT_FIELDS). ConfigError naming the step and row of the first that equals none."""

    def keys(arrays) -> list[tuple]:
        return [tuple(arrays[n][row].tobytes() for n in SCRIPT_FIELDS)
                for row in range(len(arrays["positions"]))]  # fmt: skip

    return recipe_updates.matched_rows(
        keys(features),
        (enumerate(keys(script_rows(batch))) for batch in batches),
        "cmrcx's window is none of the windows the released script builds from the "
        "training file (token ids, mask, segments, blank mask or answer position differ)",
    )


# ---------------------------------------------------------------- the models


def _bert_config_json(config, out: str) -> str:
    """bert_config.json as pytorch_pretrained_bert reads it, dropout 0."""
    from cmrcx.weights import bert as bert_weights

    raw = {**bert_weights.config_to_hf(config)}
    raw.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "bert_config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(raw, f, indent=1)
    return path


def _head_tensors(torch, params: dict) -> dict:
    head = params["cloze_head"]  # kernel [hidden, 1], bias [1]
    return {
        "weight": torch.tensor(np.asarray(head["kernel"], np.float32).T.copy()),
        "bias": torch.tensor(np.asarray(head["bias"], np.float32)),
    }


FAMILIES = ("bert",)  # the cmrcx families the recipes run


def _require_bert(config) -> None:
    from cmrcx.models import registry

    family = registry.family_of(config).name
    if family not in FAMILIES:
        raise ConfigError(f"the CMRC 2019 recipes run BERT-family encoders; not {family}")


def released_model(script, config, params: dict, out: str):
    """[RUN] BertForQuestionAnswering holding `params` (cmrcx's "bert" + "cloze_head"),
    every tensor loaded (strict), dropout 0."""
    torch, _ = torch_and_transformers()
    from cmrcx.weights import bert as bert_weights

    _require_bert(config)
    model = script.BertForQuestionAnswering(
        script.BertConfig.from_json_file(_bert_config_json(config, out))
    )
    state = {
        f"bert.{n}": torch.tensor(t) for n, t in bert_weights.hf_tensors(params["bert"], config)
    }
    state.update({f"qa_outputs.{n}": t for n, t in _head_tensors(torch, params).items()})
    model.load_state_dict(state, strict=True)
    return model


def paper_model(config, params: dict, out: str):
    """transformers' BertModel holding params["bert"] and a Linear(hidden, 1) cloze head:
    `forward(input_ids, input_mask, segment_ids, answer_mask, positions)` is the batch's
    mean cross-entropy over the window's blanks ([RUN]'s head). Dropout 0."""
    torch, transformers = torch_and_transformers()
    from cmrcx.weights import bert as bert_weights

    _require_bert(config)
    bert_weights.write_hf_dir(out, params["bert"], config, None)
    transformers.logging.set_verbosity_error()
    encoder = transformers.BertModel.from_pretrained(out, dtype=torch.float32)

    class PaperCloze(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = encoder
            self.cloze_head = torch.nn.Linear(config.hidden_size, 1)
            with torch.no_grad():
                for name, tensor in _head_tensors(torch, params).items():
                    getattr(self.cloze_head, name).copy_(tensor)

        def forward(self, input_ids, input_mask, segment_ids, answer_mask, positions):
            hidden = self.bert(
                input_ids=input_ids, attention_mask=input_mask, token_type_ids=segment_ids
            ).last_hidden_state
            logits = self.cloze_head(hidden).squeeze(-1)
            logits = logits + (1 - answer_mask.to(logits.dtype)) * MASKED_LOGIT
            return torch.nn.functional.cross_entropy(logits, positions)

    model = PaperCloze()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


# ---------------------------------------------------------------- the recipes


class ReleasedScriptRecipe:
    """[RUN]'s training, its own code, set up from a cmrcx run."""

    def __init__(self, ours, hf_dir: str, reference_dir: str | None = None):
        run = ours.runner.run
        self.run, self.script = run, load_script(reference_dir)
        self.features = script_features(self.script, run)
        self.model = released_model(self.script, run.model, ours.initial_params, hf_dir)

    def train(self, batches) -> recipe_updates.RecipeRun:
        """[RUN] main()'s training loop over the script's windows matching cmrcx's batches."""
        torch, _ = torch_and_transformers()
        script, run, model = self.script, self.run, self.model
        rows = match_rows(batches, self.features)
        t_total = int(int(self.features["examples"]) / run.batch_size * run.num_epochs)
        named = [(n, p) for n, p in model.named_parameters() if "pooler" not in n]
        groups = [
            {"params": [p for n, p in named if not any(nd in n for nd in SCRIPT_NO_DECAY)],
             "weight_decay": SCRIPT_WEIGHT_DECAY},
            {"params": [p for n, p in named if any(nd in n for nd in SCRIPT_NO_DECAY)],
             "weight_decay": 0.0},
        ]  # fmt: skip
        optimizer = script.BertAdam(
            groups, lr=run.learning_rate, warmup=run.warmup_fraction, t_total=t_total
        )
        schedule = script.warmup_linear
        rates, losses = [], []
        model.train()
        model.zero_grad()
        for global_step, indices in enumerate(rows):
            inputs = [torch.tensor(self.features[n][indices]) for n in SCRIPT_FIELDS]
            loss = model(inputs[0], inputs[2], inputs[1], inputs[3], inputs[4])
            loss.backward()
            lr_this_step = run.learning_rate * schedule(global_step / t_total, run.warmup_fraction)
            for group in optimizer.param_groups:
                group["lr"] = lr_this_step
            # The rate the update applies: BertAdam multiplies by its own schedule of the
            # steps it has taken (global_step, every tensor alike).
            rates.append(lr_this_step * schedule(global_step / t_total, run.warmup_fraction))
            optimizer.step()
            optimizer.zero_grad()
            losses.append(float(loss.item()))
        return recipe_updates.RecipeRun(rates, losses)


class PaperRecipe:
    """[PAPER]'s setting in PyTorch + transformers, set up from a cmrcx run."""

    def __init__(self, ours, hf_dir: str):
        run = ours.runner.run
        self.run, self.num_train_steps = run, ours.runner.num_train_steps
        self.model = paper_model(run.model, ours.initial_params, hf_dir)

    def train(self, batches) -> recipe_updates.RecipeRun:
        """[TF2] AdamW and warm-up over cmrcx's batches. t_total: the run's steps (cmrcx:
        ceil(epochs * windows / batch); a transformers loop's len(dataloader) * epochs,
        the same for whole epochs) or num_train_steps."""
        torch, _ = torch_and_transformers()
        run, total = self.run, self.num_train_steps
        factor = clue_classifier.warmup_linear(int(total * run.warmup_fraction), total)
        hyper = {
            "learning_rate": run.learning_rate,
            "weight_decay": run.weight_decay,
            "adam_epsilon": run.adam_epsilon,
            "max_grad_norm": run.max_grad_norm,
        }

        def batch_loss(batch):
            inputs = script_rows(batch)
            return self.model(*(torch.tensor(inputs[n]) for n in SCRIPT_FIELDS))

        return recipe_updates.updates(self.model, batches, batch_loss, factor, hyper)


def recipe(ours, hf_dir: str, reference_dir: str | None = None):
    """The run's recipe: the released script's for RunConfig.optimizer "released_script"
    (runs/released_script.gin), the paper setting's otherwise."""
    if ours.runner.run.optimizer == "released_script":
        return ReleasedScriptRecipe(ours, hf_dir, reference_dir)
    return PaperRecipe(ours, hf_dir)
