"""tools/bench.py memcheck: the memory check's verdict on gin files as written, from the
run `cmrcx.train` builds (tiny gin files here; the paper ones only by hand: docs/performance.md)."""

from __future__ import annotations

import json
import sys

import pytest

from cmrcx.training import memory_check
from tests.support import REPO_ROOT
from tests.tools.bench_support import bench_in_process

TOOLS = REPO_ROOT / "tools"
sys.path.insert(0, str(TOOLS))
from benchkit import memcheck  # noqa: E402


def test_memcheck_reports_what_a_run_of_each_gin_file_compiles():
    # A BERT cloze task on synthetic files and a T5 generation task on the LOT sample, each
    # gin file in its child process (harness.spawn_code) as bench.py memcheck runs them.
    report = bench_in_process("memcheck", "--gin_files", "cmrc2019_tiny.gin,lot_outgen_tiny.gin")
    rows = report["rows"]
    assert [(row["gin_file"], row["task"], row["model"]) for row in rows] == [
        ("cmrc2019_tiny.gin", "cmrc2019", "BertConfig"),
        ("lot_outgen_tiny.gin", "lot_outgen", "T5Config"),
    ]
    for row in rows:
        needed = row["needed_gib"]
        assert 0 < needed["state"] < needed["total"]
        assert needed["temporaries"] > 0
        assert row["runs"] and row["advice"] is None and "error" not in row
        assert row["available_gib"] > 0
    # The gin file's batch: cmrc2019_tiny.gin runs 8 windows of 128 tokens.
    assert rows[0]["batch_shape"][0] == 8 and rows[0]["grad_accum_steps"] == 1


def test_memcheck_reports_the_error_of_a_step_that_cannot_fit(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(memory_check, "available_host_bytes", lambda: (2**20, "a test"))
    monkeypatch.chdir(REPO_ROOT)
    memcheck.child("cmrc2019_tiny.gin", str(tmp_path), [])
    row = json.loads(capsys.readouterr().out.splitlines()[-1][len(memcheck.RESULT) :])
    assert not row["runs"] and row["advice"] is None  # no micro-batching fits 1 MiB
    assert row["available_gib"] == 2**20 / 2**30 and row["available_from"] == "a test"
    assert row["error"].startswith("the training step needs about")
    assert "1 MiB are available (a test)" in row["error"]
    advised = {**row, "gin_file": "b.gin", "advice": {"grad_accum_steps": 4, "gib": 0.5}}
    fitting = {**row, "gin_file": "c.gin", "runs": True, "error": None}
    report = {"benchmark": "memcheck", "machine": {}, "rows": [row, advised, fitting]}
    monkeypatch.setattr(memcheck.harness, "print_header", lambda report: None)
    memcheck.print_memcheck({**report, "note": ""})
    out = capsys.readouterr().out
    assert "stops: no accumulation fits" in out
    assert "stops: grad_accum_steps=4 (0.5)" in out
    assert out.count("error: the training step needs about") == 2  # not for c.gin
    # RunConfig.check_memory=False given as a binding: such a run starts.
    memcheck.child("cmrc2019_tiny.gin", str(tmp_path / "off"), ["RunConfig.check_memory=False"])
    row = json.loads(capsys.readouterr().out.splitlines()[-1][len(memcheck.RESULT) :])
    assert row["runs"] and not row["check_memory"] and "error" not in row
    memcheck.print_memcheck({**report, "rows": [row], "note": ""})
    assert "runs (check_memory off)" in capsys.readouterr().out


@pytest.mark.parametrize("task", ["clue_afqmc", "lot_outgen_x"])
def test_memcheck_names_the_tasks_it_has_files_for(task, tmp_path):
    with pytest.raises(SystemExit, match=f"no files for task '{task}'"):
        memcheck._data_for(task, str(tmp_path / "data"))
