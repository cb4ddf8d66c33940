"""The input layouts (`cmrcx.vocab.layouts`): every family's registry row carries one, the
names resolve to them, and nothing outside the layouts branches on a layout or
vocabulary string (the source is grepped)."""

from __future__ import annotations

import doctest
import re

import pytest

from cmrcx.models import registry
from cmrcx.vocab import layouts
from tests.support import REPO_ROOT

# A comparison of something named a layout / vocabulary (kind) with a layout or vocabulary
# name, the retired names of the idea, and the vocabulary kind guessed from the object or
# the file name.
NAMES = "bert|gpt2|t5|xlnet|wordpiece|sentencepiece|wordpiece_causal"
BRANCHES = re.compile(
    rf"(layout|vocabulary|vocab|kind)\w*\s*(==|!=|\bin\b)\s*[(\[]?\"({NAMES})\""
    rf"|\"({NAMES})\"\s*(==|!=)\s*\w*(layout|vocab|kind)"
    r"|\binput_layout\b|\bvocabulary_kind\b|\blayout_kind\b"
    r"|\.startswith\(\"(wordpiece|sentencepiece)"
    r"|hasattr\(\w*vocab\w*,"
    r"|isinstance\(\w*vocab\w*, \w*Vocabulary\)"
    r"|(vocab_file|spiece)\.endswith\("
)
# Files that may still branch, each with why (none: every branch goes through a layout).
ALLOWED: dict[str, str] = {}


def _sources():
    for root in ("cmrcx", "tasks"):
        for path in sorted((REPO_ROOT / root).rglob("*.py")):
            relative = path.relative_to(REPO_ROOT).as_posix()
            if relative.startswith(("cmrcx/tasks/", "cmrcx/gin_configs/", "cmrcx/data/")):
                continue  # checkout symlinks to tasks/ and gin_configs/; bundled samples
            if relative == "cmrcx/vocab/layouts.py":
                continue  # the one place that tells the layouts apart
            yield relative, path.read_text(encoding="utf-8")


def test_no_branch_on_a_layout_or_vocabulary_string_outside_the_layouts():
    found = [
        f"{name}:{number}: {line.strip()}"
        for name, text in _sources()
        if name not in ALLOWED
        for number, line in enumerate(text.splitlines(), 1)
        if BRANCHES.search(line)
    ]
    assert not found, "branch through cmrcx.vocab.layouts instead:\n" + "\n".join(found)


def test_the_allowed_files_still_need_it():
    """An allow-list entry whose file no longer branches is stale: remove it."""
    texts = dict(_sources())
    stale = [name for name in ALLOWED if not BRANCHES.search(texts[name])]
    assert not stale, stale


def test_the_grep_catches_the_old_branches():
    for line in (
        'if input_layout == "xlnet":',
        'if layout != "sentencepiece":',
        'if family.vocabulary == "sentencepiece":',
        'if vocabulary_kind == "wordpiece":',
        'if layout.startswith("wordpiece"):',
        'if not hasattr(vocabulary, "token_to_id"):',
        "if isinstance(vocabulary, WordPieceVocabulary):",
        'if not run.vocab_file.endswith(".txt"):',
        "if not spiece.endswith(SENTENCEPIECE_FILE):",
    ):
        assert BRANCHES.search(line), line
    for line in ('if config.embedding_layout == "albert":', 'if layout == "same":'):
        assert not BRANCHES.search(line), line


def test_every_family_row_carries_a_layout():
    expected = {"bert": "bert", "albert": "bert", "gpt2": "gpt2", "xlnet": "xlnet", "t5": "t5"}
    for family, name in expected.items():
        row = registry.family(family)
        assert isinstance(row.layout, layouts.Layout) and row.layout.name == name
        assert row.vocab_file == row.layout.vocab_file
        assert row.causal == (family == "gpt2")
    assert {layouts.layout(name).name for name in layouts.LAYOUTS} == set(layouts.LAYOUTS)
    assert layouts.layout(layouts.XLNET) is layouts.XLNET
    with pytest.raises(ValueError, match="input layout 'roberta': use one of bert, gpt2"):
        layouts.layout("roberta")


def test_a_layout_says_which_framing_it_lacks():
    with pytest.raises(ValueError, match="the 't5' input layout has no CLUE pair frame"):
        layouts.T5.pair([1], [2], layouts.SpecialIds(0, 1, 2), 8)
    with pytest.raises(ValueError, match="the 'xlnet' input layout has no LOT pointer layout"):
        layouts.XLNET.pointer("clozet")
    with pytest.raises(ValueError, match="the 't5' input layout has no CMRC 2018 window frame"):
        layouts.T5.window_frame(layouts.SpecialIds(None, 1), [1], [2], 8)


def test_the_layout_of_a_vocabulary(tiny_vocab):
    from cmrcx.common.paths import package_path

    wordpiece = layouts.BERT.vocabulary(tiny_vocab)
    spiece = layouts.T5.vocabulary(package_path("data/longlm_tiny/spiece.model"))
    assert layouts.of_vocabulary(wordpiece) is layouts.BERT
    assert layouts.of_vocabulary(spiece) is layouts.T5
    assert layouts.of_vocabulary(object()) is None
    assert layouts.BERT.readable(wordpiece, [wordpiece.cls_id, 10**6]).startswith("[CLS] <")
    assert layouts.T5.marker_names(spiece)[spiece.eos_id] == "</s>"


def test_docstring_examples():
    """The frames' examples (`BERT.pair`, `XLNET.pair`, `window_frame`)."""
    assert doctest.testmod(layouts, raise_on_error=True).attempted >= 2
