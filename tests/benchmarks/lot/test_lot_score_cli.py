"""`python -m cmrcx.score lot_<task> GOLD PRED` (cmrcx.benchmarks.lot.scoring) and the
understanding accuracy (cmrcx.benchmarks.lot.understanding_metrics)."""

from __future__ import annotations

import json

import pytest

from cmrcx import score
from cmrcx.benchmarks import task_names
from cmrcx.benchmarks.lot.understanding_metrics import accuracy
from tests.support_cli import run_main

OUTGEN_GOLD = [
    {
        "story": "有个人把神像放在驴子背上，赶着进城。驴子洋洋得意，大喊大叫。",
        "outline": ["神像放在驴子", "赶着进城", "大喊大叫", "洋洋得意"],
    },
    {"story": "小猴边跑边笑，结果掉进了水池里。", "outline": ["掉进了水池", "边跑边笑"]},
]


def _jsonl(path, records: list, encoding: str = "utf-8") -> str:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    path.write_text(text, encoding)
    return str(path)


def clozet(label) -> dict:
    """A ClozeT record (README schema) with ``label``."""
    return {
        "story": "甲乙丙。<mask>丁戊。",
        "plot0": "一句候选话。",
        "plot1": "另一句候选。",
        "label": label,
    }


def senpos(label) -> dict:
    """A SenPos record (README schema, 3 masks) with ``label``."""
    return {
        "story": "一。[MASK]二。[MASK]三。[MASK]四。",
        "sentence": "被拿走的句子。",
        "label": label,
    }


def test_accuracy_compares_labels_as_strings():
    assert accuracy(["0", "1", "1", "0"], [0, 1, "1", 1]) == {"accuracy": 0.75}
    assert accuracy([8, 3], [8.0, "3"]) == {"accuracy": 0.5}  # "8.0" is not "8"
    with pytest.raises(ValueError, match="2 targets but 1 predictions"):
        accuracy([0, 1], [0])


@pytest.mark.parametrize(
    "typed, registered",
    [("ClozeT", "lot_clozet"), ("senpos", "lot_senpos"), ("PLOTCOM", "lot_plotcom")]
    + [("OutGen", "lot_outgen"), ("lot_outgen", "lot_outgen"), ("lot-clozet", "lot_clozet")],
)
def test_the_papers_task_names_resolve(typed, registered):
    assert task_names.resolve(typed) == registered
    assert task_names.find(f"clue_{typed}") is None


def test_clozet_labels_of_another_type_are_compared_as_strings_with_a_note(tmp_path):
    gold = _jsonl(tmp_path / "gold.jsonl", [clozet(label) for label in ("0", "1", "1", "0")])
    pred = _jsonl(tmp_path / "pred.jsonl", [{"label": label} for label in (0, 1, "1", 1)])
    run = run_main("score", "ClozeT", gold, pred)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"accuracy": 0.75, "correct": 3, "total": 4}
    assert run.stderr.count("\n") == 1
    assert "note: 3 of 4 labels in" in run.stderr and "compared as strings" in run.stderr


def test_a_line_count_mismatch_is_the_official_wrong_predictions(tmp_path):
    gold = _jsonl(tmp_path / "gold.jsonl", [senpos(1), senpos(2), senpos(3)])
    pred = _jsonl(tmp_path / "pred.jsonl", [{"label": 1}, {"label": 2}])
    run = run_main("score", "senpos", gold, pred)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith("error: Wrong Predictions")
    assert "pred.jsonl has 2 lines but" in run.stderr and "gold.jsonl has 3" in run.stderr


@pytest.mark.parametrize(
    "pred_text, message",
    [
        ('{"label": 1}\nnot json\n', "pred.jsonl: line 2: malformed JSON at column 1"),
        ('{"label": 1}\n\n', "pred.jsonl: line 2: blank line"),
        ('{"label": 1}\n{"labels": 2}\n', "pred.jsonl: line 2: field 'label' is missing"),
        ('{"label": 1}\n{"label": true}\n', "line 2: field 'label' must be str or int or float"),
        ('{"label": 1}\n[2]\n', "pred.jsonl: line 2: expected a JSON object, got array"),
        ('{"label": 1}\n{"label": 1, "label": 2}\n', "line 2: field 'label': given twice"),
    ],
)
def test_bad_lines_name_the_file_line_and_field(tmp_path, capsys, pred_text, message):
    gold = _jsonl(tmp_path / "gold.jsonl", [senpos(1), senpos(2)])
    (tmp_path / "pred.jsonl").write_text(pred_text, "utf-8")
    assert score.main(["lot_senpos", gold, str(tmp_path / "pred.jsonl")]) == 2
    assert message in capsys.readouterr().err


def test_outgen_prints_the_official_keys_first_quietly(tmp_path, run_cli):
    gold = _jsonl(tmp_path / "gold.jsonl", OUTGEN_GOLD)
    pred = _jsonl(tmp_path / "pred.jsonl", [{"story": r["story"]} for r in OUTGEN_GOLD])
    run = run_cli("score", "OutGen", gold, pred)
    assert (run.returncode, run.stderr) == (0, "")  # no jieba or nltk chatter
    scores = json.loads(run.stdout)
    official = [f"{m}-{n}" for m in ("bleu", "distinct") for n in range(1, 5)]
    assert list(scores)[:10] == [*official, "coverage", "order"]
    assert list(scores)[10:] == [
        *(f"{m}-{n}" for m in ("repetition", "word-distinct") for n in range(1, 5)),
        "organisers-weighted-score",
    ]
    assert scores["bleu-4"] == scores["coverage"] == scores["order"] == 1.0


