"""Tests for the `cmrc2019` TFDS builder and the SeqIO tasks, on small fixture files."""

from __future__ import annotations

import collections
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import seqio
import tensorflow_datasets as tfds
from seqio import test_utils as seqio_test_utils

import cmrcx.data
from cmrcx.benchmarks.cmrc2019 import evaluation
from cmrcx.benchmarks.cmrc2019 import windows as cmrc2019_windows
from cmrcx.benchmarks.cmrc2019.official_format import DataFormatError
from cmrcx.datasets import cmrc2019 as cmrc2019_tfds
from cmrcx.tasks import cmrc2019 as cmrc2019_tasks
from cmrcx.vocab.wordpiece import WordPieceVocabulary

TINY_VOCAB = str(Path(cmrcx.data.__file__).parent / "tiny_vocab.txt")
MAX_LENGTH = 64
DOC_STRIDE = 32
MAX_BLANKS = 32
MAX_CANDIDATE_TOKENS = 32  # leaves room in a 64-token window

# Original short passages; every character is in the tiny vocabulary. The ids are
# deliberately not in sorted order, so file order is distinguishable from key order.
TRAIN = [
    {
        # 111 tokens: three windows of 64 with a 10-token candidate.
        "context_id": "TRAIN_9",
        "context": "周末的早上，妈妈带我去公园玩。[BLANK1]。我们先到湖边看小鸭子，"
        "它们在水里游来游去，[BLANK2]。后来我们走到一片草地上，很多小朋友在那里放风筝，"
        "[BLANK3]。中午我们坐在大树下吃饭，妈妈做的饭特别好吃。回家的路上，"
        "我问妈妈下个周末还能不能再来，[BLANK4]。",
        "choices": [
            "天气很好，太阳暖暖的",
            "有的还把头钻进水里找吃的",
            "天上飞着各种各样的风筝",
            "妈妈笑着说当然可以",
        ],
        "answers": [0, 1, 2, 3],
    },
    {
        "context_id": "TRAIN_10",
        "context": "[BLANK1]，小猫就跑到门口等我。我给它倒了一碗牛奶，[BLANK2]。",
        "choices": ["每天放学回家", "它很快就喝完了"],
        "answers": [0, 1],
    },
    {
        "context_id": "TRAIN_0",
        "context": "下雨了，小明没有带伞。[BLANK1]。他想了想，[BLANK2]，[BLANK3]",
        "choices": ["最后他跑回了家", "他站在门口不知道怎么办", "决定等雨小一点再走"],
        "answers": [1, 2, 0],
    },
]
DEV = [
    {
        "context_id": "DEV_2",
        "context": "春天来了，[BLANK1]。小鸟在树上唱歌，[BLANK2]。",
        "choices": ["花开了", "月亮很圆", "小河也笑了"],  # "月亮很圆" is the fake
        "answers": [0, 2],
    },
    {
        "context_id": "DEV_1",
        "context": "我有一个好朋友，[BLANK1]。我们每天一起上学，[BLANK2]。",
        "choices": ["他叫小明", "放学后也一起回家"],
        "answers": [0, 1],
    },
]
OFFICIAL_FILES = (
    "cmrc2019_train.json",
    "cmrc2019_trial.json",
    "cmrc2019_dev.json",
    "cmrc2019_qualify.json",
)


