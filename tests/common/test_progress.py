"""cmrcx.common.progress: no long phase is silent, no short one is noisy."""

from __future__ import annotations

import gc
import io
import itertools
import re
import threading
import types

import pytest
from tqdm import tqdm

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


class Ticks:
    """The clock and sleep of progress's threads (`progress._monotonic`, `progress._wait`):
    a thread's wait returns only when the test lets a tick pass, the clock then `seconds`
    later; `tick(n)` returns once the thread has handled n ticks and waits again. So the
    lines and redraws are counted per tick, never after a real sleep."""

    LIMIT = 60.0  # real seconds a thread may take to handle one tick (a loaded machine)

    def __init__(self) -> None:
        self.now = 0.0
        self._changed = threading.Condition()
        self._granted = self._entered = 0
        self._waiting = False

    def monotonic(self) -> float:
        return self.now

    def wait(self, stopped: threading.Event, seconds: float) -> bool:
        with self._changed:
            self._entered, self._waiting = self._entered + 1, True
            self._changed.notify_all()
            while not self._granted:
                if stopped.is_set():
                    self._waiting = False
                    return True
                self._changed.wait(0.005)  # polls `stopped`: set without our condition
            self._granted, self._waiting = self._granted - 1, False
            self.now += seconds
            return stopped.is_set()

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            with self._changed:
                assert self._changed.wait_for(lambda: self._waiting, self.LIMIT), "no thread waits"
                target = self._entered + 1
                self._granted += 1
                self._changed.notify_all()
                assert self._changed.wait_for(lambda t=target: self._entered >= t, self.LIMIT)


@pytest.fixture
def ticks(monkeypatch) -> Ticks:
    ticks = Ticks()
    monkeypatch.setattr(progress, "_monotonic", ticks.monotonic)
    monkeypatch.setattr(progress, "_wait", ticks.wait)
    monkeypatch.setattr(progress.time, "perf_counter", ticks.monotonic)
    return ticks


STILL = r"^{}: {} so far, still working \({} s since the {}\)$"


def _joined(*names: str) -> None:
    """Waits for the heartbeat threads of these phases to end (bounded: a thread that does
    not stop fails the test), after which nothing of theirs can print."""
    for thread in threading.enumerate():
        if thread.name.removeprefix("progress: ") in names:
            thread.join(timeout=Ticks.LIMIT)
            assert not thread.is_alive(), thread.name


def test_a_wait_for_the_next_item_prints_still_working(ticks, capsys):
    bar = progress.Progress("preparing x train examples", announce=False)  # every 5 s
    ticks.tick(7)  # the heartbeat looks each second; 7 s quiet is less than 1.5 x 5 s
    assert capsys.readouterr().out == ""
    ticks.tick(1)  # nothing counted yet
    (line,) = capsys.readouterr().out.splitlines()
    assert re.match(STILL.format("preparing x train examples", 0, 8, "start"), line), line
    bar.update(569_088)  # at 8 s: a count line (the first period is over)
    assert capsys.readouterr().out.startswith("preparing x train examples: 569,088 (")
    ticks.tick(8)  # the last chunk is slow; the heartbeat saw the new count 1 s after it
    (line,) = capsys.readouterr().out.splitlines()
    assert re.match(STILL.format("preparing x train examples", "569,088", 7, "count changed"),
                    line), line  # fmt: skip
    bar.done(575_862)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("preparing x train examples: 575,862 in ")
    _joined("preparing x train examples")  # done: the heartbeat has stopped
    assert capsys.readouterr().out == ""


def test_a_steady_phase_has_no_heartbeat_lines(ticks, capsys):
    bar = progress.Progress("reading", announce=False)  # every 5 s: quiet after 7.5 s
    for count in range(1, 31):  # a count line every 5 s, the end line
        bar.update(count)
        ticks.tick(1)
    bar.done(30)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and not any("still working" in line for line in lines), lines


