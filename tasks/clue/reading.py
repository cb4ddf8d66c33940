"""SeqIO tasks for CLUE's reading comprehension: CMRC 2018, ChID and C3.

`register(vocabulary_name, vocab_file, data_dirs)` registers, for every row of
`cmrcx.benchmarks.clue.reading_tasks.TASKS` given a data dir, the task
``<row name>_<vocabulary_name>`` (``clue_cmrc2018_bert_chinese``, ``clue_chid11_tiny``),
and the mixture ``clue_multiple_choice`` over the ChID and C3 tasks registered.

SeqIO refuses a mixture of tasks whose output features differ ("Mixture ... contains
Tasks with different output features", seqio 0.0.20 `Mixture.__init__`), so span
extraction, multiple choice and classification cannot share one SeqIO mixture: each
problem type has its own (``clue_classification``, ``clue_multiple_choice``; CMRC 2018
is one task), and the benchmark as a whole, all nine tasks, is what
``python -m cmrcx.eval --mixture=clue`` evaluates (`cmrcx.training.mixture_eval`).

The inputs are built the baselines' way in NumPy (`cmrcx.benchmarks.clue`: windows
with the max-context rule for CMRC 2018, a 64-token window per (blank, candidate) for
ChID, ``[CLS] context [SEP] question [SEP] choice [SEP]`` for C3) from the records of
the TFDS builders (`cmrcx.datasets.cmrc2018`, `chid`, `c3`; `split_records`), CMRC
2018's windows once per split (`span_windows`, which decoding reads too), ChID's and
C3's examples as they are asked for (`choice_examples`), and served in file order by a
`FileOrderSource`. The model family's input layout (`cmrcx.vocab.layouts`, ``layout``)
chooses the vocabulary and the frame: "bert" as above, "xlnet" XLNet's SentencePiece and
``a <sep> b <sep> <cls>`` padded on the left (CMRC 2018's windows passage first,
over `cmrc2018_xlnet`'s pieces; all framed by `Layout.frame`), with the same features:

  span (CMRC 2018), one example per window:
      input_ids, token_type_ids, input_mask [length]; start_position, end_position [];
      example_index, window_index [] and token_char_start/end, token_is_max_context
      [length] for decoding back to the passage's characters.
  multiple choice (ChID, C3), one example per blank / question:
      input_ids, token_type_ids, input_mask [choices, length]; choice_mask [choices];
      label [] (-1 in a test split); example_index [] (the blank's / question's index in
      the split, in file order).

Metrics (`METRIC_FNS`): CMRC 2018 the official evaluator's EM, F1 and AVERAGE over
(gold answer lists, predicted texts); ChID and C3 accuracy over choice indices.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence

import numpy as np
import seqio
import tensorflow as tf

from cmrcx.benchmarks.clue import c3, chid, cmrc2018_evaluate, cmrc2018_format
from cmrcx.benchmarks.clue import cmrc2018_windows as spans
from cmrcx.benchmarks.clue.cmrc2018_format import Cmrc2018Question
from cmrcx.benchmarks.clue.metrics import accuracy
from cmrcx.benchmarks.clue.reading_tasks import MULTIPLE_CHOICE, TASKS, MrcTask, get_task
from cmrcx.common.errors import DataFormatError, MissingSplitError
from cmrcx.datasets import c3 as c3_tfds
from cmrcx.datasets import chid as chid_tfds
from cmrcx.datasets import cmrc2018 as cmrc2018_tfds
from cmrcx.datasets import records
from cmrcx.tasks import task_name
from cmrcx.tasks.sources import FileOrderSource
from cmrcx.vocab import layouts

MIXTURE_NAME = "clue_multiple_choice"
_NUMBERS = seqio.PassThroughVocabulary(size=0)
_TOKEN_FEATURES = ("input_ids", "token_type_ids", "input_mask")


def exact_match_and_f1(targets: Sequence[Sequence[str]], predictions: Sequence[str]) -> dict:
    """The official CMRC 2018 evaluator over aligned lists: {"EM", "F1", "AVERAGE"} (%)."""
    gold = {str(i): list(answers) for i, answers in enumerate(targets)}
    scores = cmrc2018_evaluate.evaluate(gold, {str(i): p for i, p in enumerate(predictions)})
    return {key: scores[key] for key in ("EM", "F1", "AVERAGE")}


METRIC_FNS = {"EM": exact_match_and_f1, "accuracy": accuracy}


# --- Records of the TFDS builders -> the readers' dataclasses -------------------------------


def _read(dataset: tf.data.Dataset, name: str, split: str):
    """A TFDS split's records in file order (`cmrcx.datasets.records`), with a progress line."""
    return records.read_records(dataset, f"reading {name} {split} records")


