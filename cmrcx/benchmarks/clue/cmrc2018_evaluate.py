"""The official CMRC 2018 evaluator, rule for rule: EM, F1, AVERAGE, TOTAL, SKIP.

Source: ymcui/cmrc2018 ``baseline/cmrc2018_evaluate.py`` (v6, commit c0eb1b6ba219847457e6af
3180da722bbeb656af), the latest version stored. Its scoring is the same, line for line, as in
v4 (``eval/cmrc2018_evaluate.py``, commit 7680ab3), v5 (``data/cmrc2018_evaluate.py``) and
v5-special (``squad-style-data/cmrc2018_evaluate.py``, commit 5c81039ef856de178b5198391b3cd4
0f4e5e8514), and as in CLUE's copy (CLUEbenchmark/CLUE
``baselines/models_pytorch/mrc_pytorch/preprocess/cmrc2018_evaluate.py``, commit 2ea9046,
``get_eval``, which ``run_mrc.py`` calls). Per question, over its gold answers:

* EM: 1 if some answer equals the prediction after `remove_punctuation` (lower-case, strip,
  drop the characters of `PUNCTUATION`), else 0.
* F1: the best over answers of 2PR/(P+R), where P and R divide the length of the longest
  common *contiguous* run of tokens (`find_lcs`, not a bag of tokens as in SQuAD) by the
  prediction's and the answer's token counts; tokens come from `mixed_segmentation` with
  punctuation removed.
* A question missing from the predictions is skipped (SKIP) but still counted in TOTAL, so
  it scores 0. F1 and EM are percentages over TOTAL; AVERAGE = (EM + F1) / 2, from the
  unrounded values; the script prints each with ``'%.3f'``. Question ids are matched as
  they are (v6; v5-special strips them first, which matters only for ids with spaces).

`mixed_segmentation` makes every CJK character (U+4E00..U+9FA5 only, the script's range) and
every listed punctuation character a token, and passes the runs of other characters to
``nltk.word_tokenize``. That function needs NLTK's downloadable Punkt model, which is not
here (and not on PyPI), and its tokenizer has changed over NLTK releases: NLTK 3.10.3 makes
"——" (common in Chinese text) two tokens and "x*y" three, where 3.4.5 keeps each one token.
`treebank_word_tokenize` freezes, without the nltk dependency, the tokenizer
``word_tokenize`` ran in NLTK 3.4.5 (PyPI sdist ``nltk-3.4.5.zip``: TreebankWordTokenizer of
``nltk/tokenize/treebank.py`` plus the four "improved" rules of ``nltk/tokenize/__init__.py``),
the last release before ``NLTKWordTokenizer`` replaced it (NLTK pull request 2355, 2019-08),
so the one of the CMRC 2018 (2018) and CLUE (2019) evaluations' era; earlier 3.x releases
differ from it only in a few quote rules („, backquotes, a quote before a one-letter word).

Where a result can differ from running the script: ``word_tokenize`` first splits a run into
sentences with Punkt, which is skipped here. The tokens differ only when a run of non-CJK
characters holds a sentence end inside it, i.e. "." then whitespace then more text that Punkt
takes for a new sentence ("end. next" is ["end", ".", "next"] there, ["end.", "next"] here);
"?" and "!" are split either way, and a final "." is split by the tokenizer itself. Runs are
what lies between CJK characters, so in Chinese answers they are short (numbers, names,
Latin words). The regexes run with Python 3 semantics (``\\d``, ``\\w`` are Unicode), as in
the Python 3 v6 and CLUE scripts; Python 2 runs of v4/v5 used ASCII ``\\d`` in two rules.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from cmrcx.benchmarks.records import json_type
from cmrcx.common.errors import DataFormatError
from cmrcx.common.files import load_json

# The script's `sp_char`, in its order. "……" is one entry of two characters: the script
# tests single characters against the list, so it never matches and "…" is not removed.
PUNCTUATION_LIST = (
    "-", ":", "_", "*", "^", "/", "\\", "~", "`", "+", "=",
    "，", "。", "：", "？", "！", "“", "”", "；", "’", "《", "》", "……", "·", "、",
    "「", "」", "（", "）", "－", "～", "『", "』",
)  # fmt: skip
PUNCTUATION = frozenset(PUNCTUATION_LIST)
# The script's `re.search(r'[\u4e00-\u9fa5]', char)`: narrower than BERT's CJK blocks.
_CJK = re.compile("[\u4e00-\u9fa5]")

# --- NLTK 3.4.5 word_tokenize, without Punkt (see the module docstring) ----------------------
# Rules in the order TreebankWordTokenizer.tokenize applies them; the "improved" ones that
# nltk.tokenize.__init__ inserts (index 0) or appends are marked.
_STARTING_QUOTES = (
    (re.compile("([«“‘„]|[`]+)"), r" \1 "),  # improved, inserted first
    (re.compile(r"^\""), r"``"),
    (re.compile(r"(``)"), r" \1 "),
    (re.compile(r"([ \(\[{<])(\"|\'{2})"), r"\1 `` "),
    (re.compile(r"(?i)(\')(?!re|ve|ll|m|t|s|d)(\w)\b"), r"\1 \2"),  # improved, appended
)
_PUNCTUATION_RULES = (
    (re.compile(r"([^\.])(\.)([\]\)}>\"\'" "»”’ " r"]*)\s*$"), r"\1 \2 \3 "),  # improved
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.\.\."), r" ... "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r"([^\.])(\.)([\]\)}>\"\']*)\s*$"), r"\1 \2\3 "),  # the final period
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"([^'])' "), r"\1 ' "),
)
_PARENS_BRACKETS = (re.compile(r"[\]\[\(\)\{\}\<\>]"), r" \g<0> ")
_DOUBLE_DASHES = (re.compile(r"--"), r" -- ")
_ENDING_QUOTES = (
    (re.compile("([»”’])"), r" \1 "),  # improved, inserted first
    (re.compile(r'"'), " '' "),
    (re.compile(r"(\S)(\'\')"), r"\1 \2 "),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
)
# MacIntyreContractions.CONTRACTIONS2 and CONTRACTIONS3 (CONTRACTIONS4 is unused there).
_CONTRACTIONS = tuple(
    re.compile(pattern)
    for pattern in (
        r"(?i)\b(can)(?#X)(not)\b",
        r"(?i)\b(d)(?#X)('ye)\b",
        r"(?i)\b(gim)(?#X)(me)\b",
        r"(?i)\b(gon)(?#X)(na)\b",
        r"(?i)\b(got)(?#X)(ta)\b",
        r"(?i)\b(lem)(?#X)(me)\b",
        r"(?i)\b(mor)(?#X)('n)\b",
        r"(?i)\b(wan)(?#X)(na)\s",
        r"(?i) ('t)(?#X)(is)\b",
        r"(?i) ('t)(?#X)(was)\b",
    )
)


def treebank_word_tokenize(text: str) -> list[str]:
    """NLTK 3.4.5's ``word_tokenize(text, preserve_line=True)``: improved Treebank rules.

    >>> treebank_word_tokenize("don't stop (x) 3.5% end.")
    ['do', "n't", 'stop', '(', 'x', ')', '3.5', '%', 'end', '.']
    """
    for regexp, substitution in _STARTING_QUOTES + _PUNCTUATION_RULES:
        text = regexp.sub(substitution, text)
    for regexp, substitution in (_PARENS_BRACKETS, _DOUBLE_DASHES):
        text = regexp.sub(substitution, text)
    text = " " + text + " "
    for regexp, substitution in _ENDING_QUOTES:
        text = regexp.sub(substitution, text)
    for regexp in _CONTRACTIONS:
        text = regexp.sub(r" \1 \2 ", text)
    return text.split()


# --- The script's functions ------------------------------------------------------------------


def mixed_segmentation(text: str, rm_punc: bool = False) -> list[str]:
    """The script's tokens: lower-cased; CJK characters and punctuation alone, other runs
    through the word tokenizer. With ``rm_punc`` the punctuation is dropped first (a dropped
    character does not break a run: "a-b" is one run "ab").

    >>> mixed_segmentation("2018年NBA总决赛，", rm_punc=True)
    ['2018', '年', 'nba', '总', '决', '赛']
    """
    segments: list[str] = []
    run = ""
    for char in str(text).lower().strip():
        if rm_punc and char in PUNCTUATION:
            continue
        if _CJK.search(char) or char in PUNCTUATION:
            if run:
                segments.extend(treebank_word_tokenize(run))
                run = ""
            segments.append(char)
        else:
            run += char
    if run:
        segments.extend(treebank_word_tokenize(run))
    return segments


def remove_punctuation(text: str) -> str:
    """Lower-cased, stripped, without the characters of `PUNCTUATION` (spaces stay)."""
    return "".join(char for char in str(text).lower().strip() if char not in PUNCTUATION)


def find_lcs(s1: Sequence[str], s2: Sequence[str]) -> tuple[Sequence[str], int]:
    """The longest common contiguous run of ``s1`` and ``s2`` and its length; the first
    (in ``s1``) of equally long runs, as the script's dynamic programme finds it."""
    previous = [0] * (len(s2) + 1)
    longest, end = 0, 0
    for i in range(len(s1)):
        current = [0] * (len(s2) + 1)
        for j in range(len(s2)):
            if s1[i] == s2[j]:
                current[j + 1] = previous[j] + 1
                if current[j + 1] > longest:
                    longest, end = current[j + 1], i + 1
        previous = current
    return s1[end - longest : end], longest


