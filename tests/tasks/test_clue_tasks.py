"""Tests for the `clue` TFDS builder and the CLUE classification SeqIO tasks, on fixture files.

The records are the tiny per-task lines of `test_clue_fixtures` (written under each task's
official file names) and the bundled AFQMC sample; token ids are checked against Hugging
Face's pure-Python BERT tokenizer on a small vocabulary laid out like bert-base-chinese.
"""

from __future__ import annotations

import doctest
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import seqio
import tensorflow as tf
import tensorflow_datasets as tfds
from seqio import test_utils as seqio_test_utils

import cmrcx.data
from cmrcx.benchmarks.clue import TASKS, DataFormatError, read_split
from cmrcx.benchmarks.clue.inputs import encoder_texts, truncate_seq_pair
from cmrcx.benchmarks.clue.submission import read_submission, write_submission
from cmrcx.common.errors import MissingSplitError
from cmrcx.datasets import clue as clue_tfds
from cmrcx.datasets import cmrc2019 as cmrc2019_tfds
from cmrcx.tasks.clue import classification as clue_tasks
from cmrcx.vocab import layouts
from cmrcx.vocab.wordpiece import WordPieceVocabulary
from tests.benchmarks.clue.test_clue_fixtures import FIXTURES, write_lines, write_task_dir

DATA = Path(cmrcx.data.__file__).parent
AFQMC_SAMPLE = DATA / "clue_sample" / "afqmc_public"
VOCABULARY_NAME = "cluetest"
MAX_LENGTH = 24
# Pairs written for these tests: truncation on either side and on ties, a text longer
# than any length used, mixed scripts, exotic spaces (U+2028, U+3000) and one character
# left out of the vocabulary ("鲸", so [UNK] is exercised).
EXTRA_PAIRS = [
    ("今天天气很好，我们去公园散步吧", "好的"),
    ("好的", "今天天气很好，我们去公园散步吧"),
    ("一二三四五六七八九十", "甲乙丙丁戊己庚辛壬癸"),
    ("一二三四五六七八九十" * 10, ""),
    ("Hello World 2019年的手机", "naïve café，测试！"),
    ("第一行\u2028第二行\u3000第三行", "鲸鱼在海里游"),
]


# --- Fixtures ---------------------------------------------------------------------------


def _write_all_splits(root: Path, task_name: str) -> Path:
    """A task folder with every split of the table: the labelled fixture lines in each."""
    directory = write_task_dir(root, task_name)
    split, records = FIXTURES[task_name]["labelled"]
    for other, name in TASKS[task_name].split_files.items():
        if other not in (split, "test"):
            write_lines(directory / name, records)
    return directory


def _cjk_chars(texts: list[str]) -> list[str]:
    return sorted({c for text in texts for c in text if "\u4e00" <= c <= "\u9fff"} - {"鲸"})


def _vocab_tokens(chars: list[str]) -> list[str]:
    """bert-base-chinese's layout ([PAD] 0, [unused1..99], [UNK] 100, [CLS] 101, [SEP] 102)."""
    tokens = ["[PAD]", *(f"[unused{i}]" for i in range(1, 100)), "[UNK]", "[CLS]", "[SEP]"]
    tokens += ["[MASK]", *(chr(c) for c in range(33, 127) if not chr(c).isalnum())]
    tokens += [*"，。！？；：、（）《》“”‘’…—～·_", *"0123456789", "2019", "##9", "##1"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens += [*chars, *letters, *(f"##{c}" for c in letters), "hello", "world", "cafe"]
    return list(dict.fromkeys(tokens))


@pytest.fixture(scope="module")
def data_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("clue_data")
    return {name: str(_write_all_splits(root, name)) for name in TASKS}


@pytest.fixture(scope="module")
def all_examples(data_dirs) -> list[tuple[str, str | None]]:
    """(text_a, text_b) of every fixture record of every task and of the bundled sample."""
    pairs = []
    for name, directory in data_dirs.items():
        for split in clue_tfds.available_splits(name, directory):
            pairs += [encoder_texts(name, ex) for ex in read_split(name, directory, split).examples]
    for split in ("train", "validation", "test"):
        split_records = read_split("clue_afqmc", AFQMC_SAMPLE, split)
        pairs += [encoder_texts("clue_afqmc", ex) for ex in split_records.examples]
    return pairs + EXTRA_PAIRS


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory: pytest.TempPathFactory, all_examples) -> str:
    chars = _cjk_chars([text for pair in all_examples for text in pair if text])
    path = tmp_path_factory.mktemp("clue_vocab") / "vocab.txt"
    path.write_text("\n".join(_vocab_tokens(chars)) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def vocab(vocab_file: str) -> WordPieceVocabulary:
    return WordPieceVocabulary(vocab_file)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("clue_tfds"))


