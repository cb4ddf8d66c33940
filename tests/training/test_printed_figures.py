"""One convention for the figures a run prints for reading: percentages with two decimals
(`base.PRINTED_FIGURES`), whatever scale the benchmark's JSON keeps. The demo once printed
CLUE accuracy as 56.25 and LOT ClozeT accuracy as 0.625."""

from types import SimpleNamespace

from cmrcx.benchmarks.cmrc2019 import evaluation as cmrc2019_evaluation
from cmrcx.training.run_tasks.base import RunTask, metric_lines
from cmrcx.training.run_tasks.lot import LotGenerationRunTask, LotUnderstandingRunTask


class Clue(RunTask):
    name = "clue_afqmc"


def test_every_task_prints_its_accuracy_as_a_percentage():
    clue = Clue().results_table({"accuracy": 56.25}, "validation")  # CLUE keeps percentages
    clozet = LotUnderstandingRunTask.results_table(
        SimpleNamespace(name="lot_clozet"), {"accuracy": 0.5625}, "validation"
    )  # LOT keeps fractions, as its eval.py prints them
    assert clue == "clue_afqmc validation accuracy: 56.25"
    assert clozet == "lot_clozet validation accuracy: 56.25"


def test_lot_generation_metrics_print_as_percentages():
    results = {"bleu-1": 0.2512, "distinct-2": 0.5, "order": 1.0}
    table = LotGenerationRunTask.results_table(
        SimpleNamespace(name="lot_outgen"), results, "validation"
    )
    assert table.splitlines() == [
        "lot_outgen validation bleu-1: 25.12",
        "lot_outgen validation distinct-2: 50.00",
        "lot_outgen validation order: 100.00",
    ]


def test_counts_print_as_integers():
    results = {"AVERAGE": 50.5, "F1": 60.0, "EM": 41.0, "TOTAL": 16, "SKIP": 0}
    assert metric_lines("clue_cmrc2018", results, "validation").splitlines() == [
        "clue_cmrc2018 validation AVERAGE: 50.50",
        "clue_cmrc2018 validation F1: 60.00",
        "clue_cmrc2018 validation EM: 41.00",
        "clue_cmrc2018 validation TOTAL: 16",
        "clue_cmrc2018 validation SKIP: 0",
    ]


def test_cmrc2019_prints_qac_and_pac_as_percentages():
    results = {"qac/paper": 12.5, "pac/paper": 0.0}
    lines = cmrc2019_evaluation.results_table(results, "validation").splitlines()
    assert lines[1].split() == ["paper", "12.50", "0.00"]


def test_the_lot_tables_print_the_organisers_score_as_a_percentage():
    from cmrcx.benchmarks.lot import tables as lot_tables

    summary = {"split": "validation", "tables": {}, "organisers_outgen": 0.31234}
    assert lot_tables.format_tables(summary).splitlines()[-1] == (
        "OutGen, the competition organisers' weighted score (their eval.py's, x 100): 31.23"
    )
