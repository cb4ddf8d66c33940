"""The official CMRC 2018 evaluator's rules (cmrcx.benchmarks.clue.cmrc2018_evaluate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmrcx.benchmarks.clue import cmrc2018_evaluate as ev
from cmrcx.common.errors import DataFormatError
from tests.support import REPO_ROOT

SAMPLE_DEV = REPO_ROOT / "cmrcx/data/clue_mrc_sample/cmrc2018_public/dev.json"


def test_mixed_segmentation_lowercases_and_splits_cjk_from_word_runs() -> None:
    assert ev.mixed_segmentation("2018年NBA总决赛，", rm_punc=True) == [
        "2018", "年", "nba", "总", "决", "赛",
    ]  # fmt: skip
    assert ev.mixed_segmentation("版本为Lumen 3.2。", rm_punc=True) == [
        "版", "本", "为", "lumen", "3.2",
    ]  # fmt: skip
    assert ev.mixed_segmentation("87比79") == ["87", "比", "79"]
    # Listed punctuation is a token of its own, or dropped with rm_punc; a dropped character
    # does not end the run around it.
    assert ev.mixed_segmentation("a-b") == ["a", "-", "b"]
    assert ev.mixed_segmentation("a-b", rm_punc=True) == ["ab"]
    # ASCII "," and "." are not in the list: the word tokenizer splits them off.
    assert ev.mixed_segmentation("蓝鲸, 赤焰.", rm_punc=True) == ["蓝", "鲸", ",", "赤", "焰", "."]
    # Only U+4E00..U+9FA5 are single characters: U+9FD0 is part of a word run.
    assert ev.mixed_segmentation("\u9fd0\u9fd0") == ["\u9fd0\u9fd0"]
    # Leading/trailing whitespace is stripped, inner whitespace splits words.
    assert ev.mixed_segmentation("  Kevin  Lin ") == ["kevin", "lin"]


def test_punctuation_list_is_the_scripts_including_its_unmatchable_ellipsis() -> None:
    assert ev.remove_punctuation(" 《北京》：首都！ ") == "北京首都"
    assert ev.remove_punctuation("Harry Potter") == "harry potter"  # spaces stay
    # "……" is one two-character entry: a single "…" never matches it.
    assert ev.remove_punctuation("好……") == "好……"
    assert ev.mixed_segmentation("好……", rm_punc=True) == ["好", "……"]
    assert "‘" not in ev.PUNCTUATION and "’" in ev.PUNCTUATION  # as listed


def test_word_tokenizer_is_nltk_3_4_5_treebank_without_punkt() -> None:
    tokenize = ev.treebank_word_tokenize
    assert tokenize("don't stop") == ["do", "n't", "stop"]
    assert tokenize("cannot (x) 3.5% $5") == ["can", "not", "(", "x", ")", "3.5", "%", "$", "5"]
    assert tokenize("u.s.") == ["u.s", "."]
    assert tokenize('say "hi"') == ["say", "``", "hi", "''"]
    assert tokenize("wait... 1,500 a, b") == ["wait", "...", "1,500", "a", ",", "b"]
    # NLTK 3.4.5 keeps these whole (NLTK 3.10 splits the dashes and the asterisk).
    assert tokenize("a——b x*y") == ["a——b", "x*y"]
    # The documented difference: Punkt would split "end." from "next" as two sentences.
    assert tokenize("end. next") == ["end.", "next"]


def test_f1_uses_the_longest_common_contiguous_run_not_a_bag_of_tokens() -> None:
    # Same four characters in reverse order: a bag-of-tokens F1 would be 1.0.
    assert ev.f1_score(["甲乙丙丁"], "丁丙乙甲") == pytest.approx(0.25)
    # LCS 2 of 5 predicted and 4 gold tokens: 2PR/(P+R) with P=2/5, R=2/4.
    assert ev.f1_score(["甲乙丙丁"], "甲乙戊丙丁") == pytest.approx(0.4 / 0.9)
    assert ev.find_lcs(list("甲乙丙丁"), list("甲乙戊丙丁")) == (list("甲乙"), 2)
    assert ev.f1_score(["甲乙"], "") == 0.0
    # Tokens, not characters: "KevinLin" is one word that matches neither gold word.
    assert ev.f1_score(["Kevin Lin"], "KevinLin") == 0.0
    assert ev.f1_score(["Kevin Lin"], "kevin") == pytest.approx(2 / 3)


def test_best_over_gold_answers() -> None:
    assert ev.f1_score(["甲乙", "丙丁戊"], "丙丁") == pytest.approx(0.8)
    assert ev.exact_match(["甲乙", "丙丁"], "丙丁") == 1
    with pytest.raises(ValueError, match="no gold answers"):
        ev.f1_score([], "甲")


def test_exact_match_lowercases_and_ignores_listed_punctuation_only() -> None:
    assert ev.exact_match(["Kevin Lin"], "kevin lin") == 1
    assert ev.exact_match(["北京"], "《北京》。") == 1
    assert ev.exact_match(["北京"], "北京.") == 0  # ASCII "." is not in the list
    assert ev.exact_match(["Harry Potter"], "HarryPotter") == 0


def test_evaluate_counts_skips_in_total_and_rounds_like_the_printout() -> None:
    gold = {"q1": ["北京"], "q2": ["甲乙丙丁"], "q3": ["Kevin Lin"]}
    predictions = {"q1": "北京。", "q2": "甲乙戊丙丁", "not_in_gold": "x"}
    result = ev.evaluate(gold, predictions)
    assert result == {"AVERAGE": 40.741, "F1": 48.148, "EM": 33.333, "TOTAL": 3, "SKIP": 1}
    # AVERAGE comes from the unrounded scores: from the printed ones it would be 40.7405.
    assert f"{(33.333 + 48.148) / 2:.3f}" != "40.741"
    assert list(result) == ["AVERAGE", "F1", "EM", "TOTAL", "SKIP"]
    assert ev.evaluate({"q": ["a"]}, {}) == {
        "AVERAGE": 0.0, "F1": 0.0, "EM": 0.0, "TOTAL": 1, "SKIP": 1,
    }  # fmt: skip
    with pytest.raises(ValueError, match="'q' has no gold answer"):
        ev.evaluate({"q": []}, {"q": "a"})
    with pytest.raises(ValueError, match="no gold questions"):
        ev.evaluate({}, {})


def test_score_files_on_the_bundled_sample(tmp_path: Path) -> None:
    predictions = {
        "DEV_0_QUERY_0": "清溪",
        "DEV_0_QUERY_1": "白色花岗岩",  # F1 5/7 against "白色花岗岩砌成"
        "DEV_0_QUERY_2": "乾隆二十年",
        "DEV_0_QUERY_3": "1998",
        "DEV_1_QUERY_0": "一款笔记应用。",
        "DEV_1_QUERY_1": "杭州",
        "DEV_1_QUERY_2": "markdown",
    }  # DEV_1_QUERY_3 is missing
    path = tmp_path / "pred.json"
    path.write_text(json.dumps(predictions, ensure_ascii=False), encoding="utf-8")
    result = ev.score_files(SAMPLE_DEV, path)
    f1 = 100 * (6 + 2 * (5 / 7) * 1 / (5 / 7 + 1)) / 8
    assert result["TOTAL"] == 8 and result["SKIP"] == 1
    assert result["EM"] == 75.0
    assert result["F1"] == float(f"{f1:.3f}")
    assert result["AVERAGE"] == float(f"{(75 + f1) / 2:.3f}")


def test_prediction_files_are_validated(tmp_path: Path) -> None:
    path = tmp_path / "pred.json"
    path.write_text('["a"]', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"pred\.json: top level: expected an object.*array"):
        ev.read_predictions(path)
    path.write_text('{"DEV_0_QUERY_0": ["清溪"]}', encoding="utf-8")
    with pytest.raises(
        DataFormatError, match=r"pred\.json: question id 'DEV_0_QUERY_0': expected an answer"
    ):
        ev.score_files(SAMPLE_DEV, path)
    path.write_text("{", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"pred\.json: malformed JSON at line 1"):
        ev.read_predictions(path)
    with pytest.raises(DataFormatError, match="missing.json: file not found"):
        ev.read_predictions(tmp_path / "missing.json")


def test_gold_in_the_original_release_layout_scores_like_squad_style(tmp_path: Path) -> None:
    """v6 reads both layouts: the original release (ymcui/cmrc2018 data/cmrc2018_dev.json: a
    list of passages, ``query_id``, answers as strings) and CLUE's SQuAD-style files."""
    original = [
        {
            "context_id": "DEV_0",
            "context_text": "白石桥建于清朝乾隆二十年。",
            "qas": [
                {"query_id": "DEV_0_QUERY_0", "query_text": "白石桥建于何时？",
                 "answers": ["清朝乾隆二十年", "乾隆二十年"]},
                {"query_id": "DEV_0_QUERY_1", "query_text": "桥叫什么？", "answers": ["白石桥"]},
            ],
        }
    ]  # fmt: skip
    squad = {
        "data": [
            {
                "paragraphs": [
                    {
                        "id": "DEV_0",
                        "context": original[0]["context_text"],
                        "qas": [
                            {"id": qa["query_id"], "question": qa["query_text"],
                             "answers": [{"text": a, "answer_start": 0} for a in qa["answers"]]}
                            for qa in original[0]["qas"]
                        ],
                    }
                ]
            }
        ]
    }  # fmt: skip
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps({"DEV_0_QUERY_0": "乾隆二十年"}), encoding="utf-8")
    scores = []
    for name, document in (("original.json", original), ("squad.json", squad)):
        path = tmp_path / name
        path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
        scores.append(ev.score_files(path, predictions))
    assert scores[0] == scores[1]
    assert scores[0]["EM"] == 50.0 and scores[0]["SKIP"] == 1 and scores[0]["TOTAL"] == 2


def test_the_test_files_placeholders_are_not_gold(tmp_path: Path) -> None:
    document = {
        "data": [
            {
                "paragraphs": [
                    {
                        "id": "TEST_0",
                        "context": "……",
                        "qas": [
                            {"id": "TEST_0_QUERY_0", "question": "？",
                             "answers": [{"text": "FAKE_ANSWER_1", "answer_start": -1}]}
                        ],
                    }
                ]
            }
        ]
    }  # fmt: skip
    gold = tmp_path / "test.json"
    gold.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps({"TEST_0_QUERY_0": "x"}), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"TEST_0_QUERY_0.*placeholders .* not gold"):
        ev.score_files(gold, predictions)