def f1_score(answers: Sequence[str], prediction: str) -> float:
    """The script's ``calc_f1_score``: best LCS-based F1 over the answers, in [0, 1]."""
    if not answers:
        raise ValueError("no gold answers (the official script fails on max([]))")
    prediction_segments = mixed_segmentation(prediction, rm_punc=True)
    scores = []
    for answer in answers:
        answer_segments = mixed_segmentation(answer, rm_punc=True)
        _, common = find_lcs(answer_segments, prediction_segments)
        if common == 0:
            scores.append(0.0)
            continue
        precision = common / len(prediction_segments)
        recall = common / len(answer_segments)
        scores.append(2 * precision * recall / (precision + recall))
    return max(scores)


def exact_match(answers: Sequence[str], prediction: str) -> int:
    """The script's ``calc_em_score``: 1 if an answer equals the prediction after
    `remove_punctuation`, else 0."""
    prediction = remove_punctuation(prediction)
    return int(any(remove_punctuation(answer) == prediction for answer in answers))


def _printed(value: float) -> float:
    """The value the script prints (``'%.3f' % value``), as a number."""
    return float(f"{value:.3f}")


def evaluate(gold: Mapping[str, Sequence[str]], predictions: Mapping[str, str]) -> dict:
    """Scores predictions against gold answers as the official script does.

    Args:
      gold: question id -> its gold answer texts (at least one), in file order.
      predictions: question id -> predicted answer text; ids not in ``gold`` are ignored.

    Returns:
      ``{"AVERAGE", "F1", "EM"}`` as the script prints them (percentages rounded to 3
      decimals) and ``{"TOTAL", "SKIP"}``: questions, and those without a prediction.

    Raises:
      ValueError: ``gold`` is empty or a question has no gold answer (the script fails).
    """
    if not gold:
        raise ValueError("no gold questions to score (the official script divides by 0)")
    f1 = em = 0.0
    skipped = 0
    for qid, answers in gold.items():
        if not answers:
            raise ValueError(f"question {qid!r} has no gold answer")
        if qid not in predictions:
            skipped += 1
            continue
        f1 += f1_score(answers, predictions[qid])
        em += exact_match(answers, predictions[qid])
    total = len(gold)
    f1_percent, em_percent = 100.0 * f1 / total, 100.0 * em / total
    return {
        "AVERAGE": _printed((em_percent + f1_percent) * 0.5),
        "F1": _printed(f1_percent),
        "EM": _printed(em_percent),
        "TOTAL": total,
        "SKIP": skipped,
    }