def _register(vocab_file: str, data_dirs: dict[str, str], cache_dir: str) -> list[str]:
    return clue_tasks.register(
        VOCABULARY_NAME,
        vocab_file,
        data_dirs,
        max_length=MAX_LENGTH,
        tfds_cache_dir=cache_dir,
    )


@pytest.fixture(scope="module")
def tasks(vocab_file: str, data_dirs: dict[str, str], cache_dir: str):
    """Every table task registered once for the module; removed afterwards."""
    names = _register(vocab_file, data_dirs, cache_dir)
    yield names
    for name in names:
        seqio.TaskRegistry.remove(name)
    for mixture in clue_tasks.MIXTURE_NAMES:
        seqio.MixtureRegistry.remove(mixture)


@pytest.fixture
def other_registrations(tasks, vocab_file, data_dirs, cache_dir):
    """For tests that register more: the mixtures point at the module's tasks again after."""
    yield
    _register(vocab_file, data_dirs, cache_dir)


def _records(task: str, data_dir: str | Path, split: str, cache: str) -> list[dict[str, Any]]:
    """The prepared TFDS records of one split as plain Python values, in stored order."""
    dataset = clue_tfds.load_split(task, str(data_dir), split, cache)
    return [
        {k: v.decode("utf-8") if isinstance(v, bytes) else int(v) for k, v in ex.items()}
        for ex in tfds.as_numpy(dataset)
    ]


@pytest.fixture(scope="module")
def csl_test_split(tasks) -> tf.data.Dataset:
    """The CSL task's test split, built once (its preprocessors traced once) for the tests
    that read it."""
    return seqio.get_mixture_or_task("clue_csl_cluetest").get_dataset(
        sequence_length=None, split="test", shuffle=False
    )


def _task_examples(name: str, split: str) -> list[dict[str, Any]]:
    dataset = seqio.get_mixture_or_task(name).get_dataset(
        sequence_length=None, split=split, shuffle=False
    )
    return list(dataset.as_numpy_iterator())


# --- The TFDS builder -------------------------------------------------------------------


def test_one_config_per_table_row_and_download_instructions() -> None:
    configs = clue_tfds.Clue.BUILDER_CONFIGS
    assert [c.name for c in configs] == [name.removeprefix("clue_") for name in TASKS]
    assert [c.task for c in configs] == list(TASKS.values())
    instructions = clue_tfds.Clue.MANUAL_DOWNLOAD_INSTRUCTIONS
    for task in TASKS.values():
        assert f"{task.public_dir}.zip" in instructions
        assert f"https://storage.googleapis.com/cluebenchmark/tasks/{task.public_dir}.zip" in (
            instructions
        )
        for name in task.split_files.values():
            assert name in instructions


def test_every_task_builds_each_split_from_its_official_file(data_dirs, cache_dir) -> None:
    """Records come back as the reader and the baseline's input construction give them."""
    for name, directory in data_dirs.items():
        task = TASKS[name]
        assert clue_tfds.available_splits(name, directory) == list(task.split_files)
        for split in task.split_files:
            official = read_split(task, directory, split).examples
            expected = []
            for ex in official:
                text_a, text_b = encoder_texts(task, ex)
                expected.append(
                    {
                        "id": json.dumps(ex.id, ensure_ascii=False),
                        "line_number": ex.line_number,
                        "text_a": text_a,
                        "text_b": text_b or "",
                        "label": ex.label or "",
                        "label_index": task.labels.index(ex.label) if ex.label else -1,
                    }
                )
            assert _records(name, directory, split, cache_dir) == expected, (name, split)
            tfds_dir = clue_tfds.prepare(name, directory, split, cache_dir)
            builder = clue_tfds.Clue(config=clue_tfds.config_name(task), data_dir=tfds_dir)
            assert set(builder.info.splits) == {split}  # one split per prepared copy