def _write(directory: Path, name: str, records: list[dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    document = json.dumps({"data": records}, ensure_ascii=False, indent=1)
    (directory / name).write_text(document, encoding="utf-8")


def _write_fixture(directory: Path) -> Path:
    _write(directory, "cmrc2019_train.json", TRAIN)
    _write(directory, "cmrc2019_dev.json", DEV)
    return directory


def _read_split(tfds_dir: str, split: str) -> list[dict[str, Any]]:
    """The prepared records of one split as plain Python values, in stored order."""
    builder = cmrc2019_tfds.Cmrc2019(data_dir=tfds_dir)
    records = []
    for ex in tfds.as_numpy(builder.as_dataset(split=split, shuffle_files=False)):
        records.append(
            {
                "context_id": ex["context_id"].decode("utf-8"),
                "context": ex["context"].decode("utf-8"),
                "choices": [c.decode("utf-8") for c in ex["choices"]],
                "answers": ex["answers"].tolist(),
            }
        )
    return records


def _as_numpy(task_name: str, split: str) -> list[dict[str, np.ndarray]]:
    dataset = seqio.get_mixture_or_task(task_name).get_dataset(
        sequence_length=None, split=split, shuffle=False
    )
    return list(dataset.as_numpy_iterator())


def _stack(examples: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.stack([ex[key] for ex in examples]) for key in examples[0]}


# Python-side reference: the same tokenization, windowed by the (separately tested) spans.


def _passage_ids(vocab: WordPieceVocabulary, context: str) -> list[int]:
    """One word per character, markers whole (the script's procedure: test_tokenizer_parity)."""
    words = re.findall(r"\[BLANK\d+\]|\S", context)
    return vocab.encode(" ".join(re.sub(r"\[BLANK(\d+)\]", r"[unused\1]", w) for w in words))


def _candidate_ids(vocab: WordPieceVocabulary, choice: str) -> list[int]:
    return vocab.encode(choice)[:MAX_CANDIDATE_TOKENS]


def _blank_tokens(vocab: WordPieceVocabulary, passage_ids: list[int], num_blanks: int):
    return [passage_ids.index(vocab.token_to_id(f"[unused{k}]")) for k in range(1, num_blanks + 1)]


def _spans(passage_ids: list[int], candidate_ids: list[int]):
    room = MAX_LENGTH - len(candidate_ids) - 3
    return cmrc2019_windows.doc_spans(len(passage_ids), room, DOC_STRIDE)


def _candidate_of(input_ids: np.ndarray, sep_id: int) -> list[int]:
    return input_ids[1 : int(np.flatnonzero(input_ids == sep_id)[0])].tolist()


# Fixtures


@pytest.fixture(scope="module")
def vocab() -> WordPieceVocabulary:
    return WordPieceVocabulary(TINY_VOCAB)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_fixture(tmp_path_factory.mktemp("cmrc2019_data"))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("tfds"))


@pytest.fixture(scope="module")
def tasks(data_dir: Path, cache_dir: str):
    """Registers the tiny tasks once for the module; removes them afterwards."""
    names = cmrc2019_tasks.register(
        "tiny",
        TINY_VOCAB,
        {"cmrc2019": str(data_dir)},
        max_length=MAX_LENGTH,
        doc_stride=DOC_STRIDE,
        max_candidate_tokens=MAX_CANDIDATE_TOKENS,
        tfds_cache_dir=cache_dir,
    )
    yield names
    for name in (*names, "cmrc2019_other", "cmrc2019_other_scoring"):
        seqio.TaskRegistry.remove(name)
    seqio.MixtureRegistry.remove(cmrc2019_tasks.MIXTURE_NAME)


@pytest.fixture(scope="module")
def train_split(tasks):
    """The training task's train split, built once (its preprocessors traced once)."""
    return seqio.get_mixture_or_task(tasks[0]).get_dataset(
        sequence_length=None, split="train", shuffle=False
    )


@pytest.fixture(scope="module")
def train_examples(train_split) -> list[dict[str, np.ndarray]]:
    return list(train_split.as_numpy_iterator())


@pytest.fixture(scope="module")
def scoring_examples(tasks) -> list[dict[str, np.ndarray]]:
    return _as_numpy(tasks[1], "validation")


# The TFDS builder


def test_fixture_has_no_unknown_tokens(vocab: WordPieceVocabulary) -> None:
    """Guard: the fixture text is fully in the tiny vocabulary, so ids are meaningful."""
    for record in TRAIN + DEV:
        assert vocab.unk_id not in _passage_ids(vocab, record["context"])
        for choice in record["choices"]:
            assert vocab.unk_id not in vocab.encode(choice)


def test_prepare_round_trips_records_in_file_order(data_dir: Path, tmp_path: Path) -> None:
    """prepare builds exactly the one split asked for; records come back unchanged, in order."""
    cache = str(tmp_path / "tfds")
    for split, records in (("train", TRAIN), ("validation", DEV)):
        tfds_dir = cmrc2019_tfds.prepare(str(data_dir), split, cache)
        assert tfds_dir.startswith(cache)
        builder = cmrc2019_tfds.Cmrc2019(data_dir=tfds_dir)
        assert builder.is_prepared()
        assert set(builder.info.splits) == {split}
        assert _read_split(tfds_dir, split) == records


def test_prepare_twice_reuses_cache(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second prepare of unchanged files returns the same dir and does not rebuild."""
    cache = str(tmp_path / "tfds")
    first = cmrc2019_tfds.prepare(str(data_dir), "validation", cache)

    def rebuild(*args, **kwargs):
        raise AssertionError("prepare rebuilt an already prepared dataset")

    monkeypatch.setattr(cmrc2019_tfds.Cmrc2019, "download_and_prepare", rebuild)
    assert cmrc2019_tfds.prepare(str(data_dir), "validation", cache) == first
    assert os.listdir(cache) == [os.path.basename(first)]


def test_prepare_changed_file_gets_new_dir(tmp_path: Path) -> None:
    """Editing a file (same size) or using another data dir gives a fresh, re-read copy."""
    data = _write_fixture(tmp_path / "data")
    cache = str(tmp_path / "tfds")
    first = cmrc2019_tfds.prepare(str(data), "validation", cache)
    edited = [dict(DEV[0], choices=["花开了", "星星很亮", "小河也笑了"]), DEV[1]]
    size = (data / "cmrc2019_dev.json").stat().st_size
    _write(data, "cmrc2019_dev.json", edited)
    assert (data / "cmrc2019_dev.json").stat().st_size == size  # only the content changed
    second = cmrc2019_tfds.prepare(str(data), "validation", cache)
    assert second != first
    assert _read_split(second, "validation") == edited
    assert _read_split(first, "validation") == DEV
    # Same files in another directory: another cache entry.
    other = _write_fixture(tmp_path / "other")
    _write(other, "cmrc2019_dev.json", edited)
    assert cmrc2019_tfds.prepare(str(other), "validation", cache) not in (first, second)


def test_prepare_test_split_without_answers(tmp_path: Path) -> None:
    """The qualifying file (no answers, or `"answers": []`) becomes the `test` split."""
    qualify = [
        {k: v for k, v in DEV[0].items() if k != "answers"},
        dict(DEV[1], answers=[]),
    ]
    _write(tmp_path / "data", "cmrc2019_qualify.json", qualify)
    tfds_dir = cmrc2019_tfds.prepare(str(tmp_path / "data"), "test", str(tmp_path / "tfds"))
    records = _read_split(tfds_dir, "test")
    assert [r["context_id"] for r in records] == ["DEV_2", "DEV_1"]
    assert [r["answers"] for r in records] == [[], []]
    assert set(cmrc2019_tfds.Cmrc2019(data_dir=tfds_dir).info.splits) == {"test"}


def test_missing_official_file_lists_all_names(tmp_path: Path) -> None:
    """A data dir without the split's file: MissingSplitError naming it and all four names."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "cmrc2019_dev.jsonl").write_text("{}", encoding="utf-8")  # not an official name
    with pytest.raises(cmrc2019_tfds.MissingSplitError) as excinfo:
        cmrc2019_tfds.prepare(str(data), "validation", str(tmp_path / "tfds"))
    assert excinfo.type is cmrc2019_tfds.MissingSplitError
    message = str(excinfo.value)
    assert str(data) in message
    for name in OFFICIAL_FILES:
        assert name in message
    assert issubclass(cmrc2019_tfds.MissingSplitError, FileNotFoundError)


def test_data_dir_not_a_directory(tmp_path: Path) -> None:
    """A data dir that does not exist: MissingSplitError naming it."""
    with pytest.raises(cmrc2019_tfds.MissingSplitError, match="nowhere is not a directory"):
        cmrc2019_tfds.prepare(str(tmp_path / "nowhere"), "train", str(tmp_path / "tfds"))


def test_require_split(data_dir: Path, tmp_path: Path) -> None:
    """require_split returns the file path, or names the missing official file."""
    assert cmrc2019_tfds.require_split(str(data_dir), "validation") == str(
        data_dir / "cmrc2019_dev.json"
    )
    with pytest.raises(cmrc2019_tfds.MissingSplitError, match=r"cmrc2019_qualify\.json"):
        cmrc2019_tfds.require_split(str(data_dir), "test")
    with pytest.raises(ValueError, match="unknown CMRC 2019 split 'dev'"):
        cmrc2019_tfds.require_split(str(data_dir), "dev")
    assert cmrc2019_tfds.available_splits(str(data_dir)) == ["train", "validation"]


def test_malformed_file_fails_prepare(tmp_path: Path) -> None:
    """A bad record stops the build with the DataFormatError itself (TFDS does not wrap it)."""
    data = _write_fixture(tmp_path / "data")
    bad = dict(DEV[1], answers=[0, 5])
    _write(data, "cmrc2019_dev.json", [DEV[0], bad])
    cache = str(tmp_path / "tfds")
    with pytest.raises(DataFormatError) as excinfo:
        cmrc2019_tfds.prepare(str(data), "validation", cache)
    assert excinfo.type is DataFormatError
    message = str(excinfo.value)
    assert str(data / "cmrc2019_dev.json") in message
    assert "record 1 (context_id 'DEV_1')" in message
    assert "field 'answers'" in message
    assert "index 5 is out of range for 2 choices" in message
    # Nothing half-built is taken for a prepared dataset: a retry fails the same way.
    with pytest.raises(DataFormatError, match="DEV_1"):
        cmrc2019_tfds.prepare(str(data), "validation", cache)
    # The train split's file is fine and does not depend on the dev file.
    assert _read_split(cmrc2019_tfds.prepare(str(data), "train", cache), "train") == TRAIN


def test_a_broken_unused_split_does_not_block_the_others(tmp_path: Path) -> None:
    """A malformed test file: train and validation still work; reading test fails clearly."""
    data = _write_fixture(tmp_path / "data")
    (data / "cmrc2019_qualify.json").write_text('{"data": [{"context_id": 1', encoding="utf-8")
    train_task, score_task = cmrc2019_tasks.register(
        "tiny_broken_test",
        TINY_VOCAB,
        {"cmrc2019": str(data)},
        max_length=MAX_LENGTH,
        doc_stride=DOC_STRIDE,
        max_candidate_tokens=MAX_CANDIDATE_TOKENS,
        tfds_cache_dir=str(tmp_path / "tfds"),
    )
    try:
        assert _as_numpy(train_task, "train")
        assert _as_numpy(score_task, "validation")
        with pytest.raises(DataFormatError, match=r"cmrc2019_qualify\.json: malformed JSON"):
            _as_numpy(score_task, "test")
        with pytest.raises(cmrc2019_tfds.MissingSplitError, match=r"cmrc2019_trial\.json"):
            _as_numpy(score_task, "trial")
    finally:
        for name in (train_task, score_task):
            seqio.TaskRegistry.remove(name)


# The SeqIO tasks


def test_register_names_and_mixture(tasks) -> None:
    """register returns cmrc2019_<vocab> and *_scoring, and the cmrc2019 mixture."""
    assert tasks == ["cmrc2019_tiny", "cmrc2019_tiny_scoring"]
    for name in tasks:
        task = seqio.get_mixture_or_task(name)
        assert isinstance(task, seqio.Task)
        assert isinstance(task.output_features["input_ids"].vocabulary, WordPieceVocabulary)
    mixture = seqio.get_mixture_or_task(cmrc2019_tasks.MIXTURE_NAME)
    assert [t.name for t in mixture.tasks] == ["cmrc2019_tiny"]


def test_register_another_vocabulary(tasks, data_dir: Path, cache_dir: str) -> None:
    """The same helper registers cmrc2019_other; same vocab file -> same examples."""
    kwargs = dict(
        max_length=MAX_LENGTH,
        doc_stride=DOC_STRIDE,
        max_candidate_tokens=MAX_CANDIDATE_TOKENS,
        tfds_cache_dir=cache_dir,
    )
    names = cmrc2019_tasks.register("other", TINY_VOCAB, {"cmrc2019": str(data_dir)}, **kwargs)
    try:
        assert names == ["cmrc2019_other", "cmrc2019_other_scoring"]
        assert seqio.get_mixture_or_task("cmrc2019_tiny")  # the first registration survives
        mixture = seqio.get_mixture_or_task(cmrc2019_tasks.MIXTURE_NAME)
        assert [t.name for t in mixture.tasks] == ["cmrc2019_other"]
        seqio_test_utils.assert_datasets_eq(
            seqio.get_mixture_or_task("cmrc2019_other").get_dataset(
                sequence_length=None, split="validation", shuffle=False
            ),
            seqio.get_mixture_or_task("cmrc2019_tiny").get_dataset(
                sequence_length=None, split="validation", shuffle=False
            ),
        )
    finally:  # the mixture points at the tiny tasks again, whatever the test order
        cmrc2019_tasks.register("tiny", TINY_VOCAB, {"cmrc2019": str(data_dir)}, **kwargs)


def test_hand_written_example(tasks, vocab: WordPieceVocabulary) -> None:
    """One tiny passage injected into both tasks gives exactly the hand-written windows."""
    raw = {
        "context_id": "HAND_0",
        "context": "他[BLANK1]。",
        "choices": ["笑了", "哭了"],
        "answers": [1],
    }
    t = vocab.token_to_id
    pad = [0] * (MAX_LENGTH - 8)
    blanks = [0] * (MAX_BLANKS - 1)

    def window(choice: str, extra: dict[str, int]) -> dict[str, Any]:
        return {
            "input_ids": [t("[CLS]"), t(choice[0]), t(choice[1]), t("[SEP]"), t("他")]
            + [t("[unused1]"), t("。"), t("[SEP]")]
            + pad,
            "token_type_ids": [0, 0, 0, 0, 1, 1, 1, 1] + pad,
            "input_mask": [1] * 8 + pad,
            "blank_positions": [5] + blanks,
            "blank_in_window": [1] + blanks,
            "blank_is_max_context": [1] + blanks,
            "context_id": "HAND_0",
            "num_blanks": 1,
            "num_choices": 2,
            **extra,
        }

    expected = {
        tasks[0]: [window("哭了", {"target_blank": 0})],
        tasks[1]: [window("笑了", {"choice_index": 0}), window("哭了", {"choice_index": 1})],
    }
    for name, examples in expected.items():
        with seqio_test_utils.DataInjector(name, {"validation": raw}):
            dataset = seqio.get_mixture_or_task(name).get_dataset(
                sequence_length=None, split="validation", shuffle=False
            )
            seqio_test_utils.assert_dataset(dataset, examples)


def test_training_dataset(train_examples, vocab: WordPieceVocabulary) -> None:
    """One example per (blank, window holding it), gold candidate, fixed shapes, right target."""
    by_passage = collections.defaultdict(list)
    for ex in train_examples:
        by_passage[ex["context_id"].decode("utf-8")].append(ex)
    assert list(by_passage) == [r["context_id"] for r in TRAIN]  # file order kept
    total_windows = 0
    for record in TRAIN:
        examples = by_passage[record["context_id"]]
        passage = _passage_ids(vocab, record["context"])
        blank_tokens = _blank_tokens(vocab, passage, len(record["answers"]))
        expected_count = 0
        for k, choice in enumerate(record["answers"]):
            spans = _spans(passage, _candidate_ids(vocab, record["choices"][choice]))
            expected_count += sum(s.start <= blank_tokens[k] < s.start + s.length for s in spans)
        assert len(examples) == expected_count, record["context_id"]
        total_windows += len(_spans(passage, _candidate_ids(vocab, record["choices"][0])))
        for ex in examples:
            assert ex["input_ids"].shape == (MAX_LENGTH,)
            assert ex["token_type_ids"].shape == (MAX_LENGTH,)
            assert ex["input_mask"].shape == (MAX_LENGTH,)
            for key in ("blank_positions", "blank_in_window", "blank_is_max_context"):
                assert ex[key].shape == (MAX_BLANKS,), key
            target = int(ex["target_blank"])
            assert 0 <= target < len(record["answers"]) == int(ex["num_blanks"])
            assert int(ex["num_choices"]) == len(record["choices"])
            gold = record["choices"][record["answers"][target]]
            assert _candidate_of(ex["input_ids"], vocab.sep_id) == _candidate_ids(vocab, gold)
            assert ex["blank_in_window"][target] == 1
            marker = vocab.token_to_id(f"[unused{target + 1}]")
            assert ex["input_ids"][ex["blank_positions"][target]] == marker
    # The long passage really is windowed, so the counts above test something.
    assert len(train_examples) > sum(len(r["answers"]) for r in TRAIN)
    assert total_windows > len(TRAIN)


def test_training_dataset_element_spec(train_split) -> None:
    """The training task's features have fixed shapes: [max_length] and [max_blanks]."""
    spec = train_split.element_spec
    for key in ("input_ids", "token_type_ids", "input_mask"):
        assert spec[key].shape.as_list() == [MAX_LENGTH], key
    for key in ("blank_positions", "blank_in_window", "blank_is_max_context"):
        assert spec[key].shape.as_list() == [MAX_BLANKS], key
    for key in ("target_blank", "context_id", "num_blanks", "num_choices"):
        assert spec[key].shape.as_list() == [], key


def test_scoring_dataset_covers_every_candidate(
    scoring_examples, vocab: WordPieceVocabulary
) -> None:
    """Every candidate (the fake too) in every window; each blank scored once per candidate."""
    by_passage = collections.defaultdict(list)
    for ex in scoring_examples:
        by_passage[ex["context_id"].decode("utf-8")].append(ex)
    assert list(by_passage) == [r["context_id"] for r in DEV]
    for record in DEV:
        examples = by_passage[record["context_id"]]
        passage = _passage_ids(vocab, record["context"])
        num_blanks = len(record["answers"])
        expected_count = sum(
            len(_spans(passage, _candidate_ids(vocab, choice))) for choice in record["choices"]
        )
        assert len(examples) == expected_count
        choice_index = [int(ex["choice_index"]) for ex in examples]
        assert sorted(set(choice_index)) == list(range(len(record["choices"])))
        for choice in range(len(record["choices"])):
            rows = [ex for ex in examples if int(ex["choice_index"]) == choice]
            scored = np.stack([ex["blank_is_max_context"] for ex in rows])
            np.testing.assert_array_equal(scored[:, :num_blanks].sum(axis=0), [1] * num_blanks)
            for ex in rows:
                candidate = _candidate_of(ex["input_ids"], vocab.sep_id)
                assert candidate == _candidate_ids(vocab, record["choices"][choice])
                assert int(ex["num_blanks"]) == num_blanks
                assert int(ex["num_choices"]) == len(record["choices"])


def test_blank_logit_table_from_scoring_dataset(scoring_examples) -> None:
    """Random logits over the scoring examples fill every (candidate, blank) cell."""
    examples = _stack(scoring_examples)
    logits = np.random.default_rng(0).normal(size=(len(scoring_examples), MAX_BLANKS))
    table = evaluation.BlankLogitTable()
    table.add(logits, examples)
    table.check_complete()
    assert list(table.tables) == [r["context_id"] for r in DEV]
    for record in DEV:
        cells = table.tables[record["context_id"]]
        assert cells.shape == (len(record["choices"]), len(record["answers"]))
    # Each cell holds the logit of the window that scores it.
    for row, ex in enumerate(scoring_examples):
        for k in np.flatnonzero(ex["blank_is_max_context"]):
            cell = table.tables[ex["context_id"].decode("utf-8")][ex["choice_index"], k]
            assert cell == np.float32(logits[row, k])


def test_blank_logit_table_detects_dropped_window(scoring_examples) -> None:
    """Dropping a window that scores a blank leaves a cell empty: check_complete raises."""
    dropped = next(
        row for row, ex in enumerate(scoring_examples) if ex["blank_is_max_context"].any()
    )
    context_id = scoring_examples[dropped]["context_id"].decode("utf-8")
    kept = [ex for row, ex in enumerate(scoring_examples) if row != dropped]
    table = evaluation.BlankLogitTable()
    table.add(np.zeros((len(kept), MAX_BLANKS)), _stack(kept))
    with pytest.raises(RuntimeError, match=f"passage {context_id}: blanks"):
        table.check_complete()


def test_prepare_sees_a_same_size_edit_with_the_old_timestamp(tmp_path: Path) -> None:
    """The cache key is the content: `cp -p`-style edits (same size and mtime) are re-read."""
    data = _write_fixture(tmp_path / "data")
    cache = str(tmp_path / "tfds")
    path = data / "cmrc2019_dev.json"
    stat = path.stat()
    first = cmrc2019_tfds.prepare(str(data), "validation", cache)
    edited = [dict(DEV[0], choices=["花开了", "星星很亮", "小河也笑了"]), DEV[1]]
    _write(data, "cmrc2019_dev.json", edited)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    second = cmrc2019_tfds.prepare(str(data), "validation", cache)
    assert second != first and _read_split(second, "validation") == edited


def test_register_rejects_a_window_with_no_room_for_the_passage(data_dir: Path) -> None:
    with pytest.raises(ValueError, match="no room for the passage"):
        cmrc2019_tasks.register(
            "tiny",
            TINY_VOCAB,
            {"cmrc2019": str(data_dir)},
            max_length=64,
            max_candidate_tokens=64,
        )


def test_results_table_lists_every_mode() -> None:
    results = {f"{m}/{mode}": 12.5 for m in ("qac", "pac") for mode in evaluation.DECODING_MODES}
    table = evaluation.results_table(results, "validation").splitlines()
    assert table[0].split() == ["validation", "QAC", "PAC"]
    assert [line.split()[0] for line in table[1:]] == ["paper", "baseline", "assignment"]
    assert table[1].split()[1:] == ["12.50", "12.50"]