def read_predictions(path: str | os.PathLike[str]) -> dict[str, str]:
    """Reads a predictions file ``{question id: answer text}``.

    The script would ``str()`` any value; a non-string answer is refused here instead,
    since it means the file is not what the scorer thinks it is.

    Raises:
      DataFormatError: naming the file (and the question id) of the problem.
    """
    document = load_json(path)
    if not isinstance(document, dict):
        raise DataFormatError(
            f"{path}: top level: expected an object mapping question id to answer text, "
            f"got {json_type(document)}"
        )
    for qid, answer in document.items():
        if not isinstance(answer, str):
            raise DataFormatError(
                f"{path}: question id {qid!r}: expected an answer string, got {json_type(answer)}"
            )
    return document


def read_gold(path: str | os.PathLike[str]) -> dict[str, tuple[str, ...]]:
    """Gold answers by question id, from a file in either layout the v6 script reads.

    SQuAD-style (CLUE's ``cmrc2018_public``: ``{"data": [{"paragraphs": [{"qas": [{"id",
    "answers": [{"text", ...}]}]}]}]}``) or the original CMRC 2018 release (a list of
    ``{"context_id", "qas": [{"query_id", "answers": ["text", ...]}]}``): the script takes
    ``data`` or the list itself, ``paragraphs`` or the record itself, ``id`` or ``query_id``,
    and answers as objects with ``text`` or as strings.

    Raises:
      DataFormatError: naming the file, the record and the field; also for the CLUE test
        file's placeholder answers (FAKE_ANSWER_n), which are not gold, for a question
        without answers (the script fails there) and for a repeated question id.
    """
    from cmrcx.benchmarks.clue.cmrc2018_format import _placeholder_text as is_placeholder

    document = load_json(path)
    data = document["data"] if isinstance(document, dict) and "data" in document else document
    if not isinstance(data, list):
        raise DataFormatError(
            f"{path}: top level: expected a 'data' array or an array of passages, "
            f"got {json_type(data)}"
        )
    gold: dict[str, tuple[str, ...]] = {}
    for i, instance in enumerate(data):
        if not isinstance(instance, dict):
            raise DataFormatError(
                f"{path}: data[{i}]: expected an object, got {json_type(instance)}"
            )
        nested = "paragraphs" in instance
        paragraphs = instance["paragraphs"] if nested else [instance]
        if not isinstance(paragraphs, list):
            raise DataFormatError(f"{path}: data[{i}]: field 'paragraphs': expected an array")
        for j, paragraph in enumerate(paragraphs):
            where = f"data[{i}]" + (f".paragraphs[{j}]" if nested else "")
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise DataFormatError(f"{path}: {where}: field 'qas': missing or not an array")
            for k, qa in enumerate(qas):
                qid, answers = _gold_question(path, f"{where}.qas[{k}]", qa, is_placeholder)
                if qid in gold:
                    raise DataFormatError(f"{path}: {where}.qas[{k}]: id {qid!r} repeats")
                gold[qid] = answers
    return gold