def test_baseline_texts_reach_the_records(data_dirs, cache_dir) -> None:
    """Spot checks written by hand: WSC marking, CSL keywords, single sentences, ids."""
    wsc = _records("clue_cluewsc11", data_dirs["clue_cluewsc11"], "validation", cache_dir)
    assert [(r["id"], r["text_a"], r["text_b"], r["label"]) for r in wsc] == [
        ("7", "小王把书给了_小李_，因为[他]要出门。", "", "true"),
        ("9", "[他]说_小李_明天来。", "", "false"),
    ]
    csl = _records("clue_csl", data_dirs["clue_csl"], "test", cache_dir)
    assert [(r["id"], r["text_a"], r["label"], r["label_index"]) for r in csl] == [
        ("2415", "土壤湿度 产量", "", -1),
        ("2416", "在线课程", "", -1),
    ]
    tnews = _records("clue_tnews10", data_dirs["clue_tnews10"], "test", cache_dir)
    assert [(r["text_a"], r["text_b"]) for r in tnews] == [
        ("小城夜市重新开张", ""),
        ("今年的新茶价格上涨", ""),
    ]
    diagnostics = _records("clue_diagnostics", data_dirs["clue_diagnostics"], "test", cache_dir)
    assert diagnostics[1]["label"] == "contradiction" and diagnostics[1]["label_index"] == 0
    assert clue_tfds.record_id(csl[0]["id"]) == 2415
    assert clue_tfds.record_id('"a7"') == "a7"


def test_bundled_afqmc_sample(cache_dir) -> None:
    splits = TASKS["clue_afqmc"].split_files
    sizes = {s: clue_tfds.num_examples("clue_afqmc", AFQMC_SAMPLE, s, cache_dir) for s in splits}
    assert sizes == {"train": 40, "validation": 16, "test": 16}
    test = _records("clue_afqmc", AFQMC_SAMPLE, "test", cache_dir)
    assert [r["id"] for r in test] == [str(i) for i in range(16)]
    assert {r["label_index"] for r in test} == {-1}
    dev = _records("clue_afqmc", AFQMC_SAMPLE, "validation", cache_dir)
    assert all(r["label_index"] == int(r["label"]) for r in dev)
    assert [r["line_number"] for r in dev] == list(range(1, 17))


def test_unlabelled_rows_are_skipped_and_counted(tmp_path: Path, capsys) -> None:
    """OCNLI's "-" rows: dropped, their ids kept, and the summary line printed."""
    records = FIXTURES["clue_ocnli"]["labelled"][1]
    directory = tmp_path / "ocnli_public"
    no_majority = dict(records[0], label="-")
    path = write_lines(
        directory / "train.50k.json", [records[0], no_majority, *records, no_majority]
    )
    cache = str(tmp_path / "tfds")
    kept = _records("clue_ocnli", directory, "train", cache)
    assert [r["line_number"] for r in kept] == [1, 3, 4, 5]
    assert [r["id"] for r in kept] == ["0", "2", "3", "4"]  # no id field: the line index
    summary = read_split("clue_ocnli", directory, "train").summary()
    assert summary == f"{path}: 4 examples, 2 skipped (label '-': no majority label)"
    assert summary in capsys.readouterr().out
    assert clue_tfds.skipped_ids("clue_ocnli", str(directory), "train", cache) == [1, 5]
    assert clue_tfds.num_examples("clue_ocnli", str(directory), "train", cache) == 4
    # Test files are read unlabelled: "-" is not special there.
    assert clue_tfds.skipped_ids("clue_afqmc", str(AFQMC_SAMPLE), "test", cache) == []