def load_records(row: MrcTask, data_dir: str, split: str, cache_dir: str | None) -> list:
    """The split's records in file order (questions, blanks), prepared by TFDS first."""
    if row.dataset == "cmrc2018":
        dataset = cmrc2018_tfds.load_split(data_dir, split, cache_dir)
        return [
            Cmrc2018Question(
                qid=records.text(r["id"]),
                context_id=records.text(r["context_id"]),
                context=records.text(r["context"]),
                question=records.text(r["question"]),
                answers=records.texts(r["answers"]),
                answer_starts=tuple(int(s) for s in r["answer_starts"]),
            )
            for r in _read(dataset, row.dataset, split)
        ]
    if row.dataset == "chid":
        dataset = chid_tfds.load_split(data_dir, split, row.clue_version, cache_dir)
        lines = _read(dataset, row.dataset, split)  # one record per line
        return [blank for line in lines for blank in chid_tfds.blanks(line)]
    dataset = c3_tfds.load_split(data_dir, split, row.clue_version, cache_dir)
    return [
        c3.C3Question(
            id=c3_tfds.record_id(r["id"]),
            source=records.text(r["source"]),
            record=int(r["record"]),
            question_index=int(r["question_index"]),
            document_id=records.text(r["document_id"]) or None,
            context=records.texts(r["context"]),
            question=records.text(r["question"]),
            choices=records.texts(r["choices"]),
            answer=records.text(r["answer"]) or None,
            label=None if r["label"] < 0 else int(r["label"]),
        )
        for r in _read(dataset, row.dataset, split)
    ]


def require_split(row: MrcTask, data_dir: str, split: str) -> None:
    """MissingSplitError naming the file(s) a split needs, if absent."""
    if row.dataset == "cmrc2018":
        cmrc2018_tfds.require_split(data_dir, split)
    elif row.dataset == "chid":
        chid_tfds.require_split(data_dir, split, row.clue_version)
    else:
        c3_tfds.require_split(data_dir, split, row.clue_version)


def read_official_split(row: MrcTask, data_dir: str, split: str) -> None:
    """Reads a split's official file(s) through the dataset's reader (no preparation):
    DataFormatError naming the file, record and field of the first bad record."""
    if row.dataset == "cmrc2018":
        cmrc2018_format.read_split(data_dir, split)
    elif row.dataset == "chid":
        chid.read_split(data_dir, split, row.clue_version)
    else:
        c3.read_split(data_dir, split, row.clue_version)


# --- Features ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def split_records(row: MrcTask, data_dir: str, split: str, cache_dir: str | None) -> tuple:
    """The records of a split (questions, blanks), read once per process."""
    records = tuple(load_records(row, data_dir, split, cache_dir))
    if not records:
        raise DataFormatError(f"{data_dir}: the {split} split of {row.name} has no records")
    return records


@functools.lru_cache(maxsize=8)
def span_windows(
    row: MrcTask,
    vocabulary: seqio.Vocabulary,
    data_dir: str,
    split: str,
    max_length: int,
    doc_stride: int,
    cache_dir: str | None,
    training: bool,
    layout: layouts.Layout = layouts.BERT,
) -> dict[str, np.ndarray]:
    """CMRC 2018: every window of a split as int32 arrays [windows, ...], built once per
    process: training reads them, and decoding maps the scores back with them. With
    ``training`` (the run's train split) the windows carry the first answer's positions.
    ``layout`` tokenizes and frames them (`Layout.windows`: "bert" the vocabulary a
    `WordPieceVocabulary`, "xlnet" an `XLNetVocabulary`).

    Raises:
      DataFormatError: a training answer that cannot be placed in its passage (names the
        file and the question).
    """
    # Read outside the `try`: the reader's errors name the file already.
    records = split_records(row, data_dir, split, cache_dir)
    try:
        return layout.windows(
            records, vocabulary, training=training, max_length=max_length, doc_stride=doc_stride
        )
    except ValueError as error:
        path = os.path.join(data_dir, cmrc2018_format.SPLIT_FILES.get(split, split))
        raise DataFormatError(f"{path}: {error}") from None


