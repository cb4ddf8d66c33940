"""LOT's official files: strict reading of the four tasks, mask and label normalisation,
prediction lines in the gold file's types, and the bundled sample."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path

import pytest

import cmrcx.data
from cmrcx.benchmarks.lot import formats
from cmrcx.benchmarks.lot.formats import (
    MASK,
    ClozeTRecord,
    OutGenRecord,
    PlotComRecord,
    SenPosRecord,
)
from cmrcx.common.errors import DataFormatError
from tests.support import REPO_ROOT

SAMPLE = Path(cmrcx.data.__file__).parent / "lot_sample"
SIZES = {
    "clozet": (32, 16, 16),
    "senpos": (32, 16, 16),
    "plotcom": (32, 16, 16),
    "outgen": (24, 8, 8),
}
# The example record of each task's README (thu-coai/LOT-LongLM datasets/<task>/README.md),
# verbatim.
README_EXAMPLES = {
    "clozet": '{"story":"一只猫望着窗外飞翔的鸟儿馋涎欲滴，但自己又捕捉不到。于是它便想了一个法子。它给那些鸟儿们寄去请柬，邀请他们来参加自己的生日宴会。<mask>鸟儿一进来，猫就关上了门。鸟儿们彻底入了虎穴，被猫一只一只抓来吃掉了。","plot0":"可是没有一只鸟儿愿意来。","plot1":"有些单纯的鸟儿赴宴来了。","label":"1"}',  # noqa: E501
    "senpos": '{"story":"为了证明自己看见了这一切，路过银树林时，守望星折了一根小树枝。[MASK]丽娜听到树枝折断的声音时，回头问：“什么声音？”[MASK]“什么声音也没有。”[MASK]她的大姐说，“可能是哪座城堡的塔楼里，猫头鹰在叫唤。”[MASK]她讲话的时候，迈克悄悄地溜到前头，上了楼梯，第一个进了公主们的房间。[MASK]他推开窗户，顺着藤条滑了下去。[MASK]到花园的时候，太阳刚刚开始升起，他要开始工作了。[MASK]这一天，迈克捆扎鲜花的时候，故意把那根银色的树枝扎进了献给小公主的花里。[MASK]不过，她没有告诉姐姐们。","sentence":"丽娜发现银树枝时，吃惊极了。","label":8}',  # noqa: E501
    "plotcom": '{"story":"在一个金碧辉煌的天国王宫里住着两位公主，她们都非常的美丽善良。<MASK>大王就跟国王说，你要是不把你的女儿交出来我就杀了你，正当国王在想办法的时候，一个白马王子出现了，他直接把山寨的大王杀了，跟国王说，我要娶两位公主，国王也同意让女儿嫁了白马王子。从此以后，两位天国的公主与白马王子过上了幸福的日子。","plot":"有一次，山寨的大王要来天国王宫里提亲，可是国王并不同意把自己的女儿嫁给山寨的大王做山寨夫人。"}',  # noqa: E501
    "outgen": '{"story":"有个人把神像放在驴子背上，赶着进城。凡是遇见他们的人都对着神像顶礼膜拜。驴子以为人们是向它致敬，便洋洋得意，大喊大叫，再也不肯往前走了。结果挨了驴夫狠狠的一棍。","outline":["对着神像顶礼膜拜","再也不肯往前走","神像放在驴子","赶着进城","驴夫狠狠","洋洋得意","大喊大叫","遇见"],"title":"运神像的驴子"}',  # noqa: E501
}


def write_lines(tmp_path: Path, *lines: str, name: str = "val.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def line_of(**fields) -> str:
    return json.dumps(fields, ensure_ascii=False)


def clozet_line(
    story="甲乙丙丁。<mask>戊己庚。", plot0="天亮了他起床了。", plot1="天黑了他起床了。", **kw
):
    return line_of(story=story, plot0=plot0, plot1=plot1, **kw)


def senpos_line(story="一。[MASK]二。[MASK]三。", sentence="被拿走的那一句话。", **kw):
    return line_of(story=story, sentence=sentence, **kw)


def gold_of(record) -> int | str:
    """The record's own label (0-based) or target text."""
    if isinstance(record, ClozeTRecord | SenPosRecord):
        return record.label
    return record.plot if isinstance(record, PlotComRecord) else record.story


def test_doctests() -> None:
    assert doctest.testmod(formats).failed == 0


