"""CLUE's PyTorch classification recipe, ported where running the script is impractical.

Sources (CLUEbenchmark/CLUE @0059793, baselines/models_pytorch/classifier_pytorch/):
  [RUN]  run_classifier.py
  [PROC] processors/clue.py
  [TF2]  transformers 2.x optimization.py, the `AdamW` and `WarmupLinearSchedule` that
         [RUN] imports (`from transformers import AdamW, WarmupLinearSchedule`)

What is the recipe's, line for line:
  - records -> (text_a, text_b, label): [PROC] AfqmcProcessor, CmnliProcessor (OCNLI,
    CMNLI), TnewsProcessor, IflytekProcessor, CslProcessor, WscProcessor._create_examples;
  - encoding: [PROC] clue_convert_examples_to_features: `tokenizer.encode_plus(text_a,
    text_b, add_special_tokens=True, max_length=max_length)` (transformers 2.x truncates
    "longest_first"), right padding with id 0, mask 1 for tokens, segment 0 on padding;
    [PROC] collate_fn cuts a batch to its longest row;
  - the model: [RUN] MODEL_CLASSES, transformers' BertForSequenceClassification (bert,
    roberta) / AlbertForSequenceClassification, `loss = outputs[0]`: the batch's mean
    cross-entropy;
  - optimizer: [RUN] train(): `no_decay = ['bias', 'LayerNorm.weight']` (a parameter name
    containing either is not decayed), AdamW(lr, eps=adam_epsilon) of [TF2] (its epsilon
    added to sqrt(v) before the bias correction of the step size, the decay applied after
    the update), `clip_grad_norm_(model.parameters(), max_grad_norm)` before each step,
    WarmupLinearSchedule(warmup_steps=int(t_total * warmup_proportion), t_total) with
    t_total = len(train_dataloader) * num_train_epochs, or max_steps;
  - prediction: [RUN] evaluate(): model.eval(), argmax of the logits, accuracy =
    mean(preds == labels) (metrics/clue_compute_metrics.py simple_accuracy).

What the comparison substitutes: the batches are cmrcx's (its seeded order, not the
script's RandomSampler); each of their rows must equal the recipe's encoding of a record
of the official file, label included (`match_rows`), and the recipe's own encoded rows
are what the PyTorch model is fed.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from cmrcx.common.errors import ConfigError, DataFormatError
from cmrcx.reproduction import recipe_updates, reference_models
from cmrcx.reproduction.recipe_updates import RecipeRun, updates
from cmrcx.reproduction.reference_imports import torch_and_transformers

# [RUN] MODEL_CLASSES: the transformers class of each model type the CLUE script trains,
# by the model_type of the family's HF writer. ALBERT in the albert_zh layout (brightmart's
# releases, CLUE's ALBERT-tiny) is written as the BertModel that computes the same
# (`cmrcx.weights.albert.bert_tensors`): transformers has no class for it.
HF_CLASSIFIERS = {
    "bert": "BertForSequenceClassification",
    "albert": "AlbertForSequenceClassification",
    "xlnet": "XLNetForSequenceClassification",
}
FAMILIES = ("bert", "albert", "xlnet")  # the cmrcx families the recipe runs
# The families whose input the recipe takes from cmrcx's batches (`batch_features`): CLUE
# trained XLNet with XLNet's TF scripts (its own framing, `a <sep> b <sep> <cls>` left
# padded, and optimizer), not with run_classifier.py, whose encode_plus has no XLNet layout.
CMRCX_FRAMED = ("xlnet",)


def _pair(first: str, second: str):
    return lambda record: (record[first], record[second])


def _single(field: str):
    return lambda record: (record[field], None)


def _csl(record: dict):
    return " ".join(record["keyword"]), record["abst"]  # [PROC] CslProcessor


def _wsc(record: dict):
    """[PROC] WscProcessor._create_examples: the noun in underscores, the pronoun in
    brackets, by its four list.insert calls."""
    text, target = record["text"], record["target"]
    chars = list(text)
    query, query_idx = target["span1_text"], target["span1_index"]
    pronoun, pronoun_idx = target["span2_text"], target["span2_index"]
    if pronoun_idx > query_idx:
        chars.insert(query_idx, "_")
        chars.insert(query_idx + len(query) + 1, "_")
        chars.insert(pronoun_idx + 2, "[")
        chars.insert(pronoun_idx + len(pronoun) + 2 + 1, "]")
    else:
        chars.insert(pronoun_idx, "[")
        chars.insert(pronoun_idx + len(pronoun) + 1, "]")
        chars.insert(query_idx + 2, "_")
        chars.insert(query_idx + len(query) + 2 + 1, "_")
    return "".join(chars), None


NLI_LABELS = ["contradiction", "entailment", "neutral"]  # [PROC] CmnliProcessor.get_labels
# OCNLI: run_classifier_ocnli.sh passes --task_name=ocnli, which [PROC] @0059793 does not
# list; its NLI processor (CmnliProcessor: sentence1, sentence2, these labels) is followed.
# Every task's gold label is read from "label", the field cmrcx's task table reads
# (CmnliProcessor reads "gold_label"; which field the released files hold is not checked
# here).
# CLUE's data set name -> (record -> (text_a, text_b), label list of get_labels()).
PROCESSORS: dict[str, tuple[Callable[[dict], tuple], list[str]]] = {
    "afqmc": (_pair("sentence1", "sentence2"), ["0", "1"]),
    "cmnli": (_pair("sentence1", "sentence2"), NLI_LABELS),
    "ocnli": (_pair("sentence1", "sentence2"), NLI_LABELS),
    "csl": (_csl, ["0", "1"]),
    "cluewsc2020": (_wsc, ["true", "false"]),
    "tnews": (_single("sentence"), [str(100 + i) for i in range(17) if i not in (5, 11)]),
    "iflytek": (_single("sentence"), [str(i) for i in range(119)]),
}


class Features(NamedTuple):
    """The recipe's encoded records: int64 [records, max_length] arrays, lengths [records],
    label indices [records] (InputFeatures of [PROC])."""

    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray
    lengths: np.ndarray
    labels: np.ndarray


def read_records(path: str) -> list[dict]:
    """The official JSON-lines file, one record a line ([PROC] DataProcessor._read_json)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def recipe_features(dataset: str, path: str, tokenizer, max_length: int) -> Features:
    """Every labelled record of `path` as the recipe encodes it. A record whose label is
    not one of get_labels() (NLI's "-", no majority label) is left out, as cmrcx does;
    the script itself would stop on it (label_map KeyError)."""
    texts_of, labels = PROCESSORS[dataset]
    label_index = {label: i for i, label in enumerate(labels)}
    rows = []
    for number, record in enumerate(read_records(path), 1):
        label = str(record.get("label"))
        if label not in label_index:
            continue
        try:
            text_a, text_b = texts_of(record)
        except KeyError as error:
            raise DataFormatError(f"{path}: record {number}: no field {error}") from None
        encoded = tokenizer(
            text_a, text_b, max_length=max_length, truncation=True, return_token_type_ids=True
        )
        ids, types = encoded["input_ids"], encoded["token_type_ids"]
        padding = max_length - len(ids)
        rows.append(
            (ids + [0] * padding, [1] * len(ids) + [0] * padding, types + [0] * padding,
             len(ids), label_index[label])
        )  # fmt: skip
    if not rows:
        raise DataFormatError(f"{path}: no labelled records")
    ids, mask, types, lengths, label_ids = zip(*rows, strict=True)
    return Features(*(np.array(x, np.int64) for x in (ids, mask, types, lengths, label_ids)))


