"""Markers out of textual order, end to end: windows, decoding, a run, the prediction file.

The official test file has QUALIFY_95 with "... [BLANK9] [BLANK11] [BLANK10] [BLANK12]".
A blank is its number: `answers[k]` fills `[BLANK{k+1}]` wherever it stands, and the
prediction list is in blank-number order. Every text here is in the tiny vocabulary.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import seqio

from cmrcx.benchmarks.cmrc2019 import evaluation
from cmrcx.benchmarks.cmrc2019.official_format import read_passages, write_predictions
from cmrcx.benchmarks.cmrc2019.scoring import score_cmrc2019
from cmrcx.common import paths
from cmrcx.tasks import cmrc2019 as cmrc2019_tasks
from cmrcx.vocab.wordpiece import WordPieceVocabulary

TINY_VOCAB = paths.package_path("data/tiny_vocab.txt")
MAX_LENGTH, DOC_STRIDE = 64, 32

# Textual order [BLANK1], [BLANK3], [BLANK2], [BLANK5], [BLANK4]; long enough to be windowed.
SHUFFLED = {
    "context_id": "QUALIFY_95",
    "context": "周末的早上，妈妈带我去公园玩。[BLANK1]。我们先到湖边看小鸭子，"
    "它们在水里游来游去，[BLANK3]。后来我们走到一片草地上，很多小朋友在那里放风筝，"
    "[BLANK2]。中午我们坐在大树下吃饭，[BLANK5]。回家的路上，"
    "我问妈妈下个周末还能不能再来，[BLANK4]。",
    "choices": [
        "天上飞着各种各样的风筝",  # [BLANK2]
        "妈妈笑着说当然可以",  # [BLANK4]
        "天气很好，太阳暖暖的",  # [BLANK1]
        "月亮很圆",  # fake
        "有的还把头钻进水里找吃的",  # [BLANK3]
        "妈妈做的饭特别好吃",  # [BLANK5]
    ],
    "answers": [2, 0, 4, 1, 5],
}
IN_ORDER = {
    "context_id": "DEV_1",
    "context": "我有一个好朋友，[BLANK1]。我们每天一起上学，[BLANK2]。",
    "choices": ["他叫小明", "放学后也一起回家"],
    "answers": [0, 1],
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("blank_order")
    for name in ("cmrc2019_train.json", "cmrc2019_dev.json"):
        document = {"data": [SHUFFLED, IN_ORDER]}
        (directory / name).write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def scoring_examples(data_dir, tmp_path_factory):
    _, score_task = cmrc2019_tasks.register(
        "tiny_blank_order",
        TINY_VOCAB,
        {"cmrc2019": str(data_dir)},
        max_length=MAX_LENGTH,
        doc_stride=DOC_STRIDE,
        tfds_cache_dir=str(tmp_path_factory.mktemp("tfds")),
        max_candidate_tokens=32,
    )
    dataset = seqio.get_mixture_or_task(score_task).get_dataset(
        sequence_length=None, split="validation", shuffle=False
    )
    yield list(dataset.as_numpy_iterator())
    for name in cmrc2019_tasks.task_name("cmrc2019", "tiny_blank_order"), score_task:
        seqio.TaskRegistry.remove(name)


def test_reads_as_numbered(data_dir: Path) -> None:
    passage = read_passages(data_dir / "cmrc2019_dev.json")[0]
    assert passage.blank_numbers_in_text == (1, 3, 2, 5, 4)
    assert passage.answers == (2, 0, 4, 1, 5)


def test_blank_k_points_at_its_own_marker(scoring_examples) -> None:
    """blank_positions[k] is the token of [unused{k+1}], whatever the textual order."""
    vocab = WordPieceVocabulary(TINY_VOCAB)
    seen = set()
    for ex in scoring_examples:
        for k in np.flatnonzero(ex["blank_in_window"]):
            marker = vocab.token_to_id(f"[unused{k + 1}]")
            assert ex["input_ids"][ex["blank_positions"][k]] == marker
            seen.add((ex["context_id"], int(k)))
    assert {k for cid, k in seen if cid == b"QUALIFY_95"} == set(range(5))
    windows = [ex for ex in scoring_examples if ex["context_id"] == b"QUALIFY_95"]
    assert len(windows) > len(SHUFFLED["choices"])  # windowed: more than one per candidate


def test_perfect_scores_decode_to_the_answers(scoring_examples, data_dir, tmp_path) -> None:
    """Logits that point each candidate at its gold blank decode, in every mode, to the
    answers in blank-number order; the prediction file scores 100 with the official scorer."""
    gold = {p["context_id"]: p["answers"] for p in (SHUFFLED, IN_ORDER)}
    logits = np.zeros([len(scoring_examples), cmrc2019_tasks.MAX_BLANKS], np.float32)
    for row, ex in enumerate(scoring_examples):
        answers = gold[ex["context_id"].decode()]
        choice = int(ex["choice_index"])
        if choice in answers:
            logits[row, answers.index(choice)] = 8.0
    table = evaluation.BlankLogitTable()
    table.add(
        logits, {k: np.stack([ex[k] for ex in scoring_examples]) for k in scoring_examples[0]}
    )
    table.check_complete()
    for mode in evaluation.DECODING_MODES:
        decoded = evaluation.decode_all(table.tables, mode)
        assert decoded == gold, mode
        path = tmp_path / f"{mode}.json"
        write_predictions(path, decoded)
        scores = score_cmrc2019(str(data_dir / "cmrc2019_dev.json"), str(path))
        assert scores == {"qac": 100.0, "pac": 100.0, "total": 7, "skip": 0}, mode


@pytest.mark.slow  # default-suite budget (15 min on 2 cores)
def test_train_step_eval_prediction_file_and_score(data_dir, tiny_runner, tmp_path) -> None:
    """A real tiny run trains on and evaluates the out-of-order passage; its prediction
    file holds one index per blank and the scorer reads it."""
    runner = tiny_runner(
        "cmrc2019_tiny.gin",
        f"DATA_DIR = '{data_dir}'",
        "RunConfig.num_train_steps = 1",
        "RunConfig.max_length = 64",
        "RunConfig.doc_stride = 32",
        "RunConfig.max_candidate_tokens = 32",
    )
    state, losses = runner.train()
    results = runner.evaluate(state, 1)
    assert [step for step, _ in losses] == [1] and np.isfinite(losses[0][1])
    path = tmp_path / "run" / "predictions" / "cmrc2019_tiny_validation.json"
    predictions = json.loads(path.read_text(encoding="utf-8"))
    assert len(predictions["QUALIFY_95"]) == 5 and len(predictions["DEV_1"]) == 2
    scores = score_cmrc2019(str(data_dir / "cmrc2019_dev.json"), str(path))
    assert scores["qac"] == pytest.approx(results["qac/paper"])
    assert scores["total"] == 7