def choice_examples(
    row: MrcTask,
    vocabulary: seqio.Vocabulary,
    records,
    max_length: int,
    layout: layouts.Layout = layouts.BERT,
):
    """ChID / C3: one feature dict per record, built as it is asked for (ChID's 577k
    training blanks x 10 choices x 64 tokens are GBs: only the run's prepared store,
    `cmrcx.training.prepared_examples`, on disk, holds them). Nothing here is needed to
    decode: a line's blanks and its candidates come from the records. ``layout`` frames
    them (`Layout.cloze`, `Layout.choices`): "bert" ``[CLS] a [SEP] b [SEP]``, "xlnet"
    ``a <sep> b <sep> <cls>`` padded on the left."""
    encode = functools.lru_cache(maxsize=1 << 16)(lambda text: tuple(vocabulary.encode(text)))
    frame = layout.cloze if row.dataset == "chid" else layout.choices
    texts_of = {"c3": _c3_texts, "chid": _chid_texts}[row.dataset]
    texts_of = texts_of if layout.encodes_in_batches else None
    known = _Known(encode)
    build = functools.partial(frame, tokenize=known.__getitem__, vocabulary=vocabulary)
    for start in range(0, len(records), _TOKENIZE_CHUNK):
        chunk = records[start : start + _TOKENIZE_CHUNK]
        if texts_of is not None:
            if len(known) > _KNOWN_TEXTS:
                known.clear()
            known.update(_encode_all(vocabulary, texts_of(chunk), known))
        for index, record in enumerate(chunk, start):
            example = build(record, max_length=max_length)
            example["example_index"] = np.int32(index)
            yield example


# The texts of this many records (C3's questions, ChID's blanks) are tokenized in one
# WordPiece call: a call per text costs ~10x more. The texts' ids are kept (ChID's
# passages are tokenized character by character, so most recur) up to _KNOWN_TEXTS.
_TOKENIZE_CHUNK = 256
_KNOWN_TEXTS = 1 << 18


class _Known(dict):
    """{text: ids} of the texts tokenized together; any other text is encoded on its own."""

    def __init__(self, encode):
        super().__init__()
        self._encode = encode

    def __missing__(self, text: str):
        return self._encode(text)


def _c3_texts(questions) -> list[str]:
    """The texts `c3.question_features` tokenizes, in its spelling (lower-cased), once each."""
    texts = []
    for q in questions:
        texts += ["\n".join(q.context).lower(), q.question.lower()]
        texts += [choice.lower() for choice in c3.padded_choices(q.choices)]
    return list(dict.fromkeys(texts))


def _chid_texts(blanks) -> list[str]:
    """The texts `chid.blank_features` tokenizes, once each, sorted: candidates and the
    passages' doc tokens (a chunk's passages hold a few thousand distinct ones)."""
    texts: set[str] = set()
    for blank in blanks:
        texts.update(blank.candidates)
        texts.update(chid.passage_tokens(blank.passage))
    return sorted(text for text in texts if not chid.TAG_PATTERN.fullmatch(text))


def _encode_all(vocabulary, texts: Sequence[str], known) -> dict[str, list[int]]:
    """{text: WordPiece ids} of the `texts` (distinct) not in `known`, in one `encode_tf`
    call."""
    new = [text for text in texts if text not in known]
    if not new:
        return {}
    ids = vocabulary.encode_tf(tf.constant(new, tf.string)).to_list()
    return dict(zip(new, ids, strict=True))


def _stacked(examples, size: int = _TOKENIZE_CHUNK):
    """The examples `size` at a time, each feature stacked: one crossing from Python into
    tf.data per chunk, not per example (which costs as much as building ChID's features)."""
    chunk = []
    for example in examples:
        chunk.append(example)
        if len(chunk) == size:
            yield {key: np.stack([e[key] for e in chunk]) for key in chunk[0]}
            chunk = []
    if chunk:
        yield {key: np.stack([e[key] for e in chunk]) for key in chunk[0]}


def choice_signature(row: MrcTask, max_length: int) -> dict[str, tf.TensorSpec]:
    shape = (row.num_choices, max_length)
    signature = {key: tf.TensorSpec(shape, tf.int32) for key in _TOKEN_FEATURES}
    signature["choice_mask"] = tf.TensorSpec((row.num_choices,), tf.int32)
    signature["label"] = tf.TensorSpec((), tf.int32)
    signature["example_index"] = tf.TensorSpec((), tf.int32)
    return signature


class MrcSource(FileOrderSource):
    """A split's examples in file order whatever the shuffle or seed (`FileOrderSource`;
    the input pipeline shuffles)."""

    def __init__(
        self,
        row,
        vocabulary,
        data_dir,
        max_length,
        doc_stride,
        cache_dir,
        train_split,
        layout=layouts.BERT,
    ):
        def examples(split: str) -> tf.data.Dataset:
            if row.dataset == "cmrc2018":
                windows = span_windows(
                    row,
                    vocabulary,
                    data_dir,
                    split,
                    max_length,
                    doc_stride,
                    cache_dir,
                    training=split == train_split,
                    layout=layout,
                )
                return tf.data.Dataset.from_tensor_slices(windows)
            records = split_records(row, data_dir, split, cache_dir)
            signature = choice_signature(row, max_length)
            stacked = {k: tf.TensorSpec((None, *v.shape), v.dtype) for k, v in signature.items()}
            return tf.data.Dataset.from_generator(
                lambda: _stacked(choice_examples(row, vocabulary, records, max_length, layout)),
                output_signature=stacked,
            ).unbatch()

        super().__init__(examples, splits=("train", "validation", "test", "trial"))
        self._row, self._data_dir, self._cache_dir = row, data_dir, cache_dir

    def num_input_examples(self, split: str) -> int:
        """Records (questions, blanks) of a split; 0 if its file is not in DATA_DIR."""
        try:
            require_split(self._row, self._data_dir, split)
        except MissingSplitError:
            return 0
        return len(split_records(self._row, self._data_dir, split, self._cache_dir))


