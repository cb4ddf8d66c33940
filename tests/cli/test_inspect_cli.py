"""`python -m cmrcx.inspect`, run in-process on the bundled samples and tiny vocabulary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cmrcx import inspect
from cmrcx.cli import launch
from cmrcx.training import inspection


@pytest.fixture(scope="module")
def tfds_cache(tmp_path_factory):
    """One TFDS cache for the module: each sample split is prepared once."""
    return tmp_path_factory.mktemp("tfds")


def _flags(gin_file: str, tmp_path, tfds_cache) -> list[str]:
    """The run's flags, with --json: the raw features these tests check."""
    return [
        "--json",
        f"--gin_file={gin_file}",
        f"--gin.MODEL_DIR='{tmp_path}/run'",
        f"--gin.RunConfig.tfds_cache_dir='{tfds_cache}'",
    ]


def _lines(capsys) -> list[dict]:
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines()]


def test_cmrc2019_training_windows(tmp_path, tfds_cache, capsys):
    inspect.main(["cmrc2019", "--n", "3", *_flags("cmrc2019_tiny.gin", tmp_path, tfds_cache)])
    lines = _lines(capsys)  # stdout holds nothing but the JSON lines
    assert len(lines) == 3
    for line in lines:
        tokens = line["input_ids_text"].split(" ")
        assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "[PAD]" not in tokens
        assert any(t.startswith("[unused") for t in tokens)  # a blank marker
        assert len(line["input_ids"]) == len(tokens) == sum(line["input_mask"])
        assert "target_blank" in line and isinstance(line["context_id"], str)


def test_cmrc2019_scoring_windows(tmp_path, tfds_cache, capsys):
    flags = _flags("cmrc2019_tiny.gin", tmp_path, tfds_cache)
    inspect.main(["cmrc2019", "--scoring", "--n", "2", *flags])
    lines = _lines(capsys)
    assert len(lines) == 2
    assert all("choice_index" in line and "target_blank" not in line for line in lines)
    assert lines[0]["input_ids_text"].startswith("[CLS] ")
    # The scoring task by its SeqIO name is the same thing.
    inspect.main(["cmrc2019_tiny_scoring", "--n", "2", *flags])
    assert _lines(capsys) == lines


def test_clue_afqmc_sentence_pair_and_label(tmp_path, tfds_cache, capsys):
    flags = _flags("clue_afqmc_tiny.gin", tmp_path, tfds_cache)
    inspect.main(["clue_afqmc", "--n", "2", *flags])
    lines = _lines(capsys)
    assert len(lines) == 2
    inspect.main(["AFQMC", "--n", "2", *flags])  # the paper's name of the run's task
    assert _lines(capsys) == lines
    for line in lines:
        assert line["input_ids_text"].startswith("[CLS] ")
        assert line["input_ids_text"].count("[SEP]") == 2  # [CLS] a [SEP] b [SEP]
        assert line["label"] in (0, 1)
        assert len(line["token_type_ids"]) == len(line["input_ids"])


def test_unknown_name_lists_the_run_names(tmp_path, tfds_cache, capsys):
    flags = _flags("clue_afqmc_tiny.gin", tmp_path, tfds_cache)
    with pytest.raises(SystemExit) as exit_info:
        launch.main_guard(inspect.main, ["clue_nope", *flags])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()[-1:]
    assert "'clue_nope'" in line and "clue_afqmc, clue_afqmc_tiny" in line


def test_example_json_trims_with_the_mask():
    example = {
        "input_ids": np.array([2, 5, 3, 0, 0], np.int32),
        "input_mask": np.array([1, 1, 1, 0, 0], np.int32),
        "blank_positions": np.array([1, 0], np.int32),
        "context_id": b"DEV_1",
        "label": np.int32(1),
    }
    got = inspection.example_json(example, {})
    assert got == {
        "input_ids": [2, 5, 3],
        "input_mask": [1, 1, 1],
        "blank_positions": [1, 0],
        "context_id": "DEV_1",
        "label": 1,
    }
    assert inspection.example_json(example, {}, trim=False)["input_ids"] == [2, 5, 3, 0, 0]


