"""The baselines' encoder input per CLUE task (cmrcx.benchmarks.clue.inputs)."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from cmrcx.benchmarks.clue import inputs, read_split
from cmrcx.benchmarks.clue.inputs import (
    csl_keyword_text,
    encoder_texts,
    truncate_seq_pair,
    wsc_marked_text,
)
from cmrcx.benchmarks.clue.official_format import WscTarget
from tests.benchmarks.clue.test_clue_fixtures import write_task_dir


def test_docstring_examples() -> None:
    result = doctest.testmod(inputs)
    assert result.attempted >= 4
    assert result.failed == 0


@pytest.mark.parametrize(
    ("task_name", "split", "expected"),
    [
        ("clue_afqmc", "validation", ("怎么修改登录密码", "登录密码在哪里改")),
        ("clue_tnews10", "train", ("主队加时赛逆转夺冠", None)),  # keywords unused
        ("clue_tnews11", "test", ("小城夜市重新开张", None)),
        ("clue_iflytek", "test", ("离线地图\u2028不用流量也能导航", None)),  # not shortened
        ("clue_ocnli", "validation", ("会议推迟到下周举行", "会议没有按原计划召开")),
        ("clue_cmnli", "test", ("雨下了一整夜", "地面是湿的")),
        ("clue_cluewsc10", "train", ("小王把书给了_小李_，因为[他]要出门。", None)),
        ("clue_cluewsc11", "test", ("_妈妈_打电话时[她]很高兴。", None)),
        (
            "clue_csl",
            "validation",
            ("图像压缩 分块", "提出一种基于分块的图像压缩方法,实验表明压缩率提高。"),
        ),
        ("clue_diagnostics", "test", ("小红比小明高", "小明比小红矮")),
    ],
)
def test_first_example_of_each_task(
    tmp_path: Path, task_name: str, split: str, expected: tuple[str, str | None]
) -> None:
    directory = write_task_dir(tmp_path, task_name)
    example = read_split(task_name, directory, split).examples[0]
    assert encoder_texts(task_name, example) == expected


def test_wsc_marks_both_orders() -> None:
    # Pronoun after the noun: "_noun_" first, then "[pronoun]".
    assert wsc_marked_text("甲叫乙，他来了", WscTarget(0, "甲", 4, "他")) == "_甲_叫乙，[他]来了"
    # Pronoun before the noun.
    assert (
        wsc_marked_text("他说小李明天来。", WscTarget(2, "小李", 0, "他")) == "[他]说_小李_明天来。"
    )
    # Adjacent spans and multi-character pronouns.
    assert wsc_marked_text("老张他们到了", WscTarget(0, "老张", 2, "他们")) == "_老张_[他们]到了"


def test_wsc_equal_indices_follow_the_baseline_branch() -> None:
    # Overlapping spans (pronoun_index == query_index): the baseline's else-branch inserts
    # the brackets first and the underscores at shifted positions; reproduced as is.
    assert wsc_marked_text("他们来了", WscTarget(0, "他们", 0, "他")) == "[他_]们_来了"


def test_csl_keywords_joined_by_one_space() -> None:
    assert csl_keyword_text(["水声学", "FFT", "3维成像"]) == "水声学 FFT 3维成像"
    assert csl_keyword_text(["单个"]) == "单个"


def test_truncate_seq_pair_pops_the_longer_list() -> None:
    a, b = list("一二三"), list("甲乙丙丁戊")
    truncate_seq_pair(a, b, 5)
    assert (a, b) == (list("一二三"), list("甲乙"))  # ties pop from b
    a, b = list("一二"), list("甲")
    truncate_seq_pair(a, b, 10)
    assert (a, b) == (list("一二"), list("甲"))