def test_line_separator_inside_iflytek_text(data_dirs, cache_dir) -> None:
    """U+2028 is text, not a line break: two records, the character kept in the sentence."""
    dev = _records("clue_iflytek", data_dirs["clue_iflytek"], "validation", cache_dir)
    assert [r["text_a"] for r in dev] == [
        "一键叫车，司机几分钟就到",
        "记录每天的心情\u2028支持导出日记",
    ]
    assert [r["label"] for r in dev] == ["0", "118"]


def test_malformed_dev_file_does_not_block_train(
    tmp_path: Path, vocab_file: str, other_registrations
) -> None:
    """The reader's error comes through TFDS and SeqIO unwrapped; train still builds."""
    directory = Path(_write_all_splits(tmp_path, "clue_afqmc"))
    good = FIXTURES["clue_afqmc"]["labelled"][1]
    dev = write_lines(directory / "dev.json", [good[0], {"sentence1": "怎么还款", "label": "1"}])
    cache = str(tmp_path / "tfds")
    with pytest.raises(DataFormatError) as excinfo:
        clue_tfds.prepare("clue_afqmc", str(directory), "validation", cache)
    assert excinfo.type is DataFormatError
    assert str(excinfo.value) == f"{dev}: line 2: field 'sentence2': missing"
    assert len(_records("clue_afqmc", directory, "train", cache)) == 2
    names = clue_tasks.register(
        "broken_dev",
        vocab_file,
        {"clue_afqmc": str(directory)},
        tfds_cache_dir=cache,
    )
    try:
        assert len(_task_examples(names[0], "train")) == 2
        with pytest.raises(DataFormatError) as excinfo:  # nothing half-built was kept
            _task_examples(names[0], "validation")
        assert excinfo.type is DataFormatError
        assert f"{dev}: line 2: field 'sentence2'" in str(excinfo.value)
    finally:
        seqio.TaskRegistry.remove(names[0])


def test_missing_file_names_it_and_the_official_zip(tmp_path: Path, cache_dir: str) -> None:
    directory = write_task_dir(tmp_path, "clue_tnews10")
    (directory / "test1.0.json").unlink()
    with pytest.raises(MissingSplitError) as excinfo:
        clue_tfds.prepare("clue_tnews10", str(directory), "test", cache_dir)
    message = str(excinfo.value)
    for part in ("'test'", "test1.0.json", str(directory), "tnews_public.zip", "cluebenchmark"):
        assert part in message
    with pytest.raises(MissingSplitError, match="nowhere is not a directory"):
        clue_tfds.prepare("clue_afqmc", str(tmp_path / "nowhere"), "validation", cache_dir)
    with pytest.raises(ValueError, match="clue_diagnostics has no 'validation' split; it has test"):
        clue_tfds.prepare("clue_diagnostics", str(directory), "validation", cache_dir)


def test_cache_is_keyed_by_content_task_and_split(tmp_path: Path, monkeypatch) -> None:
    directory = _write_all_splits(tmp_path, "clue_tnews11")
    cache = str(tmp_path / "tfds")
    first = clue_tfds.prepare("clue_tnews11", str(directory), "validation", cache)
    # The same file for TNEWS 1.0 and for another split: other copies.
    others = {
        clue_tfds.prepare("clue_tnews10", str(directory), "validation", cache),
        clue_tfds.prepare("clue_tnews11", str(directory), "train", cache),
    }
    assert first not in others and len(others) == 2

    def rebuild(*args, **kwargs):
        raise AssertionError("an already prepared split was built again")

    with monkeypatch.context() as patch:
        patch.setattr(clue_tfds.Clue, "download_and_prepare", rebuild)
        assert clue_tfds.prepare("clue_tnews11", str(directory), "validation", cache) == first
    records = FIXTURES["clue_tnews11"]["labelled"][1]
    write_lines(directory / "dev.json", [dict(records[0], label="104"), records[1]])
    second = clue_tfds.prepare("clue_tnews11", str(directory), "validation", cache)
    assert second != first
    labels = [r["label"] for r in _records("clue_tnews11", directory, "validation", cache)]
    assert labels == ["104", "116"]