def labelled_records(dataset: str, path: str) -> int:
    """How many records of `path` have a label of get_labels() (those `recipe_features`
    encodes: the records of the recipe's t_total)."""
    labels = set(PROCESSORS[dataset][1])
    return sum(str(record.get("label")) in labels for record in read_records(path))


def match_rows(batches: Sequence[dict], features) -> list[np.ndarray]:
    """For each cmrcx batch, the indices of the recipe's features its real rows equal
    (token ids, segments, mask and label; a multiple-choice row: those of every choice).
    ConfigError naming the step and row of the first that equals none."""
    recipe_keys = (
        (features.input_ids[i].tobytes(), features.token_type_ids[i].tobytes(),
         features.attention_mask[i].tobytes(), int(features.labels[i]))
        for i in range(len(features.labels))
    )  # fmt: skip

    def keys(batch):
        for row in np.flatnonzero(batch["example_mask"]):
            yield (
                row,
                tuple(
                    np.asarray(batch[name][row], np.int64).tobytes()
                    for name in ("input_ids", "token_type_ids", "input_mask")
                )
                + (int(batch["label"][row]),),
            )

    return recipe_updates.matched_rows(
        recipe_keys, map(keys, batches),
        "cmrcx's input is no record of the official file as the CLUE recipe encodes it "
        "(token ids, segments, mask or label differ)",
    )  # fmt: skip