def test_each_feature_is_cut_by_its_own_mask():
    example = {  # LongLM's padded features: inputs and targets of one width
        "inputs": np.array([7, 9, 1, 0], np.int32),
        "targets": np.array([4, 1, 0, 0], np.int32),
        "inputs_mask": np.array([1, 1, 1, 0], np.int32),
        "targets_mask": np.array([1, 1, 0, 0], np.int32),
    }
    assert inspection.mask_lengths(example) == {
        "inputs": 3,
        "inputs_mask": 3,
        "targets": 2,
        "targets_mask": 2,
    }


def test_multiple_choice_examples_show_one_text_per_choice(tmp_path, tfds_cache, capsys):
    inspect.main(["clue_c311", "--n", "1", *_flags("clue_c311_tiny.gin", tmp_path, tfds_cache)])
    (line,) = _lines(capsys)
    texts = line["input_ids_text"]
    assert len(texts) == len(line["choice_mask"]) == 4
    for text, real in zip(texts, line["choice_mask"], strict=True):
        tokens = text.split(" ")
        # [CLS] context [SEP] question [SEP] choice [SEP]; a padded choice is its filler.
        assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 3 and "[PAD]" not in tokens
        assert real in (0, 1)


def test_span_windows_show_question_and_passage(tmp_path, tfds_cache, capsys):
    flags = _flags("clue_cmrc2018_tiny.gin", tmp_path, tfds_cache)
    inspect.main(["clue_cmrc2018", "--split", "train", "--n", "1", *flags])
    (line,) = _lines(capsys)
    tokens = line["input_ids_text"].split(" ")
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2 and tokens[-1] == "[SEP]"
    start, end = line["start_position"], line["end_position"]
    assert 0 < start <= end < len(tokens)  # a training window holding its answer


def test_the_default_view_is_readable(tmp_path, tfds_cache, capsys):
    flags = [f for f in _flags("clue_afqmc_tiny.gin", tmp_path, tfds_cache) if f != "--json"]
    inspect.main(["clue_afqmc", "--n", "2", *flags])
    out = capsys.readouterr().out
    blocks = out.split("example ")[1:]
    assert len(blocks) == 2 and blocks[0].startswith("1 (clue_afqmc_tiny, validation)\n")
    lines = blocks[0].splitlines()
    (tokens,) = [x for x in lines if x.startswith("  input_ids (")]
    count, text = tokens.split(" tokens): ")
    assert text.startswith("[CLS] ") and len(text.split(" ")) == int(count.split("(")[1])
    assert not any("_text" in x for x in lines) and "  label: " in blocks[0]
    with pytest.raises(json.JSONDecodeError):
        json.loads(out.splitlines()[0])  # not the JSON lines of --json


def test_readable_example_cuts_long_lists_and_shows_choices():
    line = {
        "input_ids": [[2, 5, 3], [2, 6, 3]],
        "input_ids_text": ["[CLS] a [SEP]", "[CLS] b [SEP]"],
        "input_mask": list(range(1, 12)),
        "context_id": "DEV_1",
        "layout": "⟨context⟩ x ⟨0*⟩",
    }
    assert inspection.readable_example(line, 3, "clue_c311_tiny, validation").splitlines() == [
        "example 3 (clue_c311_tiny, validation)",
        "  input_ids (2 choices):",
        "    0: [CLS] a [SEP]",
        "    1: [CLS] b [SEP]",
        "  input_mask: [1, 2, 3, 4, 5, 6, 7, 8, ... 11 values]",
        "  context_id: DEV_1",
        "  layout: ⟨context⟩ x ⟨0*⟩",
    ]
