"""CLUE's CMRC 2018 baseline, step for step: passage tokens, windows, labels, answer decoding.

Sources, CLUEbenchmark/CLUE ``baselines/models_pytorch/mrc_pytorch/``:
  [PRE] ``preprocess/cmrc2018_preprocess.py`` (commit 016c3baa24ad515d9f15429f4fc6beed2c1aa974),
        ``json2features``;
  [OUT] ``preprocess/cmrc2018_output.py`` (commit 2ea90461e0a0321945f880330b629ce09e0e3fd2),
        ``write_predictions``, ``get_final_text``, ``_get_best_indexes``;
  [RUN] ``run_mrc.py`` (commit 2ea9046): ``--n_best 20``, ``--max_ans_length 50``, not
        overridden by ``run_mrc_cmrc2018.sh``; tokenizer ``BertTokenizer(do_lower_case=True)``.

1. Doc tokens (`split_doc_tokens`): every CJK character (BERT's blocks) and every character
   of `SEPARATE_CHARACTERS` (the script's ``is_fuhao``) is a token of its own; other
   characters form tokens between `WHITESPACE`. ``char_to_word_offset`` maps each context
   character to its token (whitespace to the token before it).
2. Each doc token is WordPiece-tokenized on its own (`tokenize_passage`), like
   ``tokenizer.tokenize(token)``; the question is tokenized whole and cut to 64 pieces.
3. Windows (`question_windows`, the one loop of every layout): window starts ``doc_stride``
   apart over the passage pieces, ``max_length - len(question) - 3`` pieces each
   (`cmrcx.benchmarks.windows.doc_spans`, the same loop); each passage piece is scored only
   in its max-context window (``_check_is_max_context``, as
   `cmrcx.benchmarks.windows.max_context_span`). The family's layout frames each window and
   says where its passage and its cls token land (`WindowFrame`, `cmrcx.vocab.layouts`
   `Layout.window_frame`); BERT's is ``[CLS] question [SEP] passage[start:start+n] [SEP]``,
   padded with id 0 to ``max_length``, segment ids 0 up to the first [SEP], 1 after it
   (XLNet's: `cmrc2018_xlnet`). The layout also tokenizes (`Cmrc2018Tokenizer`): here, steps
   1 and 2 (`word_tokenizer`).
4. Training labels (`Passage.answer_pieces`): the first answer only, found by
   `cmrc2018_format.baseline_answer_chars`; a start on a doc token "。", "，", "：", ":", ".",
   "," moves to the next token. Every window is kept: one without the whole answer is labelled
   (0, 0), the [CLS] slot. An ``answer_start`` of -1 is placed where [PRE]'s negative indexes
   put it, from the passage's end (its end may then come before its start, and the label
   with it); [PRE] neither drops nor searches for such an answer (ymcui/cmrc2018's own
   baseline, ``baseline/run_cmrc2018_drcd_baseline.py`` @04bf5f1 ``read_squad_examples``,
   would search the text and skip it when absent; CLUE's is the one reproduced here). The
   reader counts them (`Cmrc2018Split.summary`). An empty question is no pieces: the window is
   ``[CLS] [SEP] passage [SEP]``, as [PRE] builds it. (``_improve_answer_span`` is called
   with the context instead of the answer text, so it never changes a span: it is left out.)
5. Decoding (`nbest_answers`): per window the 20 best start and 20 best end positions over
   the whole row (padding included); a pair counts if both are passage pieces, the start is
   in its max-context window, end >= start and it spans at most 50 pieces; pairs sort by
   start + end logit (stable), and the first 20 distinct texts are the n-best; none gives
   "empty" (an empty passage has one window without passage pieces here, none in [PRE]:
   "empty" either way). A text is the span's doc tokens joined *without* the whitespace
   between them, cut to the predicted pieces by ``get_final_text`` (the BERT-normalised
   pieces are looked up in the BERT-normalised doc tokens; if they are not found or the
   lengths differ, the whole doc tokens). So it is original characters with their casing, no
   "##" and no spaces added, but also none kept: "Harry Potter" comes out "HarryPotter".
   ``keep_whitespace=True`` returns the context slice instead (not the baseline's choice).

Known difference: a U+2581 ("▁") in a context is whitespace to the baseline, which also drops
it from ``char_to_word_offset``, shifting every later training label by one character; here
offsets stay aligned.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol

import numpy as np

from cmrcx.benchmarks.clue.cmrc2018_format import Cmrc2018Question, baseline_answer_chars
from cmrcx.benchmarks.windows import Span, doc_spans

# [PRE] json2features defaults (max_seq_length=512, doc_stride=128, max_query_length=64);
# CLUE's run_mrc_cmrc2018.sh passes --max_seq_length=256.
MAX_LENGTH = 512
DOC_STRIDE = 128
MAX_QUERY_TOKENS = 64
# [RUN] argparse defaults --n_best 20, --max_ans_length 50 (pieces).
N_BEST = 20
MAX_ANSWER_TOKENS = 50
# [PRE] is_fuhao: characters that are doc tokens of their own.
SEPARATE_CHARACTERS = frozenset('。，！？；、：（）－~「《》,」"“”$『』—;()-～‘’')
# [PRE] is_whitespace (SPIECE_UNDERLINE is its own separator, hence "▁").
WHITESPACE = frozenset(" \t\r\n\u202f\u2581")
# [PRE] a training start on one of these doc tokens moves one token right.
START_SKIP_TOKENS = frozenset({"。", "，", "：", ":", ".", ","})
EMPTY_ANSWER = "empty"  # [OUT] the nonce prediction when no span is valid

# words -> WordPiece ids of each word, like BertTokenizer.tokenize on each.
TokenizeWords = Callable[[Sequence[str]], Sequence[Sequence[int]]]

WINDOW_FEATURES = (
    "input_ids",
    "token_type_ids",
    "input_mask",
    "start_position",
    "end_position",
    "token_char_start",
    "token_char_end",
    "token_is_max_context",
    "window_index",
)


def is_cjk(char: str) -> bool:
    """BERT's "Chinese character" blocks ([PRE] ``_is_chinese_char``)."""
    cp = ord(char)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


