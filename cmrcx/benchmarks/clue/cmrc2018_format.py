"""Strict reader of CMRC 2018's official SQuAD-style JSON files (CLUE's cmrc2018_public).

A file (train.json, dev.json, trial.json, test.json) is one JSON object::

    {"version": "v1.0",
     "data": [{"id": "DEV_0", "title": "...",
               "paragraphs": [{"id": "DEV_0", "context": "...",
                               "qas": [{"id": "DEV_0_QUERY_0", "question": "...",
                                        "answers": [{"text": "...", "answer_start": 12},
                                                    ...]}]}]}]}

This is the layout the official evaluator (ymcui/cmrc2018 ``squad-style-data/
cmrc2018_evaluate.py``, ``data -> paragraphs -> qas -> id, answers[].text``) and CLUE's
baseline (CLUEbenchmark/CLUE ``baselines/models_pytorch/mrc_pytorch/preprocess/
cmrc2018_preprocess.py``, commit 016c3ba, ``json2features``: ``context``, ``question``,
``answers[0].text`` / ``answer_start``) read. The article and paragraph ``id`` and ``title``
are not used by either and are optional here (checked to be strings when present); the
context id is the paragraph's id, else the article's, else ``"data[i].paragraphs[j]"``.
Labelled files (train, dev, trial) need at least one answer per question; in the test file
``answers`` may be missing or empty.

A malformed record raises one `DataFormatError` naming the file, the record
(``data[3].paragraphs[0].qas[2] (id 'DEV_3_QUERY_2')``) and the field. Question ids must
be unique: predictions are a ``{id: text}`` object.

Empty strings are read as the evaluator and the baseline read them, and counted in
`Cmrc2018Split.summary`: the official trial file (ymcui/cmrc2018 @c0eb1b6
``squad-style-data/cmrc2018_trial.json``, CLUE's trial.json) has two questions whose
``question`` is "" (TRIAL_20_QUERY_0, TRIAL_776_QUERY_4). The evaluator (ymcui/cmrc2018
``squad-style-data/cmrc2018_evaluate.py`` @5c81039, ``evaluate``) scores every question
whatever its text (it computes ``qas['question'].strip()`` and never uses it), and the
baseline tokenizes an empty question to no pieces and trains on ``[CLS] [SEP] passage
[SEP]``. An empty context is scored too (the evaluator never reads it; the baseline's
``write_predictions`` gives a question without windows the answer "empty"); only training on
it fails, as the baseline's does. An empty answer text is a gold answer to the evaluator
(EM 1 for a prediction that is empty once punctuation is removed, F1 0) and a span to
``json2features``. An empty ``id`` is a key like any other to both.

``answer_start`` that does not point at the answer text is not an error: the baseline
(``json2features``, training only) looks for the text up to 3 characters to the left of it
and, if still not found, trains on the span 3 characters to the left anyway (counting a
"mis_match"); `baseline_answer_chars` does the same. The reader counts such first answers in
`Cmrc2018Split.summary`. Other answers and their starts are not used by the baseline
(``answers[0]`` only) nor by the evaluator (texts only). ``answer_start`` -1 marks an answer
whose text was not located in the passage (some answers of the official dev file): the
evaluator ignores it; for a first answer used in training, ``json2features`` indexes the
context with the negative positions as Python does (from the passage's end), and so does
`baseline_answer_chars`; those are counted separately in the summary.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

from cmrcx.benchmarks.records import FieldError, is_json_int, json_type
from cmrcx.common.errors import DataFormatError
from cmrcx.common.files import load_json

# split -> official file name in the unpacked cmrc2018_public.zip; test has no answers.
SPLIT_FILES = {
    "train": "train.json",
    "validation": "dev.json",
    "test": "test.json",
    "trial": "trial.json",
}
UNLABELLED_SPLITS = frozenset({"test"})
# json2features(repeat_limit=3): how far left of answer_start the baseline looks.
ANSWER_SEARCH_LIMIT = 3


@dataclasses.dataclass(frozen=True)
class Cmrc2018Question:
    """One validated question with its passage.

    Attributes:
      qid: the question's ``id``, e.g. ``"DEV_0_QUERY_0"`` (the predictions' key).
      context_id: the paragraph's ``id`` (else the article's, else its position).
      context: the passage, exactly as in the file.
      question: the question text, exactly as in the file.
      answers: gold answer texts in file order (empty for the test split).
      answer_starts: ``answer_start`` of each answer, as in the file.
      position: ``"data[i].paragraphs[j].qas[k]"``, where the record is in the file.
    """

    qid: str
    context_id: str
    context: str
    question: str
    answers: tuple[str, ...]
    answer_starts: tuple[int, ...]
    position: str = ""


@dataclasses.dataclass(frozen=True)
class Cmrc2018Split:
    """The questions of one file, in file order.

    Attributes:
      path: the file read.
      questions: every question, in file order (articles, paragraphs, qas).
      misplaced_starts: ids of questions whose first answer is not at its ``answer_start``
        (the baseline then searches left of it, see `baseline_answer_chars`).
    """

    path: str
    questions: tuple[Cmrc2018Question, ...]
    misplaced_starts: tuple[str, ...] = ()

    @property
    def empty_questions(self) -> tuple[str, ...]:
        """Ids of questions whose text is empty or whitespace-only (read as an empty query)."""
        return tuple(q.qid for q in self.questions if not q.question.strip())

    @property
    def empty_contexts(self) -> tuple[str, ...]:
        """Ids of questions whose passage is empty or whitespace-only."""
        return tuple(q.qid for q in self.questions if not q.context.strip())

    @property
    def empty_first_answers(self) -> tuple[str, ...]:
        """Ids of labelled questions whose first answer text is empty or whitespace-only."""
        return tuple(q.qid for q in self.questions if q.answers and not q.answers[0].strip())

    @property
    def negative_starts(self) -> tuple[str, ...]:
        """Ids of questions whose first answer has a negative ``answer_start`` (-1: not
        located), a subset of `misplaced_starts`."""
        return tuple(q.qid for q in self.questions if q.answers and q.answer_starts[0] < 0)

    @property
    def unfound_answers(self) -> tuple[str, ...]:
        """Ids of `misplaced_starts` questions (answer_start >= 0) whose first answer text
        the baseline's search to the left does not find either: the span it trains on
        (`baseline_answer_chars`, the end its search stops at) is not the answer."""
        misplaced = set(self.misplaced_starts)
        unfound = []
        for q in self.questions:
            if q.qid not in misplaced or q.answer_starts[0] < 0:
                continue
            text = q.answers[0]
            try:
                _, last = baseline_answer_chars(q.context, text, q.answer_starts[0])
            except ValueError:  # not in the passage at all
                unfound.append(q.qid)
                continue
            if q.context[last - len(text) + 1 : last + 1] != text:
                unfound.append(q.qid)
        return tuple(unfound)

    def notes(self) -> list[str]:
        """What the summary adds to the counts: each kind of record read as the official
        scripts read it, with how many there are; empty when there is none."""
        notes = []
        for ids, what in (
            (self.empty_questions, "empty questions (read as an empty query, as the baseline)"),
            (self.empty_contexts, "empty passages (scored; the baseline cannot train on them)"),
            (self.empty_first_answers, "empty first answers (gold texts to the evaluator)"),
        ):
            if ids:
                notes.append(f"{len(ids):,} {what}, e.g. {ids[0]!r}")
        if self.misplaced_starts:
            note = (
                f"{len(self.misplaced_starts):,} first answers not at their answer_start "
                f"(searched up to {ANSWER_SEARCH_LIMIT} characters to the left, as the "
                "baseline does)"
            )
            if self.unfound_answers:
                note += (
                    f", {len(self.unfound_answers):,} of them not found there either (trained "
                    f"on the span where the search stops, as the baseline), e.g. "
                    f"{self.unfound_answers[0]!r}"
                )
            if self.negative_starts:
                note += (
                    f", {len(self.negative_starts):,} of them at answer_start -1 (placed from "
                    "the passage's end for training, as the baseline's negative index does)"
                )
            notes.append(note)
        return notes

    def summary(self) -> str:
        """One line for a log, e.g. ``.../train.json: 10,142 questions, 2,403 passages``."""
        passages = len({q.context_id for q in self.questions})
        text = f"{self.path}: {len(self.questions):,} questions, {passages:,} passages"
        return ", ".join([text, *self.notes()])


def baseline_answer_chars(context: str, text: str, answer_start: int) -> tuple[int, int]:
    """The characters the baseline trains on for an answer: (first, last), both inclusive.

    As ``json2features`` (is_training): while ``context[start:end + 1] != text`` move the
    span one character left, at most `ANSWER_SEARCH_LIMIT` times (then keep it, found or
    not); then move the start past whitespace (" ", tab, CR, LF), the end staying. The
    script indexes ``context`` and ``char_to_word_offset`` with these positions as Python
    does, so a negative one counts from the passage's end: an ``answer_start`` of -1 (the
    data's "not located") ends up at ``len(context) - 4``, and ``last`` may then come before
    ``first``. Both are returned as the characters they point at, in [0, len(context)).

    >>> baseline_answer_chars("在北京。", "北京", 2)
    (1, 2)
    >>> baseline_answer_chars("在北京的天安门。", "北京", -1)  # start -4, end -3
    (4, 5)

    Raises:
      ValueError: a position ends up past either end of the context (the baseline's
        ``context[start_position]`` or ``char_to_word_offset[...]`` fails there).
    """
    start = answer_start
    end = start + len(text) - 1
    for _ in range(ANSWER_SEARCH_LIMIT):
        if context[start : end + 1] == text:
            break
        start, end = start - 1, end - 1
    size = len(context)
    while -size <= start < size and context[start] in " \t\r\n":
        start += 1
    if not (-size <= start < size and -size <= end < size):
        raise ValueError(
            f"answer {text!r} with answer_start {answer_start} does not lie in the context "
            f"({size} characters), even {ANSWER_SEARCH_LIMIT} characters to the left"
        )
    return start % size, end % size


def _field(record: dict, key: str, expected: type, name: str | None = None) -> Any:
    """``record[key]``, which must be present and of JSON type ``expected``."""
    name = name or key
    if key not in record:
        raise FieldError(name, "missing")
    value = record[key]
    if not isinstance(value, expected):
        wanted = {str: "a string", list: "an array", dict: "an object"}[expected]
        raise FieldError(name, f"expected {wanted}, got {json_type(value)}")
    return value


def _optional_id(record: dict, key: str) -> str | None:
    if key not in record:
        return None
    if not isinstance(record[key], str):
        raise FieldError(key, f"expected a string, got {json_type(record[key])}")
    return record[key]


# CLUE's test.json gives every question three placeholder answers, {"text": "FAKE_ANSWER_1",
# "answer_start": -1} .. _3 (the CLUE test passage TEST_0 as dbiir/UER-py keeps it,
# datasets/test_data/cmrc_test/test.json @5bce6e6; bojone/CLUE-bert4keras src/cmrc2018.py
# @6538b90 stops at answer_start -1). They are not answers: an unlabelled split drops them,
# a labelled one refuses them.
PLACEHOLDER_ANSWER = re.compile(r"FAKE_ANSWER_\d+")


def is_placeholder(answer: Any) -> bool:
    """Whether an ``answers`` entry of an unlabelled file is a placeholder (its text or its
    ``answer_start`` -1 says so)."""
    return isinstance(answer, dict) and (
        answer.get("answer_start") == -1 or _placeholder_text(answer)
    )


def _placeholder_text(answer: Any) -> bool:
    """Whether an entry's text is FAKE_ANSWER_n (never a gold answer)."""
    text = answer.get("text") if isinstance(answer, dict) else answer
    return isinstance(text, str) and PLACEHOLDER_ANSWER.fullmatch(text) is not None