# --- The official README examples --------------------------------------------------------


@pytest.mark.parametrize("task", formats.TASKS)
def test_readme_examples_read_and_write_back_unchanged(tmp_path: Path, task: str) -> None:
    path = write_lines(tmp_path, README_EXAMPLES[task])
    (record,) = formats.read_file(task, path, labelled=True)
    assert record.line == 1 and record.raw == json.loads(README_EXAMPLES[task])
    assert json.loads(formats.prediction_line(record, gold_of(record))) == record.raw


def test_readme_labels_are_0_based_in_records(tmp_path: Path) -> None:
    def read(task):
        return formats.read_file(task, write_lines(tmp_path, README_EXAMPLES[task]))[0]

    clozet, senpos, outgen = read("clozet"), read("senpos"), read("outgen")
    assert clozet.label == 1 and clozet.candidates[1] == "有些单纯的鸟儿赴宴来了。"
    assert senpos.label == 7 and senpos.story.count(MASK) == 8  # label 8 = the 8th of 8
    assert "[MASK]" not in senpos.story
    assert outgen.title == "运神像的驴子" and len(outgen.outline) == 8


# --- Masks and labels ---------------------------------------------------------------------


@pytest.mark.parametrize("spelling", formats.MASK_SPELLINGS)
@pytest.mark.parametrize("task", ["clozet", "senpos", "plotcom"])
def test_every_mask_spelling_is_normalised(tmp_path: Path, task: str, spelling: str) -> None:
    story = f"第一句话。{spelling}第三句话。"
    line = {
        "clozet": clozet_line(story=story, label="0"),
        "senpos": senpos_line(story=story + spelling + "第四句话。", label=2),
        "plotcom": line_of(story=story, plot="第二句话在这里。"),
    }[task]
    (record,) = formats.read_file(task, write_lines(tmp_path, line), labelled=True)
    assert record.story.startswith(f"第一句话。{MASK}第三句话。")
    assert not any(m in record.story for m in formats.MASK_SPELLINGS if m != MASK)
    assert record.raw["story"].count(spelling) >= 1  # raw keeps the file's spelling


def test_label_types_read_and_written_back_in_the_files_type(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        clozet_line(label="1"),  # official: a string
        clozet_line(label=0),  # a converted copy: an int, kept an int
        clozet_line(),  # no label (test file)
        clozet_line(label=""),  # an empty label: none
    )
    records = formats.read_file("clozet", path)
    assert [r.label for r in records] == [1, 0, None, None]
    labels = [json.loads(formats.prediction_line(r, 1))["label"] for r in records]
    assert labels == ["1", 1, "1", "1"]

    path = write_lines(
        tmp_path,
        senpos_line(label=2),  # official: a 1-based int
        senpos_line(label="1"),  # a string copy, kept a string
        senpos_line(),
        name="senpos.jsonl",
    )
    records = formats.read_file("senpos", path)
    assert [r.label for r in records] == [1, 0, None]
    labels = [json.loads(formats.prediction_line(r, 0))["label"] for r in records]
    assert labels == [1, "1", 1]


def test_prediction_lines_keep_key_order_and_append_missing_fields() -> None:
    raw = {"title": "题", "outline": ["甲", "乙"], "story": ""}
    record = OutGenRecord(3, "题", ("甲", "乙"), None, raw)
    assert formats.prediction_line(record, "故事。") == (
        '{"title": "题", "outline": ["甲", "乙"], "story": "故事。"}'
    )
    record = PlotComRecord(1, f"甲{MASK}", None, {"story": "甲<MASK>"})
    assert formats.prediction_line(record, "乙。") == '{"story": "甲<MASK>", "plot": "乙。"}'
    assert record.raw == {"story": "甲<MASK>"}  # the record is not changed


def test_predictions_out_of_range_or_of_the_wrong_kind_are_refused() -> None:
    senpos = SenPosRecord(1, f"一{MASK}二{MASK}三", "句", None, {})
    with pytest.raises(ValueError, match="2 candidates"):
        formats.prediction_line(senpos, 2)
    with pytest.raises(TypeError):
        formats.prediction_line(senpos, "1")
    with pytest.raises(TypeError, match="text"):
        formats.prediction_line(PlotComRecord(1, MASK, None, {}), 0)
    with pytest.raises(ValueError, match="no label"):
        formats.official_label("outgen", 0)
    with pytest.raises(ValueError, match="not a candidate"):
        formats.official_label("clozet", 2)


