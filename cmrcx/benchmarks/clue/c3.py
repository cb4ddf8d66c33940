"""C3 (CLUE's free-form multiple-choice reading comprehension): files, inputs, submissions.

Sources (cited by tag; a commit is the stored version that was read):

  [RUN]    CLUEbenchmark/CLUE baselines/models_pytorch/mrc_pytorch/run_c3.py @65dae35:
           `c3Processor` (the d- then m- file of a split concatenated; the context sentences
           joined with "\\n"; context, question, choices and answer lower-cased; fewer than 4
           choices padded with the filler "无效答案", commented "some C3 questions have fewer
           than 4 choices; adding [无效答案] stabilises convergence"; the label is the last of
           the 4 padded choices equal to the answer), `convert_examples_to_features`
           (``[CLS] context [SEP] question [SEP] choice [SEP]``, segment 0 up to the first
           [SEP], 1 after; `_truncate_seq_tuple` to max_seq_length - 4), defaults
           max_seq_length 512, 8 epochs, lr 2e-5, warmup 0.1, and a test submission of argmax
           indices in test-file order ("the test submission order can't be changed").
           @0964517 is an earlier version padding with "" instead of the filler. The script
           reads the original C3 release's names (c3-d-train.json, ...); the CLUE zip drops
           the "c3-" prefix.
  [MODEL]  .../mrc_pytorch/pytorch_modeling.py @0964517 `BertForMultipleChoice`: the filler
           choices are scored like real ones (no choice mask reaches the model).
  [README] CLUEbenchmark/CLUE README.md @21ef108: a file is one JSON array of documents
           ``[[sentence, ...], [{"question", "choice", "answer"}, ...], "25-35"]``; d = dialogue,
           m = mixed-genre; Table 7's C3 row (batch 24, length 512, 8 epochs, lr 2e-5).
  [HF]     huggingface/datasets datasets/clue/clue.py @02bb18c: train/dev = d- and m- files;
           test questions carry an "id" (read as ``int(question["id"])``) and no answer.
  [B4K]    bojone/CLUE-bert4keras src/c3.py @be5b4f2: the CLUE 1.1 zip's test1.0.json /
           test1.1.json -> c310_predict.json / c311_predict.json, one ``{"id", "label"}`` per
           question in test-file order, id = the question's "id".
  [SUBMIT] CLUE "任务提交说明" (2021-09-04): c311_predict.json for 1.1, c310 for 1.0.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cmrcx.benchmarks.clue.metrics import accuracy
from cmrcx.benchmarks.clue.official_format import parse_object_line, read_lines
from cmrcx.benchmarks.records import FieldError, is_json_int, json_type, versioned_split_files
from cmrcx.benchmarks.windows import Frame
from cmrcx.common.errors import DataFormatError
from cmrcx.common.files import load_json, write_atomically

NUM_CHOICES = 4  # [RUN] n_class
FILLER_CHOICE = "无效答案"  # [RUN] @65dae35
MAX_SEQ_LENGTH = 512  # [RUN]; Table 7 of the paper
VERSIONS = ("1.1", "1.0")
SPLIT_FILES = {
    "train": ("d-train.json", "m-train.json"),  # [RUN] order: d, then m
    "validation": ("d-dev.json", "m-dev.json"),
}
# The test file of each version, the preferred name first: the current zip's test.json
# (huggingface/datasets datasets/clue/clue.py @02bb18c reads test.json from the zip, and its
# dataset card's test sizes are CLUE 1.1's, not README's 1.0 ones), or the test1.1.json /
# test1.0.json names of the CLUE 1.1 release that [B4K] reads.
TEST_FILES = {"1.1": ("test.json", "test1.1.json"), "1.0": ("test1.0.json",)}
SUBMISSION_FILES = {"1.1": "c311_predict.json", "1.0": "c310_predict.json"}  # [SUBMIT]


@dataclasses.dataclass(frozen=True)
class C3Question:
    """One question: a 4-way multiple-choice example.

    Attributes:
      id: the question's own "id" (test files), else its 0-based index in the split.
      source: the file it comes from, e.g. "d-dev.json".
      record: index of its document in that file; ``question_index`` its index there.
      document_id: the document's id (third element, e.g. "25-35"), or None.
      context: the document's sentences; question, choices, answer as in the file.
      label: index of the answer among the (padded) choices; None without an answer.
    """

    id: int | str
    source: str
    record: int
    question_index: int
    document_id: str | None
    context: tuple[str, ...]
    question: str
    choices: tuple[str, ...]
    answer: str | None
    label: int | None


def split_files(split: str, version: str = "1.1", data_dir: str | None = None) -> tuple[str, ...]:
    """The official files a split reads (in this order). The test split's file is the first
    of its version's names present in ``data_dir`` (the preferred name without one)."""
    return versioned_split_files("C3", SPLIT_FILES, TEST_FILES, split, version, data_dir)


