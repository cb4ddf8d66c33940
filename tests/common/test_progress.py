"""cmrcx.common.progress: no long phase is silent, no short one is noisy."""

from __future__ import annotations

import itertools

from cmrcx.common import progress


def _clock(monkeypatch, step: float):
    ticks = itertools.count()
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(ticks) * step)


def test_a_long_read_prints_counts_and_its_end(monkeypatch, capsys):
    _clock(monkeypatch, 2.0)  # each item takes 2 s: a line every 3 items (>= 5 s)
    assert list(progress.counted(range(7), "reading chid train records")) == list(range(7))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("reading chid train records: 3 (")
    assert lines[-1].startswith("reading chid train records: 7 in ")
    assert len(lines) == 3  # 3, 6 and the end


def test_a_short_read_prints_nothing(monkeypatch, capsys):
    _clock(monkeypatch, 0.001)
    assert list(progress.counted(range(100), "reading c3 validation records")) == list(range(100))
    assert capsys.readouterr().out == ""


def test_other_hosts_print_nothing(monkeypatch, capsys):
    _clock(monkeypatch, 10.0)
    list(progress.counted(range(5), "reading", shown=False))
    bar = progress.Progress("preparing", shown=False)
    bar.update(5)
    bar.done(5)
    assert capsys.readouterr().out == ""


def test_an_announced_phase_says_when_it_starts_and_ends(monkeypatch, capsys):
    _clock(monkeypatch, 0.001)
    bar = progress.Progress("preparing x train examples", note=" (once)")
    bar.update(256)
    bar.done(256, " -> /cache/x")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "preparing x train examples (once) ..."
    assert lines[1].startswith("preparing x train examples: 256 in ") and lines[1].endswith(
        " -> /cache/x"
    )
