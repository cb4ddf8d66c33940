"""CMRC 2019 marks blanks with [unusedk]: a vocabulary without them is named at once."""

import pytest

from cmrcx.common.errors import ConfigError
from cmrcx.tasks import cmrc2019
from cmrcx.vocab.wordpiece import WordPieceVocabulary


def test_a_vocabulary_without_the_blank_markers_is_a_config_error(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n我\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"vocab.txt: CMRC 2019 marks .*\[unused1\]"):
        cmrc2019.window_ids(WordPieceVocabulary(str(path)), 15)
