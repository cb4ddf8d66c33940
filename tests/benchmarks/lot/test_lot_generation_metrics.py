"""PlotCom/OutGen metrics (cmrcx.benchmarks.lot.generation_metrics): golden vectors
measured through the organisers' eval.py functions (`rouge`, `order`), pltrdy rouge
itself as the coverage oracle, and jieba's quiet, deterministic start."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys

import pytest

from cmrcx.benchmarks.lot import generation_metrics as gm
from tests.support import REPO_ROOT

# Order vectors measured through the organisers' eval.py functions (`order`, `inversenum`).
GOLD_STORY = "甲乙丙丁戊己庚辛壬癸子丑寅卯"
OUTLINE = ["丙丁", "庚辛", "子丑"]


@pytest.mark.parametrize(
    "prediction, expected",
    [
        (GOLD_STORY, 1.0),
        ("子丑庚辛丙丁", 0.5),  # fully reversed: 3 inversions of n(n+1)/2 = 6 pairs
        ("", 0.5),  # nothing found: reversed visiting order, every pair inverted
        ("庚辛子丑", 1.0),  # the lowest-ranked phrase missing costs nothing
        ("子丑庚辛", 5 / 6),
        ("丙丁庚辛", 2 / 3),
        ("丙丁子丑", 5 / 6),
    ],
)
def test_order_golden_vectors(prediction, expected):
    assert gm.order([OUTLINE], [GOLD_STORY], [prediction]) == pytest.approx(expected, abs=1e-12)


def test_order_details_of_the_script():
    # The longest common substring, longer than one character, at its first occurrence:
    # "丙丁" is found through "丙丁" at 0 even though "庚辛" comes first in the story.
    assert gm.longest_common_substring("丙丁戊", "庚辛丙丁丙丁戊") == "丙丁戊"
    assert gm.longest_common_substring("甲乙丙", "乙丙甲乙") == "甲乙"  # first to end in x
    assert gm.longest_common_substring("甲乙", "丙丁") == ""
    # One shared character is no position: "庚" alone leaves 庚辛 unfound, so it sorts
    # first, before 丙丁: an inversion.
    assert gm.order([["丙丁", "庚辛"]], [GOLD_STORY], ["丙丁庚"]) == pytest.approx(2 / 3)
    # An empty outline is one empty phrase ("".split("#") == [""]): order 1, no error.
    assert gm.order([[]], [GOLD_STORY], ["子丑"]) == 1.0
    # A repeated phrase keeps one dict entry (its last rank, its first place).
    assert gm.gold_phrase_ranks(["丙丁", "庚辛", "丙丁"], GOLD_STORY) == {"丙丁": 1, "庚辛": 2}
    # Inversions are counted over i <= j, the diagonal included.
    assert gm.inversion_ratio([2, 1, 0]) == 0.5
    assert gm.inversion_ratio([0]) == 0.0


def test_distinct_is_character_level_in_the_script_and_word_level_in_the_paper():
    assert gm.proline("我们 去\u3000上学。") == "我们 去 上学 。"  # all white space removed first
    # 9 characters, spaces included, 7 distinct (the eval.py's `distinct`).
    assert gm.distinct(["我们去上学。"]) == {
        "distinct-1": pytest.approx(7 / 9),
        "distinct-2": 1.0,
        "distinct-3": 1.0,
        "distinct-4": 1.0,
    }
    words = gm.distinct(["我们去上学。", "我们去"], unit="word")
    assert words["word-distinct-1"] == pytest.approx(4 / 6)  # 我们 去 上学 。 | 我们 去
    assert words["word-distinct-2"] == pytest.approx(3 / 4)
    assert words["word-distinct-4"] == 1.0
    assert gm.distinct(["我"])["distinct-2"] == 0.0  # no bigram at all: the script divides by 0
    with pytest.raises(ValueError, match="unit"):
        gm.distinct(["我"], unit="piece")


def test_repetition_counts_predictions_with_a_repeated_character_ngram():
    # "我们 去 上学 。": the space repeats, no longer n-gram does.
    assert gm.repetition(["我们去上学。", "好好好好好"]) == {
        "repetition-1": 1.0,
        "repetition-2": 0.5,
        "repetition-3": 0.5,
        "repetition-4": 0.5,
    }


def test_bleu_golden_vectors():
    assert gm.bleu(["我们去上学。"], ["我们去上学。"]) == {f"bleu-{n}": 1.0 for n in range(1, 5)}
    assert gm.bleu(["我们去上学。"], ["学校"]) == {f"bleu-{n}": 0.0 for n in range(1, 5)}
    # No smoothing: an order without a match makes BLEU-n about 1e-155, not a penalty.
    scores = gm.bleu(["我们去上学。"], ["上学我们"])
    assert scores["bleu-1"] > 0.1 and scores["bleu-3"] < 1e-100


def test_coverage_golden_vectors():
    # Set counting: 大喊大叫 has 3 distinct characters, 2 of them in the LCS.
    assert gm.coverage([["大喊大叫"]], ["他大叫"]) == pytest.approx(2 / 3)
    # The empty prediction's phrases are skipped, not scored 0 (the eval.py's `rouge`).
    assert gm.coverage([["大喊大叫", "遇见"], ["大喊大叫"]], ["", "大喊"]) == pytest.approx(2 / 3)
    assert math.isnan(gm.coverage([["大喊大叫"]], [""]))
    # Only ASCII "." splits the story into sentences, whose LCS tokens are united.
    assert gm.coverage([["甲乙"]], ["乙甲"]) == 0.5
    assert gm.coverage([["甲乙"]], ["乙.甲"]) == 1.0
    assert gm.coverage([["甲乙"]], ["乙。甲"]) == 0.5


def test_coverage_skips_what_overflows_rouges_recursion_in_the_script():
    story = "a" + "c" * 987 + "b"  # "ab": 990 reconstruction calls; "abx": 991
    assert gm.coverage([["ab"]], [story]) == 1.0
    assert math.isnan(gm.coverage([["abx"]], [story]))
    assert gm.coverage([["abx"]], ["a" + "c" * 10 + "b"]) == pytest.approx(2 / 3)


def test_coverage_equals_pltrdy_rouge_on_random_texts():
    """The script's per-phrase rouge call, through the rouge package itself."""
    rouge = pytest.importorskip("rouge")
    rng = random.Random(0)
    alphabet = "甲乙丙丁ab. 。"
    for _ in range(300):
        phrase = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        story = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        ref = " ".join("".join(phrase.split()))
        hyp = " ".join("".join(story.split()))
        try:
            expected = rouge.Rouge().get_scores(refs=ref, hyps=hyp)[0]["rouge-l"]["r"]
        except Exception:  # the script's bare except: the phrase is skipped
            expected = math.nan
        got = gm.coverage([[phrase]], [story])
        assert got == expected or math.isnan(got) and math.isnan(expected), (phrase, story)


