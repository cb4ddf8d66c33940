"""SeqIO tasks for LOT's generation tasks, PlotCom and OutGen (LOT paper sections 3.3, 3.4
and 5.2): a table plus a loop. A decoder-only family (GPT-2, BERT's vocab.txt) gets the same
texts as a prompt and its continuation (`lm_tokenize_and_trim`, the causal "gpt2" input
layout of `cmrcx.vocab.layouts`).

`register(vocabulary_name, spiece_model, {"lot_outgen": DATA_DIR, ...})` registers, per task
given a folder of its official files (train.jsonl, val.jsonl, test.jsonl), the task
`<task>_<vocabulary_name>` (`lot_plotcom_longlm`, `lot_outgen_tiny`, ...). Splits "train",
"validation" (val.jsonl), "test", each prepared from its file when first read
(`cmrcx.datasets.lot`), in file order.

From a record of the `lot` TFDS builder to a seq2seq example:
  1. `seq2seq_texts`: the input and target texts of `cmrcx.benchmarks.lot.generation`
     (TF twins, tested against it): OutGen ``TITLE#p1#...#pn<extra_id_1>`` ->
     ``<extra_id_1>STORY`` (the authors' baselines/generation format; without a title
     ``p1#...#pn<extra_id_1>``); PlotCom the story with its blank replaced by
     ``<extra_id_1>`` -> ``<extra_id_1>PLOT`` (cmrcx's analogue: the authors released no
     PlotCom format). A test record without a target gets ``<extra_id_1>`` alone.
  2. `tokenize_and_trim`: each text tokenized as transformers' T5Tokenizer
     (`T5SentencePieceVocabulary`: the written sentinel becomes its id), cut to its
     length - 1 ids and EOS appended: what the authors' `tokenizer(..., truncation=True,
     max_length=512)` gives (truncation keeps the first ids, so a cut OutGen input loses
     its end, the sentinel with it, as theirs does). A cut PlotCom input (our format)
     keeps the ids around its blank instead (`window_around`).
Features: "inputs", "targets" (int32 ids, EOS last), and carried for the prediction
files: "example_index" (int32, the record's place in its split), "line" (int32, its
1-based line) and "raw" (string, the official JSON object as read).

Postprocessing and metrics: predictions are the decoded output, special tokens kept
(`decoded_output`), cleaned as the authors' gen.py does
(`cmrcx.benchmarks.lot.generation.generation_text`); targets are the official JSON
objects (`raw`), and `official_metrics` scores them as `cmrcx.score` scores the prediction
file (the official eval.py's semantics: `cmrcx.benchmarks.lot.generation_metrics`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence

import seqio
import tensorflow as tf

from cmrcx.benchmarks.lot import generation
from cmrcx.benchmarks.lot.formats import MASK
from cmrcx.datasets import lot as lot_tfds
from cmrcx.tasks import task_name
from cmrcx.tasks.sources import FileOrderSource
from cmrcx.vocab import layouts
from cmrcx.vocab.sentencepiece import SENTINEL_TOKEN, T5SentencePieceVocabulary
from cmrcx.vocab.wordpiece import WordPieceVocabulary

SPLITS = ("train", "validation", "test")
FIRST_SENTINEL = 1  # LongLM's <extra_id_1> (cmrcx.tasks.lot.pretraining.FIRST_SENTINEL)
# A decoder-only model over BERT's vocab.txt (GPT-2): PlotCom's blank, kept whole.
WORDPIECE_SENTINEL = "[unused1]"


@dataclasses.dataclass(frozen=True)
class GenerationTask:
    """One LOT generation task (its Table 11 cells: `cmrcx.benchmarks.lot.paper`)."""

    name: str  # registered as <name>_<vocabulary_name>; RunConfig.task
    lot_task: str  # `cmrcx.benchmarks.lot.formats.TASKS` / `lot` TFDS config name
    target_field: str  # the official file's target: PlotCom "plot", OutGen "story"


TASKS = {
    "lot_plotcom": GenerationTask(name="lot_plotcom", lot_task="plotcom", target_field="plot"),
    "lot_outgen": GenerationTask(name="lot_outgen", lot_task="outgen", target_field="story"),
}


def get_task(name: str) -> GenerationTask:
    if name not in TASKS:
        raise KeyError(f"not a LOT generation task: {name!r}; tasks: {', '.join(TASKS)}")
    return TASKS[name]


# --- Preprocessors ----------------------------------------------------------------------


def seq2seq_texts(dataset: tf.data.Dataset, *, lot_task: str, sentinel: str) -> tf.data.Dataset:
    """A `lot` TFDS record -> its input and target texts (`cmrcx.benchmarks.lot.generation`).

    OutGen {"title": "运神像的驴子", "outline": ["神像放在驴子", "赶着进城"],
    "story": "有个人...", "line", "raw", "example_index"} ->
    {"source": "运神像的驴子#神像放在驴子#赶着进城<extra_id_1>",
     "target": "<extra_id_1>有个人...", "line", "raw", "example_index"};
    PlotCom {"story": "甲。<mask>丙。", "plot": "乙。", ...} ->
    {"source": "甲。<extra_id_1>丙。", "target": "<extra_id_1>乙。", ...}.
    """

    separator = generation.OUTLINE_SEPARATOR

    def texts(example):
        if lot_task == "outgen":
            title = example["title"]
            phrases = tf.strings.reduce_join(example["outline"], separator=separator)
            fields = tf.where(
                tf.strings.length(title) > 0, tf.strings.join([title, phrases], separator), phrases
            )
            source, target = tf.strings.join([fields, sentinel]), example["story"]
        else:
            source = tf.strings.regex_replace(example["story"], MASK, sentinel)
            target = example["plot"]
        return {
            "source": source,
            "target": tf.strings.join([sentinel, target]),
            "example_index": example["example_index"],
            "line": example["line"],
            "raw": example["raw"],
        }

    return dataset.map(texts, num_parallel_calls=tf.data.AUTOTUNE)


def window_around(ids: tf.Tensor, keep_id: int | None, length: int) -> tf.Tensor:
    """`ids[:length]`; but when `keep_id` (PlotCom's blank) first occurs past that, the
    `length` ids centred on it (within `ids`), so a long story's blank stays in the
    input. Inputs whose blank is within the first `length` ids are cut as before."""
    if keep_id is None:
        return ids[:length]
    hits = tf.cast(tf.where(tf.equal(ids, keep_id))[:, 0], tf.int32)
    at = tf.cond(tf.size(hits) > 0, lambda: hits[0], lambda: tf.constant(0, tf.int32))
    last_start = tf.maximum(tf.shape(ids)[0] - length, 0)
    start = tf.where(at < length, 0, tf.minimum(at - length // 2, last_start))
    return ids[start : start + length]


def tokenize_and_trim(
    dataset: tf.data.Dataset,
    *,
    vocabulary: T5SentencePieceVocabulary,
    input_length: int,
    target_length: int,
    keep_sentinel: bool = False,
) -> tf.data.Dataset:
    """{"source": "甲<extra_id_1>", "target": "<extra_id_1>乙", ...} ->
    {"inputs": [▁, 甲, S1, EOS], "targets": [S1, ▁, 乙, EOS], ...} (S1: the id of
    <extra_id_1>): each text's first length - 1 ids, then EOS. `keep_sentinel`
    (PlotCom): an input longer than that keeps S1 in view (`window_around`)."""
    eos = tf.constant([vocabulary.eos_id], tf.int32)
    keep = vocabulary.sentinel_id(FIRST_SENTINEL) if keep_sentinel else None

    def tokenize(example):
        ids = vocabulary.encode_tf(tf.stack([example["source"], example["target"]]))
        out = {k: v for k, v in example.items() if k not in ("source", "target")}
        out["inputs"] = tf.concat([window_around(ids[0], keep, input_length - 1), eos], 0)
        out["targets"] = tf.concat([ids[1][: target_length - 1], eos], 0)
        return out

    return dataset.map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)


def lm_tokenize_and_trim(
    dataset: tf.data.Dataset,
    *,
    vocabulary: WordPieceVocabulary,
    sentinel: str,
    input_length: int,
    target_length: int,
    keep_sentinel: bool = False,
) -> tf.data.Dataset:
    """The texts of `seq2seq_texts` (with `WORDPIECE_SENTINEL`) as a decoder-only LM
    (GPT-2, BERT's vocab.txt) reads them, cmrcx's format (the LOT authors released no
    GPT-2 script): the prompt ``[CLS] SOURCE [SEP]`` (UER-py's scripts/generate_lm.py starts a
    text with [CLS]; its LM pretraining data, uer/utils/data.py LmDataset, is ``[CLS] line
    [SEP]``), the
    OutGen source without its final sentinel, PlotCom's blank kept as ``[unused1]``; the
    continuation ``TARGET [SEP]`` (the sentinel prefix dropped; [SEP] is GPT2Config's EOS).
    Each text's first length - 2 (prompt) / length - 1 (target) ids are kept; with
    `keep_sentinel` (PlotCom) a longer prompt keeps the blank in view (`window_around`)."""
    cls, sep = vocabulary.cls_id, vocabulary.sep_id
    keep = vocabulary.token_to_id(sentinel) if keep_sentinel else None
    escaped = sentinel.replace("[", r"\[").replace("]", r"\]")

    def tokenize(example):
        source = tf.strings.regex_replace(example["source"], escaped + "$", "")
        target = tf.strings.substr(example["target"], len(sentinel), -1)
        ids = vocabulary.encode_tf(tf.stack([source, target]))
        out = {k: v for k, v in example.items() if k not in ("source", "target")}
        out["inputs"] = tf.concat([[cls], window_around(ids[0], keep, input_length - 2), [sep]], 0)
        out["targets"] = tf.concat([ids[1][: target_length - 1], [sep]], 0)
        return out

    return dataset.map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)


# --- Postprocessing and metrics ---------------------------------------------------------


def decoded_output(vocabulary: T5SentencePieceVocabulary, ids: Sequence[int], eos_id: int):
    """Generated ids -> the text gen.py's `pro` reads: T5Tokenizer's `decode(ids)`, special
    tokens kept (sentinels as <extra_id_k>, unk as <unk>), and "</s>" after it when the
    model produced its EOS (`eos_id`). `ids` are the generated tokens only (none after
    the EOS, none past the decoding's max_new_tokens).

    A row without EOS reached the length limit: no "</s>", so `generation_text` keeps its
    last character unless asked to drop it as gen.py does.
    """
    ids = [int(i) for i in ids]
    if eos_id in ids:
        return vocabulary.decode(ids[: ids.index(eos_id)]) + " " + generation.EOS_TEXT
    return vocabulary.decode(ids)


def generation_postprocessor(output, example=None, is_target=False, *, drop_last_char=False):
    """Predictions: a `decoded_output` text -> `generation_text` (gen.py's clean-up; its
    drop-the-last-character slip when there is no "</s>" only with `drop_last_char`).
    Targets: the example's official JSON object (its "raw" line), what the official
    eval.py reads from the gold file."""
    if is_target:
        raw = example["raw"]
        return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    return generation.generation_text(output, drop_last_char)


def official_metrics(targets, predictions, *, lot_task: str) -> dict[str, float]:
    """What `python -m cmrcx.score lot_<task> GOLD PRED` reports of the same texts:
    `cmrcx.benchmarks.lot.generation_metrics.generation_metrics` of `predictions` (the
    cleaned texts) against `targets` (the gold JSON objects), and for OutGen the
    organisers' weighted score of those (`cmrcx.benchmarks.lot.overall`), as
    `cmrcx.benchmarks.lot.scoring.score_generation` adds it."""
    # The scorers' modules, loaded when scoring (jieba, nltk).
    from cmrcx.benchmarks.lot.generation_metrics import generation_metrics

    scores = dict(generation_metrics(lot_task, list(targets), list(predictions)))
    if lot_task == "outgen":
        from cmrcx.benchmarks.lot.overall import organisers_weighted_score

        scores["organisers-weighted-score"] = organisers_weighted_score(scores)
    return scores


# --- Registration -----------------------------------------------------------------------


def _source(row: GenerationTask, data_dir: str, cache_dir: str | None) -> seqio.DataSource:
    """The split's `lot` records in file order, each with its "example_index", whatever
    the shuffle or seed (`FileOrderSource`; the input pipeline shuffles)."""

    def official_split(split: str) -> tf.data.Dataset:
        records = lot_tfds.load_split(row.lot_task, data_dir, split, cache_dir)
        return records.enumerate().map(
            lambda index, record: {**record, "example_index": tf.cast(index, tf.int32)}
        )

    return FileOrderSource(official_split, splits=list(SPLITS))


def register(
    vocabulary_name: str,
    spiece_model: str,
    data_dirs: Mapping[str, str],
    *,
    max_length: int = 512,
    target_length: int = 512,
    tfds_cache_dir: str | None = None,
    drop_last_char_without_eos: bool = False,
    layout: str | layouts.Layout = "t5",
) -> list[str]:
    """Registers a SeqIO task per LOT generation task of ``data_dirs``.

    Args:
      vocabulary_name: suffix of the task names, e.g. "longlm".
      spiece_model: the model's spiece.model (`T5SentencePieceVocabulary`, 100 sentinels).
      data_dirs: task name ("lot_plotcom", "lot_outgen") -> the folder of its official
        train.jsonl / val.jsonl / test.jsonl.
      max_length, target_length: input and target ids at most, EOS included (LOT paper
        section 5.2: 512).
      tfds_cache_dir: where prepared splits go (default ~/.cache/cmrcx/tfds).
      drop_last_char_without_eos: reproduce gen.py's slip (`generation_text`).
      layout: the family's input layout (`cmrcx.vocab.layouts`, or its name): "t5" (a
        seq2seq model: `tokenize_and_trim`, EOS after each text) or a causal one, "gpt2"
        (spiece_model is then a BERT vocab.txt: a decoder-only LM's prompt and
        continuation, `lm_tokenize_and_trim`).

    Returns the task names, in `TASKS` order. Registering again replaces them.
    """
    rows = [get_task(name) for name in data_dirs]  # KeyError naming the known tasks
    if not rows:
        raise ValueError("register: no data dirs given, so no LOT generation task to register")
    if min(max_length, target_length) < 2:
        raise ValueError(f"lengths {max_length}/{target_length}: room for a token and EOS needed")
    layout = layouts.layout(layout)
    vocabulary = layout.vocabulary(spiece_model)
    if layout.causal:  # a decoder-only LM continues its prompt
        sentinel = WORDPIECE_SENTINEL
        tokenize = functools.partial(lm_tokenize_and_trim, sentinel=sentinel)
    else:
        sentinel, tokenize = SENTINEL_TOKEN.format(FIRST_SENTINEL), tokenize_and_trim
    add_eos = not layout.causal  # the LM texts end in [SEP] already
    features = {key: seqio.Feature(vocabulary, add_eos=add_eos) for key in ("inputs", "targets")}
    names = []
    for row in TASKS.values():
        name = task_name(row.name, vocabulary_name)
        seqio.TaskRegistry.remove(name)
        if row.name not in data_dirs:
            continue
        seqio.TaskRegistry.add(
            name,
            source=_source(row, data_dirs[row.name], tfds_cache_dir),
            preprocessors=[
                functools.partial(seq2seq_texts, lot_task=row.lot_task, sentinel=sentinel),
                functools.partial(
                    tokenize,
                    vocabulary=vocabulary,
                    input_length=max_length,
                    target_length=target_length,
                    keep_sentinel=row.lot_task == "plotcom",
                ),
            ],
            output_features=features,
            postprocess_fn=functools.partial(
                generation_postprocessor, drop_last_char=drop_last_char_without_eos
            ),
            metric_fns=[functools.partial(official_metrics, lot_task=row.lot_task)],
        )
        names.append(name)
    return names
