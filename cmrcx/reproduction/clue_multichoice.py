"""CLUE's PyTorch multiple-choice recipes (C3, ChID), ported where running them is impractical.

Sources (CLUEbenchmark/CLUE, baselines/models_pytorch/mrc_pytorch/):
  [C3]     run_c3.py @65dae35 (@0964517 read line for line; @65dae35 pads with "无效答案"
           where @0964517 pads with "", cmrcx.benchmarks.clue.c3 [RUN])
  [PRE]    preprocess/CHID_preprocess.py @959c3c9 (@74d6506 read: the same code, its answer
           file CSV where @959c3c9 reads the JSON {tag: index} of the CLUE zip)
  [MC]     run_multichoice_mrc.py @5c44cc2 (ChID: max_num_choices 10, the choice masks built
           but not given to the model, `get_final_predictions(g=True)`)
  [MODEL]  pytorch_modeling.py @0964517 BertForMultipleChoice: pooled output -> dropout ->
           Linear(hidden, 1) -> view(-1, num_choices), CrossEntropyLoss() (the batch mean)

What is the recipe's, line for line:
  - C3 records ([C3] c3Processor): the d- then m- file, context = "\\n".join(sentences),
    question, choices and answer lower-cased, choices padded to 4 with the filler, the label
    the last padded choice equal to the answer;
  - C3 encoding ([C3] convert_examples_to_features): tokenize context (a), choice (b),
    question (c); `_truncate_seq_tuple(a, b, c, max_seq_length - 4)`; ``[CLS] a [SEP] c
    [SEP] b [SEP]``, segment 0 through the first [SEP], 1 after; right padding with 0 to
    max_seq_length (no cut to the batch's longest: TensorDataset);
  - ChID records ([PRE] read_chid_examples): the quote/dash rewrite, `_tokenize_chinese_chars`
    (the character loop, a blank the 13 characters from "#idiom"), the whitespace split into
    doc tokens, one example per blank over the line's candidates;
  - ChID encoding ([PRE] convert_examples_to_features): each doc token tokenized on its own
    (a blank kept whole), `add_tokens_for_around` with max_seq_length - 3 - 5 tokens, other
    blanks 4 x [MASK] cut back to each side's length, per candidate ``[CLS] idiom [SEP] left
    [unused1] right [SEP]``, segments 0, padded candidates all 0;
  - the model and loss: [MODEL] (transformers' BertForMultipleChoice computes the same); the
    filler and padded choices are scored (no choice mask reaches the model);
  - prediction: C3 argmax per question, accuracy = mean(argmax == label) ([C3] accuracy());
    ChID the blanks of a line decoded together by [PRE] logits_matrix_to_array (global
    greedy: the highest remaining (blank, candidate) logit first), accuracy over the answer
    file's blanks.

The optimizer is the run's: the scripts' BERTAdam (tools/pytorch_optimization.py @2ea9046:
per-tensor clipping, no bias correction) is not what a cmrcx gin runs (its "adamw" is the
paper setting, runs/clue_mrc_finetune.gin), so `OPTIMIZERS` gives the recipe the
paper setting's AdamW (torch.optim.AdamW, global clipping, linear warm-up and decay).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np

from cmrcx.common.errors import ConfigError, DataFormatError
from cmrcx.reproduction import clue_classifier, recipe_updates, reference_models
from cmrcx.reproduction.reference_imports import torch_and_transformers

C3_CHOICES = 4  # [C3] n_class
C3_FILLER = "无效答案"  # [C3] @65dae35
C3_FILES = {"train": ("d-train.json", "m-train.json"), "validation": ("d-dev.json", "m-dev.json")}
CHID_CHOICES = 10  # [MC] max_num_choices
CHID_FILES = {"train": ("train.json", "train_answer.json"),
              "validation": ("dev.json", "dev_answer.json")}  # fmt: skip
SPIECE_UNDERLINE = "\u2581"  # [PRE]


class Features:
    """The recipe's examples: int64 [examples, choices, max_length] input_ids,
    attention_mask, token_type_ids; labels [examples]; for ChID, line [examples] (the
    [PRE] example_id) and tag [examples]."""

    def __init__(self, rows: list[tuple], line=None, tag=None):
        ids, mask, types, labels = zip(*rows, strict=True)
        self.input_ids, self.attention_mask, self.token_type_ids, self.labels = (
            np.array(x, np.int64) for x in (ids, mask, types, labels)
        )
        self.line, self.tag = line, tag


# --- C3 ------------------------------------------------------------------------------------


def c3_records(paths: Sequence[str]) -> list[tuple[str, str, list[str], int]]:
    """[C3] c3Processor + _create_examples: (context, question, 4 choices, label) per
    question, lower-cased, in file order (the training shuffle is the sampler's)."""
    records = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            documents = json.load(f)
        for d, document in enumerate(documents):
            for q, item in enumerate(document[1]):
                try:
                    choices = [c.lower() for c in item["choice"]]
                    choices += [C3_FILLER] * (C3_CHOICES - len(choices))
                    answer = item["answer"].lower()
                    question = item["question"].lower()
                except (KeyError, AttributeError, TypeError) as error:
                    raise DataFormatError(f"{path}: record {d}, question {q}: {error!r}") from None
                labels = [k for k in range(C3_CHOICES) if choices[k] == answer]
                if not labels:
                    raise DataFormatError(
                        f"{path}: record {d}, question {q}: field 'answer': {answer!r} is no "
                        "choice (the script's label would be -1)"
                    )
                records.append(("\n".join(document[0]).lower(), question, choices, labels[-1]))
    return records


def truncate_seq_tuple(tokens_a: list, tokens_b: list, tokens_c: list, max_length: int) -> None:
    """[C3] _truncate_seq_tuple: pop the longest (ties: a, then b) until all fit."""
    while len(tokens_a) + len(tokens_b) + len(tokens_c) > max_length:
        if len(tokens_a) >= len(tokens_b) and len(tokens_a) >= len(tokens_c):
            tokens_a.pop()
        elif len(tokens_b) >= len(tokens_a) and len(tokens_b) >= len(tokens_c):
            tokens_b.pop()
        else:
            tokens_c.pop()


def _padded(tokenizer, tokens: list[str], segments: list[int], max_length: int) -> tuple:
    ids = tokenizer.convert_tokens_to_ids(tokens)
    padding = max_length - len(ids)
    return ids + [0] * padding, [1] * len(ids) + [0] * padding, segments + [0] * padding


def c3_features(paths: Sequence[str], tokenizer, max_length: int) -> Features:
    """[C3] convert_examples_to_features of every question of `paths`."""
    rows = []
    for context, question, choices, label in c3_records(paths):
        encoded = []
        for choice in choices:
            tokens_a, tokens_b = tokenizer.tokenize(context), tokenizer.tokenize(choice)
            tokens_c = tokenizer.tokenize(question)
            truncate_seq_tuple(tokens_a, tokens_b, tokens_c, max_length - 4)
            tokens_b = tokens_c + ["[SEP]"] + tokens_b
            tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
            segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
            encoded.append(_padded(tokenizer, tokens, segments, max_length))
        ids, mask, types = zip(*encoded, strict=True)
        rows.append((ids, mask, types, label))
    if not rows:
        raise DataFormatError(f"{', '.join(paths)}: no questions")
    return Features(rows)


# --- ChID ----------------------------------------------------------------------------------

# [PRE] is_fuhao (its duplicates of "。" left out) and _is_chinese_char's blocks.
_FUHAO = set('。，！？；、：（）－~「《》,」"“”$『』—;()-～‘’')
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))  # fmt: skip
_REWRITES = (("“", '"'), ("”", '"'), ("——", "--"), ("—", "-"), ("―", "-"), ("…", "..."),
             ("‘", "'"), ("’", "'"))  # fmt: skip