def test_content_keyed_dir_is_the_cmrc2019_key(tmp_path: Path) -> None:
    """The shared helper gives cmrc2019.prepare's folder: moving it there keeps the caches."""
    sample = DATA / "cmrc2019_sample"
    cache = str(tmp_path / "tfds")
    prepared = cmrc2019_tfds.prepare(str(sample), "validation", cache)
    path = str(sample / "cmrc2019_dev.json")
    key = (str(sample.resolve()), "validation")
    assert clue_tfds.content_keyed_dir(cache, "cmrc2019-validation", key, path) == prepared


def test_prepare_once_accepts_a_copy_another_process_finished(tmp_path: Path) -> None:
    """FileExistsError from a lost rename race is fine once the copy is whole."""
    checks = []

    class RacingBuilder:
        def __init__(self, data_dir: str, **kwargs):
            self.kwargs = kwargs

        def is_prepared(self) -> bool:
            checks.append(self.kwargs)
            return len(checks) > 1  # the other process finished while this one built

        def download_and_prepare(self, download_config) -> None:
            assert self.kwargs == {"split": "validation"}
            assert download_config.manual_dir == "DATA"
            raise FileExistsError("renamed into place by another process")

    clue_tfds.prepare_once(RacingBuilder, str(tmp_path), "DATA", split="validation")
    assert checks == [{}, {}]  # checked before building and after the race

    class BrokenBuilder(RacingBuilder):
        def is_prepared(self) -> bool:
            return False  # not whole after all: the error stands

    with pytest.raises(FileExistsError):
        clue_tfds.prepare_once(BrokenBuilder, str(tmp_path), "DATA", split="validation")


# --- The SeqIO tasks: inputs ------------------------------------------------------------


def _runner_features(ids_a: list[int], ids_b: list[int], max_length: int) -> dict[str, list]:
    """The BERT runner's ``convert_single_example`` in Python ([RUN] in the CLUE table)."""
    tokens_a, tokens_b = list(ids_a), list(ids_b) or None
    if tokens_b:
        truncate_seq_pair(tokens_a, tokens_b, max_length - 3)
    elif len(tokens_a) > max_length - 2:
        tokens_a = tokens_a[: max_length - 2]
    input_ids = [101, *tokens_a, 102]
    type_ids = [0] * len(input_ids)
    if tokens_b:
        input_ids += [*tokens_b, 102]
        type_ids += [1] * (len(tokens_b) + 1)
    padding = [0] * (max_length - len(input_ids))
    return {
        "input_ids": input_ids + padding,
        "token_type_ids": type_ids + padding,
        "input_mask": [1] * len(input_ids) + padding,
    }


def test_kept_lengths_equal_truncate_seq_pair() -> None:
    """The closed form against the runner's pop loop, for every small pair of lengths."""
    sizes = np.arange(15)
    len_a, len_b = (x.ravel() for x in np.meshgrid(sizes, sizes))
    for max_length in range(3, 19):
        kept_a, kept_b = (
            n.numpy().tolist() for n in clue_tasks.kept_lengths(len_a, len_b, max_length)
        )
        expected = []
        for n_a, n_b in zip(len_a.tolist(), len_b.tolist(), strict=True):
            a, b = list(range(n_a)), list(range(n_b))
            if b:
                truncate_seq_pair(a, b, max_length - 3)
            expected.append((len(a[: max_length - 2]), len(b)))
        assert list(zip(kept_a, kept_b, strict=True)) == expected, max_length


def test_framing_equals_the_runner_for_all_small_lengths() -> None:
    """[CLS] a [SEP] (b [SEP]), types, mask and padding, down to max_length 3."""
    pairs = [
        (list(range(200, 200 + n_a)), list(range(300, 300 + n_b)))
        for n_a in range(7)
        for n_b in range(7)
    ]
    for max_length in range(3, 11):
        dataset = tf.data.Dataset.from_generator(
            lambda: (
                {"ids_a": a, "ids_b": b, "label_index": 0, "id": "", "line_number": 0}
                for a, b in pairs
            ),
            output_signature={
                "ids_a": tf.TensorSpec([None], tf.int32),
                "ids_b": tf.TensorSpec([None], tf.int32),
                "label_index": tf.TensorSpec([], tf.int32),
                "id": tf.TensorSpec([], tf.string),
                "line_number": tf.TensorSpec([], tf.int32),
            },
        )
        framed = clue_tasks.classification_inputs(
            dataset, layout=layouts.BERT, max_length=max_length, ids=layouts.SpecialIds(101, 102, 0)
        )
        for (a, b), ex in zip(pairs, framed.as_numpy_iterator(), strict=True):
            expected = _runner_features(a, b, max_length)
            actual = {k: ex[k].tolist() for k in expected}
            assert actual == expected, (len(a), len(b), max_length)