def test_write_predictions_needs_one_per_record(tmp_path: Path) -> None:
    records = formats.read_split("clozet", SAMPLE / "clozet", "test")
    with pytest.raises(ValueError, match="15 predictions for 16 records"):
        formats.write_predictions(tmp_path / "p.jsonl", records, [0] * 15)


# --- Lines --------------------------------------------------------------------------------


def test_bom_crlf_and_u2028_are_read(tmp_path: Path) -> None:
    path = tmp_path / "val.jsonl"
    text = clozet_line(story="甲\u2028乙。<mask>丙。", label="0") + "\r\n" + clozet_line(label="1")
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())  # BOM, CRLF, no final newline
    records = formats.read_file("clozet", path)
    assert [r.label for r in records] == [0, 1] and records[0].story == f"甲\u2028乙。{MASK}丙。"


# --- Bad records: one line naming the file, the line and the field -----------------------

GOOD = clozet_line(label="0")
BAD_RECORDS = [
    # (task, the bad line, its field or None, what the message says)
    ("clozet", '{"story": "甲<mask>",', None, "malformed JSON"),
    ("senpos", "[1, 2]", None, "expected a JSON object, got array"),
    ("clozet", "", None, "blank line"),
    ("clozet", line_of(story="甲<mask>", plot0="一个候选句子。", label="0"), "plot1", "missing"),
    ("plotcom", line_of(story=5, plot="一个目标句子。"), "story", "expected a string, got number"),
    ("clozet", clozet_line(label=True), "label", "got true"),
    ("clozet", clozet_line(label=1.0), "label", "got 1.0"),
    ("clozet", clozet_line(label="2"), "label", 'got "2"'),
    ("clozet", clozet_line(story="甲乙。丙丁。", label="0"), "story", "has no mask"),
    ("clozet", clozet_line(story="甲<mask>乙[MASK]", label="0"), "story", "has 2 masks"),
    ("clozet", clozet_line(plot0="", label="0"), "plot0", "is empty"),
    ("clozet", clozet_line(plot1="另一句<MASK>话。", label="0"), "plot1", "holds a mask"),
    ("senpos", senpos_line(label=0), "label", "0 is not a mask number: the story has 2 masks"),
    ("senpos", senpos_line(label=3), "label", "3 is not a mask number"),
    ("senpos", senpos_line(label="08"), "label", 'got "08"'),
    ("senpos", senpos_line(story="一。二。三。", label=1), "story", "has no mask"),
    ("senpos", line_of(story="一。[MASK]二。", label=1), "sentence", "missing"),
    ("plotcom", line_of(story="甲<MASK>乙<MASK>", plot="一个目标句子。"), "story", "has 2 masks"),
    ("outgen", line_of(outline="甲#乙", title="题", story="甲乙。"), "outline", "got string"),
    ("outgen", line_of(outline=["甲", 2], title="题", story="甲乙。"), "outline[1]", "got number"),
    # The organisers' eval.py reads [] as the phrase "" ("".split("#")): order 1.0.
    ("outgen", line_of(outline=[], title="题", story="甲乙。"), "outline", 'phrase "": order 1.0'),
    ("outgen", line_of(outline=["甲", ""], title="题", story="甲。"), "outline[1]", "is empty"),
    # White space only is empty too (LOT deleted every space).
    (
        "outgen",
        line_of(outline=["甲", "  "], title="题", story="甲。"),
        "outline[1]",
        "white space",
    ),
    ("outgen", line_of(outline=["\u3000"], title="题", story="甲。"), "outline[0]", "white space"),
    ("clozet", clozet_line(plot1=" ", label="0"), "plot1", 'is white space only (" ")'),
    ("senpos", senpos_line(sentence="\t", label=1), "sentence", "is white space only"),
    # '#' joins title and phrases in the model input; the organisers' scorer splits on it.
    (
        "outgen",
        line_of(outline=["甲#乙"], title="题", story="甲乙。"),
        "outline[0]",
        "as 2 phrases",
    ),
    ("outgen", line_of(outline=["甲"], title="题#一", story="甲。"), "title", "holds '#'"),
    ("outgen", line_of(outline=["甲"], title="题", story="甲<mask>。"), "story", "OutGen story is"),
    ("clozet", GOOD[:-1] + ', "label": "1"}', "label", "given twice in one object"),
    ("outgen", line_of(outline=["甲"], title=["题"], story="甲。"), "title", "got array"),
    ("outgen", line_of(outline=["甲"], title="题", story=None), "story", "got null"),
]