class DocTokens(NamedTuple):
    """The baseline's doc tokens of one context, as character spans.

    starts, ends: int32 [num_doc_tokens]; token t is ``context[starts[t]:ends[t]]``.
    char_to_doc: int32 [len(context)], the doc token of each character (``char_to_word_offset``:
      whitespace belongs to the token before it, -1 before the first token).
    """

    starts: np.ndarray
    ends: np.ndarray
    char_to_doc: np.ndarray


def split_doc_tokens(context: str) -> DocTokens:
    """[PRE] ``_tokenize_chinese_chars`` + the whitespace split of ``json2features``.

    >>> [("AB 中x，y"[s:e]) for s, e in zip(*split_doc_tokens("AB 中x，y")[:2])]
    ['AB', '中', 'x', '，', 'y']
    """
    starts: list[int] = []
    ends: list[int] = []
    char_to_doc: list[int] = []
    boundary = True  # a new token starts at the next non-whitespace character
    for i, char in enumerate(context):
        if char in WHITESPACE:
            boundary = True
        else:
            alone = is_cjk(char) or char in SEPARATE_CHARACTERS
            if boundary or alone:
                starts.append(i)
                ends.append(i)
            ends[-1] = i + 1
            boundary = alone
        char_to_doc.append(len(starts) - 1)
    return DocTokens(
        np.asarray(starts, np.int32), np.asarray(ends, np.int32), np.asarray(char_to_doc, np.int32)
    )


class PassagePieces(Protocol):
    """A context as a layout's `Cmrc2018Tokenizer` splits it (`Passage`: doc tokens and
    their WordPiece pieces; `cmrc2018_xlnet.XLNetPassage`: SentencePiece pieces with their
    characters), all the windowing loop asks of it.

    piece_ids, char_start, char_end: int32 [num_pieces]; piece p maps back to
    ``context[char_start[p]:char_end[p]]`` (BERT's: its doc token; XLNet's: what it covers).
    """

    @property
    def piece_ids(self) -> np.ndarray: ...

    @property
    def char_start(self) -> np.ndarray: ...

    @property
    def char_end(self) -> np.ndarray: ...

    def answer_pieces(self, text: str, answer_start: int) -> tuple[int, int] | None:
        """(first piece, last piece) of a training answer; None: in no window (every window
        points at the cls token). ValueError naming the answer when it cannot be placed."""
        ...


class Cmrc2018Tokenizer(NamedTuple):
    """A layout's CMRC 2018 tokenization (`cmrcx.vocab.layouts` `Layout.windows`).

    questions: the question texts -> each one's ids (cut to ``max_query_tokens`` later).
    passage: a context -> its `PassagePieces`.
    """

    questions: Callable[[Sequence[str]], Sequence[Sequence[int]]]
    passage: Callable[[str], PassagePieces]