def _encode_pairs(vocab, pairs, max_length: int) -> list[dict[str, np.ndarray]]:
    """The registered tasks' two preprocessors over (text_a, text_b) pairs."""
    dataset = tf.data.Dataset.from_tensor_slices(
        {
            "text_a": [a for a, _ in pairs],
            "text_b": [b or "" for _, b in pairs],
            "label_index": np.zeros(len(pairs), np.int32),
            "id": [""] * len(pairs),
            "line_number": np.zeros(len(pairs), np.int32),
        }
    )
    dataset = clue_tasks.tokenize_pair(dataset, vocab)
    dataset = clue_tasks.classification_inputs(
        dataset, layout=layouts.BERT, max_length=max_length, ids=layouts.BERT.special_ids(vocab)
    )
    return list(dataset.as_numpy_iterator())


def _hugging_face_tokenizer(vocab_file: str):
    transformers = pytest.importorskip("transformers")
    cls = getattr(transformers, "BertTokenizerLegacy", None) or transformers.BertTokenizer
    markers = [f"[unused{i}]" for i in range(1, 100)]
    return cls(
        vocab_file,
        do_lower_case=True,
        tokenize_chinese_chars=True,
        additional_special_tokens=markers,
    )


def test_token_ids_match_hugging_face(all_examples, vocab, vocab_file) -> None:
    """`tokenizer(text_a, text_b, truncation='longest_first', max_length=L)`, every text."""
    reference = _hugging_face_tokenizer(vocab_file)
    lengths = {max_length: 0 for max_length in (12, MAX_LENGTH, 96)}
    for max_length in lengths:
        ours = _encode_pairs(vocab, all_examples, max_length)
        for (text_a, text_b), ex in zip(all_examples, ours, strict=True):
            theirs = reference(
                text_a,
                text_b or None,
                truncation="longest_first",
                max_length=max_length,
                padding="max_length",
                return_token_type_ids=True,
            )
            assert ex["input_ids"].tolist() == theirs["input_ids"], (text_a, text_b, max_length)
            assert ex["token_type_ids"].tolist() == theirs["token_type_ids"], (text_a, text_b)
            assert ex["input_mask"].tolist() == theirs["attention_mask"], (text_a, text_b)
            full = len(reference.tokenize(text_a)) + len(reference.tokenize(text_b or ""))
            lengths[max_length] += full + (3 if text_b else 2) > max_length
    # The texts exercise truncation at the short lengths and none at the longest but one.
    assert lengths[12] > 20 and lengths[MAX_LENGTH] > 5 and lengths[96] == 1
    unknown = [a for a, b in all_examples if vocab.unk_id in vocab.encode(a + (b or ""))]
    assert unknown == ["第一行\u2028第二行\u3000第三行"]  # its pair's "鲸" only


def test_an_empty_second_text_is_a_single_sentence(vocab) -> None:
    """text_b without tokens ("", spaces) gives [CLS] a [SEP] with max_length - 2 of a."""
    text_a = "一二三四五六七八九十"
    ids_a = vocab.encode(text_a)
    for text_b in ("", "  \u3000"):
        (ex,) = _encode_pairs(vocab, [(text_a, text_b)], 8)
        assert ex["input_ids"].tolist() == _runner_features(ids_a, [], 8)["input_ids"]
        assert ex["input_ids"].tolist() == [vocab.cls_id, *ids_a[:6], vocab.sep_id]


