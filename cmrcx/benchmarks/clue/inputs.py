"""The text (pair) CLUE's baselines feed the encoder, as pure functions.

The baselines build ``InputExample(text_a, text_b)`` per record ([TF] / [PT] in
`cmrcx.benchmarks.clue.tasks`) and the BERT runner then encodes
``[CLS] text_a [SEP] (text_b [SEP])`` ([RUN] ``convert_single_example``). This module
reproduces ``(text_a, text_b)`` exactly; tokenization, ``[CLS]``/``[SEP]`` and
truncation to the task's ``max_length`` belong to the SeqIO side. `truncate_seq_pair`
states the baselines' truncation rule in pure Python so that side can be checked
against it.

Per task:
  AFQMC, OCNLI, CMNLI   (sentence1, sentence2)
  diagnostics           (premise, hypothesis)  [HF]
  TNEWS                 (sentence, None); the file's "keywords" are not used by
                        [TF]/[PT]/[RUN], though the paper's Table 1 lists "news title and
                        keywords" as the source of the data.
  IFLYTEK               (sentence, None); not shortened here. The runner keeps the first
                        max_length - 2 WordPiece tokens (Appendix C of the paper: the useful
                        information is at the beginning, so 128 tokens suffice).
  CSL                   (" ".join(keyword), abst): keywords first, joined by one space.
  CLUEWSC2020           (text with "_noun_" and "[pronoun]" marked, None).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cmrcx.benchmarks.clue.official_format import ClueExample, WscTarget
from cmrcx.benchmarks.clue.tasks import (
    CSL_KEYWORDS,
    PAIR,
    SINGLE,
    WSC_MARKED,
    ClueTask,
    get_task,
)


def csl_keyword_text(keywords: Sequence[str]) -> str:
    """CSL's first segment: the keywords joined by single spaces ([TF] CslProcessor).

    >>> csl_keyword_text(["声呐", "波束形成", "FFT"])
    '声呐 波束形成 FFT'
    """
    return " ".join(keywords)


def wsc_marked_text(text: str, target: WscTarget) -> str:
    """CLUEWSC2020's text with the noun (span1) in underscores and the pronoun (span2) in
    brackets, by the same four ``list.insert`` calls as [TF]/[PT] WSCProcessor.

    The insertion positions assume the later span starts after the earlier one ends;
    for overlapping spans the baseline's (odd) result is reproduced as is.

    >>> wsc_marked_text("小王把书给了小李，因为他要出门。", WscTarget(6, "小李", 11, "他"))
    '小王把书给了_小李_，因为[他]要出门。'
    >>> wsc_marked_text("他说小李明天来。", WscTarget(2, "小李", 0, "他"))
    '[他]说_小李_明天来。'
    """
    chars = list(text)
    query, query_index = target.span1_text, target.span1_index
    pronoun, pronoun_index = target.span2_text, target.span2_index
    if pronoun_index > query_index:
        chars.insert(query_index, "_")
        chars.insert(query_index + len(query) + 1, "_")
        chars.insert(pronoun_index + 2, "[")
        chars.insert(pronoun_index + len(pronoun) + 2 + 1, "]")
    else:
        chars.insert(pronoun_index, "[")
        chars.insert(pronoun_index + len(pronoun) + 1, "]")
        chars.insert(query_index + 2, "_")
        chars.insert(query_index + len(query) + 2 + 1, "_")
    return "".join(chars)


def _single(task: ClueTask, example: ClueExample) -> tuple[str, str | None]:
    return example.texts[task.text_fields[0]], None


def _pair(task: ClueTask, example: ClueExample) -> tuple[str, str | None]:
    first, second = task.text_fields
    return example.texts[first], example.texts[second]


def _csl(task: ClueTask, example: ClueExample) -> tuple[str, str | None]:
    return csl_keyword_text(example.texts["keyword"]), example.texts["abst"]


def _wsc(task: ClueTask, example: ClueExample) -> tuple[str, str | None]:
    return wsc_marked_text(example.texts["text"], example.texts["target"]), None


_BUILDERS: dict[str, Callable[[ClueTask, ClueExample], tuple[str, str | None]]] = {
    SINGLE: _single,
    PAIR: _pair,
    CSL_KEYWORDS: _csl,
    WSC_MARKED: _wsc,
}


def encoder_texts(task: ClueTask | str, example: ClueExample) -> tuple[str, str | None]:
    """``(text_a, text_b)`` for one record, as the task's baseline processor builds it.

    Example (AFQMC): ``{"sentence1": "怎么还款", "sentence2": "如何还钱", ...}`` ->
    ``("怎么还款", "如何还钱")``; (TNEWS): ``{"sentence": "新车上市", ...}`` ->
    ``("新车上市", None)``.
    """
    task = get_task(task) if isinstance(task, str) else task
    return _BUILDERS[task.input_format](task, example)


def truncate_seq_pair(tokens_a: list[str], tokens_b: list[str], max_tokens: int) -> None:
    """The runner's ``_truncate_seq_pair`` ([RUN]): pop from the end of the longer list
    (``tokens_b`` on ties) until both fit in ``max_tokens`` (= max_length - 3). A single
    sequence is cut to its first max_length - 2 tokens instead. Modifies the lists.

    >>> a, b = list("一二三四五"), list("甲乙")
    >>> truncate_seq_pair(a, b, 4); a, b
    (['一', '二'], ['甲', '乙'])
    """
    while len(tokens_a) + len(tokens_b) > max_tokens:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()
