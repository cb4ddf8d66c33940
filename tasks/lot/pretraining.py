"""SeqIO tasks for LongLM pretraining (LOT paper section 4): a table plus a loop.

`register(vocabulary_name, spiece_model, {"train": corpus_dir, ...})` registers, per
row of `TASKS`, the task `<row name>_<vocabulary_name>` (`longlm_infilling_longlm`,
`longlm_continuation_longlm`, ...) and the mixture `longlm_pretrain` of the two, rate 1
each (the paper gives no ratio). Splits: "train" reads `corpus_dir/*.txt`, "validation"
`validation_dir/*.txt` when one is given (the paper holds out 1,000 texts; cut them off
into their own folder). Files are the shards of a multi-host run (`seqio.FileDataSource`).

From files to texts, shared by both tasks (Table 9 scores both on the same texts):
  1. `read_corpus_file`: one record per file, its lines (split at "\\n", a BOM at a line
     start dropped). A file that is not UTF-8 stops the pipeline with an error naming the
     file and its first bad line.
  2. `tokenize_lines`: each line tokenized on its own, as transformers' T5Tokenizer(line)
     (`T5SentencePieceVocabulary`; blank lines give no ids), the ids joined: the file's
     token stream.
  3. `split_into_texts`: each run of `text_length` consecutive tokens of a file is a text
     (section 4, "Pretraining Data": novels are split into segments); a file's last text
     may be shorter, and is dropped under 2 tokens. `text_id` = "<file name>:<k>".
Then the row's objective, with SeqIO's seeds (a seed gives the same examples), in TF ops
whose semantics are `cmrcx.benchmarks.lot.pretraining`:
  - `text_infilling`: 15% of the tokens in spans of Poisson(3) lengths, each replaced by
    a sentinel; targets = sentinel, span, sentinel, span, ...
  - `conditional_continuation`: a split uniform in [1, len - 1]; inputs = front +
    sentinel, targets = sentinel + back.
  4. EOS appended to both (`append_eos_after_trim`; `text_length` makes trimming
     impossible, see `check_lengths`).
Features: "inputs", "targets" (int32 ids, EOS last), "text_id" (string, not a model input).

Sentinels: span k gets `<extra_id_{first_sentinel + k}>` (id vocab_size - 1 - that). LongLM
numbers from <extra_id_1>: its model card's infilling example uses <extra_id_1> ...
<extra_id_7> and its continuation example ends with <extra_id_1> (huggingface.co/thu-coai/
LongLM-large README), and the authors' generation data put <extra_id_1> at the end of the
input and the start of the target (thu-coai/LOT-LongLM baselines/generation/test.source,
test.target @7c76ad1b). `first_sentinel=0` gives T5's numbering.

Metrics (Table 9): `perplexity` (a score metric over each target's log-likelihood) and
`bleu` (BLEU-3/4 the LOT way), after `text_postprocessor`. `TASKS[...].decoding` says how
the BLEU generations are made (greedy for infilling; top-k 40, temperature 0.7 for
continuation: section 4, "Model Performance").
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence

import seqio
import tensorflow as tf

from cmrcx.benchmarks.lot import pretraining
from cmrcx.tasks import task_name
from cmrcx.tasks.sources import FileOrderSource
from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary

MIXTURE_NAME = "longlm_pretrain"
FIRST_SENTINEL = 1  # LongLM's <extra_id_1> (module docstring)
MIN_TEXT_TOKENS = 2  # both objectives need a token on each side


@dataclasses.dataclass(frozen=True)
class Decoding:
    """How generations are made (`cmrcx.models.decoding`): pretraining BLEU, LOT PlotCom/OutGen."""

    method: str  # "greedy" | "sample" (`decoding.greedy` / `decoding.sample`)
    top_k: int = 0  # sample among the k most likely tokens; 0: all
    temperature: float = 1.0  # logits / temperature before sampling
    max_new_tokens: int | None = None  # tokens at most, EOS included; None: target_length


@dataclasses.dataclass(frozen=True)
class PretrainTask:
    """One pretraining task: its objective, decoding and the paper's Table 9 row."""

    name: str  # registered as <name>_<vocabulary_name>
    objective: str  # key of OBJECTIVES
    decoding: Decoding  # section 4, "Model Performance"
    table9: Mapping[str, tuple[float, float, float]]  # model -> (PPL, BLEU-3, BLEU-4)