class FramedWindow(NamedTuple):
    """One window framed by a layout: input_ids, token_type_ids, input_mask int32
    [max_length]; passage_start: the row slot of the window's first passage piece;
    cls_position: the cls token's slot, where a window without the answer points."""

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    input_mask: np.ndarray
    passage_start: int
    cls_position: int


class WindowFrame(Protocol):
    """A layout's window frame with its special ids bound (`cmrcx.vocab.layouts`
    `Layout.window_frame`): a question's ids and a window's passage pieces, framed and
    padded to ``max_length``."""

    def __call__(
        self, question_ids: np.ndarray, passage_ids: np.ndarray, max_length: int
    ) -> FramedWindow: ...


class Passage(NamedTuple):
    """A context in doc tokens and their WordPiece pieces.

    piece_ids: int32 [num_pieces] (``all_doc_tokens``); piece_doc: int32 [num_pieces], the doc
    token of each piece (``tok_to_orig_index``); doc_first_piece: int32 [num_doc_tokens], the
    first piece of each doc token (``orig_to_tok_index``; a doc token without pieces points
    at the next token's).
    """

    context: str
    doc: DocTokens
    piece_ids: np.ndarray
    piece_doc: np.ndarray
    doc_first_piece: np.ndarray

    @property
    def char_start(self) -> np.ndarray:
        """int32 [num_pieces]: the first character of each piece's doc token."""
        return self.doc.starts[self.piece_doc]

    @property
    def char_end(self) -> np.ndarray:
        """int32 [num_pieces]: the character after each piece's doc token."""
        return self.doc.ends[self.piece_doc]

    def answer_pieces(self, text: str, answer_start: int) -> tuple[int, int]:
        """[PRE] training positions: (first piece, last piece) of an answer in the passage.

        The doc tokens are indexed as [PRE] indexes its lists, a negative index from the
        end: a character before the first doc token maps to token -1, the last one.

        Raises:
          ValueError: the answer is not inside the context (see `baseline_answer_chars`),
            the passage has no doc tokens, or the answer starts on the last doc token,
            which is punctuation (the baseline would crash on each).
        """
        first, last = baseline_answer_chars(self.context, text, answer_start)
        doc = self.doc
        if not len(doc.starts):
            raise ValueError(f"answer {text!r}: the passage has no tokens to place it on")
        start_doc, end_doc = int(doc.char_to_doc[first]), int(doc.char_to_doc[last])
        if self.context[doc.starts[start_doc] : doc.ends[start_doc]] in START_SKIP_TOKENS:
            start_doc += 1
        num_docs = len(doc.starts)
        if start_doc >= num_docs:
            raise ValueError(f"answer {text!r} starts on the passage's final punctuation")
        piece_start = int(self.doc_first_piece[start_doc])
        if end_doc < num_docs - 1:
            piece_end = int(self.doc_first_piece[end_doc + 1]) - 1
        else:
            piece_end = len(self.piece_ids) - 1
        return piece_start, piece_end


def tokenize_passage(context: str, tokenize_words: TokenizeWords) -> Passage:
    """Doc tokens of ``context`` and the pieces of each, tokenized one token at a time."""
    doc = split_doc_tokens(context)
    words = [context[s:e] for s, e in zip(doc.starts, doc.ends, strict=True)]
    pieces = tokenize_words(words) if words else []
    counts = np.asarray([len(p) for p in pieces], np.int32)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32) if words else counts
    flat = [i for p in pieces for i in p]
    return Passage(
        context,
        doc,
        np.asarray(flat, np.int32),
        np.repeat(np.arange(len(words), dtype=np.int32), counts),
        first,
    )


def word_tokenizer(tokenize_words: TokenizeWords) -> Cmrc2018Tokenizer:
    """The baseline's tokenization (steps 1 and 2): each question whole, each passage doc
    token by doc token (`tokenize_passage`)."""
    return Cmrc2018Tokenizer(
        tokenize_words, functools.partial(tokenize_passage, tokenize_words=tokenize_words)
    )


def max_context_windows(spans: Sequence[Span], num_pieces: int) -> np.ndarray:
    """int [num_pieces]: the window scoring each piece, `max_context_span` for all at once.

    A piece's score in a window is min(left, right context) + 0.01 * window length; the
    first window wins ties (np.argmax takes the first maximum, like the strict ">").
    """
    positions = np.arange(num_pieces)
    best = np.full([num_pieces], -np.inf)
    chosen = np.full([num_pieces], -1)
    for index, span in enumerate(spans):
        end = span.start + span.length - 1
        inside = (positions >= span.start) & (positions <= end)
        score = np.minimum(positions - span.start, end - positions) + 0.01 * span.length
        better = inside & (score > best)
        best[better], chosen[better] = score[better], index
    return chosen