def _gold_question(path, where: str, qa, is_placeholder) -> tuple[str, tuple[str, ...]]:
    """(id, answer texts) of one question of a gold file; DataFormatError otherwise."""
    if not isinstance(qa, dict):
        raise DataFormatError(f"{path}: {where}: expected an object, got {json_type(qa)}")
    key = "id" if "id" in qa else "query_id"
    qid = qa.get(key)
    if not isinstance(qid, str):
        raise DataFormatError(
            f"{path}: {where}: field 'id' (or 'query_id'): missing or not a string"
        )
    where = f"{where} (id {qid!r})"
    raw = qa.get("answers")
    if not isinstance(raw, list) or not raw:
        raise DataFormatError(f"{path}: {where}: field 'answers': missing or empty: no gold")
    if any(is_placeholder(answer) for answer in raw):
        raise DataFormatError(
            f"{path}: {where}: field 'answers': the test file's placeholders (FAKE_ANSWER_n, "
            "answer_start -1) are not gold answers"
        )
    texts = [answer.get("text") if isinstance(answer, dict) else answer for answer in raw]
    for n, text in enumerate(texts):
        if not isinstance(text, str):
            raise DataFormatError(f"{path}: {where}: field 'answers[{n}]': not an answer text")
    return qid, tuple(texts)


def score_files(
    dataset_path: str | os.PathLike[str], predictions_path: str | os.PathLike[str]
) -> dict:
    """``python cmrc2018_evaluate.py DATASET PREDICTIONS`` without the FILE entry: the
    official file with answers (dev.json, trial.json) in either layout (`read_gold`)."""
    return evaluate(read_gold(dataset_path), read_predictions(predictions_path))
