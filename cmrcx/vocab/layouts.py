"""Input layouts: how a model family's vocabulary tokenizes a text and frames an example.

A family's registry row names its layout (`cmrcx.models.registry.Family.input_layout`);
the tasks (`cmrcx.tasks.clue`) build the layout's vocabulary and frame examples with its
special tokens:

  "bert"   WordPiece (`cmrcx.vocab.wordpiece`): [CLS] a [SEP] b [SEP], padded on the
           right, token types 0 (a, with [CLS] and its [SEP]) and 1 (b and its [SEP]).
  "xlnet"  XLNet's SentencePiece (`cmrcx.vocab.xlnet`): a <sep> b <sep> <cls>, padded
           on the left, token types 0, 1 and 2 (<cls>), padding 3 (XLNetTokenizer's).
"""

from __future__ import annotations

import seqio

LAYOUTS = ("bert", "xlnet")


def vocabulary(layout: str, vocab_file: str, lower_case: bool) -> seqio.Vocabulary:
    """The vocabulary of `layout` read from `vocab_file` (vocab.txt, spiece.model)."""
    if layout == "bert":
        from cmrcx.vocab.wordpiece import WordPieceVocabulary

        return WordPieceVocabulary(vocab_file, lower_case=lower_case)
    if layout == "xlnet":
        from cmrcx.vocab.xlnet import XLNetVocabulary

        return XLNetVocabulary(vocab_file, lower_case=lower_case)
    raise ValueError(f"input layout {layout!r}: use one of {', '.join(LAYOUTS)}")