def question_windows(
    question_ids: Sequence[int],
    passage: PassagePieces,
    frame: WindowFrame,
    answer: tuple[int, int] | None = None,
    *,
    max_length: int = MAX_LENGTH,
    max_query_tokens: int = MAX_QUERY_TOKENS,
    doc_stride: int = DOC_STRIDE,
) -> dict[str, np.ndarray]:
    """All windows of one question over its passage ([PRE] the feature loop; CLUE's XLNet
    script's, `cmrc2018_xlnet`, is the same), each framed by ``frame``.

    Args:
      question_ids: the question's pieces (cut to ``max_query_tokens`` here).
      answer: (first piece, last piece) from `PassagePieces.answer_pieces` for training,
        else None.

    Returns arrays with a leading [W] (windows) axis:
      input_ids, token_type_ids, input_mask: int32 [W, max_length];
      start_position, end_position: int32 [W], the answer's row positions when the window
        holds all of it, else the cls token's (BERT's [CLS], 0); the cls token's without
        ``answer``;
      token_char_start, token_char_end: int32 [W, max_length], the context characters
        [start, end) each passage piece maps back to, -1 elsewhere;
      token_is_max_context: int32 [W, max_length], 1 where a passage piece is scored;
      window_index: int32 [W].
    """
    query = np.asarray(question_ids, np.int32)[:max_query_tokens]
    pieces, piece_start, piece_end = passage.piece_ids, passage.char_start, passage.char_end
    # Room for the passage beside the question, a cls token and two separators ([PRE]; the
    # XLNet script's alike).
    spans = doc_spans(len(pieces), max_length - len(query) - 3, doc_stride)
    scoring_span = max_context_windows(spans, len(pieces))
    out: dict[str, list] = {key: [] for key in WINDOW_FEATURES}
    for index, span in enumerate(spans):
        window = np.arange(span.start, span.start + span.length)
        framed = frame(query, pieces[window], max_length)
        offset = framed.passage_start
        char_start = np.full([max_length], -1, np.int32)
        char_end = np.full([max_length], -1, np.int32)
        is_max = np.zeros([max_length], np.int32)
        passage_slots = slice(offset, offset + span.length)
        char_start[passage_slots] = piece_start[window]
        char_end[passage_slots] = piece_end[window]
        is_max[passage_slots] = scoring_span[window] == index
        start = end = framed.cls_position
        if answer is not None:
            if answer[0] >= span.start and answer[1] <= span.start + span.length - 1:
                start, end = answer[0] - span.start + offset, answer[1] - span.start + offset
        values = (framed.input_ids, framed.token_type_ids, framed.input_mask, start, end)
        values += (char_start, char_end, is_max, index)
        for key, value in zip(WINDOW_FEATURES, values, strict=True):
            out[key].append(value)
    return {key: np.asarray(value, np.int32) for key, value in out.items()}


def split_windows(
    questions: Sequence[Cmrc2018Question],
    tokenizer: Cmrc2018Tokenizer,
    frame: WindowFrame,
    *,
    training: bool,
    max_length: int = MAX_LENGTH,
    max_query_tokens: int = MAX_QUERY_TOKENS,
    doc_stride: int = DOC_STRIDE,
) -> dict[str, np.ndarray]:
    """The windows of every question, concatenated, for ``Dataset.from_tensor_slices``:
    tokenized by ``tokenizer`` and framed by ``frame``, a layout's
    (`cmrcx.vocab.layouts` `Layout.windows`).

    Each context is tokenized once however many questions it has. With ``training`` the
    labels come from each question's first answer (`PassagePieces.answer_pieces`). Adds
    ``example_index``: int32 [N], the question's index in ``questions``.

    Raises:
      ValueError: naming the question whose first answer cannot be placed (training).
    """
    passages: dict[str, PassagePieces] = {}
    question_ids = tokenizer.questions([question.question for question in questions])
    parts = []
    for example_index, question in enumerate(questions):
        if question.context not in passages:
            passages[question.context] = tokenizer.passage(question.context)
        passage = passages[question.context]
        answer = None
        if training:
            if not question.answers:
                raise ValueError(f"question {question.qid!r} has no answer to train on")
            try:
                answer = passage.answer_pieces(question.answers[0], question.answer_starts[0])
            except ValueError as e:
                raise ValueError(f"question {question.qid!r}: {e}") from None
        windows = question_windows(
            question_ids[example_index],
            passage,
            frame,
            answer,
            max_length=max_length,
            max_query_tokens=max_query_tokens,
            doc_stride=doc_stride,
        )
        windows["example_index"] = np.full([len(windows["input_ids"])], example_index, np.int32)
        parts.append(windows)
    if not parts:
        raise ValueError("no questions")
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


