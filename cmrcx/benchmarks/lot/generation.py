"""LOT's generation tasks, PlotCom and OutGen, as the authors' seq2seq baseline sees them:
the input and target texts of a record, and the clean-up of a generated text.

Pure Python, the reference semantics of `cmrcx.tasks.lot.generation` (which builds the same
texts in TF ops; the tests compare the two) and of `cmrcx.generate`'s LOT mode.

Input formats (thu-coai/LOT-LongLM baselines/generation/gen.py, test.source, test.target):

- **OutGen** is the authors' `baselines/generation/test.source` / `test.target` format
  (thu-coai/LOT-LongLM @cea35437): input ``TITLE#p1#p2#...#pn<extra_id_1>`` (title and
  phrases joined by a plain ``#``, the phrases in the file's order, the sentinel last),
  target ``<extra_id_1>STORY``. The title is the first ``#`` field (9 fields for 8
  phrases). A record without a title (the organisers' competition files have none:
  IndexFziQ/LongLM-Eyas datasets/chn/data/val.jsonl) drops that field:
  ``p1#...#pn<extra_id_1>``, the layout a competition team's files have
  (IndexFziQ/LongLM-Eyas datasets/chn/data/final/test/test.source @8a5b4a2c begins each
  line with the first phrase), rather than an empty field before a leading ``#``.
- **PlotCom**: the authors released no PlotCom input. cmrcx uses the analogue of their
  OutGen format and of LongLM's infilling (its model card's example): the story with the
  blank (``<mask>`` in every record, `formats.MASK`) replaced by ``<extra_id_1>`` ->
  ``<extra_id_1>PLOT``. This format is ours, not the authors'. A source longer than the
  input length keeps the ids around the blank (`cut_source`), where OutGen's keeps its
  first ids as gen.py's truncation does.

The sentinel is LongLM's first, ``<extra_id_1>`` (`cmrcx.tasks.lot.pretraining.FIRST_SENTINEL`
explains the numbering). Tokenizers turn the written sentinel into its id
(`cmrcx.vocab.sentencepiece`, as T5Tokenizer does).

Clean-up (`generation_text`): the authors' `gen.py` `pro()` and `strB2Q()`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from cmrcx.benchmarks.lot.formats import MASK, OutGenRecord, PlotComRecord

SENTINEL = "<extra_id_1>"  # LongLM's first sentinel: ends the input, starts the target
OUTLINE_SEPARATOR = "#"  # gen.py's test.source joins title and phrases with a plain '#'
EOS_TEXT = "</s>"  # what T5Tokenizer.decode writes for EOS (gen.py cuts there)


# --- Inputs and targets -------------------------------------------------------------------


def outgen_source(title: str, outline: Sequence[str], sentinel: str = SENTINEL) -> str:
    """OutGen's input: ``TITLE#p1#...#pn<extra_id_1>``; no title: ``p1#...#pn<extra_id_1>``.

    >>> outgen_source("运神像的驴子", ["神像放在驴子", "赶着进城"])
    '运神像的驴子#神像放在驴子#赶着进城<extra_id_1>'
    >>> outgen_source("", ["神像放在驴子", "赶着进城"])
    '神像放在驴子#赶着进城<extra_id_1>'
    """
    fields = ([title] if title else []) + list(outline)
    return OUTLINE_SEPARATOR.join(fields) + sentinel


def plotcom_source(story: str, sentinel: str = SENTINEL) -> str:
    """PlotCom's input (cmrcx's format): the story, its one blank replaced by the sentinel.

    >>> plotcom_source("从前有座山。<mask>山里有座庙。")
    '从前有座山。<extra_id_1>山里有座庙。'
    """
    return story.replace(MASK, sentinel)


def cut_source(ids: Sequence[int], length: int, blank_id: int | None = None) -> list[int]:
    """A source's ids cut to `length`: the first ones (the authors' truncation), unless
    `blank_id` (PlotCom's sentinel) first occurs past them; then the `length` ids centred
    on it, within the source, so a long story's blank stays in the input.

    >>> cut_source([1, 2, 3, 4, 5, 9, 6], 4), cut_source([1, 2, 3, 4, 5, 9, 6], 4, blank_id=9)
    ([1, 2, 3, 4], [4, 5, 9, 6])
    """
    ids = list(ids)
    at = ids.index(blank_id) if blank_id in ids else 0
    if at < length:
        return ids[:length]
    start = min(at - length // 2, max(len(ids) - length, 0))
    return ids[start : start + length]


def generation_target(text: str | None, sentinel: str = SENTINEL) -> str:
    """The target of either task: ``<extra_id_1>TEXT`` ("" when there is no text: test).

    >>> generation_target("山里有座庙。")
    '<extra_id_1>山里有座庙。'
    """
    return sentinel + (text or "")


def source_and_target(record: OutGenRecord | PlotComRecord, sentinel: str = SENTINEL):
    """(input text, target text) of a PlotCom or OutGen record."""
    if isinstance(record, OutGenRecord):
        return outgen_source(record.title, record.outline, sentinel), generation_target(
            record.story, sentinel
        )
    if isinstance(record, PlotComRecord):
        return plotcom_source(record.story, sentinel), generation_target(record.plot, sentinel)
    raise TypeError(f"not a PlotCom or OutGen record: {type(record).__name__}")


# --- Generated text -----------------------------------------------------------------------

# strB2Q shifts the ASCII characters of Unicode category P* (!"#%&'()*,-./:;?@[\]_{}) to
# their full-width forms (+65248); symbols such as $+<=>^|~ stay (gen.py's strB2Q).
_ASCII_PUNCTUATION = frozenset(
    chr(c) for c in range(33, 127) if unicodedata.category(chr(c)).startswith("P")
)
_SPECIAL_PIECES = ("<s>", "</s>", "<pad>")


def full_width_punctuation(text: str) -> str:
    """gen.py's `strB2Q`: "..." -> "…", then ASCII punctuation -> full width.

    >>> full_width_punctuation("好,走吧...$1")
    '好，走吧…$1'
    """
    text = text.replace("...", "…")
    return "".join(chr(ord(c) + 65248) if c in _ASCII_PUNCTUATION else c for c in text)


def generation_text(decoded: str, drop_last_char_without_eos: bool = False) -> str:
    """A decoded output (special tokens kept) cleaned as the authors' `gen.py` does before
    scoring (thu-coai/LOT-LongLM baselines/generation/gen.py `pro`, `strB2Q`):

    1. the text from the first "</s>" on is dropped;
    2. "<s>", "</s>", "<pad>" and "<extra_id_0..99>" are removed;
    3. all white space is deleted;
    4. `full_width_punctuation` ("..." -> "…", ASCII punctuation -> full width).

    gen.py cuts with ``s[:s.find("</s>")]``, which, when there is no "</s>" (the output
    reached the maximum length), drops the last character. cmrcx keeps it unless
    `drop_last_char_without_eos` (compatibility with the script's numbers).

    >>> generation_text("<s> <extra_id_1> 从前, 有座山... </s> <pad>")
    '从前，有座山…'
    >>> generation_text("<extra_id_1> 从前有座山"), generation_text("从前有座山", True)
    ('从前有座山', '从前有座')
    """
    end = decoded.find(EOS_TEXT)
    if end >= 0:
        text = decoded[:end]
    else:
        text = decoded[:-1] if drop_last_char_without_eos else decoded
    for piece in _SPECIAL_PIECES:
        text = text.replace(piece, "")
    for k in range(100):
        text = text.replace(f"<extra_id_{k}>", "")
    return full_width_punctuation("".join(text.split()))