def test_plotcom_scores_the_plot_field(tmp_path, capsys):
    gold = _jsonl(tmp_path / "gold.jsonl", [{"story": "x<MASK>", "plot": "我们去上学。"}])
    pred = _jsonl(tmp_path / "pred.jsonl", [{"story": "x<MASK>", "plot": "我们去上学。"}])
    assert score.main(["PlotCom", gold, pred]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["bleu-1"] == 1.0 and scores["distinct-1"] == pytest.approx(7 / 9)
    assert "coverage" not in scores and "organisers-weighted-score" not in scores
    wrong = _jsonl(tmp_path / "wrong.jsonl", [{"story": "我们去上学。"}])
    assert score.main(["PlotCom", gold, wrong]) == 2
    assert "wrong.jsonl: line 1: field 'plot' is missing" in capsys.readouterr().err


def test_undefined_coverage_is_null_with_a_note(tmp_path, capsys):
    gold = _jsonl(tmp_path / "gold.jsonl", OUTGEN_GOLD)
    pred = _jsonl(tmp_path / "pred.jsonl", [{"story": ""}] * 2)
    assert score.main(["lot_outgen", gold, pred]) == 0
    out, err = capsys.readouterr()
    scores = json.loads(out)
    assert scores["coverage"] is None and scores["organisers-weighted-score"] is None
    assert "coverage is undefined" in err


# GOLD is read as training reads a labelled file (formats.read_file, labelled=True).
OUTGEN_TEST = [{**record, "story": ""} for record in OUTGEN_GOLD]  # the organisers' test form
PLOTCOM_GOLD = [{"story": "甲<MASK>丙。", "plot": "乙。"}]
REFUSED_GOLDS = [
    # (task, gold records, predictions, what the one line says after "gold.jsonl: line 1: ")
    ("lot_outgen", OUTGEN_TEST, OUTGEN_GOLD, "field 'story': is empty"),
    ("lot_plotcom", [{**PLOTCOM_GOLD[0], "plot": ""}], PLOTCOM_GOLD, "field 'plot': is empty"),
    ("lot_clozet", [clozet("")], [clozet("1")], "field 'label': is empty"),
    ("lot_senpos", [{**senpos(1), "label": ""}], [senpos(1)], "field 'label': is empty"),
    ("lot_clozet", [senpos(3)], [senpos(3)], "field 'story': has 3 masks; expected exactly one"),
    ("lot_senpos", [clozet("1")], [clozet("1")], "field 'sentence': missing"),
    ("lot_clozet", [clozet("2")], [clozet("1")], 'field \'label\': expected "0" or "1"'),
    ("lot_senpos", [senpos(4)], [senpos(1)], "field 'label': 4 is not a mask number"),
    ("lot_outgen", [{**OUTGEN_GOLD[0], "outline": []}], OUTGEN_GOLD[:1], "field 'outline'"),
]


@pytest.mark.parametrize(("task", "golds", "predictions", "message"), REFUSED_GOLDS)
def test_gold_files_training_refuses_are_refused(
    tmp_path, capsys, task, golds, predictions, message
):
    gold = _jsonl(tmp_path / "gold.jsonl", golds)
    pred = _jsonl(tmp_path / "pred.jsonl", predictions)
    assert score.main([task, gold, pred]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"error: {gold}: line 1: {message}")


def test_a_test_file_as_gold_exits_2_with_one_line(tmp_path):
    gold = _jsonl(tmp_path / "gold.jsonl", OUTGEN_TEST)
    pred = _jsonl(tmp_path / "pred.jsonl", OUTGEN_GOLD)
    run = run_main("score", "lot_outgen", gold, pred)
    assert (run.returncode, run.stdout) == (2, "")
    assert (
        run.stderr == f"error: {gold}: line 1: field 'story': is empty (a train or val "
        "file, or a gold file to score, needs it)\n"
    )


@pytest.mark.parametrize(("gold_bom", "pred_bom"), [(True, False), (False, True), (True, True)])
def test_a_utf8_bom_is_read_in_either_file(tmp_path, capsys, gold_bom, pred_bom):
    """The reader skips a leading BOM (formats.read_file), so both files do here."""

    def encoding(bom: bool) -> str:
        return "utf-8-sig" if bom else "utf-8"

    gold = _jsonl(tmp_path / "gold.jsonl", OUTGEN_GOLD, encoding(gold_bom))
    pred = _jsonl(tmp_path / "pred.jsonl", OUTGEN_GOLD, encoding(pred_bom))
    assert score.main(["lot_outgen", gold, pred]) == 0
    assert json.loads(capsys.readouterr().out)["bleu-4"] == 1.0
    gold = _jsonl(tmp_path / "c.jsonl", [clozet("0"), clozet("1")], encoding(gold_bom))
    pred = _jsonl(tmp_path / "p.jsonl", [clozet("0"), clozet("0")], encoding(pred_bom))
    assert score.main(["lot_clozet", gold, pred]) == 0
    assert json.loads(capsys.readouterr().out) == {"accuracy": 0.5, "correct": 1, "total": 2}