def test_generation_metrics_keys_in_the_scripts_order_then_ours():
    golds = [{"story": "我们去上学。路上遇见了老师。", "outline": ["去上学", "遇见"]}]
    scores = gm.generation_metrics("outgen", golds, ["我们去上学，遇见了老师。"])
    ngram_keys = [f"{name}-{n}" for name in ("bleu", "distinct") for n in range(1, 5)]
    extra_keys = [f"{name}-{n}" for name in ("repetition", "word-distinct") for n in range(1, 5)]
    assert list(scores) == [*ngram_keys, "coverage", "order", *extra_keys]
    assert scores["coverage"] == 1.0 and scores["order"] == 1.0
    plotcom = gm.generation_metrics("lot_plotcom", [{"plot": "我们去上学。"}], ["我们去上学。"])
    assert list(plotcom) == [*ngram_keys, *extra_keys]
    assert plotcom["bleu-4"] == 1.0
    with pytest.raises(ValueError, match="2 gold records but 1 predictions"):
        gm.generation_metrics("outgen", golds * 2, ["x"])
    with pytest.raises(ValueError, match="plotcom, outgen"):
        gm.generation_metrics("clozet", golds, ["x"])


def test_jieba_starts_quietly_with_a_cache_named_after_its_dictionary(tmp_path):
    """No "Building prefix dict ..." lines; the cache goes to the temporary directory
    under a name with the dictionary's digest, and a second process loads it."""
    code = (
        "from cmrcx.benchmarks.lot.generation_metrics import proline\n"
        "print(proline('我们去上学。'))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TMPDIR": str(tmp_path)}
    for _ in range(2):
        run = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        assert (run.stdout, run.stderr) == ("我们 去 上学 。\n", "")
    assert [p.name.startswith("jieba.cmrcx-") for p in tmp_path.iterdir()] == [True]