# --- Reading ------------------------------------------------------------------------------


def _strings(field: str, value: Any, lo: int, hi: int | None = None) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise FieldError(field, f"expected an array of strings, got {json_type(value)}")
    if not lo <= len(value) <= (hi or len(value)):
        raise FieldError(field, f"has {len(value)} entries; expected {lo} to {hi or 'any'}")
    for k, text in enumerate(value):
        if not isinstance(text, str):
            raise FieldError(f"{field}[{k}]", f"expected a string, got {json_type(text)}")
    return tuple(value)


def answer_label(choices: Sequence[str], answer: str) -> int | None:
    """[RUN]: the last of the padded choices equal to the answer, both lower-cased."""
    padded = [c.lower() for c in padded_choices(choices)]
    matches = [k for k, choice in enumerate(padded) if choice == answer.lower()]
    return matches[-1] if matches else None


def _question(field: str, value: Any, labelled: bool) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FieldError(field, f"expected an object, got {json_type(value)}")
    for key in ("question", "choice") + (("answer",) if labelled else ()):
        if key not in value:
            raise FieldError(f"{field}.{key}", "missing")
    if not isinstance(value["question"], str):
        raise FieldError(
            f"{field}.question", f"expected a string, got {json_type(value['question'])}"
        )
    # [RUN] pads to 4 and reads 4: a fifth choice would be taken for the answer.
    choices = _strings(f"{field}.choice", value["choice"], 1, NUM_CHOICES)
    answer, label = value.get("answer"), None
    if answer == "" and not labelled:  # a test file's empty answer: no answer
        answer = None
    if answer is not None:
        if not isinstance(answer, str):
            raise FieldError(f"{field}.answer", f"expected a string, got {json_type(answer)}")
        label = answer_label(choices, answer)
        # Refused as [RUN] cannot use it either: with no match its label stays the integer
        # -1, which `convert_to_unicode` rejects (ValueError); an answer matching only the
        # filler would be a label on a slot the model masks here (choice_mask 0).
        if label is None or label >= len(choices):
            raise FieldError(f"{field}.answer", f"{answer!r} is not one of the choices {choices}")
    question_id = value.get("id")
    if question_id is not None and not (is_json_int(question_id) or isinstance(question_id, str)):
        raise FieldError(f"{field}.id", f"expected an integer or string, got {question_id!r}")
    return {
        "id": question_id,
        "question": value["question"],
        "choices": choices,
        "answer": answer,
        "label": label,
    }


def _document(value: Any, labelled: bool) -> tuple[str | None, tuple[str, ...], list[dict]]:
    if not isinstance(value, list) or len(value) not in (2, 3):
        raise FieldError("", "expected [[sentences], [questions], id] (an array of 2 or 3)")
    # [RUN] reads no sentences as the context "" ("\n".join) and no questions as no examples;
    # so does this reader.
    context = _strings("[0]", value[0], 0)
    if not isinstance(value[1], list):
        raise FieldError("[1]", f"expected an array of questions, got {json_type(value[1])}")
    document_id = value[2] if len(value) == 3 else None
    if document_id is not None and not isinstance(document_id, str):
        raise FieldError("[2]", f"expected the document id string, got {json_type(document_id)}")
    questions = [_question(f"[1][{q}]", item, labelled) for q, item in enumerate(value[1])]
    return document_id, context, questions