# --- Decoding ([OUT] write_predictions) -------------------------------------------------------


class AnswerCandidate(NamedTuple):
    """One n-best entry: its text, the context characters [start_char, end_char) it comes
    from (-1 for the "empty" nonce), and its logits."""

    text: str
    start_char: int
    end_char: int
    start_logit: float
    end_logit: float


def _best_indexes(logits: np.ndarray, n_best: int) -> np.ndarray:
    """[OUT] ``_get_best_indexes``: the n largest, ties in position order (stable sort)."""
    return np.argsort(-np.asarray(logits), kind="stable")[:n_best]


def _bert_normalized(text: str) -> str:
    """``"".join(BasicTokenizer(do_lower_case=True).tokenize(text))``: control characters
    dropped, whitespace gone, each word lower-cased and stripped of accents (Mn marks after
    NFD); punctuation splitting changes nothing once the words are joined."""
    kept = []
    for char in text:
        category = unicodedata.category(char)
        if char in "\t\n\r" or char == " " or category == "Zs":
            kept.append(" ")
        elif ord(char) in (0, 0xFFFD) or category.startswith("C"):
            continue
        else:
            kept.append(f" {char} " if is_cjk(char) else char)
    words = "".join(kept).split()
    return "".join(
        "".join(
            c for c in unicodedata.normalize("NFD", w.lower()) if unicodedata.category(c) != "Mn"
        )
        for w in words
    )


def _final_span(piece_text: str, orig_text: str) -> tuple[int, int]:
    """[OUT] ``get_final_text``: [start, end) of the predicted pieces in ``orig_text``, or the
    whole of it when the pieces cannot be aligned.

    ``orig_text`` (doc tokens joined) and the normalised text hold no " ", so the script's
    space-stripping maps are identities here.
    """
    normalized = _bert_normalized(orig_text)
    start = normalized.find(piece_text)
    end = start + len(piece_text) - 1
    if start == -1 or len(normalized) != len(orig_text) or not 0 <= end < len(normalized):
        return 0, len(orig_text)
    return start, end + 1


def _candidate(context, window, start, end, vocab_tokens, keep_whitespace):
    """The text and characters of pieces [start, end] of one window."""
    pieces = [vocab_tokens[i] for i in window["input_ids"][start : end + 1]]
    piece_text = "".join(pieces).replace(" ##", "").replace("##", "")
    piece_text = " ".join(piece_text.strip().split())
    first, last = int(window["token_char_start"][start]), int(window["token_char_end"][end])
    # The doc tokens of the span joined without whitespace, and where each character is.
    where = [i for i in range(first, last) if context[i] not in WHITESPACE]
    orig_text = "".join(context[i] for i in where)
    a, b = _final_span(piece_text, orig_text)
    start_char, end_char = where[a], where[b - 1] + 1
    text = context[start_char:end_char] if keep_whitespace else orig_text[a:b]
    return text, start_char, end_char


def _covered_text(context, window, start, end):
    """XLNet: the characters pieces [start, end] of a window cover, stripped."""
    first, last = int(window["token_char_start"][start]), int(window["token_char_end"][end])
    raw = context[first:last]
    stripped = raw.strip()
    start_char = first + (raw.find(stripped) if stripped else 0)
    return stripped, start_char, start_char + len(stripped)


