"""QAC/PAC with the official evaluator's semantics (ymcui/cmrc2019 eval/cmrc2019_evaluate.py
at commit eae5c10), checked on hand-made cases and against a replay of its arithmetic."""

from __future__ import annotations

import random

import pytest

from cmrcx.benchmarks.cmrc2019.metrics import cloze_scores, qac_pac
from cmrcx.benchmarks.cmrc2019.official_format import ClozePassage


def _passage(
    context_id: str, answers: tuple[int, ...] | None, num_choices: int = 5
) -> ClozePassage:
    num_blanks = len(answers) if answers is not None else 2
    context = "".join(f"句子[BLANK{k + 1}]。" for k in range(num_blanks))
    return ClozePassage(context_id, context, tuple(f"选项{c}" for c in range(num_choices)), answers)


# P1 has 3 blanks, P2 has 2: 5 blanks in 2 passages throughout.
PASSAGES = [_passage("P1", (0, 1, 2)), _passage("P2", (3, 1))]


def test_all_right() -> None:
    scores = cloze_scores(PASSAGES, {"P1": [0, 1, 2], "P2": [3, 1]})
    assert scores == {"qac": 100.0, "pac": 100.0, "total": 5, "skip": 0, "missing": []}


def test_one_wrong() -> None:
    # P1: 2 of 3 right, P2: 2 of 2. QAC = 4/5 = 80%; PAC = 1/2 = 50%.
    scores = cloze_scores(PASSAGES, {"P1": [0, 1, 4], "P2": [3, 1]})
    assert scores == {"qac": 80.0, "pac": 50.0, "total": 5, "skip": 0, "missing": []}


def test_unfilled_blank_is_wrong() -> None:
    # -1 (no prediction) never equals a gold index: P1 2/3, P2 1/2 -> QAC 3/5, PAC 0/2.
    scores = cloze_scores(PASSAGES, {"P1": [0, -1, 2], "P2": [-1, 1]})
    assert scores["qac"] == pytest.approx(60.0)
    assert scores["pac"] == 0.0
    assert scores["skip"] == 0


def test_short_prediction_loses_a_point_per_missing_blank() -> None:
    # P1: gold [0, 1, 2], pred [0, 1]: 2 right over the common prefix, minus 1 uncovered
    # blank = 1. P2 all right = 2. QAC = (1 + 2) / 5 = 60%; PAC = 1/2 = 50%.
    # skip = (3 - 2) + (2 - 2) = 1.
    scores = cloze_scores(PASSAGES, {"P1": [0, 1], "P2": [3, 1]})
    assert scores == {"qac": 60.0, "pac": 50.0, "total": 5, "skip": 1, "missing": []}


def test_short_prediction_is_floored_at_zero() -> None:
    # eae5c10 floors each passage at 0. P1: gold [0, 1, 2], pred [0]: 1 right - 2 uncovered
    # = -1 -> 0. P2: [9] vs [3, 1]: 0 - 1 = -1 -> 0. The first release (c498b32) gave
    # QAC -40%; the official (fixed) evaluator gives 0.
    scores = cloze_scores(PASSAGES, {"P1": [0], "P2": [9]})
    assert scores == {"qac": 0.0, "pac": 0.0, "total": 5, "skip": 2 + 1, "missing": []}
    scores = cloze_scores(PASSAGES, {"P1": [], "P2": [3, 1]})
    assert scores == {"qac": 40.0, "pac": 50.0, "total": 5, "skip": 3, "missing": []}


def test_long_prediction_extra_entries_ignored() -> None:
    # P2: gold [3, 1], pred [3, 1, 0, 2]: both right, extras ignored; skip = 2 - 4 = -2.
    scores = cloze_scores([PASSAGES[1]], {"P2": [3, 1, 0, 2]})
    assert scores == {"qac": 100.0, "pac": 100.0, "total": 2, "skip": -2, "missing": []}


def test_missing_context_id_scores_zero_and_is_reported() -> None:
    # P1 has no prediction: 0 right, and its 3 blanks count as skipped. P2 all right.
    # A predicted id not in the dataset is ignored. QAC = 2/5 = 40%; PAC = 1/2 = 50%.
    scores = cloze_scores(PASSAGES, {"P2": [3, 1], "NOT_IN_DATASET": [0]})
    assert scores == {"qac": 40.0, "pac": 50.0, "total": 5, "skip": 3, "missing": ["P1"]}


def test_missing_context_id_does_not_reuse_previous_count() -> None:
    # Dataset order P2, P1 with P1 missing. The first release added P2's count (2) again
    # for P1 (QAC 4/5 = 80%); eae5c10 scores P1 as 0: QAC = 2/5 = 40%.
    scores = cloze_scores([PASSAGES[1], PASSAGES[0]], {"P2": [3, 1]})
    assert scores["qac"] == 40.0
    assert scores["pac"] == 50.0
    assert scores["missing"] == ["P1"]


