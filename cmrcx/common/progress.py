"""A progress line for long phases that have no bar of their own.

    reading chid train records: 61,440 (12,288/s)      <- every `every` seconds
    reading chid train records: 577,157 in 47.0 s

With `announce=False` (what `counted` uses) a phase that ends within `every` seconds
prints nothing, and a longer one its counts and end. `shown=False` prints nothing at all
(the other hosts of a multi-host run).

The count lines come from `update`, so they stop while the phase waits for its next item
(a slow producer, the last chunk of a store). A heartbeat thread fills such a gap: once
1.5 x `every` seconds pass without a line, it prints

    preparing chid train examples: 569,088 so far, still working (8 s since the count changed)

and again each time as long passes, until `done` or `close` (a `with` block's end, or
the Progress dropped). The lines go through `tqdm.external_write_mode`, so they appear
above an open progress bar instead of on its line.

`ticking` redraws a tqdm bar every `every` seconds, so its elapsed time moves during a
long step: one BERT-base step at the paper's batch 24 x 512 takes 35 to 60 s on 2 cores.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")
EVERY_SECONDS = 5.0
QUIET_FACTOR = 1.5  # the heartbeat speaks after this many `every`s without a line
# The threads' clock and sleep, real even where tests fake `time`; the tests of this
# module replace them with ticks they let pass one by one (no redraw counted after a sleep).
_monotonic = time.monotonic
_wait = threading.Event.wait  # (stopped, seconds) -> True once `stopped` is set
_timer = threading.Timer


class Progress:
    """`what: count (rate/s)` every `every` seconds; `what: count in S s[ suffix]` at the end."""

    def __init__(self, what: str, shown=True, every=EVERY_SECONDS, note="", announce=True) -> None:
        self.what, self.shown, self.every = what, shown, every
        self.start = self.last = time.perf_counter()
        self.count, self.printed = 0, False
        self.waiting = True  # False while the items are with their consumer (`counted`)
        self._lock, self._stopped = threading.Lock(), threading.Event()
        self._line_at = _monotonic()
        if shown:
            weakref.finalize(self, self._stopped.set)
            heartbeat = threading.Thread(
                target=_heartbeat,
                args=(weakref.ref(self), self._stopped),
                name=f"progress: {what}",
                daemon=True,
            )
            try:
                heartbeat.start()
            except RuntimeError:  # no thread to spare: the count lines still come
                pass
        if announce:
            self._print(f"{what}{note} ...")

    def _print(self, line: str) -> None:
        if self.shown:
            with self._lock:
                _write(line)
                self.printed, self._line_at = True, _monotonic()

    def update(self, count: int) -> None:
        self.count = count
        now = time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            self._print(f"{self.what}: {count:,} ({count / (now - self.start):,.0f}/s)")

    def done(self, count: int, suffix: str = "") -> None:
        """The end line: always after an announced start, else only after a count line."""
        self.close()
        if self.printed:
            seconds = time.perf_counter() - self.start
            self._print(f"{self.what}: {count:,} in {seconds:.1f} s{suffix}")

    def close(self) -> None:
        """Stops the heartbeat without an end line (a phase abandoned or failed)."""
        with self._lock:
            self._stopped.set()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _heartbeat(ref: weakref.ref, stopped: threading.Event) -> None:
    """Prints a "still working" line when `ref`'s Progress has been quiet too long."""
    progress = ref()
    if progress is None:
        return
    tick = min(1.0, max(progress.every / 5, 0.005))
    seen, changed_at = progress.count, _monotonic()
    del progress  # hold no reference while waiting: a dropped Progress stops the thread
    while not _wait(stopped, tick):
        progress = ref()
        if progress is None:
            return
        now = _monotonic()
        if progress.count != seen:
            seen, changed_at = progress.count, now
        quiet = QUIET_FACTOR * progress.every
        if progress.waiting and now - progress._line_at >= quiet:
            with progress._lock:  # checked again: a count line or the end may come first
                if stopped.is_set():
                    return
                if now - progress._line_at >= quiet:
                    since = "the count changed" if seen else "the start"
                    _write(
                        f"{progress.what}: {seen:,} so far, still working "
                        f"({now - changed_at:.0f} s since {since})"
                    )
                    progress.printed, progress._line_at = True, now
        del progress


def counted(
    items: Iterable[T], what: str, shown: bool = True, every: float = EVERY_SECONDS
) -> Iterator[T]:
    """The items of `items`, with a Progress line about them while they are read. The
    heartbeat speaks only while the next item is awaited, not while the consumer holds
    one (its own phase speaks for it), nor for a generator left suspended."""
    progress = Progress(what, shown, every, announce=False)
    count = 0
    try:
        for count, item in enumerate(items, 1):
            progress.update(count)
            progress.waiting = False
            yield item
            progress.waiting = True
    finally:
        progress.close()
    progress.done(count)


def _write(line: str) -> None:
    """A line on stdout, flushed, above any open tqdm bar (cleared and redrawn after)."""
    with tqdm.external_write_mode():
        print(line, flush=True)


class Ticker:
    """What `ticking` yields: set `paused` while a generator is suspended at a `yield`,
    so a generator left unfinished (a traceback's frame) draws nothing later."""

    paused = False


@contextlib.contextmanager
def ticking(bar: tqdm, every: float = EVERY_SECONDS) -> Iterator[Ticker]:
    """Redraws `bar` from a thread every `every` seconds until the block ends: its elapsed
    time moves while one step, batch or compilation lasts longer than that."""
    ticker = Ticker()
    if bar.disable:
        yield ticker
        return
    stopped = threading.Event()

    def tick() -> None:
        while not _wait(stopped, every):
            # Under the bar's lock: tqdm's close disables the bar before it takes the lock
            # to draw its last line, so no redraw lands after that line.
            with bar.get_lock():
                if not (bar.disable or ticker.paused):
                    bar.refresh(nolock=True)

    thread = threading.Thread(target=tick, name=f"ticking: {bar.desc}", daemon=True)
    thread.start()
    try:
        yield ticker
    finally:
        stopped.set()
        if thread is not threading.current_thread():  # a generator closed by the GC there
            thread.join()


@contextlib.contextmanager
def said_if_slow(what: str, after: float = 10.0, shown: bool = True):
    """A phase with no bar or count of its own: `what ...` is printed if it is still
    running `after` seconds in, and its time when it ends: no silent wait."""
    timer = _timer(after, lambda: _write(f"{what} ..."))
    timer.daemon = True
    start = time.perf_counter()
    if shown:
        timer.start()
    try:
        yield
    finally:
        timer.cancel()
        seconds = time.perf_counter() - start
        if seconds >= after and shown:
            _write(f"{what}: {seconds:.0f} s")
