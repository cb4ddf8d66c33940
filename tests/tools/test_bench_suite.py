"""tools/bench.py suite: docs/performance.md's compared benchmarks one after another, each
started on a quiet machine, their reports kept and summed up in one table."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from tests.support import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
from benchkit import cli, suite  # noqa: E402


def test_the_suite_waits_for_a_quiet_machine_and_says_so(capsys):
    loads, slept = iter([1.9, 1.2, 0.7, 0.4]), []
    load = suite.wait_for_quiet(0.5, 60, loadavg=lambda: (next(loads), 0, 0), sleep=slept.append)
    assert load == 0.4 and slept == [5, 5, 5]
    assert "waiting for a quiet machine: load 1.90, below 0.5 wanted" in capsys.readouterr().err


def test_a_machine_that_stays_loaded_stops_the_suite():
    with pytest.raises(SystemExit, match=r"stayed at or above 0.5 for 20 s \(now 1.50\)"):
        suite.wait_for_quiet(0.5, 20, loadavg=lambda: (1.5, 0, 0), sleep=lambda s: None)


def _side(median: float, spread: float, key: str = "median_step_seconds") -> dict:
    return {key: median, "spread": spread}


def test_rows_of_bert_and_t5_reports_and_their_table(capsys, monkeypatch):
    comparison = {
        "speed_ratio_cmrcx_over_torch": 2.0,
        "speed_ratio_per_round": [1.9, 2.1],
        "speed_ratio_by_mean": 1.8,
    }
    bert = {
        "cmrcx": _side(1.0, 0.01),
        "torch": _side(2.0, 0.02),
        **comparison,
        "method": {"rounds": 3},  # how the children ran, as every report has it
        "suite": {"name": "train", "arguments": ["train", "--rounds", "3"], "start_load": 0.3},
    }
    t5 = {
        "results": [
            {"method": m, "geometry": {"batch": b}, "cmrcx": _side(0.5, 0.0, "median_seconds"),
             "torch": _side(1.0, 0.1, "median_seconds"), **comparison}
            for m in ("sample", "beam") for b in (1, 8)
        ],
        "suite": {"name": "generate", "arguments": ["generate"], "start_load": 0.4},
    }  # fmt: skip
    rows = suite.rows(bert) + suite.rows(t5)
    assert [row["label"] for row in rows] == [
        "train",
        "generate sample batch 1",
        "generate sample batch 8",
        "generate beam batch 1",
        "generate beam batch 8",
    ]
    assert rows[0]["cmrcx"] == 1.0 and rows[0]["torch"] == 2.0 and rows[0]["by_mean"] == 1.8
    assert rows[1]["cmrcx"] == 0.5 and rows[1]["torch"] == 1.0  # T5's key
    monkeypatch.setattr(suite.harness, "print_header", lambda report: None)
    suite.print_suite({"out": "/x", "rows": rows})
    out = capsys.readouterr().out
    assert (
        "| train: `train --rounds 3` (0.30) | 1.000 s | 2.000 s | **2.00x** (1.90, 2.10) "
        "| 1.80x | 1.0% / 2.0% |" in out
    )
    assert out.count("| generate ") == 4


def test_unknown_entries_are_named():
    args = argparse.Namespace(only="train, trian", out="unused")
    with pytest.raises(SystemExit, match=r"unknown entries \['trian'\]"):
        suite.bench_suite(args)


def test_the_suite_is_not_restarted_with_the_huge_page_tunable(monkeypatch):
    """Its children inherit its environment: restarted with the tunable, it would hand it
    to PyTorch's side too, which runs as the environment is."""
    restarts = []
    monkeypatch.setattr(cli.hugepages, "restart_with_hugepages", lambda: restarts.append(1))
    monkeypatch.setattr(cli.os, "sched_setaffinity", lambda pid, cpus: None)  # not pytest's
    monkeypatch.setattr(sys, "argv", ["bench.py", "suite", "--only", "trian"])
    with pytest.raises(SystemExit, match="unknown entries"):
        cli.main()
    assert restarts == []
    monkeypatch.setattr(sys, "argv", ["bench.py", "memcheck", "--gin_files", "x"])
    monkeypatch.setitem(cli.IN_PROCESS, "memcheck", (lambda args: sys.exit("stopped"), None))
    with pytest.raises(SystemExit, match="stopped"):
        cli.main()
    assert restarts == [1]  # the in-process benches run as `python -m cmrcx.train` does


@pytest.mark.slow  # child processes with jax and torch: ~40 s
def test_the_suite_runs_its_entries_and_keeps_their_reports(tmp_path, monkeypatch):
    tiny = "--layers 2 --hidden 64 --heads 2 --intermediate 128 --vocab 512 --seq 64"
    timing = "--rounds 1 --warmup 2 --steps 2"
    tiny_t5 = "--d_model 64 --d_ff 128 --d_kv 16 --heads 2 --layers 2 --decoder_layers 2"
    tiny_t5 += " --vocab 512 --input_length 32 --target_length 8 --batch 1"
    entries = (
        ("train", f"train {tiny} {timing}"),
        ("generate", f"generate {tiny_t5} --method greedy {timing}"),
    )
    monkeypatch.setattr(suite, "ENTRIES", entries)
    args = argparse.Namespace(only="", out=str(tmp_path), quiet_load=1e9, max_wait=0, cpus="0")
    report = suite.bench_suite(args)
    assert [row["label"] for row in report["rows"]] == ["train", "generate greedy batch 1"]
    for row in report["rows"]:
        assert row["cmrcx"] > 0 and row["torch"] > 0 and row["ratio"] > 0
    kept = json.loads((tmp_path / "train.json").read_text())
    assert kept["benchmark"] == "train" and kept["suite"]["arguments"][0] == "train"
    assert (tmp_path / "generate.json").exists()