TASKS = {
    "longlm_infilling": PretrainTask(
        name="longlm_infilling",
        objective="infilling",
        decoding=Decoding("greedy"),
        table9={
            "longlm_small": (11.61, 73.80, 68.96),
            "longlm_base": (8.24, 75.65, 71.05),
            "longlm_large": (6.50, 77.08, 72.65),
        },
    ),
    "longlm_continuation": PretrainTask(
        name="longlm_continuation",
        objective="continuation",
        decoding=Decoding("sample", top_k=40, temperature=0.7),
        table9={
            "longlm_small": (22.91, 5.30, 2.43),
            "longlm_base": (17.03, 5.73, 2.64),
            "longlm_large": (14.08, 8.91, 5.97),
        },
    ),
}


# --- Files to texts ---------------------------------------------------------------------


def read_corpus_file(path: tf.Tensor) -> tf.data.Dataset:
    """A file name -> one record {"path": str [], "lines": str [num_lines]}.

    Lines are split at "\\n" (a "\\r" before it stays: T5Tokenizer reads it as white
    space); a U+FEFF at a line start is dropped. Bytes that are not UTF-8 fail an
    assertion naming the file and the 1-based number of the first bad line.
    """
    lines = tf.strings.split(tf.io.read_file(path), "\n")
    valid = tf.equal(tf.strings.unicode_transcode(lines, "UTF-8", "UTF-8", errors="replace"), lines)
    first_bad = tf.argmin(tf.cast(valid, tf.int32)) + 1
    check = tf.debugging.Assert(
        tf.reduce_all(valid), ["corpus file is not UTF-8 text:", path, "first bad line:", first_bad]
    )
    with tf.control_dependencies([check]):
        lines = tf.strings.regex_replace(lines, "^\ufeff", "")
    return tf.data.Dataset.from_tensors({"path": path, "lines": lines})


def tokenize_lines(dataset: tf.data.Dataset, vocabulary) -> tf.data.Dataset:
    """{"path", "lines": ["从前", "", "有座山"]} -> {"path", "tokens": [▁, 从前, ▁, 有, 座山]}.

    Each line is encoded on its own (its own "▁" prefix), blank lines give no ids.
    """

    def tokenize(example):
        ids = vocabulary.encode_tf(example["lines"])  # ragged [lines, None]
        return {"path": example["path"], "tokens": ids.flat_values}

    return dataset.map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)


