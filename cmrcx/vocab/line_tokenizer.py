"""The library of `python -m cmrcx.tokenize`: lines of text -> one JSON list of token ids
(or token strings) per line, made by the same TF op the input pipelines use.

TensorFlow and the vocabularies (which import it) are imported inside the functions, so
the entry point answers --help and a missing file at once, and starts TensorFlow quietly
(`cmrcx.common.quiet_start`) before they load.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

from cmrcx.benchmarks.cmrc2019.official_format import PASSAGE_REWRITES

if TYPE_CHECKING:
    from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary
    from cmrcx.vocab.wordpiece import WordPieceVocabulary

    Vocabulary = WordPieceVocabulary | T5SentencePieceVocabulary

SENTENCEPIECE_SUFFIX = ".model"


def load_vocabulary(path: str, lower_case: bool = True) -> Vocabulary:
    """The vocabulary the file's name says: SentencePiece for *.model, else WordPiece."""
    from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary
    from cmrcx.vocab.wordpiece import WordPieceVocabulary

    if path.endswith(SENTENCEPIECE_SUFFIX):
        return T5SentencePieceVocabulary(path)
    return WordPieceVocabulary(path, lower_case=lower_case)


def batches(lines: TextIO, size: int) -> Iterator[list[str]]:
    """Lines without their line break, `size` at a time (fewer at the end)."""
    batch: list[str] = []
    for line in lines:
        batch.append(line.rstrip("\n").rstrip("\r"))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def tokenize_lines(
    vocab: Vocabulary, lines: list[str], *, pieces: bool, cmrc2019_passage: bool
) -> list[list[int]] | list[list[str]]:
    """One list of ids (or token strings) per line, from one call of the TF op."""
    import tensorflow as tf  # here, so --help and a missing file answer at once

    text = tf.constant(lines)
    for pattern, rewrite in PASSAGE_REWRITES if cmrc2019_passage else ():
        text = tf.strings.regex_replace(text, pattern, rewrite)
    rows = vocab.encode_tf(text).to_list()
    if pieces:
        return [[vocab.tokens[i] for i in ids] for ids in rows]
    return rows


def write_token_rows(
    vocab: Vocabulary,
    lines: TextIO,
    out: TextIO,
    size: int,
    *,
    pieces: bool,
    cmrc2019_passage: bool,
) -> None:
    """Tokenizes `lines` `size` at a time and writes one JSON row per line to `out`."""
    for batch in batches(lines, size):
        rows = tokenize_lines(vocab, batch, pieces=pieces, cmrc2019_passage=cmrc2019_passage)
        out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
