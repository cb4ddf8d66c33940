"""PlotCom and OutGen as the authors' seq2seq baseline sees them
(`cmrcx.benchmarks.lot.generation`): the input and target texts of a record, and gen.py's
clean-up of a generated text (thu-coai/LOT-LongLM baselines/generation/gen.py, `pro`)."""

from __future__ import annotations

import doctest

import pytest

from cmrcx.benchmarks.lot import formats, generation
from cmrcx.benchmarks.lot.generation import generation_text

# thu-coai/LOT-LongLM baselines/generation/test.source @7c76ad1b, line 1: the title
# (懒纺妇, not in its story) and 8 outline phrases joined by '#', <extra_id_1> last.
AUTHORS_SOURCE = (
    "懒纺妇#地上缠成一大团#女人提起纺纱#纱线放进锅#妻子懒得#不想干活#不绕成团#逃避纺纱#赶紧起身"
    "<extra_id_1>"
)
# The OutGen README example (thu-coai/LOT-LongLM datasets/outgen/README.md).
OUTGEN_EXAMPLE = {
    "story": "有个人把神像放在驴子背上，赶着进城。凡是遇见他们的人都对着神像顶礼膜拜。驴子以为"
    "人们是向它致敬，便洋洋得意，大喊大叫，再也不肯往前走了。结果挨了驴夫狠狠的一棍。",
    "outline": ["对着神像顶礼膜拜", "再也不肯往前走", "神像放在驴子", "赶着进城", "驴夫狠狠",
                "洋洋得意", "大喊大叫", "遇见"],
    "title": "运神像的驴子",
}  # fmt: skip


def test_module_doctests():
    assert doctest.testmod(generation).failed == 0


def test_outgen_input_is_the_authors_format():
    title, *outline = AUTHORS_SOURCE.removesuffix("<extra_id_1>").split("#")
    assert len(outline) == 8
    assert generation.outgen_source(title, outline) == AUTHORS_SOURCE
    record = formats.parse_record("outgen", 1, OUTGEN_EXAMPLE)
    source, target = generation.source_and_target(record)
    assert source == "运神像的驴子#" + "#".join(OUTGEN_EXAMPLE["outline"]) + "<extra_id_1>"
    assert source.count("#") == 8  # 9 fields: the title first
    assert target == "<extra_id_1>" + OUTGEN_EXAMPLE["story"]  # test.target's shape


def test_outgen_without_title_starts_with_the_first_phrase():
    fields = {key: value for key, value in OUTGEN_EXAMPLE.items() if key != "title"}
    source, _ = generation.source_and_target(formats.parse_record("outgen", 1, fields))
    assert source == "#".join(OUTGEN_EXAMPLE["outline"]) + "<extra_id_1>"


def test_plotcom_input_replaces_the_blank_by_the_sentinel():
    fields = {"story": "甲乙丙。<MASK>戊己庚。", "plot": "丁丁丁丁丁丁丁丁丁丁。"}
    source, target = generation.source_and_target(formats.parse_record("plotcom", 1, fields))
    assert source == "甲乙丙。<extra_id_1>戊己庚。"
    assert target == "<extra_id_1>丁丁丁丁丁丁丁丁丁丁。"
    test_record = formats.parse_record("plotcom", 1, {"story": "甲。[MASK]丙。"})
    assert generation.source_and_target(test_record) == ("甲。<extra_id_1>丙。", "<extra_id_1>")
    with pytest.raises(TypeError, match="ClozeTRecord"):
        generation.source_and_target(
            formats.parse_record(
                "clozet", 1, {"story": "甲<mask>", "plot0": "乙", "plot1": "丙", "label": "0"}
            )
        )


@pytest.mark.parametrize(
    "decoded, drop_last, expected",
    [
        # gen.py's output: <s> (decoder start 1), the sentinel, the text, </s>, padding.
        ("<s> <extra_id_1> 从前, 有座山. 庙!</s><pad><pad>", False, "从前，有座山．庙！"),
        ("<s> <extra_id_1> 他说: 好! </s> 后面的不要", False, "他说：好！"),
        # No </s> (the maximum length was reached): kept, or gen.py's slip.
        ("<extra_id_1> 从前有座山", False, "从前有座山"),
        ("<extra_id_1> 从前有座山", True, "从前有座"),
        ("<extra_id_1> 从前有座山</s>", True, "从前有座山"),  # with </s> the flag changes nothing
        # strB2Q: "..." -> "…", ASCII punctuation (category P*) full width, symbols kept.
        ('等等...\u3000"好"(1+1=2)~$', False, "等等…＂好＂（1+1=2）~$"),
        ("<extra_id_0><extra_id_99> a b\tc\n", False, "abc"),
        ("</s> 全部在后面", False, ""),
        ("", False, ""),
    ],
)  # fmt: skip
def test_generation_text_is_gen_py_pro(decoded, drop_last, expected):
    assert generation_text(decoded, drop_last) == expected


def test_unknown_pieces_stay_as_gen_py_leaves_them():
    # gen.py removes <s>, </s>, <pad> and the sentinels only; "<" and ">" are symbols (Sm).
    assert generation_text("<extra_id_1> 甲<unk>乙</s>") == "甲<unk>乙"