def split_into_texts(dataset: tf.data.Dataset, text_length: int) -> tf.data.Dataset:
    """One file's token stream -> texts of `text_length` consecutive tokens.

    {"path": "a/x.txt", "tokens": [1, 2, 3, 4, 5, 6, 7]} with text_length 3 ->
    {"text_id": "x.txt:0", "tokens": [1, 2, 3]}, {"text_id": "x.txt:1", "tokens": [4, 5, 6]}
    (the last text, [7], is under MIN_TEXT_TOKENS and dropped).
    """

    def texts(example):
        tokens, name = example["tokens"], tf.strings.regex_replace(example["path"], r"^.*[/\\]", "")

        def text(start):
            number = tf.strings.as_string(start // text_length)
            return {
                "text_id": tf.strings.join([name, number], ":"),
                "tokens": tokens[start : start + text_length],
            }

        starts = tf.range(0, tf.size(tokens), text_length)
        return tf.data.Dataset.from_tensor_slices(starts).map(text)

    return dataset.flat_map(texts).filter(lambda ex: tf.size(ex["tokens"]) >= MIN_TEXT_TOKENS)


# --- Objectives (TF twins of cmrcx.benchmarks.lot.pretraining) ----------------------------


def infill_from_spans(tokens, starts, span_lengths, sentinel_ids):
    """(inputs, targets) of text infilling without EOS, as `pretraining.infilling_pair`.

    tokens int32 [L]; starts, span_lengths int32 [S] (increasing, not touching);
    sentinel_ids int32 [>= S]. Sentinel k sorts just before token starts[k] (key 2 * start,
    token p has key 2p + 1): inputs are the sorted stream without span tokens, targets the
    sentinels with their span tokens.
    """
    length, num_spans = tf.size(tokens), tf.size(starts)
    ends = starts + span_lengths
    edges = tf.math.unsorted_segment_sum(
        tf.concat([tf.ones_like(starts), -tf.ones_like(starts)], 0),
        tf.concat([starts, ends], 0),
        length + 1,
    )
    in_span = tf.cumsum(edges)[:length] > 0  # [L]
    keys = tf.concat([2 * tf.range(length) + 1, 2 * starts], 0)
    order = tf.argsort(keys, stable=True)
    values = tf.gather(tf.concat([tokens, sentinel_ids[:num_spans]], 0), order)
    is_span = tf.gather(tf.concat([in_span, tf.zeros([num_spans], tf.bool)], 0), order)
    is_sentinel = tf.gather(
        tf.concat([tf.zeros([length], tf.bool), tf.ones([num_spans], tf.bool)], 0), order
    )
    return tf.boolean_mask(values, ~is_span), tf.boolean_mask(values, is_span | is_sentinel)


def infill_example(tokens, seed, sentinel_ids, noise_density, mean_span_length):
    """One text infilling example: `pretraining.sample_infilling` in TF ops.

    tokens int32 [L >= 2]; seed int [2] (stateless). Returns (inputs, targets), no EOS.
    """
    tokens = tf.convert_to_tensor(tokens, tf.int32)
    sentinel_ids = tf.convert_to_tensor(sentinel_ids, tf.int32)
    length = tf.size(tokens)
    num_noise = tf.cast(tf.round(tf.cast(length, tf.float64) * noise_density), tf.int32)
    num_noise = tf.clip_by_value(num_noise, 1, length - 1)
    draw_seed, place_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    # Span lengths: pretraining.span_lengths_from_draws.
    draws = tf.random.stateless_poisson([num_noise + 1], draw_seed, mean_span_length, tf.int32)
    reached = tf.cumsum(draws) >= num_noise
    num_spans = tf.where(
        tf.reduce_any(reached), tf.argmax(reached, output_type=tf.int32) + 1, num_noise + 1
    )
    head = draws[: num_spans - 1]
    span_lengths = tf.concat([head, [num_noise - tf.reduce_sum(head)]], 0)
    tf.debugging.assert_less_equal(
        num_spans, tf.size(sentinel_ids), message="more spans than sentinels"
    )
    # Placement: pretraining.place_spans (num_spans of free + num_spans slots, uniformly).
    free = length - num_noise - (num_spans - 1)
    tf.debugging.assert_non_negative(free, message="noise_density leaves no room between spans")
    scores = tf.random.stateless_uniform([free + num_spans], place_seed)
    chosen = tf.sort(tf.math.top_k(scores, k=num_spans).indices)
    starts = chosen + tf.cumsum(span_lengths, exclusive=True)
    return infill_from_spans(tokens, starts, span_lengths, sentinel_ids)


def continue_example(tokens, seed, sentinel_id):
    """One conditional continuation example: `pretraining.sample_continuation` in TF ops."""
    tokens = tf.convert_to_tensor(tokens, tf.int32)
    split = tf.random.stateless_uniform([], seed, 1, tf.size(tokens), tf.int32)
    sentinel = tf.fill([1], tf.cast(sentinel_id, tf.int32))
    return tf.concat([tokens[:split], sentinel], 0), tf.concat([sentinel, tokens[split:]], 0)


@seqio.map_over_dataset(num_seeds=1)
def text_infilling(
    example,
    seed,
    *,
    sentinel_ids: Sequence[int],
    noise_density: float = pretraining.NOISE_DENSITY,
    mean_span_length: float = pretraining.MEAN_SPAN_LENGTH,
):
    """{"text_id", "tokens": [从, 前, 有, 座, 山]} -> {"text_id", "inputs": [从, S0, 座, 山],
    "targets": [S0, 前, 有]} (S0 = sentinel_ids[0]; spans drawn at random)."""
    inputs, targets = infill_example(
        example["tokens"], seed, sentinel_ids, noise_density, mean_span_length
    )
    return {"text_id": example["text_id"], "inputs": inputs, "targets": targets}


@seqio.map_over_dataset(num_seeds=1)
def conditional_continuation(example, seed, *, sentinel_ids: Sequence[int]):
    """{"text_id", "tokens": [从, 前, 有, 座, 山]} -> {"text_id", "inputs": [从, 前, S0],
    "targets": [S0, 有, 座, 山]} (the split drawn at random)."""
    inputs, targets = continue_example(example["tokens"], seed, sentinel_ids[0])
    return {"text_id": example["text_id"], "inputs": inputs, "targets": targets}


OBJECTIVES = {"infilling": text_infilling, "continuation": conditional_continuation}


# --- Postprocessing and metrics ---------------------------------------------------------


def text_postprocessor(output, example=None, is_target=False):
    """Decoded ids -> `pretraining.generation_text` (sentinels, white space dropped).

    Targets become {"text": ..., "num_tokens": ids in the example's targets, EOS
    included}, what `perplexity` divides by; predictions stay text. The example's
    targets are unpadded (seqio's, or cut at their mask), so every id counts: id 0 is
    <unk> in LongLM's spiece.model, a token like any other.
    """
    text = pretraining.generation_text(output)
    if not is_target:
        return text
    num_tokens = None if example is None else len(example["targets"])
    return {"text": text, "num_tokens": num_tokens}


def bleu(targets, predictions) -> dict[str, float]:
    """{"bleu-3", "bleu-4"}: LOT's BLEU (percent), targets from `text_postprocessor`."""
    return pretraining.lot_bleu([t["text"] for t in targets], list(predictions))


def perplexity(targets, scores) -> dict[str, float]:
    """{"perplexity"}: scores [N] are each target's summed log-likelihood (natural log)."""
    counts = [t["num_tokens"] for t in targets]
    if None in counts:
        raise ValueError("perplexity: a target without its token count (postprocess_fn example)")
    return {"perplexity": pretraining.perplexity(list(scores), counts)}


# --- Registration -----------------------------------------------------------------------


def longlm_sentinel_ids(vocabulary: T5SentencePieceVocabulary, first_sentinel: int) -> tuple:
    """Ids of <extra_id_{first_sentinel}>, <extra_id_{first_sentinel + 1}>, ... (span order)."""
    return tuple(vocabulary.sentinel_id(k) for k in range(first_sentinel, vocabulary.extra_ids))


def check_lengths(text_length: int, input_length: int, target_length: int, num_sentinels: int):
    """Raises ValueError unless every example of a `text_length` text fits untrimmed.

    Infilling: at most num_noise + 1 spans, so inputs <= text_length + 1 and targets <=
    2 * num_noise + 1, each plus EOS. Continuation: both halves <= text_length - 1, plus
    a sentinel and EOS.
    """
    num_noise = pretraining.num_noise_tokens(text_length)
    limits = {
        "inputs": (text_length + 2, input_length),
        "targets": (max(2 * num_noise + 2, text_length + 1), target_length),
        "sentinels": (num_noise + 1, num_sentinels),
    }
    for what, (needed, available) in limits.items():
        if needed > available:
            raise ValueError(
                f"text_length {text_length} needs up to {needed} {what}, {available} given"
            )


def register(
    vocabulary_name: str,
    spiece_model: str,
    data_dirs: Mapping[str, str | None],
    *,
    max_length: int = 512,
    target_length: int = 512,
    text_length: int | None = None,
    first_sentinel: int = FIRST_SENTINEL,
) -> list[str]:
    """Registers both pretraining tasks for one vocabulary and corpus, and the mixture.

    Args:
      vocabulary_name: suffix of the task names, e.g. "longlm".
      spiece_model: LongLM's spiece.model (`T5SentencePieceVocabulary`, 100 sentinels).
      data_dirs: split -> folder of UTF-8 `.txt` files: "train" (the corpus) and, if
        given and not None, "validation" (held-out texts).
      max_length, target_length: the model's input and target lengths (section 4: 512
        and 512).
      text_length: tokens per text; default min(input_length - 2, target_length - 1),
        the most that always fits (`check_lengths`): 510 for 512/512.
      first_sentinel: the sentinel of the first span (LongLM: 1; T5: 0).

    Returns the task names, in `TASKS` order. Registering again replaces them. Files
    are listed and read only when a split's dataset is built.
    """
    vocabulary = T5SentencePieceVocabulary(spiece_model)
    sentinel_ids = longlm_sentinel_ids(vocabulary, first_sentinel)
    input_length = max_length
    if text_length is None:
        text_length = min(input_length - 2, target_length - 1)
    check_lengths(text_length, input_length, target_length, len(sentinel_ids))
    unknown = set(data_dirs) - {"train", "validation"}
    if unknown or not data_dirs.get("train"):
        raise ValueError(
            f"data_dirs {dict(data_dirs)}: give {{'train': CORPUS, 'validation': DIR}}"
        )
    splits = {split: folder for split, folder in data_dirs.items() if folder}
    source = seqio.FileDataSource(
        read_corpus_file, {split: os.path.join(d, "*.txt") for split, d in splits.items()}
    )
    texts = [
        functools.partial(tokenize_lines, vocabulary=vocabulary),
        functools.partial(split_into_texts, text_length=text_length),
    ]
    features = {key: seqio.Feature(vocabulary, add_eos=True) for key in ("inputs", "targets")}
    names = []
    for row in TASKS.values():
        name = task_name(row.name, vocabulary_name)
        seqio.TaskRegistry.remove(name)
        seqio.TaskRegistry.add(
            name,
            source=source,
            preprocessors=[
                *texts,
                functools.partial(OBJECTIVES[row.objective], sentinel_ids=sentinel_ids),
                seqio.preprocessors.append_eos_after_trim,
            ],
            output_features=features,
            postprocess_fn=text_postprocessor,
            metric_fns=[perplexity, bleu],
        )
        names.append(name)
    seqio.MixtureRegistry.remove(MIXTURE_NAME)
    seqio.MixtureRegistry.add(MIXTURE_NAME, [(name, 1.0) for name in names])
    return names


# --- Fixed-length training and scoring tasks of a run (cmrcx.training.run_tasks.longlm) ----


def pad_to_lengths(example: dict, lengths: dict[str, int]) -> dict:
    """Pads each feature of `lengths` with 0 to its length and adds `<key>_mask`.

    {"inputs": [5, 9, 1]} with {"inputs": 5} -> {"inputs": [5, 9, 1, 0, 0],
    "inputs_mask": [1, 1, 1, 0, 0]}. Longer features fail (check_lengths rules them out).
    The mask comes from the length, never from the ids: 0 is a token like any other
    (<unk> in LongLM's spiece.model), and the padding id is not the model's pad.
    """
    out = dict(example)
    for key, length in lengths.items():
        ids = example[key]
        extra = [[0, length - tf.size(ids)]]
        out[key] = tf.ensure_shape(tf.pad(ids, extra), [length])
        out[f"{key}_mask"] = tf.ensure_shape(tf.pad(tf.ones_like(ids), extra), [length])
    return out


def register_function_task(name: str, dataset_fn, splits, like: str) -> str:
    """A SeqIO task over `dataset_fn(split)`, with the features and metrics of task `like`
    (`dataset_fn`'s order for any shuffle or seed: `FileOrderSource`)."""
    model = seqio.get_mixture_or_task(like)
    seqio.TaskRegistry.remove(name)
    seqio.TaskRegistry.add(
        name,
        source=FileOrderSource(dataset_fn, splits),
        preprocessors=[],
        output_features=model.output_features,
    )
    return name