def _tokenize_chinese_chars(text: str) -> str:
    """[PRE] _tokenize_chinese_chars: the underline around CJK characters, punctuation and
    blanks (a blank ends where the 13 characters from its "#idiom" end)."""
    output: list[str] = []
    is_blank = False
    for index, char in enumerate(text):
        if is_blank:
            output.append(char)
            if text[index - 12 : index + 1].startswith("#idiom"):
                is_blank = False
                output.append(SPIECE_UNDERLINE)
        elif (
            text[index : index + 6] == "#idiom"
            or char in _FUHAO
            or any(lo <= ord(char) <= hi for lo, hi in _CJK)
        ):
            is_blank = text[index : index + 6] == "#idiom"
            if output and output[-1] != SPIECE_UNDERLINE:
                output.append(SPIECE_UNDERLINE)
            output.append(char)
            if not is_blank:
                output.append(SPIECE_UNDERLINE)
        else:
            output.append(char)
    return "".join(output)


def doc_tokens(passage: str) -> list[str]:
    """[PRE] read_chid_examples: the rewrite, the underlines, the whitespace split."""
    for old, new in _REWRITES:
        passage = passage.replace(old, new)
    tokens: list[str] = []
    previous_is_whitespace = True
    for char in _tokenize_chinese_chars(passage).strip():
        if char in " \t\r\n\u202f" + SPIECE_UNDERLINE:
            previous_is_whitespace = True
            continue
        if previous_is_whitespace:
            tokens.append(char)
        else:
            tokens[-1] += char
        previous_is_whitespace = False
    return tokens


