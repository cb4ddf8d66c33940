"""Shows how a vocabulary tokenizes text: ``python -m cmrcx.tokenize --vocab VOCAB``.

Reads lines of UTF-8 text on stdin and prints, for each, one line with a JSON list
of token ids (``--pieces``: the token strings), made by the same TF op the input
pipelines use. The file picks the vocabulary: a SentencePiece ``*.model`` (LongLM,
mT5) is a `cmrcx.vocab.sentencepiece.T5SentencePieceVocabulary` with 100 sentinels
(``<extra_id_k>`` in the text becomes its id, as in transformers' T5Tokenizer; no
``</s>`` is appended; any model with the pieces ``<pad>``, ``</s>``, ``<unk>``, at
T5's ids 0, 1, 2 or at Chinese XLNet's 5, 2, 0 as LongLM's), anything else a BERT
``vocab.txt`` (`cmrcx.vocab.wordpiece.WordPieceVocabulary`). With the bundled tiny
vocabulary::

    $ echo '他[BLANK1]了。' | python -m cmrcx.tokenize --vocab cmrcx/data/tiny_vocab.txt --pieces
    ["他", "[", "[UNK]", "]", "了", "。"]

The text is tokenized as given. The CMRC 2019 pipeline first splits a passage into
characters, as the authors' script does ("100" becomes ``1 0 0``), and rewrites each
``[BLANKk]`` to `` [unusedk] `` (`tokenize_passage` in tasks/cmrc2019.py);
``--cmrc2019_passage`` applies the same rewrites, so the output is what the model
sees of a passage: ``["他", "[unused1]", "了", "。"]``. (Candidates are tokenized
whole: leave the flag off for them.)

``--no_lower_case`` keeps case and accents (for cased vocabularies); both flags are
for WordPiece vocabularies only. A LongLM OutGen input (outline phrases joined by
``#``, then ``<extra_id_1>``) with a model trained on cmrcx/data/longlm_sample::

    $ echo '老木匠#椅子<extra_id_1>' | python -m cmrcx.tokenize --vocab spiece.model --pieces
    ["▁", "老木匠", "#", "椅子", "<extra_id_1>"]

A missing or malformed vocabulary, or input that is not UTF-8, prints
``error: <message>`` on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence

from cmrcx.common import quiet_start
from cmrcx.vocab import line_tokenizer


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m cmrcx.tokenize",
        description="Print the token ids (or pieces) of each line of stdin, as JSON.",
    )
    parser.add_argument(
        "--vocab",
        required=True,
        help=f"SentencePiece *{line_tokenizer.SENTENCEPIECE_SUFFIX} (LongLM, mT5: 100 "
        "sentinels) or BERT vocab.txt (WordPiece, one token per line)",
    )
    parser.add_argument("--pieces", action="store_true", help="print token strings, not ids")
    parser.add_argument(
        "--no_lower_case", action="store_true", help="keep case and accents (cased vocabularies)"
    )
    parser.add_argument(
        "--cmrc2019_passage",
        action="store_true",
        help="tokenize as a CMRC 2019 passage: one word per character (as the authors' "
        "script does) and [BLANKk] rewritten to [unusedk]",
    )
    parser.add_argument(
        "--batch_size",
        type=int,
        default=None,
        help="lines per TF call; default 1 on a terminal (answers at once), else 512",
    )
    args = parser.parse_args(argv)
    if args.batch_size is not None and args.batch_size < 1:
        parser.error(f"--batch_size must be at least 1, got {args.batch_size}")
    if args.vocab.endswith(line_tokenizer.SENTENCEPIECE_SUFFIX):
        for flag in ("no_lower_case", "cmrc2019_passage"):
            if getattr(args, flag):
                parser.error(f"--{flag} is for WordPiece vocab.txt files, not {args.vocab}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    args = _parse_args(argv)
    if not os.path.isfile(args.vocab):  # before the seconds TensorFlow takes to load
        print(f"error: vocabulary file not found: {args.vocab}", file=sys.stderr)
        return 2
    # Before the vocabulary loads TensorFlow: its start-up chatter would bury the answers.
    quiet_start.import_tensorflow()
    try:
        vocab = line_tokenizer.load_vocabulary(args.vocab, lower_case=not args.no_lower_case)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", newline="\n")
    stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", line_buffering=True)
    size = args.batch_size or (1 if sys.stdin.isatty() else 512)
    try:
        line_tokenizer.write_token_rows(
            vocab, stdin, stdout, size, pieces=args.pieces, cmrc2019_passage=args.cmrc2019_passage
        )
    except UnicodeDecodeError as e:
        print(f"error: stdin is not UTF-8 text: {e}", file=sys.stderr)
        return 2
    finally:
        stdout.flush()
        stdout.detach()  # leave sys.stdout usable (main() may run in-process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