@pytest.mark.parametrize(("task", "line", "field", "message"), BAD_RECORDS)
def test_bad_records_name_file_line_and_field(
    tmp_path: Path, task: str, line: str, field: str | None, message: str
) -> None:
    first = {
        "clozet": GOOD,
        "senpos": senpos_line(label=1),
        "plotcom": line_of(story="甲<MASK>", plot="乙丙丁。"),
        "outgen": line_of(outline=["甲"], title="题", story="甲。"),
    }[task]
    path = write_lines(tmp_path, first, line, first)
    with pytest.raises(DataFormatError) as error:
        formats.read_file(task, path)
    text = str(error.value)
    assert "\n" not in text and text.startswith(f"{path}: line 2: ")
    if field is not None:
        assert f"field {field!r}: " in text
    assert message in text


@pytest.mark.parametrize(
    ("task", "other", "message"),
    [
        ("clozet", "senpos", "field 'story': has 2 masks; expected exactly one"),
        ("senpos", "clozet", "field 'sentence': missing"),
        ("plotcom", "outgen", "field 'story': has no mask"),
        ("outgen", "plotcom", "field 'outline': missing"),
    ],
)
def test_another_tasks_file_is_named_in_the_error(
    tmp_path: Path, task: str, other: str, message: str
) -> None:
    line = {
        "clozet": clozet_line(label="0"),
        "senpos": senpos_line(label=1),
        "plotcom": line_of(story="甲<MASK>", plot="乙丙丁。"),
        "outgen": line_of(outline=["甲"], title="题", story="甲。"),
    }[other]
    with pytest.raises(DataFormatError) as error:
        formats.read_file(task, write_lines(tmp_path, line))
    text, name = str(error.value), formats.TASK_NAMES[other]
    assert text.startswith(f"{tmp_path / 'val.jsonl'}: line 1: {message}")
    assert text.endswith(f" (the line has {name}'s fields: the wrong task or file?)")
    assert formats.task_of_fields(json.loads(line)) == other


@pytest.mark.parametrize(
    ("task", "line", "field"),
    [
        ("clozet", clozet_line(), "label"),
        ("senpos", senpos_line(label=""), "label"),
        ("plotcom", line_of(story="甲<MASK>"), "plot"),
        ("outgen", line_of(outline=["甲"], title="题", story=""), "story"),
        ("plotcom", line_of(story="甲<MASK>", plot="  "), "plot"),
        ("outgen", line_of(outline=["甲"], title="题", story="\u3000\n"), "story"),
    ],
)
def test_train_and_val_files_need_labels_and_targets(
    tmp_path: Path, task: str, line: str, field: str
) -> None:
    path = write_lines(tmp_path, line)
    assert len(formats.read_file(task, path)) == 1  # as a test file: read
    message = "missing|is empty|is white space only"
    with pytest.raises(DataFormatError, match=rf"line 1: field '{field}': ({message})"):
        formats.read_file(task, path, labelled=True)


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="empty file"):
        formats.read_file("clozet", write_lines(tmp_path))
    (tmp_path / "latin.jsonl").write_bytes(b'{"story": "\xe9"}\n')
    with pytest.raises(DataFormatError, match=r"latin.jsonl: not valid UTF-8 \(byte offset 11\)"):
        formats.read_file("clozet", tmp_path / "latin.jsonl")
    with pytest.raises(DataFormatError, match="test.jsonl: file not found"):
        formats.read_split("clozet", tmp_path, "test")
    with pytest.raises(ValueError, match="unknown LOT task 'cloze'"):
        formats.read_file("cloze", tmp_path / "x.jsonl")
    with pytest.raises(ValueError, match="unknown LOT split 'dev'"):
        formats.split_path(tmp_path, "dev")
    assert formats.split_path("D", "validation") == "D/val.jsonl"


# --- The bundled sample -------------------------------------------------------------------