def _official_eae5c10(data: list[dict], prediction_file: dict) -> tuple[float, float, int, int]:
    """The arithmetic of the official evaluate() at eae5c10, line for line (stderr left out)."""

    def compare_list(ground_truth, prediction):
        right_count = 0
        min_len = len(ground_truth) if len(ground_truth) < len(prediction) else len(prediction)
        gap_count = len(ground_truth) - min_len
        for k in range(min_len):
            if str(ground_truth[k]) == str(prediction[k]):
                right_count += 1
        final_right_count = right_count - gap_count
        if final_right_count < 0:
            final_right_count = 0
        return final_right_count

    qac = pac = total_question_count = skip_question_count = total_passage_count = 0
    for instance in data:
        answers = instance["answers"]
        predictions = []
        if instance["context_id"] not in prediction_file:
            right_question_count = 0
        else:
            predictions = prediction_file[instance["context_id"]]
            right_question_count = compare_list(answers, predictions)
        qac += right_question_count
        pac += right_question_count == len(answers)
        total_question_count += len(answers)
        skip_question_count += len(answers) - len(predictions)
        total_passage_count += 1
    return (
        100.0 * qac / total_question_count,
        100.0 * pac / total_passage_count,
        total_question_count,
        skip_question_count,
    )


def _random_case(rng: random.Random) -> tuple[list[ClozePassage], dict]:
    """Passages with 1-6 blanks; predictions right, wrong, short, long, string or missing."""
    passages, predictions = [], {}
    for p in range(rng.randint(1, 6)):
        num_choices = rng.randint(2, 8)
        answers = tuple(rng.sample(range(num_choices), rng.randint(1, min(6, num_choices))))
        passages.append(_passage(f"P{p}", answers, num_choices))
        kind = rng.choice(["right", "noisy", "short", "long", "strings", "missing"])
        guess = [a if rng.random() < 0.6 else rng.randrange(-1, num_choices) for a in answers]
        if kind == "right":
            predictions[f"P{p}"] = list(answers)
        elif kind == "noisy":
            predictions[f"P{p}"] = guess
        elif kind == "short":
            predictions[f"P{p}"] = guess[: rng.randrange(len(guess))]
        elif kind == "long":
            predictions[f"P{p}"] = guess + [rng.randrange(num_choices) for _ in range(3)]
        elif kind == "strings":
            predictions[f"P{p}"] = [str(i) for i in guess]
    if rng.random() < 0.5:
        predictions["EXTRA_ID"] = [0, 1]  # a context_id not in the dataset
    return passages, predictions


def test_matches_a_replay_of_the_official_arithmetic() -> None:
    rng = random.Random(2019)
    for _ in range(2000):
        passages, predictions = _random_case(rng)
        data = [{"context_id": p.context_id, "answers": list(p.answers)} for p in passages]
        qac, pac, total, skip = _official_eae5c10(data, predictions)
        scores = cloze_scores(passages, predictions)
        assert (scores["qac"], scores["pac"], scores["total"], scores["skip"]) == (
            qac,
            pac,
            total,
            skip,
        ), (passages, predictions)
        targets = [list(p.answers) for p in passages]
        ordered = [predictions.get(p.context_id, []) for p in passages]
        assert qac_pac(targets, ordered) == {"qac": qac, "pac": pac}


def test_compares_as_strings_like_the_official_script() -> None:
    # str("1") == str(1), so string predictions count as right.
    scores = cloze_scores(PASSAGES, {"P1": ["0", "1", 2], "P2": [3, "1"]})  # type: ignore[dict-item]
    assert scores["qac"] == 100.0
    assert scores["pac"] == 100.0


def test_passage_without_answers_rejected() -> None:
    with pytest.raises(ValueError, match="TEST_1"):
        cloze_scores([_passage("TEST_1", None)], {"TEST_1": [0, 1]})


def test_nothing_to_score_rejected() -> None:
    with pytest.raises(ValueError, match="no blanks"):
        cloze_scores([], {})


def test_qac_pac_matches_cloze_scores() -> None:
    # Passage 1: gold [0, 1, 2], pred [0, 1, 4] -> 2. Passage 2: gold [3, 1], pred [3]
    # -> 1 right - 1 uncovered = 0. QAC = 2/5 = 40%; PAC = 0/2.
    targets = [[0, 1, 2], [3, 1]]
    predictions = [[0, 1, 4], [3]]
    assert qac_pac(targets, predictions) == {"qac": 40.0, "pac": 0.0}
    scores = cloze_scores(PASSAGES, {"P1": [0, 1, 4], "P2": [3]})
    assert (scores["qac"], scores["pac"]) == (40.0, 0.0)


def test_qac_pac_all_right() -> None:
    assert qac_pac([[2, 0], [1]], [[2, 0], [1]]) == {"qac": 100.0, "pac": 100.0}


def test_qac_pac_length_mismatch() -> None:
    with pytest.raises(ValueError, match="2 targets but 1 predictions"):
        qac_pac([[0], [1]], [[0]])