def test_hand_written_example(tasks, vocab) -> None:
    """One AFQMC record injected into the task gives exactly these features."""
    raw = {
        "id": "7",
        "line_number": 3,
        "text_a": "怎么还款",
        "text_b": "如何还钱",
        "label": "1",
        "label_index": 1,
    }
    t = vocab.token_to_id
    padding = [0] * (MAX_LENGTH - 11)
    expected = {
        "input_ids": [t("[CLS]"), t("怎"), t("么"), t("还"), t("款"), t("[SEP]")]
        + [t("如"), t("何"), t("还"), t("钱"), t("[SEP]")]
        + padding,
        "token_type_ids": [0] * 6 + [1] * 5 + padding,
        "input_mask": [1] * 11 + padding,
        "label": 1,
        "id": b"7",
        "line_number": 3,
    }
    actual = seqio_test_utils.test_preprocessing_single("clue_afqmc_cluetest", {"validation": raw})
    expected = {k: np.asarray(v) if isinstance(v, list) else v for k, v in expected.items()}
    seqio_test_utils.assert_dict_values_equal(actual, expected)


def test_task_datasets_keep_file_order_ids_and_labels(tasks, vocab, csl_test_split) -> None:
    assert tasks == [f"{name}_{VOCABULARY_NAME}" for name in TASKS]
    task = seqio.get_mixture_or_task("clue_csl_cluetest")
    assert [p.func for p in task.preprocessors] == [
        clue_tasks.tokenize_pair,
        clue_tasks.classification_inputs,
    ]
    spec = csl_test_split.element_spec
    for key in ("input_ids", "token_type_ids", "input_mask"):
        assert spec[key].shape.as_list() == [MAX_LENGTH], key
    assert [spec[key].shape.as_list() for key in ("label", "id", "line_number")] == [[]] * 3
    test = list(csl_test_split.as_numpy_iterator())
    assert [(ex["id"], ex["line_number"], ex["label"]) for ex in test] == [
        (b"2415", 1, -1),
        (b"2416", 2, -1),
    ]
    dev = _task_examples("clue_tnews11_cluetest", "validation")
    task = seqio.get_mixture_or_task("clue_tnews11_cluetest")
    labels = [task.postprocess_fn(None, example=ex, is_target=True) for ex in dev]
    assert labels == [r["label"] for r in FIXTURES["clue_tnews11"]["labelled"][1]]
    # The task's ids are the preprocessors' on the file's texts (and so HF's, tested above).
    texts = [(r["sentence"], None) for r in FIXTURES["clue_tnews11"]["labelled"][1]]
    for ex, reference in zip(dev, _encode_pairs(vocab, texts, MAX_LENGTH), strict=True):
        assert ex["input_ids"].tolist() == reference["input_ids"].tolist()


def test_label_round_trip_and_metric(tasks) -> None:
    """Class index -> official label string, for every class of every task; accuracy."""
    for name in tasks:
        row = TASKS[name.removesuffix(f"_{VOCABULARY_NAME}")]
        task = seqio.get_mixture_or_task(name)
        predictions = [task.postprocess_fn(np.int64(i)) for i in range(row.num_classes)]
        assert predictions == list(row.labels)
        targets = [
            task.postprocess_fn(None, example={"label": np.int32(i)}, is_target=True)
            for i in range(row.num_classes)
        ]
        assert targets == list(row.labels)
        (metric,) = task.metric_fns
        assert metric(targets, predictions) == {"accuracy": 100.0}
        assert metric(targets, predictions[::-1])["accuracy"] < 100.0
    task = seqio.get_mixture_or_task("clue_tnews11_cluetest")
    assert task.postprocess_fn(5) == "106"  # 105 does not exist
    with pytest.raises(ValueError, match="no label"):
        task.postprocess_fn(None, example={"label": -1}, is_target=True)
    with pytest.raises(ValueError, match=r"class index 15 is not in \[0, 15\)"):
        task.postprocess_fn(15)


