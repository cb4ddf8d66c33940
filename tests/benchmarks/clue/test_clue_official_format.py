"""Strict readers of CLUE's official JSON-lines files (cmrcx.benchmarks.clue.official_format)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cmrcx.benchmarks.clue import TASKS, DataFormatError, read_examples, read_split
from cmrcx.benchmarks.clue.inputs import encoder_texts
from cmrcx.benchmarks.clue.official_format import WscTarget
from tests.benchmarks.clue.test_clue_fixtures import FIXTURES, write_lines, write_task_dir
from tests.support import REPO_ROOT


@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_every_task_reads_its_labelled_and_test_files(tmp_path: Path, task_name: str) -> None:
    directory = write_task_dir(tmp_path, task_name)
    split, records = FIXTURES[task_name]["labelled"]
    labelled = read_split(task_name, directory, split)
    task = TASKS[task_name]
    assert labelled.task == task_name
    assert len(labelled.examples) == len(records)
    assert labelled.skipped_unlabelled == 0
    for example, record in zip(labelled.examples, records, strict=True):
        assert example.label == record["label"]
        assert set(task.text_fields) <= set(example.texts)
    assert [e.line_number for e in labelled.examples] == list(range(1, len(records) + 1))
    if split != "test":
        test = read_split(task_name, directory, "test")
        assert [e.label for e in test.examples] == [None] * len(FIXTURES[task_name]["test"])
        assert [e.id for e in test.examples] == [
            next(r[f] for f in task.id_fields if f in r) for r in FIXTURES[task_name]["test"]
        ]


def test_versions_read_their_own_test_files(tmp_path: Path) -> None:
    # TNEWS and CLUEWSC2020 1.0 test sets are test1.0.json, the 1.1 ones test.json.
    v10 = write_task_dir(tmp_path / "a", "clue_tnews10")
    v11 = write_task_dir(tmp_path / "b", "clue_tnews11")
    assert (v10 / "test1.0.json").exists() and not (v10 / "test.json").exists()
    assert (v11 / "test.json").exists()
    assert len(read_split("clue_tnews10", v10, "test").examples) == 2
    with pytest.raises(DataFormatError, match=r"test\.json: file not found"):
        read_split("clue_tnews11", v10, "test")


def test_ids_exactly_as_in_the_file(tmp_path: Path) -> None:
    csl = read_split("clue_csl", write_task_dir(tmp_path, "clue_csl"), "test")
    assert [e.id for e in csl.examples] == [2415, 2416]  # not the line index
    wsc_dir = write_task_dir(tmp_path, "clue_cluewsc11")
    assert [e.id for e in read_split("clue_cluewsc11", wsc_dir, "validation").examples] == [7, 9]
    assert [e.id for e in read_split("clue_cluewsc11", wsc_dir, "test").examples] == [0]
    diag = read_split("clue_diagnostics", write_task_dir(tmp_path, "clue_diagnostics"), "test")
    assert [e.id for e in diag.examples] == [0, 1]  # the "index" field
    # AFQMC train/dev lines have no id: the 0-based line index stands in.
    afqmc = read_split("clue_afqmc", write_task_dir(tmp_path, "clue_afqmc"), "validation")
    assert [e.id for e in afqmc.examples] == [0, 1]
    path = write_lines(tmp_path / "string_ids.json", [{"id": "a7", "sentence": "标题"}])
    assert read_examples("clue_iflytek", path, labelled=False).examples[0].id == "a7"


def test_texts_per_task(tmp_path: Path) -> None:
    tnews = read_split("clue_tnews11", write_task_dir(tmp_path, "clue_tnews11"), "validation")
    assert tnews.examples[0].texts == {"sentence": "主队加时赛逆转夺冠", "keywords": "加时赛,夺冠"}
    csl = read_split("clue_csl", write_task_dir(tmp_path, "clue_csl"), "validation")
    assert csl.examples[0].texts["keyword"] == ("图像压缩", "分块")
    wsc = read_split("clue_cluewsc10", write_task_dir(tmp_path, "clue_cluewsc10"), "train")
    assert wsc.examples[0].texts["target"] == WscTarget(6, "小李", 11, "他")


def test_iflytek_line_separator_is_not_a_line_break(tmp_path: Path) -> None:
    directory = write_task_dir(tmp_path, "clue_iflytek")
    raw = (directory / "dev.json").read_text(encoding="utf-8")
    assert "\u2028" in raw and len(raw.splitlines()) == 3  # splitlines() would see 3 lines
    dev = read_split("clue_iflytek", directory, "validation")
    assert len(dev.examples) == 2
    assert dev.examples[1].texts["sentence"] == "记录每天的心情\u2028支持导出日记"
    assert read_split("clue_iflytek", directory, "test").examples[0].id == 0


def test_crlf_and_missing_final_newline(tmp_path: Path) -> None:
    lines = [json.dumps(r, ensure_ascii=False) for r in FIXTURES["clue_afqmc"]["labelled"][1]]
    path = tmp_path / "dev.json"
    path.write_bytes("\r\n".join(lines).encode("utf-8"))
    assert len(read_examples("clue_afqmc", path, labelled=True).examples) == 2


def _nli(label: str, n: int) -> dict[str, Any]:
    return {"sentence1": f"前提{n}", "sentence2": f"假设{n}", "label": label, "id": n}


@pytest.mark.parametrize("task_name", ["clue_ocnli", "clue_cmnli"])
def test_no_majority_rows_are_skipped_and_counted(tmp_path: Path, task_name: str) -> None:
    labels = ["entailment", "-", "neutral", "-", "contradiction"]
    records = [_nli(label, n) for n, label in enumerate(labels)]
    path = write_lines(tmp_path / TASKS[task_name].split_files["train"], records)
    split = read_examples(task_name, path, labelled=True)
    assert [e.id for e in split.examples] == [0, 2, 4]
    assert [e.line_number for e in split.examples] == [1, 3, 5]
    assert split.skipped_unlabelled == 2
    assert split.skipped_ids == (1, 3)
    assert "3 examples, 2 skipped (label '-'" in split.summary()
    # Unlabelled reading keeps every line (a submission needs one per test line).
    assert len(read_examples(task_name, path, labelled=False).examples) == 5


def test_empty_texts_and_repeated_ids_are_kept_and_counted(tmp_path: Path) -> None:
    records = [_nli("neutral", 0), _nli("neutral", 1), _nli("neutral", 0)]
    records[1]["sentence2"] = " "
    path = write_lines(tmp_path / "dev.json", records)
    split = read_examples("clue_ocnli", path, labelled=True)
    assert len(split.examples) == 3
    assert split.empty_text_ids == (1,) and split.repeated_ids == (0,)
    assert split.summary().endswith(
        ": 3 examples, 1 with an empty text (kept, read as an empty sentence), e.g. 1, "
        "1 repeating an earlier record's id (kept; lines are what count), e.g. 0"
    )
    assert read_examples("clue_ocnli", write_lines(tmp_path / "ok.json", records[:1]),
                         labelled=True).notes() == []  # fmt: skip


def test_ocnli_train_file_name(tmp_path: Path) -> None:
    directory = tmp_path / "ocnli_public"
    write_lines(directory / "train.50k.json", [_nli("-", 0), _nli("neutral", 1)])
    split = read_split("clue_ocnli", directory, "train")
    assert split.path.endswith("train.50k.json")
    assert (len(split.examples), split.skipped_unlabelled) == (1, 1)


def test_dash_is_an_unknown_label_where_clue_does_not_skip(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "dev.json", [{"sentence1": "a", "sentence2": "b", "label": "-"}])
    with pytest.raises(DataFormatError, match=r"line 1: field 'label': unknown label '-'"):
        read_examples("clue_afqmc", path, labelled=True)


_AFQMC_OK = {"sentence1": "怎么还款", "sentence2": "如何还钱", "label": "1"}
_WSC_OK = FIXTURES["clue_cluewsc11"]["labelled"][1][0]


def _edit(record: dict[str, Any], **changes: Any) -> dict[str, Any]:
    edited = json.loads(json.dumps(record))
    for key, value in changes.items():
        if value is _DELETE:
            del edited[key]
        else:
            edited[key] = value
    return edited


_DELETE = object()


def _wsc_target(**changes: Any) -> dict[str, Any]:
    target = dict(_WSC_OK["target"])
    for key, value in changes.items():
        if value is _DELETE:
            del target[key]
        else:
            target[key] = value
    return _edit(_WSC_OK, target=target)


# (task, labelled, bad line as text, expected message after "line 2: ")
_MALFORMED = [
    ("clue_afqmc", True, '{"sentence1": "a", "sentence2": ', "malformed JSON at column"),
    ("clue_afqmc", True, '["a", "b", "1"]', "expected a JSON object, got array"),
    ("clue_afqmc", True, "", "empty line"),
    ("clue_afqmc", True, _edit(_AFQMC_OK, sentence2=_DELETE), "field 'sentence2': missing"),
    ("clue_afqmc", True, _edit(_AFQMC_OK, sentence1=3), "field 'sentence1': expected a string"),
    ("clue_afqmc", True, _edit(_AFQMC_OK, label=_DELETE), "field 'label': missing"),
    ("clue_afqmc", True, _edit(_AFQMC_OK, label=1), "field 'label': expected a label string"),
    ("clue_afqmc", True, _edit(_AFQMC_OK, label="2"), "field 'label': unknown label '2'"),
    ("clue_afqmc", False, _edit(_AFQMC_OK, label="yes"), "field 'label': unknown label 'yes'"),
    ("clue_afqmc", False, _edit(_AFQMC_OK, id=[3]), "field 'id': expected an integer or string"),
    ("clue_afqmc", False, _edit(_AFQMC_OK, id=True), "field 'id': expected an integer or string"),
    ("clue_tnews11", True, {"label": "105", "sentence": "x"}, "field 'label': unknown label '105'"),
    (
        "clue_tnews11",
        True,
        {"label": "100", "sentence": "x", "keywords": ["a"]},
        "field 'keywords': expected a string",
    ),
    ("clue_iflytek", True, {"label": "119", "sentence": "x"}, "unknown label '119'"),
    ("clue_ocnli", True, _edit(_nli("Entailment", 1)), "field 'label': unknown label"),
    (
        "clue_csl",
        True,
        {"abst": "x", "keyword": "a b", "label": "0"},
        "field 'keyword': expected an array of strings",
    ),
    (
        "clue_csl",
        True,
        {"abst": "x", "keyword": ["a", 2], "label": "0"},
        "field 'keyword': keyword 1 is number",
    ),
    ("clue_cluewsc11", True, _edit(_WSC_OK, target="小李"), "field 'target': expected an object"),
    (
        "clue_cluewsc11",
        True,
        _wsc_target(span2_index=_DELETE),
        "field 'target.span2_index': missing",
    ),
    (
        "clue_cluewsc11",
        True,
        _wsc_target(span1_index=-1),
        "field 'target.span1_index': expected a non-negative integer",
    ),
    (
        "clue_cluewsc11",
        True,
        _wsc_target(span1_text=None),
        "field 'target.span1_text': expected a string, got null",
    ),
    (
        "clue_cluewsc11",
        True,
        _wsc_target(span1_index=3),
        "field 'target.span1_text': '小李' is not at index 3 of 'text'",
    ),
    ("clue_cluewsc11", True, _edit(_WSC_OK, label="True"), "field 'label': unknown label 'True'"),
    (
        "clue_diagnostics",
        True,
        {"index": 0, "premise": "a", "label": "neutral"},
        "field 'hypothesis': missing",
    ),
]


@pytest.mark.parametrize(("task_name", "labelled", "bad", "message"), _MALFORMED)
def test_malformed_line_names_file_line_and_field(
    tmp_path: Path, task_name: str, labelled: bool, bad: Any, message: str
) -> None:
    good = FIXTURES[task_name]["labelled"][1][0]
    path = tmp_path / "broken_split.json"
    bad_line = bad if isinstance(bad, str) else json.dumps(bad, ensure_ascii=False)
    good_line = json.dumps(good, ensure_ascii=False)
    path.write_text(f"{good_line}\n{bad_line}\n{good_line}\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as info:
        read_examples(task_name, path, labelled=labelled)
    assert str(info.value).startswith(f"{path}: line 2: ")
    assert message in str(info.value)


def test_what_the_baselines_read_is_read(tmp_path: Path) -> None:
    """[TF] CslProcessor joins an empty keyword array to ""; WSCProcessor's assertion holds
    for an empty span text. Both are read, and give the baselines' inputs."""
    csl = tmp_path / "csl.json"
    csl.write_text(json.dumps({"abst": "摘要", "keyword": [], "label": "1"}) + "\n")
    (example,) = read_examples("clue_csl", csl, labelled=True).examples
    assert encoder_texts("clue_csl", example) == ("", "摘要")
    wsc = tmp_path / "wsc.json"
    wsc.write_text(json.dumps(_wsc_target(span1_text="", span1_index=0)) + "\n")
    (example,) = read_examples("clue_cluewsc11", wsc, labelled=True).examples
    marked, _ = encoder_texts("clue_cluewsc11", example)
    assert marked == "__小王把书给了小李，因为[他]要出门。"


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"nope\.json: file not found"):
        read_examples("clue_afqmc", tmp_path / "nope.json", labelled=True)
    latin = tmp_path / "latin1.json"
    latin.write_bytes('{"sentence1": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"latin1\.json: not valid UTF-8"):
        read_examples("clue_afqmc", latin, labelled=True)
    with pytest.raises(DataFormatError, match="clue_diagnostics has no 'train' split"):
        read_split("clue_diagnostics", tmp_path, "train")
    with pytest.raises(KeyError, match="unknown CLUE task 'clue_c3'"):
        read_examples("clue_c3", latin, labelled=True)


def test_empty_file_is_an_empty_split(tmp_path: Path) -> None:
    path = tmp_path / "dev.json"
    path.write_text("", encoding="utf-8")
    assert read_examples("clue_afqmc", path, labelled=True).examples == ()


def test_bundled_afqmc_sample() -> None:
    directory = REPO_ROOT / "cmrcx/data/clue_sample/afqmc_public"
    sizes = {
        split: len(read_split("clue_afqmc", directory, split).examples)
        for split in ("train", "validation", "test")
    }
    assert sizes == {"train": 40, "validation": 16, "test": 16}
    test = read_split("clue_afqmc", directory, "test")
    assert [e.id for e in test.examples] == list(range(16))
    dev_labels = {e.label for e in read_split("clue_afqmc", directory, "validation").examples}
    assert dev_labels == {"0", "1"}