def read_examples(paths: Sequence[str | os.PathLike[str]], *, labelled: bool) -> list[C3Question]:
    """Reads and validates C3 files, concatenated in the given order ([RUN]: d, then m).

    Args:
      paths: official files, e.g. ``[".../d-dev.json", ".../m-dev.json"]``.
      labelled: True for train/dev (every question needs an answer among its choices);
        False for test files (an answer is optional, and checked when present).

    Raises:
      DataFormatError: naming the file, the record (document index and id) and the field.
    """
    questions: list[C3Question] = []
    for path in paths:
        documents = load_json(path)
        if not isinstance(documents, list):
            raise DataFormatError(
                f"{path}: expected a JSON array of documents, got {json_type(documents)}"
            )
        for d, document in enumerate(documents):
            try:
                document_id, context, parsed = _document(document, labelled)
            except FieldError as e:
                doc_id = document[2] if isinstance(document, list) and len(document) == 3 else None
                where = f"record {d}" + (f" (id {doc_id!r})" if isinstance(doc_id, str) else "")
                field = f": field {e.field!r}" if e.field else ""
                raise DataFormatError(f"{path}: {where}{field}: {e.detail}") from None
            for q, item in enumerate(parsed):
                question_id = len(questions) if item["id"] is None else item["id"]
                questions.append(
                    C3Question(
                        question_id,
                        os.path.basename(path),
                        d,
                        q,
                        document_id,
                        context,
                        item["question"],
                        item["choices"],
                        item["answer"],
                        item["label"],
                    )
                )
    return questions


def read_split(
    data_dir: str | os.PathLike[str], split: str, version: str = "1.1"
) -> list[C3Question]:
    """Reads ``split`` ("train", "validation", "test") from the unpacked ``c3_public/``."""
    paths = [os.path.join(data_dir, name) for name in split_files(split, version, data_dir)]
    return read_examples(paths, labelled=split != "test")


# --- The baseline's input ([RUN] c3Processor, convert_examples_to_features) ---------------


def padded_choices(choices: Sequence[str]) -> tuple[str, ...]:
    """The choices followed by the filler up to 4: ``("甲", "乙")`` -> ``("甲", "乙",
    "无效答案", "无效答案")``."""
    return (*choices, *[FILLER_CHOICE] * (NUM_CHOICES - len(choices)))


def truncate_seq_tuple(tokens_a: list, tokens_b: list, tokens_c: list, max_tokens: int) -> None:
    """[RUN] `_truncate_seq_tuple`: pop from the end of the longest list until the three fit
    in ``max_tokens``; ties go to a, then b. Modifies the lists.

    >>> a, b, c = list("一二三四五"), list("甲乙"), list("子丑寅")
    >>> truncate_seq_tuple(a, b, c, 6); a, b, c
    (['一', '二'], ['甲', '乙'], ['子', '丑'])
    """
    while len(tokens_a) + len(tokens_b) + len(tokens_c) > max_tokens:
        if len(tokens_a) >= len(tokens_b) and len(tokens_a) >= len(tokens_c):
            tokens_a.pop()
        elif len(tokens_b) >= len(tokens_c):
            tokens_b.pop()
        else:
            tokens_c.pop()


def question_features(
    question: C3Question,
    tokenize: Callable[[str], Sequence[int]],
    frame: Frame,
    max_seq_length: int = MAX_SEQ_LENGTH,
) -> dict[str, np.ndarray]:
    """One question in the multiple-choice layout of `cmrcx.model_api.base`.

    Per padded choice the pieces (context, question, choice): lower-cased texts (context
    sentences joined with "\\n") tokenized separately and truncated longest-first to
    ``max_seq_length - 4``, framed by the input layout's `frame` ([RUN]: ``[CLS] context
    [SEP] question [SEP] choice [SEP]`` with segment ids 0 through the first [SEP] and 1
    after; XLNet's ``context <sep> question <sep> choice <sep> <cls>``, CLUE having no
    XLNet C3 script).

    Returns:
      input_ids, token_type_ids, input_mask: int32 [4, max_seq_length]; choice_mask: int32
      [4], 1 for the file's choices, 0 for fillers (which the baseline scores anyway);
      label: int32 [] (-1 without an answer).
    """
    context = list(tokenize("\n".join(question.context).lower()))
    query = list(tokenize(question.question.lower()))
    choices = []
    for choice in padded_choices(question.choices):
        tokens_a, tokens_b, tokens_c = list(context), list(tokenize(choice.lower())), list(query)
        truncate_seq_tuple(tokens_a, tokens_b, tokens_c, max_seq_length - 4)
        choices.append((tokens_a, tokens_c, tokens_b))
    input_ids, token_type_ids, input_mask = frame(choices, max_seq_length)
    choice_mask = np.zeros(NUM_CHOICES, np.int32)
    choice_mask[: len(question.choices)] = 1
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "input_mask": input_mask,
        "choice_mask": choice_mask,
        "label": np.int32(-1 if question.label is None else question.label),
    }


# --- Submission files and scoring ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SubmissionLine:
    """One validated prediction: the question id, the choice index, its 1-based line."""

    id: int | str
    label: int
    line_number: int


