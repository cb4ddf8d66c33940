"""The `lot` mixture's text-to-text examples (`cmrcx.benchmarks.lot.text_to_text`): ClozeT
and SenPos as the pointer's SentencePiece layouts with the gold sentinel as target, exact
for a small record; the text form and the ids agree on every sample record; PlotCom and
OutGen exactly the generation tasks' ids; the constrained choice among candidates."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

from cmrcx.benchmarks.lot import formats, text_to_text
from cmrcx.benchmarks.lot.formats import ClozeTRecord, OutGenRecord, PlotComRecord, SenPosRecord
from cmrcx.benchmarks.windows import SpecialIds
from cmrcx.common.paths import package_path
from cmrcx.tasks.lot import generation as generation_tasks
from cmrcx.vocab import layouts
from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary

SAMPLE = package_path("data/lot_sample")
SPIECE = package_path("data/longlm_tiny/spiece.model")


@pytest.fixture(scope="module")
def vocabulary():
    return T5SentencePieceVocabulary(SPIECE)


@pytest.fixture(scope="module")
def ids(vocabulary):
    return layouts.T5.special_ids(vocabulary)


def one_id_a_character(text: str) -> list[int]:
    """A toy tokenizer: each character its code point (so ids are readable)."""
    return [ord(c) for c in text]


TOY = SpecialIds(cls_id=None, sep_id=4, mask_id=6, eos_id=1, sentinels=(99, 98, 97, 96))
CLOZET = ClozeTRecord(1, "甲乙<mask>丙", ("丁", "戊己"), 1, {})
SENPOS = SenPosRecord(1, "甲<mask>乙<mask>丙", "丁", 0, {})


def test_clozet_text_and_ids():
    assert text_to_text.source_and_target(CLOZET) == (
        "丁<extra_id_1>戊己<extra_id_2>甲乙<sep>丙<mask>",
        "<extra_id_2>",
    )
    example = text_to_text.example(CLOZET, one_id_a_character, TOY, 512, 512)
    c = one_id_a_character
    assert example["inputs"].tolist() == [*c("丁"), 98, *c("戊己"), 97, *c("甲乙"), 4, *c("丙"),
                                          6, 1]  # fmt: skip
    assert example["targets"].tolist() == [97, 1]  # <extra_id_2> (label 1), EOS
    assert example["candidate_ids"].tolist() == [98, 97]  # <extra_id_1>, <extra_id_2>
    assert all(v.dtype == np.int32 for v in example.values())


def test_senpos_text_and_ids():
    assert text_to_text.source_and_target(SENPOS) == (
        "甲<extra_id_1>乙<extra_id_2>丙<sep>丁<mask>",
        "<extra_id_1>",
    )
    example = text_to_text.example(SENPOS, one_id_a_character, TOY, 512, 512)
    c = one_id_a_character
    assert example["inputs"].tolist() == [*c("甲"), 98, *c("乙"), 97, *c("丙"), 4, *c("丁"), 6, 1]
    assert example["targets"].tolist() == [98, 1]
    assert example["candidate_ids"].tolist() == [98, 97]


def test_a_test_record_has_eos_alone_as_target():
    unlabelled = ClozeTRecord(1, "甲<mask>", ("乙", "丙"), None, {})
    assert text_to_text.source_and_target(unlabelled)[1] == ""
    example = text_to_text.example(unlabelled, one_id_a_character, TOY, 512, 512)
    assert example["targets"].tolist() == [1]
    assert example["candidate_ids"].tolist() == [98, 97]


def test_a_long_story_is_trimmed_never_the_candidates():
    record = ClozeTRecord(1, "甲" * 50 + "<mask>" + "乙" * 50, ("丙丙", "丁丁"), 0, {})
    example = text_to_text.example(record, one_id_a_character, TOY, 20, 8)
    inputs = example["inputs"].tolist()
    assert len(inputs) == 20 and inputs[-2:] == [6, 1]
    assert inputs[:6] == [ord("丙"), ord("丙"), 98, ord("丁"), ord("丁"), 97]
    assert inputs.count(4) == 1  # <sep> kept


def _text_ids(text: str, vocabulary, ids) -> list[int]:
    """The text form tokenized piece by piece, its markers as the layouts' ids."""
    markers = {"<sep>": ids.sep_id, "<mask>": ids.mask_id}
    markers |= {f"<extra_id_{k}>": i for k, i in enumerate(ids.sentinels)}
    out = []
    for part in re.split(r"(<sep>|<mask>|<extra_id_\d+>)", text):
        out.extend([markers[part]] if part in markers else vocabulary.encode(part) if part else [])
    return out


@pytest.mark.parametrize("task", ["clozet", "senpos"])
def test_text_form_is_the_ids_on_every_sample_record(task, vocabulary, ids):
    for split in ("train", "validation", "test"):
        for record in formats.read_split(task, f"{SAMPLE}/{task}", split):
            source, target = text_to_text.source_and_target(record)
            example = text_to_text.example(record, vocabulary.encode, ids, 4096, 8)
            assert example["inputs"].tolist() == _text_ids(source, vocabulary, ids) + [ids.eos_id]
            assert example["targets"].tolist() == _text_ids(target, vocabulary, ids) + [ids.eos_id]


@pytest.mark.parametrize("task", ["plotcom", "outgen"])
def test_generation_examples_are_the_generation_tasks_ids(task, vocabulary, ids):
    """PlotCom and OutGen: the ids `cmrcx.tasks.lot.generation.tokenize_and_trim` makes of
    the generation texts (its texts are tested against `generation.source_and_target`)."""
    records = formats.read_split(task, f"{SAMPLE}/{task}", "validation")
    texts = [text_to_text.source_and_target(r) for r in records]
    dataset = tf.data.Dataset.from_tensor_slices(
        {"source": [s for s, _ in texts], "target": [t for _, t in texts]}
    )
    tokenized = generation_tasks.tokenize_and_trim(
        dataset,
        vocabulary=vocabulary,
        input_length=40,
        target_length=24,
        keep_sentinel=task == "plotcom",  # PlotCom's blank kept in view, as the task does
    )
    for record, expected in zip(records, tokenized.as_numpy_iterator(), strict=True):
        example = text_to_text.example(record, vocabulary.encode, ids, 40, 24)
        assert example["inputs"].tolist() == expected["inputs"].tolist()
        assert example["targets"].tolist() == expected["targets"].tolist()
        assert example["candidate_ids"].size == 0


def test_plotcom_and_outgen_texts_are_the_generation_format():
    plotcom = PlotComRecord(1, "甲。<mask>丙。", "乙。", {})
    outgen = OutGenRecord(1, "题", ("甲", "乙"), "故事。", {})
    assert text_to_text.source_and_target(plotcom) == ("甲。<extra_id_1>丙。", "<extra_id_1>乙。")
    assert text_to_text.source_and_target(outgen) == ("题#甲#乙<extra_id_1>", "<extra_id_1>故事。")


def test_constrained_choice_takes_the_best_candidate_present():
    assert text_to_text.constrained_choice([-3.0, -0.2, -1.0], [1, 1, 1]) == 1
    # A padding slot never wins, however it scores.
    assert text_to_text.constrained_choice([-3.0, -2.0, 0.0], [1, 1, 0]) == 1
    assert text_to_text.constrained_choice([-1.0, -1.0], [1, 1]) == 0  # ties: the first
    with pytest.raises(ValueError, match="no candidate"):
        text_to_text.constrained_choice([0.0], [0])