def _output_features(row: MrcTask, vocabulary) -> dict[str, seqio.Feature]:
    rank = 2 if row.problem == MULTIPLE_CHOICE else 1
    features = {
        "input_ids": seqio.Feature(vocabulary, add_eos=False, rank=rank),
        "token_type_ids": seqio.Feature(_NUMBERS, add_eos=False, rank=rank),
        "input_mask": seqio.Feature(_NUMBERS, add_eos=False, rank=rank),
    }
    if row.problem == MULTIPLE_CHOICE:
        features["choice_mask"] = seqio.Feature(_NUMBERS, add_eos=False)
        features["label"] = seqio.Feature(_NUMBERS, add_eos=False, rank=0)
    else:
        features["start_position"] = seqio.Feature(_NUMBERS, add_eos=False, rank=0)
        features["end_position"] = seqio.Feature(_NUMBERS, add_eos=False, rank=0)
    return features


def register(
    vocabulary_name: str,
    vocab_file: str,
    data_dirs: Mapping[str, str],
    *,
    max_length: int | None = None,
    lower_case: bool = True,
    tfds_cache_dir: str | None = None,
    doc_stride: int = spans.DOC_STRIDE,
    train_split: str = "train",
    layout: str | layouts.Layout = "bert",
) -> list[str]:
    """Registers a SeqIO task per row named in ``data_dirs`` and adds them to ``clue``.

    Args:
      data_dirs: row name (``"clue_c311"``) -> its unpacked official folder.
      max_length: window / choice sequence length; None takes each row's Table 7 value.
      doc_stride: CMRC 2018's window stride in passage tokens (the baseline's 128).
      train_split: the split whose CMRC 2018 windows carry answer positions.
      layout: the model family's input layout (`cmrcx.vocab.layouts`, or its name):
        "bert" (WordPiece, ``[CLS] ... [SEP]``) or "xlnet" (XLNet's SentencePiece, ``...
        <sep> ... <sep> <cls>`` padded on the left; `vocab_file` a spiece.model).
      Others as `cmrcx.tasks.clue.classification.register`.

    Returns:
      The registered task names.
    """
    rows = [get_task(name) for name in data_dirs]
    layout = layouts.layout(layout)
    vocabulary = layout.vocabulary(vocab_file, lower_case)
    names = []
    for row in rows:
        name = task_name(row.name, vocabulary_name)
        seqio.TaskRegistry.remove(name)
        length = max_length or row.max_length
        source = MrcSource(
            row,
            vocabulary,
            data_dirs[row.name],
            length,
            doc_stride,
            tfds_cache_dir,
            train_split,
            layout,
        )
        seqio.TaskRegistry.add(
            name,
            source=source,
            preprocessors=[],
            output_features=_output_features(row, vocabulary),
            metric_fns=[METRIC_FNS[row.metric]],
        )
        names.append(name)
    choice_tasks = [n for n, row in zip(names, rows, strict=True) if row.problem == MULTIPLE_CHOICE]
    _add_to_mixture(choice_tasks, vocabulary_name)
    return names


def _add_to_mixture(names: Sequence[str], vocabulary_name: str) -> None:
    """``clue_multiple_choice`` = ``names`` and the tasks of the same vocabulary name it
    already holds (ChID registered by one run, C3 by another), rated by their number of
    training examples (T5's "proportional" mixing)."""
    if not names:
        return
    current = []
    if MIXTURE_NAME in seqio.MixtureRegistry.names():
        mixture = seqio.get_mixture_or_task(MIXTURE_NAME)
        ours = {task_name(row, vocabulary_name) for row in TASKS}
        current = [t.name for t in mixture.tasks if t.name in ours and t.name not in names]
    seqio.MixtureRegistry.remove(MIXTURE_NAME)
    seqio.MixtureRegistry.add(
        MIXTURE_NAME, [(name, _train_examples) for name in [*current, *names]]
    )


def _train_examples(task: seqio.Task) -> float:
    """A task's number of training examples (0 without a train split)."""
    return float(task.source.num_input_examples("train"))


__all__ = ["TASKS", "register", "span_windows", "split_records", "task_name"]