def nbest_answers(
    context: str,
    windows: Mapping[str, np.ndarray],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    vocab_tokens: Sequence[str],
    *,
    n_best: int = N_BEST,
    max_answer_tokens: int = MAX_ANSWER_TOKENS,
    keep_whitespace: bool = False,
    covered_text: bool = False,
) -> list[AnswerCandidate]:
    """The n-best answers of one question, best first ([OUT] ``write_predictions``).

    Args:
      context: the question's passage.
      windows: its windows' input_ids, token_char_start, token_char_end and
        token_is_max_context, each [W, length] (from `question_windows`).
      start_logits, end_logits: float [W, length], the model's scores of those windows.
      vocab_tokens: the vocabulary's tokens by id (to rebuild the predicted piece text).
      keep_whitespace: return the context slice, whitespace kept, instead of the baseline's
        doc tokens joined without it.
      covered_text: for windows of `cmrc2018_xlnet` (pieces with their own character
        ranges; `cmrcx.vocab.layouts` `Layout.answers_cover_pieces`): a span's text is the
        characters from its first piece's start to its last piece's end, stripped (CLUE's
        XLNet ``write_predictions``); ``vocab_tokens`` and ``keep_whitespace`` are then
        not used.

    Returns:
      Up to ``n_best`` candidates with distinct texts; ``[("empty", -1, -1, 0, 0)]`` if no
      span is valid.
    """
    prelim = []
    for w in range(len(start_logits)):
        in_passage = windows["token_char_start"][w] >= 0
        for start in _best_indexes(start_logits[w], n_best):
            if not (in_passage[start] and windows["token_is_max_context"][w][start]):
                continue
            for end in _best_indexes(end_logits[w], n_best):
                if in_passage[end] and start <= end < start + max_answer_tokens:
                    prelim.append((w, int(start), int(end)))
    scores = {p: float(start_logits[p[0]][p[1]]) + float(end_logits[p[0]][p[2]]) for p in prelim}
    prelim.sort(key=scores.__getitem__, reverse=True)  # stable, as sorted(..., reverse=True)
    nbest: list[AnswerCandidate] = []
    seen: set[str] = set()
    for w, start, end in prelim:
        if len(nbest) >= n_best:
            break
        window = {key: value[w] for key, value in windows.items()}
        if covered_text:
            text, start_char, end_char = _covered_text(context, window, start, end)
        else:
            text, start_char, end_char = _candidate(
                context, window, start, end, vocab_tokens, keep_whitespace
            )
        if text in seen:
            continue
        seen.add(text)
        logits = float(start_logits[w][start]), float(end_logits[w][end])
        nbest.append(AnswerCandidate(text, start_char, end_char, *logits))
    return nbest or [AnswerCandidate(EMPTY_ANSWER, -1, -1, 0.0, 0.0)]


def predict_answers(
    questions: Sequence[Cmrc2018Question],
    windows: Mapping[str, np.ndarray],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    vocab_tokens: Sequence[str],
    **kwargs,
) -> dict[str, str]:
    """``{qid: best answer text}`` for a split: the predictions file the evaluator reads.

    Args:
      questions: the split's questions (``windows["example_index"]`` indexes them).
      windows: `split_windows` output (or the same arrays in any window order).
      start_logits, end_logits: float [N, length], one row per window.
      **kwargs: n_best, max_answer_tokens, keep_whitespace, covered_text (see
        `nbest_answers`).
    """
    example_index = np.asarray(windows["example_index"])
    keys = ("input_ids", "token_char_start", "token_char_end", "token_is_max_context")
    predictions = {}
    for index, question in enumerate(questions):
        # The baseline visits an example's windows in their order within the split.
        rows = np.flatnonzero(example_index == index)
        if len(rows):
            rows = rows[np.argsort(np.asarray(windows["window_index"])[rows], kind="stable")]
        nbest = nbest_answers(
            question.context,
            {key: np.asarray(windows[key])[rows] for key in keys},
            np.asarray(start_logits)[rows],
            np.asarray(end_logits)[rows],
            vocab_tokens,
            **kwargs,
        )
        predictions[question.qid] = nbest[0].text
    return predictions


def wordpiece_tokenize_words(vocabulary) -> TokenizeWords:
    """The `TokenizeWords` of a `cmrcx.vocab.wordpiece.WordPieceVocabulary`.

    One ``encode_tf`` call on all words (a string tensor), which gives, word by word, the
    pieces of BERT's ``BertTokenizer(do_lower_case=True).tokenize`` (clean-up, lower-casing,
    accent stripping, CJK and punctuation splits, WordPiece) that [PRE] applies to each doc
    token; see `cmrcx.vocab.wordpiece` for the parity and its two documented exceptions.
    """
    import tensorflow as tf  # only here: the rest of this module is NumPy

    def tokenize(words: Sequence[str]) -> list[list[int]]:
        if not words:
            return []
        return vocabulary.encode_tf(tf.constant(list(words), tf.string)).to_list()

    return tokenize