def test_a_closed_dropped_or_abandoned_phase_goes_quiet(ticks, capsys):
    """No tick passes: each heartbeat ends on its phase's end alone (no time runs out)."""
    closed = progress.Progress("closed", announce=False)
    closed.close()
    dropped = progress.Progress("dropped", announce=False)
    del dropped
    gc.collect()
    abandoned = progress.counted(range(10), "abandoned")
    next(abandoned)
    abandoned.close()
    with progress.Progress("failed", announce=False):
        pass
    _joined("closed", "dropped", "abandoned", "failed")
    assert capsys.readouterr().out == ""


def test_a_generator_with_its_consumer_or_left_suspended_is_quiet(ticks, capsys):
    """`counted` speaks only while it awaits its next item: a consumer's slow work and a
    generator kept in a traceback's frame print no "still working" lines."""

    def slow_items():
        yield 1
        ticks.tick(8)  # the producer is slow here
        yield 2

    items = progress.counted(slow_items(), "reading")
    items.__next__()
    ticks.tick(8)  # the consumer holds item 1
    assert capsys.readouterr().out == ""
    assert next(items) == 2  # awaiting item 2: the heartbeat speaks
    assert "reading: 1 so far, still working (8 s since the count changed)" in (
        capsys.readouterr().out
    )
    ticks.tick(8)  # suspended again, never finished
    assert capsys.readouterr().out == ""
    items.close()


def _redraws(stream) -> list[str]:
    return [part for part in stream.getvalue().split("\r") if part.strip()]


def test_a_ticking_bar_is_redrawn_during_a_long_step_and_not_after(ticks):
    stream = io.StringIO()
    bar = tqdm(range(2), desc="train", file=stream, mininterval=0)
    with progress.ticking(bar, every=0.05):
        for step in bar:
            before = len(_redraws(stream))
            ticks.tick(8 if step == 0 else 0)  # one long step: 8 redraws
            assert len(_redraws(stream)) == before + (8 if step == 0 else 0)
    after = len(_redraws(stream))
    assert not any(t.name.startswith("ticking: ") for t in threading.enumerate())
    assert len(_redraws(stream)) == after  # the thread is gone: nothing after the block


def test_a_paused_or_disabled_bar_is_not_redrawn(ticks):
    stream = io.StringIO()
    bar = tqdm(range(1), desc="generate", file=stream, mininterval=0)
    with progress.ticking(bar, every=0.02) as ticker:
        ticker.paused = True  # a generator suspended at its yield
        before = len(_redraws(stream))
        ticks.tick(5)
        assert len(_redraws(stream)) == before
        ticker.paused = False
        ticks.tick(1)
        assert len(_redraws(stream)) == before + 1
    quiet = tqdm(range(1), desc="eval", file=stream, disable=True)
    with progress.ticking(quiet, every=0.02):
        assert not any(t.name.startswith("ticking: ") for t in threading.enumerate())


class Timers(list):
    """`progress._timer`: the timers said_if_slow starts, fired by the test."""

    def __call__(self, after, function):
        timer = types.SimpleNamespace(after=after, fire=function, started=False, daemon=False)
        timer.start = lambda: setattr(timer, "started", True)
        timer.cancel = lambda: setattr(timer, "fire", None)
        self.append(timer)
        return timer


def test_a_slow_phase_without_a_bar_is_said_and_a_quick_one_is_not(monkeypatch, capsys):
    timers = Timers()
    monkeypatch.setattr(progress, "_timer", timers)
    _clock(monkeypatch, 0.3)  # each phase lasts 0.3 s
    with progress.said_if_slow("eval validation: writing the predictions", after=0.05):
        timers[-1].fire()  # 0.05 s in, still running
    with progress.said_if_slow("eval test: writing the predictions", after=0.5):
        pass
    assert timers[-1].started and timers[-1].fire is None  # cancelled: it ended first
    with progress.said_if_slow("on another host", after=0.05, shown=False):
        assert not timers[-1].started
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "eval validation: writing the predictions ..."
    assert re.fullmatch(r"eval validation: writing the predictions: \d+ s", lines[1])
    assert len(lines) == 2