def _answers(record: dict, labelled: bool) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Texts and starts of ``answers``; empty for an unlabelled question without them (or
    with only the test file's placeholders)."""
    raw = record.get("answers", [])
    if isinstance(raw, list) and any(is_placeholder(answer) for answer in raw):
        if labelled and any(_placeholder_text(answer) for answer in raw):
            raise FieldError(
                "answers", "holds the test file's placeholders (FAKE_ANSWER_n, answer_start -1)"
            )
        if not labelled:
            raw = [answer for answer in raw if not is_placeholder(answer)]
    if not isinstance(raw, list):
        raise FieldError("answers", f"expected an array, got {json_type(raw)}")
    if not raw and labelled:
        raise FieldError("answers", "missing or empty (unlabelled file? read it labelled=False)")
    texts, starts = [], []
    for i, answer in enumerate(raw):
        if not isinstance(answer, dict):
            raise FieldError(f"answers[{i}]", f"expected an object, got {json_type(answer)}")
        texts.append(_field(answer, "text", str, f"answers[{i}].text"))
        if "answer_start" not in answer:
            raise FieldError(f"answers[{i}].answer_start", "missing")
        if not is_json_int(answer["answer_start"]):
            raise FieldError(
                f"answers[{i}].answer_start",
                f"expected an integer, got {json_type(answer['answer_start'])}",
            )
        starts.append(answer["answer_start"])
    return tuple(texts), tuple(starts)


def _question(record: Any, context: str, context_id: str, position: str, labelled: bool):
    if not isinstance(record, dict):
        raise FieldError("", f"expected an object, got {json_type(record)}")
    # Empty strings are read, not refused (see the module docstring): the evaluator and the
    # baseline accept them, and the official trial file has two empty questions.
    qid = _field(record, "id", str)
    question = _field(record, "question", str)
    answers, starts = _answers(record, labelled)
    return Cmrc2018Question(qid, context_id, context, question, answers, starts, position)


def _where(path, position: str, record: Any) -> str:
    """``file: data[0].paragraphs[1].qas[2] (id 'X')`` for error messages."""
    record_id = record.get("id") if isinstance(record, dict) else None
    named = f" (id {record_id!r})" if isinstance(record_id, str) else ""
    return f"{path}: {position}{named}"


def _paragraph_questions(path, paragraph, position, article_id, labelled):
    """The questions of one paragraph; DataFormatError naming the record otherwise."""
    try:
        if not isinstance(paragraph, dict):
            raise FieldError("", f"expected an object, got {json_type(paragraph)}")
        context = _field(paragraph, "context", str)
        context_id = _optional_id(paragraph, "id") or article_id or position
        qas = _field(paragraph, "qas", list)
    except FieldError as e:
        raise _error(_where(path, position, paragraph), e) from None
    questions = []
    for k, record in enumerate(qas):
        where = f"{position}.qas[{k}]"
        try:
            questions.append(_question(record, context, context_id, where, labelled))
        except FieldError as e:
            raise _error(_where(path, where, record), e) from None
    return questions


def _error(where: str, e: FieldError) -> DataFormatError:
    field = f": field {e.field!r}" if e.field else ""
    return DataFormatError(f"{where}{field}: {e.detail}")


def read_questions(path: str | os.PathLike[str], *, labelled: bool) -> Cmrc2018Split:
    """Reads and validates one official CMRC 2018 file.

    Args:
      path: e.g. ``cmrc2018_public/dev.json``.
      labelled: True for train/dev/trial (every question needs an answer), False for test.

    Returns:
      A `Cmrc2018Split` with the questions in file order.

    Raises:
      DataFormatError: naming the file, the record and the field of the first problem.
    """
    document = load_json(path)
    try:
        if not isinstance(document, dict):
            raise FieldError(
                "", f"expected an object with a 'data' array, got {json_type(document)}"
            )
        articles = _field(document, "data", list)
    except FieldError as e:
        raise _error(f"{path}: top level", e) from None
    questions: list[Cmrc2018Question] = []
    for i, article in enumerate(articles):
        try:
            if not isinstance(article, dict):
                raise FieldError("", f"expected an object, got {json_type(article)}")
            article_id = _optional_id(article, "id")
            _optional_id(article, "title")
            paragraphs = _field(article, "paragraphs", list)
        except FieldError as e:
            raise _error(_where(path, f"data[{i}]", article), e) from None
        for j, paragraph in enumerate(paragraphs):
            position = f"data[{i}].paragraphs[{j}]"
            questions.extend(_paragraph_questions(path, paragraph, position, article_id, labelled))
    _check_unique_ids(path, questions)
    misplaced = tuple(q.qid for q in questions if q.answers and not _at_its_start(q))
    return Cmrc2018Split(os.fspath(path), tuple(questions), misplaced)


def _check_unique_ids(path, questions: list[Cmrc2018Question]) -> None:
    first: dict[str, str] = {}
    for question in questions:
        if question.qid in first:
            raise DataFormatError(
                f"{path}: {question.position} (id {question.qid!r}): field 'id': duplicate "
                f"of {first[question.qid]}"
            )
        first[question.qid] = question.position


def _at_its_start(question: Cmrc2018Question) -> bool:
    """Whether the first answer's text stands at its ``answer_start``."""
    start, text = question.answer_starts[0], question.answers[0]
    return start >= 0 and question.context[start : start + len(text)] == text


def read_split(data_dir: str | os.PathLike[str], split: str) -> Cmrc2018Split:
    """Reads ``split`` ("train", "validation", "test" or "trial") from the unpacked
    ``cmrc2018_public`` folder; only the test file is read unlabelled."""
    if split not in SPLIT_FILES:
        raise DataFormatError(f"CMRC 2018 has no {split!r} split; it has {', '.join(SPLIT_FILES)}")
    path = os.path.join(data_dir, SPLIT_FILES[split])
    return read_questions(path, labelled=split not in UNLABELLED_SPLITS)
