"""cmrcx.common.progress: no long phase is silent, no short one is noisy."""

from __future__ import annotations

import gc
import io
import itertools
import re
import threading
import time

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


# The heartbeat runs on the real clock (time.monotonic); these use a short `every`.
EVERY = 0.04
STILL = r"^{}: {} so far, still working \(\d+ s since the {}\)$"


def _quiet_lines(capsys, seconds: float) -> list[str]:
    time.sleep(seconds)
    return capsys.readouterr().out.splitlines()


def test_a_wait_for_the_next_item_prints_still_working(capsys):
    bar = progress.Progress("preparing x train examples", every=EVERY, announce=False)
    lines = _quiet_lines(capsys, 0.5)  # nothing counted yet
    assert lines and all(re.match(STILL.format("preparing x train examples", 0, "start"), x)
                         for x in lines)  # fmt: skip
    bar.update(569_088)
    lines = _quiet_lines(capsys, 0.5)  # the last chunk is slow
    assert any(re.match(STILL.format("preparing x train examples", "569,088", "count changed"), x)
               for x in lines)  # fmt: skip
    bar.done(575_862)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("preparing x train examples: 575,862 in ")
    assert _quiet_lines(capsys, 0.3) == []  # done: the heartbeat has stopped


def test_a_steady_phase_has_no_heartbeat_lines(capsys, monkeypatch):
    monkeypatch.setattr(progress, "QUIET_FACTOR", 6.0)  # a 1.2 s stall, not a busy CI, speaks
    bar = progress.Progress("reading", every=0.2, announce=False)
    stop = time.monotonic() + 1.5
    count = 0
    while time.monotonic() < stop:
        count += 1
        bar.update(count)
        time.sleep(0.002)
    bar.done(count)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 3 and not any("still working" in line for line in lines)


def test_a_closed_dropped_or_abandoned_phase_goes_quiet(capsys):
    closed = progress.Progress("closed", every=EVERY, announce=False)
    closed.close()
    dropped = progress.Progress("dropped", every=EVERY, announce=False)
    del dropped
    gc.collect()
    abandoned = progress.counted(range(10), "abandoned")
    next(abandoned)
    abandoned.close()
    with progress.Progress("failed", every=EVERY, announce=False):
        pass
    assert _quiet_lines(capsys, 0.5) == []
    names = {"closed", "dropped", "abandoned", "failed"}
    assert not [t for t in threading.enumerate() if t.name.removeprefix("progress: ") in names]


def test_a_generator_with_its_consumer_or_left_suspended_is_quiet(capsys):
    """`counted` speaks only while it awaits its next item: a consumer's slow work and a
    generator kept in a traceback's frame print no "still working" lines."""

    def slow_items():
        yield 1
        time.sleep(0.4)  # the producer is slow here
        yield 2

    items = progress.counted(slow_items(), "reading", every=EVERY)
    items.__next__()
    time.sleep(0.4)  # the consumer holds item 1
    assert capsys.readouterr().out == ""
    assert next(items) == 2  # awaiting item 2: the heartbeat speaks
    assert "reading: 1 so far, still working (" in capsys.readouterr().out
    time.sleep(0.4)  # suspended again, never finished
    assert capsys.readouterr().out == ""
    items.close()


def _redraws(stream) -> list[str]:
    return [part for part in stream.getvalue().split("\r") if part.strip()]


def test_a_ticking_bar_is_redrawn_during_a_long_step_and_not_after():
    stream = io.StringIO()
    bar = tqdm(range(2), desc="train", file=stream, mininterval=0)
    with progress.ticking(bar, every=0.05):
        for _ in bar:
            time.sleep(0.4)  # one long step: about 8 redraws
        during = len(_redraws(stream))
    assert during >= 2 + 4, stream.getvalue()  # more than the start and the two steps
    assert not any(t.name.startswith("ticking: ") for t in threading.enumerate())
    time.sleep(0.2)
    assert len(_redraws(stream)) == during  # nothing after the block


def test_a_paused_or_disabled_bar_is_not_redrawn():
    stream = io.StringIO()
    bar = tqdm(range(1), desc="generate", file=stream, mininterval=0)
    with progress.ticking(bar, every=0.02) as ticker:
        ticker.paused = True  # a generator suspended at its yield
        time.sleep(0.05)  # a redraw already under way lands before the count
        before = len(_redraws(stream))
        time.sleep(0.2)
        assert len(_redraws(stream)) == before
    quiet = tqdm(range(1), desc="eval", file=stream, disable=True)
    with progress.ticking(quiet, every=0.02):
        assert not any(t.name.startswith("ticking: ") for t in threading.enumerate())


def test_a_slow_phase_without_a_bar_is_said_and_a_quick_one_is_not(capsys):
    with progress.said_if_slow("eval validation: writing the predictions", after=0.05):
        time.sleep(0.3)
    with progress.said_if_slow("eval test: writing the predictions", after=0.5):
        pass
    with progress.said_if_slow("on another host", after=0.05, shown=False):
        time.sleep(0.2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "eval validation: writing the predictions ..."
    assert re.fullmatch(r"eval validation: writing the predictions: \d+ s", lines[1])
    assert len(lines) == 2