def add_tokens_for_around(tokens: list, pos: int, num_tokens: int) -> tuple[list, list]:
    """[PRE] add_tokens_for_around, negative slice starts included."""
    num_l = num_tokens // 2
    num_r = num_tokens - num_l
    if pos >= num_l and (len(tokens) - 1 - pos) >= num_r:
        return tokens[pos - num_l : pos], tokens[pos + 1 : pos + 1 + num_r]
    if pos <= num_l:
        left = tokens[:pos]
        return left, tokens[pos + 1 : pos + 1 + num_tokens - len(left)]
    right = tokens[pos + 1 :]
    return tokens[pos - (num_tokens - len(right)) : pos], right


def _masked(window: list[str], tag: str) -> list[str]:
    out: list[str] = []
    for token in window:
        out.extend(["[MASK]"] * 4 if "#idiom" in token and token != tag else [token])
    return out


def chid_blank_rows(tokens: list[str], tag: str, candidates, tokenizer, max_length: int):
    """[PRE] convert_examples_to_features `_loop`: (input_ids, mask, segments) of one blank,
    [CHID_CHOICES, max_length] each."""
    pieces: list[str] = []
    for token in tokens:
        pieces.extend([token] if "#idiom" in token else tokenizer.tokenize(token))
    left, right = add_tokens_for_around(pieces, pieces.index(tag), max_length - 3 - 5)
    num_l, num_r = len(left), len(right)
    left = _masked(left, tag)[-num_l:] if num_l else []  # [PRE] tokens_l[-num_l:] (none: [])
    right = _masked(right, tag)[:num_r]
    rows = []
    for idiom in candidates:
        sequence = ["[CLS]", *tokenizer.tokenize(idiom), "[SEP]", *left, "[unused1]", *right]
        sequence.append("[SEP]")
        rows.append(_padded(tokenizer, sequence, [0] * len(sequence), max_length))
    rows += [([0] * max_length,) * 3] * (CHID_CHOICES - len(rows))
    return tuple(zip(*rows, strict=True))