def submission_path(output_dir: str | os.PathLike[str], version: str = "1.1") -> Path:
    """``output_dir/c311_predict.json`` (``c310_predict.json`` for version "1.0")."""
    if version not in SUBMISSION_FILES:
        raise ValueError(f"unknown C3 version {version!r}; versions: {', '.join(VERSIONS)}")
    return Path(output_dir) / SUBMISSION_FILES[version]


def _index(value: Any) -> int | None:
    """A choice index 0..3 given as an integer or a digit string ([B4K] writes "2")."""
    if isinstance(value, str) and value in ("0", "1", "2", "3"):
        return int(value)
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value) if 0 <= value < NUM_CHOICES else None
    return None


def write_submission(
    output_dir: str | os.PathLike[str],
    ids: Sequence[Any],
    labels: Sequence[Any],
    version: str = "1.1",
    file_name: str | None = None,
) -> Path:
    """Writes ``{"id": question id, "label": choice index}`` per line, atomically.

    Args:
      ids: [num_questions] `C3Question.id` in test-file order.
      labels: [num_questions] argmax over the 4 choice logits (integers 0..3).

    Returns:
      The path written (official name unless ``file_name`` is given).
    """
    if len(ids) != len(labels):
        raise ValueError(f"C3 submission: {len(ids)} ids but {len(labels)} labels")
    lines = []
    for k, (question_id, label) in enumerate(zip(ids, labels, strict=True)):
        index = None if isinstance(label, str) else _index(label)
        if index is None:
            raise ValueError(f"C3 submission: prediction {k}: {label!r} is not a choice 0..3")
        if isinstance(question_id, np.integer):
            question_id = int(question_id)
        if not (is_json_int(question_id) or isinstance(question_id, str)):
            raise ValueError(f"C3 submission: prediction {k}: id {question_id!r}")
        lines.append(json.dumps({"id": question_id, "label": index}, ensure_ascii=False) + "\n")
    path = Path(output_dir) / file_name if file_name else submission_path(output_dir, version)
    write_atomically(path, "".join(lines))
    return path


def read_submission(
    path: str | os.PathLike[str], questions: Sequence[C3Question] | None = None
) -> list[SubmissionLine]:
    """Reads and validates a submission: one ``{"id", "label"}`` object per line, the label a
    choice index 0..3 (integer or digit string). With ``questions``, one line per question,
    ids in the same order (compared as strings).

    Raises:
      DataFormatError: naming the file, the line and the field.
    """
    predictions = []
    for index, line in enumerate(read_lines(path)):
        record = parse_object_line(path, index + 1, line)
        where = f"{path}: line {index + 1}"
        for key in ("id", "label"):
            if key not in record:
                raise DataFormatError(f"{where}: field {key!r}: missing")
        if not (is_json_int(record["id"]) or isinstance(record["id"], str)):
            raise DataFormatError(
                f"{where}: field 'id': expected an integer or string, got {json_type(record['id'])}"
            )
        label = _index(record["label"])
        if label is None:
            raise DataFormatError(
                f"{where}: field 'label': {record['label']!r} is not a choice index 0..3"
            )
        predictions.append(SubmissionLine(record["id"], label, index + 1))
    if questions is not None:
        if len(predictions) != len(questions):
            raise DataFormatError(
                f"{path}: {len(predictions)} lines for {len(questions)} "
                "questions; one line per question, in file order"
            )
        for prediction, question in zip(predictions, questions, strict=True):
            if str(prediction.id) != str(question.id):
                raise DataFormatError(
                    f"{path}: line {prediction.line_number}: field 'id': {prediction.id!r}, but "
                    f"the question it is compared with ({question.source} record "
                    f"{question.record}) has id {question.id!r}"
                )
    return predictions


def score_submission(
    data_dir: str | os.PathLike[str],
    split: str,
    submission: str | os.PathLike[str],
    version: str = "1.1",
) -> dict[str, Any]:
    """Accuracy of a submission-format file on a labelled split (train / validation), as
    [RUN] computes it (argmax against the label): ``{"accuracy": %, "correct", "total"}``."""
    questions = read_split(data_dir, split, version)
    if any(q.label is None for q in questions):
        raise DataFormatError(f"C3 {split}: unlabelled questions; nothing to score")
    predictions = read_submission(submission, questions)
    targets, labels = [q.label for q in questions], [p.label for p in predictions]
    scores: dict[str, Any] = accuracy(targets, labels)
    scores["correct"] = sum(t == p for t, p in zip(targets, labels, strict=True))
    scores["total"] = len(targets)
    return scores