@pytest.mark.parametrize("task", formats.TASKS)
def test_every_bundled_file_reads_in_its_official_form(task: str) -> None:
    for split, size in zip(formats.SPLIT_FILES, SIZES[task], strict=True):
        records = formats.read_split(task, SAMPLE / task, split)
        assert len(records) == size and [r.line for r in records] == list(range(1, size + 1))
        assert all(formats.has_gold(r) == (split != "test") for r in records)
        gold = "label" if task in ("clozet", "senpos") else formats.TARGET_FIELDS[task]
        assert all((gold in r.raw) == (split != "test") for r in records)
        spelling = {"clozet": "<mask>", "senpos": "[MASK]", "plotcom": "<MASK>"}.get(task)
        for r in records:
            texts = [r.raw.get("story", ""), r.raw.get("title", ""), *r.raw.get("outline", [])]
            assert not any(c.isspace() for text in texts for c in text)  # LOT deletes spaces
            if spelling:
                assert r.raw["story"].count(spelling) == r.story.count(MASK) >= 1
        if task == "clozet" and split != "test":
            assert all(isinstance(r.raw["label"], str) for r in records)
            assert sorted(r.label for r in records) == [0] * (size // 2) + [1] * (size // 2)
        if task == "senpos" and split != "test":
            assert all(isinstance(r.raw["label"], int) for r in records)
            assert len({r.label for r in records}) >= 3  # labels vary


def test_bundled_plotcom_val_and_test_are_the_clozet_stories_with_the_right_plot() -> None:
    for split in ("validation", "test"):
        clozet = formats.read_split("clozet", SAMPLE / "clozet", split)
        plotcom = formats.read_split("plotcom", SAMPLE / "plotcom", split)
        assert [r.story for r in plotcom] == [r.story for r in clozet]
    clozet = formats.read_split("clozet", SAMPLE / "clozet", "validation")
    plotcom = formats.read_split("plotcom", SAMPLE / "plotcom", "validation")
    assert [r.plot for r in plotcom] == [r.candidates[r.label] for r in clozet]


def test_bundled_outlines_occur_in_their_stories() -> None:
    for split in ("train", "validation"):
        for record in formats.read_split("outgen", SAMPLE / "outgen", split):
            assert 1 <= len(record.outline) <= 8 and record.title
            assert all(phrase in record.story for phrase in record.outline)


@pytest.mark.parametrize("task", formats.TASKS)
def test_writing_the_gold_back_gives_the_same_file(tmp_path: Path, task: str) -> None:
    """Round trip: the gold labels / targets written as predictions are the gold file."""
    for split in ("train", "validation"):
        gold_path = formats.split_path(SAMPLE / task, split)
        records = formats.read_file(task, gold_path, labelled=True)
        out = tmp_path / f"{task}-{split}.jsonl"
        formats.write_predictions(out, records, [gold_of(r) for r in records])
        written = out.read_text(encoding="utf-8").splitlines()
        gold = Path(gold_path).read_text(encoding="utf-8").splitlines()
        assert [json.loads(x) for x in written] == [json.loads(x) for x in gold]
        assert written == gold  # the sample is written the way prediction lines are


def test_test_file_predictions_have_the_official_label_types(tmp_path: Path) -> None:
    for task, prediction, expected in (("clozet", 1, "1"), ("senpos", 0, 1)):
        records = formats.read_split(task, SAMPLE / task, "test")
        out = tmp_path / f"{task}.jsonl"
        formats.write_predictions(out, records, [prediction] * len(records))
        lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
        assert [x["label"] for x in lines] == [expected] * len(records)
        assert [{k: v for k, v in x.items() if k != "label"} for x in lines] == [
            r.raw for r in records
        ]


def test_the_organisers_outgen_files_read_without_a_title() -> None:
    """The OutGen-format competition data (IndexFziQ/LongLM-Eyas datasets/chn/data/; not
    LOT's own val split)."""
    folder = REPO_ROOT.parent / "shared" / "data" / "lot_outgen_competition"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent (real data is not part of the repository)")
    records = formats.read_file("outgen", folder / "val.jsonl", labelled=True)
    assert len(records) == 661 and {r.title for r in records} == {""}
    assert max(len(r.outline) for r in records) == 8


def test_the_sample_is_what_its_generator_writes(tmp_path: Path) -> None:
    """tools/make_lot_sample.py rebuilds the bundled files from the stories' source."""
    tool = REPO_ROOT / "tools" / "make_lot_sample.py"
    command = [sys.executable, str(tool), "--out", str(tmp_path)]
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    for task in formats.TASKS:
        for name in formats.SPLIT_FILES.values():
            assert (tmp_path / task / name).read_bytes() == (SAMPLE / task / name).read_bytes()