def batch_features(batches: Sequence[dict], features_class=Features):
    """The real rows of cmrcx's batches as the recipe's features, in order (for a family
    the recipe does not encode itself, CMRCX_FRAMED): no padding is cut (XLNet's is on
    the left), so `lengths` is the full row length."""
    rows = [(batch, row) for batch in batches for row in np.flatnonzero(batch["example_mask"])]
    if not rows:
        raise ConfigError("cmrcx's batches hold no real row")

    def stacked(name):
        return np.stack([np.asarray(batch[name][row], np.int64) for batch, row in rows])

    ids = stacked("input_ids")
    lengths = np.full(len(rows), ids.shape[-1], np.int64)
    arrays = (ids, stacked("input_mask"), stacked("token_type_ids"), lengths, stacked("label"))
    if features_class is Features:
        return Features(*arrays)
    ids, mask, types, _, labels = arrays
    return features_class(list(zip(ids, mask, types, labels, strict=True)))


def reference_classifier(config, params: dict, encoder_name: str, num_labels: int, out: str):
    """transformers' classifier of the family ([RUN] MODEL_CLASSES) holding `params` (the
    cmrcx tree: encoder + "classifier"), written to `out` by the family's HF writer.
    Every dropout is 0."""
    return reference_models.family_model(
        config, params, encoder_name, out, FAMILIES, "CLUE classification", HF_CLASSIFIERS,
        num_labels=num_labels,
    )  # fmt: skip


def t_total(train_records: int, batch_size: int, num_epochs: float, max_steps: int | None):
    """[RUN] train(): max_steps if set, else len(train_dataloader) * num_train_epochs
    (the loader's last batch partial: ceil)."""
    if max_steps:
        return max_steps
    return int(math.ceil(train_records / batch_size) * num_epochs)


def warmup_linear(warmup_steps: int, total: int) -> Callable[[int], float]:
    """[TF2] WarmupLinearSchedule.lr_lambda: the factor of the rate at update `step`."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return float(step) / float(max(1, warmup_steps))
        return max(0.0, float(total - step) / float(max(1.0, total - warmup_steps)))

    return factor


def collate(torch, features: Features, rows: np.ndarray) -> dict:
    """[PROC] collate_fn: the rows, cut to the batch's longest; the model's inputs."""
    longest = int(features.lengths[rows].max())
    return {
        "input_ids": torch.tensor(features.input_ids[rows, :longest]),
        "attention_mask": torch.tensor(features.attention_mask[rows, :longest]),
        "token_type_ids": torch.tensor(features.token_type_ids[rows, :longest]),
        "labels": torch.tensor(features.labels[rows]),
    }


def train_steps(model, features: Features, batches_rows, hyper: dict) -> RecipeRun:
    """[RUN] train() over the given batches: forward, backward, clip, AdamW step, schedule.

    hyper: learning_rate, weight_decay, adam_epsilon, max_grad_norm, warmup_proportion,
    t_total.
    """
    torch, _ = torch_and_transformers()
    factor = warmup_linear(int(hyper["t_total"] * hyper["warmup_proportion"]), hyper["t_total"])
    return updates(
        model, batches_rows, lambda rows: model(**collate(torch, features, rows))[0], factor, hyper
    )


def predict(model, features: Features, batch_size: int) -> np.ndarray:
    """[RUN] evaluate(): model.eval(), batches in file order, argmax: label indices
    [records]."""
    torch, _ = torch_and_transformers()
    model.eval()
    predicted = []
    with torch.no_grad():
        for start in range(0, len(features.labels), batch_size):
            rows = np.arange(start, min(start + batch_size, len(features.labels)))
            logits = model(**collate(torch, features, rows))[1]
            predicted.append(logits.numpy().argmax(axis=1))
    return np.concatenate(predicted)


def tokenizer_for(vocab_file: str, lower_case: bool):
    """[RUN] MODEL_CLASSES: BertTokenizer for every family it runs (ALBERT's Chinese
    releases included), from the run's vocab.txt; do_lower_case as the run script's flag.
    The pure-Python tokenizer the script had: `BertTokenizerLegacy` in transformers 5."""
    _, transformers = torch_and_transformers()
    if not os.path.isfile(vocab_file):
        raise ConfigError(f"vocabulary {vocab_file} not found")
    transformers.logging.set_verbosity_error()  # a note per truncated pair otherwise
    python_tokenizer = getattr(transformers, "BertTokenizerLegacy", transformers.BertTokenizer)
    return python_tokenizer(vocab_file, do_lower_case=lower_case)
