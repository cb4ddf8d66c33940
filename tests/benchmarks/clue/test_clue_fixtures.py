"""Tiny CLUE-format files for the CLUE tests: lines written for cmrcx, not taken from CLUE.

`FIXTURES[task]` holds a labelled split (train or dev) and the test split of each task,
as lists of records in the official field layout; `write_task_dir` writes them under
the official file names of that task. The other ``test_clue_*`` modules import these; the
tests at the bottom check the fixtures themselves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cmrcx.benchmarks.clue.tasks import TASKS

_TNEWS_LABELLED = [
    {
        "label": "103",
        "label_desc": "news_sports",
        "sentence": "主队加时赛逆转夺冠",
        "keywords": "加时赛,夺冠",
    },
    {
        "label": "116",
        "label_desc": "news_game",
        "sentence": "新版本上线后玩家排队登录",
        "keywords": "",
    },
]
_TNEWS_TEST = [
    {"id": 0, "sentence": "小城夜市重新开张", "keywords": "夜市"},
    {"id": 1, "sentence": "今年的新茶价格上涨", "keywords": ""},
]
_WSC_LABELLED = [
    {
        "target": {"span2_index": 11, "span1_index": 6, "span1_text": "小李", "span2_text": "他"},
        "idx": 7,
        "label": "true",
        "text": "小王把书给了小李，因为他要出门。",
    },
    {
        "target": {"span2_index": 0, "span1_index": 2, "span1_text": "小李", "span2_text": "他"},
        "idx": 9,
        "label": "false",
        "text": "他说小李明天来。",
    },
]
_WSC_TEST = [
    {
        "id": 0,
        "target": {"span1_index": 0, "span1_text": "妈妈", "span2_index": 6, "span2_text": "她"},
        "text": "妈妈打电话时她很高兴。",
    },
]
_NLI_LABELLED = [
    {"sentence1": "会议推迟到下周举行", "sentence2": "会议没有按原计划召开", "label": "entailment"},
    {"sentence1": "他每天骑车上班", "sentence2": "他从来不骑车", "label": "contradiction"},
    {"sentence1": "商店门口排着长队", "sentence2": "商店在打折", "label": "neutral"},
]
_NLI_TEST = [
    {"id": 0, "sentence1": "雨下了一整夜", "sentence2": "地面是湿的"},
    {"id": 1, "sentence1": "她刚学会游泳", "sentence2": "她是游泳教练"},
]

# task -> {"labelled": (split, records), "test": records}
FIXTURES: dict[str, dict[str, Any]] = {
    "clue_afqmc": {
        "labelled": (
            "validation",
            [
                {"sentence1": "怎么修改登录密码", "sentence2": "登录密码在哪里改", "label": "1"},
                {"sentence1": "退款多久到账", "sentence2": "怎么申请退款", "label": "0"},
            ],
        ),
        "test": [{"id": 0, "sentence1": "账单在哪看", "sentence2": "如何查看账单"}],
    },
    "clue_tnews10": {"labelled": ("train", _TNEWS_LABELLED), "test": _TNEWS_TEST},
    "clue_tnews11": {"labelled": ("validation", _TNEWS_LABELLED), "test": _TNEWS_TEST},
    "clue_iflytek": {
        "labelled": (
            "validation",
            [
                {"label": "0", "label_des": "打车", "sentence": "一键叫车，司机几分钟就到"},
                {
                    "label": "118",
                    "label_des": "其他",
                    "sentence": "记录每天的心情\u2028支持导出日记",
                },
            ],
        ),
        "test": [{"id": 0, "sentence": "离线地图\u2028不用流量也能导航"}],
    },
    "clue_ocnli": {"labelled": ("validation", _NLI_LABELLED), "test": _NLI_TEST},
    "clue_cmnli": {"labelled": ("train", _NLI_LABELLED), "test": _NLI_TEST},
    "clue_cluewsc10": {"labelled": ("train", _WSC_LABELLED), "test": _WSC_TEST},
    "clue_cluewsc11": {"labelled": ("validation", _WSC_LABELLED), "test": _WSC_TEST},
    "clue_csl": {
        "labelled": (
            "validation",
            [
                {
                    "id": 1,
                    "abst": "提出一种基于分块的图像压缩方法,实验表明压缩率提高。",
                    "keyword": ["图像压缩", "分块"],
                    "label": "1",
                },
                {
                    "id": 2,
                    "abst": "研究了城市道路的交通流量预测问题。",
                    "keyword": ["交通流量", "预测", "压缩率"],
                    "label": "0",
                },
            ],
        ),
        "test": [
            {
                "id": 2415,
                "abst": "讨论了土壤湿度对作物产量的影响。",
                "keyword": ["土壤湿度", "产量"],
            },
            {"id": 2416, "abst": "分析了在线课程的学习效果。", "keyword": ["在线课程"]},
        ],
    },
    "clue_diagnostics": {
        "labelled": (
            "test",
            [
                {
                    "index": 0,
                    "premise": "小红比小明高",
                    "hypothesis": "小明比小红矮",
                    "label": "entailment",
                },
                {
                    "index": 1,
                    "premise": "我没有去过北京",
                    "hypothesis": "我去过北京",
                    "label": "contradiction",
                },
            ],
        ),
        "test": [{"index": 0, "premise": "猫在睡觉", "hypothesis": "猫醒着"}],
    },
}


def write_lines(path: Path, records: list[Any]) -> Path:
    """One JSON object per line, UTF-8, non-ASCII (and U+2028) written raw."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    path.write_text(text, encoding="utf-8")
    return path


def write_task_dir(root: Path, task_name: str) -> Path:
    """Writes the task's fixture splits under their official file names; returns the dir."""
    task = TASKS[task_name]
    directory = root / task.public_dir
    split, records = FIXTURES[task_name]["labelled"]
    write_lines(directory / task.split_files[split], records)
    if split != "test":
        write_lines(directory / task.split_files["test"], FIXTURES[task_name]["test"])
    return directory


def test_every_task_has_fixtures() -> None:
    assert set(FIXTURES) == set(TASKS)


def test_fixture_dirs_use_official_file_names(tmp_path: Path) -> None:
    directory = write_task_dir(tmp_path, "clue_tnews10")
    assert directory.name == "tnews_public"
    assert sorted(p.name for p in directory.iterdir()) == ["test1.0.json", "train.json"]
    directory = write_task_dir(tmp_path, "clue_diagnostics")
    assert sorted(p.name for p in directory.iterdir()) == ["diagnostics_test.json"]