def chid_features(data_path: str, answer_path: str, tokenizer, max_length: int) -> Features:
    """Every blank of `data_path` ([PRE] read_chid_examples, convert_examples_to_features),
    labelled from the {tag: index} answer file."""
    with open(answer_path, encoding="utf-8") as f:
        answers = json.load(f)
    rows, line_of, tags = [], [], []
    with open(data_path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    for number, line in enumerate(lines):
        record = json.loads(line)
        for passage in record["content"]:
            tokens = doc_tokens(passage)
            for tag in [token for token in tokens if "#idiom" in token]:
                if tag not in answers:
                    raise DataFormatError(f"{answer_path}: no answer for {tag} (line {number + 1})")
                blank = chid_blank_rows(tokens, tag, record["candidates"], tokenizer, max_length)
                rows.append((*blank, answers[tag]))
                line_of.append(number)
                tags.append(tag)
    if not rows:
        raise DataFormatError(f"{data_path}: no blanks")
    return Features(rows, np.array(line_of), tags)


def chid_decode(features: Features, logits: np.ndarray) -> dict[str, int]:
    """[PRE] get_final_predictions(g=True) / logits_matrix_to_array: per line, the
    (candidate, blank) pairs by logit, highest first, each blank and candidate taken once."""
    predictions: dict[str, int] = {}
    for line in dict.fromkeys(features.line.tolist()):
        blanks = np.flatnonzero(features.line == line)
        matrix = logits[blanks].T  # [candidates, blanks]
        cells = sorted(
            ((i, j, matrix[i, j]) for i in range(matrix.shape[0]) for j in range(matrix.shape[1])),
            key=lambda cell: cell[2],
            reverse=True,
        )
        free_blanks, free_choices = set(range(len(blanks))), set(range(matrix.shape[0]))
        for i, j, _ in cells:
            if j in free_blanks and i in free_choices:
                predictions[features.tag[blanks[j]]] = i
                free_blanks.remove(j)
                free_choices.remove(i)
    return predictions


# --- The model, its steps and predictions --------------------------------------------------


# [MODEL]'s class and its ALBERT and XLNet counterparts in transformers, by the model_type
# of the family's HF writer (ALBERT in the albert_zh layout is written as the BertModel
# computing the same: `clue_classifier.HF_CLASSIFIERS`; XLNet's rows are cmrcx's,
# `clue_classifier.CMRCX_FRAMED`).
HF_MULTIPLE_CHOICE = {
    "bert": "BertForMultipleChoice",
    "albert": "AlbertForMultipleChoice",
    "xlnet": "XLNetForMultipleChoice",
}
FAMILIES = ("bert", "albert", "xlnet")  # the cmrcx families the recipe runs


def reference_model(config, params: dict, encoder_name: str, out: str):
    """transformers' multiple-choice model of the family ([MODEL]'s BertForMultipleChoice
    for BERT) holding `params`, every dropout 0. The batches' rows are matched to the
    recipe's examples by `clue_classifier.match_rows`."""
    return reference_models.family_model(
        config, params, encoder_name, out, FAMILIES, "CLUE multiple-choice", HF_MULTIPLE_CHOICE
    )


def _inputs(torch, features: Features, rows: np.ndarray) -> dict:
    return {
        "input_ids": torch.tensor(features.input_ids[rows]),
        "attention_mask": torch.tensor(features.attention_mask[rows]),
        "token_type_ids": torch.tensor(features.token_type_ids[rows]),
    }


# RunConfig.optimizer -> the recipe's optimizer (recipe_updates.updates' `optimizer`).
OPTIMIZERS = {
    "adamw": recipe_updates.torch_adamw,
    "transformers2_adamw": recipe_updates.transformers2_adamw,
}


def train_steps(model, features: Features, batches_rows, hyper: dict, optimizer: str):
    """The recipe's updates over the given batches: the batch's mean cross-entropy over
    every choice ([MODEL]), backward, global clipping, the optimizer at learning_rate *
    warm-up/decay factor (hyper as clue_classifier.train_steps', and
    gradient_accumulation_steps: a batch in that many micro-batches, as run_mrc_c3.sh's 4)."""
    torch, _ = torch_and_transformers()
    if optimizer not in OPTIMIZERS:
        raise ConfigError(
            f"RunConfig.optimizer {optimizer!r}: the CLUE multiple-choice recipe runs "
            f"{', '.join(OPTIMIZERS)}"
        )
    total = hyper["t_total"]
    factor = clue_classifier.warmup_linear(int(total * hyper["warmup_proportion"]), total)

    accumulation = hyper.get("gradient_accumulation_steps", 1)

    def batch_loss(rows):
        """[C3] / [MC] main(): each of `accumulation` micro-batches' mean loss divided by
        their number, the gradients summed before the step (one backward of the sum)."""
        losses = [
            model(**_inputs(torch, features, micro), labels=torch.tensor(features.labels[micro]))
            .loss for micro in np.array_split(rows, accumulation)
        ]  # fmt: skip
        return sum(losses) / accumulation

    return recipe_updates.updates(
        model, batches_rows, batch_loss, factor, hyper, OPTIMIZERS[optimizer]
    )


def logits(model, features: Features, batch_size: int) -> np.ndarray:
    """model.eval(), the examples in file order: float32 [examples, choices]."""
    torch, _ = torch_and_transformers()
    model.eval()
    examples = np.arange(len(features.labels))
    batches = [examples[i : i + batch_size] for i in range(0, len(examples), batch_size)]
    with torch.no_grad():
        scores = [model(**_inputs(torch, features, rows)).logits.numpy() for rows in batches]
    return np.concatenate(scores)


def examples(task: str, paths: Sequence[str]) -> int:
    """The recipe's training examples, read without encoding them: C3's questions, ChID's
    blanks (the answer file's tags)."""
    if task.startswith("clue_c3"):
        return len(c3_records(paths))
    with open(paths[1], encoding="utf-8") as f:
        return len(json.load(f))


def split_paths(task: str, data_dir: str, split: str) -> list[str]:
    files = C3_FILES if task.startswith("clue_c3") else CHID_FILES
    if split not in files:
        raise ConfigError(f"{task}: the recipe reads {', '.join(files)}; not {split}")
    return [os.path.join(data_dir, name) for name in files[split]]
