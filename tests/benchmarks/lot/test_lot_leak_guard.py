"""The `lot` mixture's leak guard (`cmrcx.benchmarks.lot.leak_guard`): a training record
telling a validation/test story is dropped (a ClozeT training record whose completed story
is a PlotCom validation story, as the paper builds PlotCom's validation set from ClozeT),
whatever fills the blank, in every task; the bundled sample has none."""

from __future__ import annotations

import pytest

from cmrcx.benchmarks.lot import formats, leak_guard
from cmrcx.benchmarks.lot.formats import ClozeTRecord, OutGenRecord, PlotComRecord, SenPosRecord
from cmrcx.common.paths import package_path

SAMPLE = package_path("data/lot_sample")
STORY = "小明早上起床。他去学校上课。老师表扬了他。他很高兴。"
PLOT = "他去学校上课。"


def sample_records(split_names=("validation", "test")):
    training = {t: formats.read_split(t, f"{SAMPLE}/{t}", "train") for t in formats.TASKS}
    held_out = {
        t: {s: formats.read_split(t, f"{SAMPLE}/{t}", s) for s in split_names}
        for t in formats.TASKS
    }
    return training, held_out


def test_completed_stories():
    clozet = ClozeTRecord(1, "小明早上起床。<mask>老师表扬了他。他很高兴。", ("错。", PLOT), 1, {})
    senpos = SenPosRecord(1, "小明早上起床。<mask>老师表扬了他。<mask>他很高兴。", PLOT, 0, {})
    plotcom = PlotComRecord(1, "小明早上起床。<mask>老师表扬了他。 他很高兴。", PLOT, {})
    outgen = OutGenRecord(1, "题", ("起床",), STORY, {})
    for record in (clozet, senpos, plotcom, outgen):
        assert leak_guard.completed_story(record) == STORY


def test_the_sample_has_no_leak():
    report = leak_guard.guard(*sample_records())
    assert {t: len(d) for t, d in report.dropped.items()} == dict.fromkeys(formats.TASKS, 0)
    assert report.kept["clozet"] == sample_records()[0]["clozet"]
    assert report.held_out == {"clozet": 32, "senpos": 32, "plotcom": 32, "outgen": 8}
    assert report.unchecked == {"clozet": 0, "senpos": 0, "plotcom": 0, "outgen": 8}


def test_a_clozet_training_record_telling_a_plotcom_validation_story_is_dropped():
    """The paper's construction backwards: PlotCom validation line 1's story, its plot the
    right candidate of a ClozeT training record."""
    training, held_out = sample_records()
    plotcom = held_out["plotcom"]["validation"][0]
    leaked = ClozeTRecord(
        99, plotcom.story, ("一个不相干的句子。", plotcom.plot), 1, {"story": "..."}
    )
    completed = leak_guard.completed_story(leaked)
    assert completed == leak_guard.normalise(plotcom.story.replace("<mask>", plotcom.plot))
    training["clozet"] = [*training["clozet"], leaked]
    report = leak_guard.guard(training, held_out)
    assert [r.line for r, _ in report.dropped["clozet"]] == [99]
    _, told = report.dropped["clozet"][0]
    # ClozeT validation has the same story (PlotCom's come from ClozeT's): either is named.
    assert (told.task, told.split) in {("plotcom", "validation"), ("clozet", "validation")}
    assert leaked not in report.kept["clozet"] and len(report.kept["clozet"]) == 32
    assert report.line().startswith(
        "lot leak guard: dropped from training 1 clozet, 0 senpos, 0 plotcom, 0 outgen record(s)"
    )
    assert report.dropped_lines()["clozet"] == [
        {"line": 99, "tells": f"{told.task} {told.split} line {told.line}"}
    ]


def test_only_plotcom_held_out_still_catches_it():
    training, _ = sample_records()
    held_out = {"plotcom": {"validation": formats.read_split("plotcom", f"{SAMPLE}/plotcom",
                                                              "validation")}}  # fmt: skip
    plotcom = held_out["plotcom"]["validation"][3]
    # Another sentence in the blank (the wrong candidate) tells the story all the same.
    training["clozet"] = [ClozeTRecord(7, plotcom.story, ("别的句子。", "又一句。"), 0, {})]
    report = leak_guard.guard(training, held_out)
    assert [r.line for r, _ in report.dropped["clozet"]] == [7]
    assert report.dropped["plotcom"] == []


@pytest.mark.parametrize(
    "record, told",
    [
        # SenPos training record: the same story, the sentence removed elsewhere.
        (
            SenPosRecord(
                1, "小明早上起床。<mask>他去学校上课。<mask>他很高兴。", "老师表扬了他。", 1, {}
            ),
            True,
        ),
        (
            PlotComRecord(1, "小明早上起床。他去学校上课。<mask>他很高兴。", "老师表扬了他。", {}),
            True,
        ),
        (
            OutGenRecord(
                1, "", ("起床",), " 小明早上起床。他去学校上课。\n老师表扬了他。他很高兴。", {}
            ),
            True,
        ),
        # Another ending: another story.
        (
            OutGenRecord(
                1, "", ("起床",), "小明早上起床。他去学校上课。老师表扬了他。他哭了。", {}
            ),
            False,
        ),
        (PlotComRecord(1, "小红早上起床。<mask>老师表扬了他。他很高兴。", PLOT, {}), False),
    ],
)
def test_every_task_and_blank_is_matched(record, told):
    held_out = {
        "clozet": {"test": [ClozeTRecord(3, "小明早上起床。<mask>老师表扬了他。他很高兴。",
                                         ("a", "b"), None, {})]},
    }  # fmt: skip
    report = leak_guard.guard({formats.task_of(record): [record]}, held_out)
    assert bool(report.dropped[formats.task_of(record)]) is told


@pytest.mark.parametrize(
    "held, story, told",
    [
        # SenPos held out (sentence 他去学校上课。, its gap unknown to the guard).
        (SenPosRecord(1, "小明早上起床。<mask>老师表扬了他。<mask>他很高兴。", PLOT, None, {}),
         STORY, True),
        (SenPosRecord(1, "小明早上起床。<mask>老师表扬了他。<mask>他很高兴。", "他去了公园。", None,
                      {}), STORY, False),
        # A gap before the index key's characters: still found.
        (SenPosRecord(1, "<mask>他去学校上课。老师表扬了他。他很高兴。", "小明早上起床。",
                      None, {}), STORY, True),
        (OutGenRecord(1, "", ("起床",), STORY, {}), STORY, True),
        (PlotComRecord(1, "小<mask>他很高兴。", None, {}), STORY, True),  # short left part
    ],
)  # fmt: skip
def test_held_out_kinds(held, story, told):
    stories = leak_guard.HeldOutStories([leak_guard.held_out_story(held, "validation")])
    assert (stories.told_by(leak_guard.normalise(story)) is not None) is told


def test_an_outgen_test_record_without_story_is_counted_not_checked():
    assert leak_guard.held_out_story(OutGenRecord(1, "题", ("甲",), None, {}), "test") is None