def test_submission_from_the_test_split(tasks, csl_test_split, tmp_path: Path) -> None:
    """Test-split ids + predicted labels -> the official file, ids as in test.json."""
    test = list(csl_test_split.as_numpy_iterator())
    task = seqio.get_mixture_or_task("clue_csl_cluetest")
    ids = [clue_tfds.record_id(ex["id"]) for ex in test]
    labels = [task.postprocess_fn(i) for i in (1, 0)]
    path = write_submission("clue_csl", tmp_path, ids, labels)
    assert path.name == "csl_predict.json"
    assert [(p.id, p.label) for p in read_submission("clue_csl", path)] == [
        (2415, "1"),
        (2416, "0"),
    ]


# --- Mixtures and registration ----------------------------------------------------------


def test_mixtures_rate_tasks_by_training_examples(tasks) -> None:
    for mixture_name in clue_tasks.MIXTURE_NAMES:
        mixture = seqio.get_mixture_or_task(mixture_name)
        assert sorted(t.name for t in mixture.tasks) == sorted(tasks)
        rates = {
            t.name.removesuffix(f"_{VOCABULARY_NAME}"): mixture.get_rate(t) for t in mixture.tasks
        }
        assert rates["clue_afqmc"] == 2.0 and rates["clue_cmnli"] == 3.0
        # Two versions read one train.json: each gets half, so TNEWS counts once.
        assert rates["clue_tnews10"] == rates["clue_tnews11"] == 1.0
        assert rates["clue_diagnostics"] == 0.0  # no training data
    mixture = seqio.get_mixture_or_task("clue")
    dataset = mixture.get_dataset(sequence_length=None, split="train", shuffle=False, num_epochs=1)
    assert set(dataset.element_spec) == {"input_ids", "token_type_ids", "input_mask", "label"}
    examples = list(dataset.take(8).as_numpy_iterator())
    assert len(examples) == 8
    assert all(ex["input_ids"].shape == (MAX_LENGTH,) and ex["label"] >= 0 for ex in examples)


def test_only_tasks_with_a_data_dir_are_registered(
    tmp_path, vocab_file, other_registrations
) -> None:
    missing = str(tmp_path / "not_unpacked_yet")  # registration reads nothing
    names = clue_tasks.register("partial", vocab_file, {"clue_iflytek": missing})
    try:
        assert names == ["clue_iflytek_partial"]
        assert "clue_afqmc_partial" not in seqio.TaskRegistry.names()
        assert [t.name for t in seqio.get_mixture_or_task("clue").tasks] == names
        with pytest.raises(MissingSplitError, match="not_unpacked_yet is not a directory"):
            _task_examples(names[0], "validation")
        # Registering again without the row removes its task.
        names = clue_tasks.register("partial", vocab_file, {"clue_csl": missing})
        assert "clue_iflytek_partial" not in seqio.TaskRegistry.names()
    finally:
        for name in ("clue_iflytek_partial", "clue_csl_partial"):
            seqio.TaskRegistry.remove(name)
    with pytest.raises(KeyError, match="unknown CLUE task 'afqmc'"):
        clue_tasks.register("bad", vocab_file, {"afqmc": missing})
    with pytest.raises(ValueError, match="no data dirs"):
        clue_tasks.register("bad", vocab_file, {})
    with pytest.raises(ValueError, match="max_length 2"):
        clue_tasks.register("bad", vocab_file, {"clue_csl": missing}, max_length=2)


def test_docstring_examples() -> None:
    assert doctest.testmod(clue_tasks, raise_on_error=True).attempted > 0


def test_task_max_length_defaults(tmp_path, vocab_file, other_registrations) -> None:
    """128 for every task by default; None takes the table's (CSL 256, paper Table 7)."""
    dirs = {"clue_csl": str(tmp_path), "clue_afqmc": str(tmp_path)}
    for max_length, expected in ((128, {"clue_csl": 128, "clue_afqmc": 128}), (None, None)):
        names = clue_tasks.register("lengths", vocab_file, dirs, max_length=max_length)
        try:
            got = {
                name.removesuffix("_lengths"): seqio.get_mixture_or_task(name)
                .preprocessors[1]
                .keywords["max_length"]
                for name in names
            }
            assert got == (expected or {"clue_csl": 256, "clue_afqmc": 128})
        finally:
            for name in names:
                seqio.TaskRegistry.remove(name)
    assert os.listdir(tmp_path) == []  # nothing was read or written
