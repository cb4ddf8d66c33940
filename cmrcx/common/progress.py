"""A progress line for long phases that have no bar of their own.

    reading chid train records: 61,440 (12,288/s)      <- every `every` seconds
    reading chid train records: 577,157 in 47.0 s

With `announce=False` (what `counted` uses) a phase that ends within `every` seconds
prints nothing, and a longer one its counts and end. `shown=False` prints nothing at all
(the other hosts of a multi-host run).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
EVERY_SECONDS = 5.0


class Progress:
    """`what: count (rate/s)` every `every` seconds; `what: count in S s[ suffix]` at the end."""

    def __init__(self, what: str, shown=True, every=EVERY_SECONDS, note="", announce=True) -> None:
        self.what, self.shown, self.every = what, shown, every
        self.start = self.last = time.perf_counter()
        self.printed = False
        if announce:
            self._print(f"{what}{note} ...")

    def _print(self, line: str) -> None:
        if self.shown:
            print(line, flush=True)
            self.printed = True

    def update(self, count: int) -> None:
        now = time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            self._print(f"{self.what}: {count:,} ({count / (now - self.start):,.0f}/s)")

    def done(self, count: int, suffix: str = "") -> None:
        """The end line: always after an announced start, else only after a count line."""
        if self.printed:
            seconds = time.perf_counter() - self.start
            self._print(f"{self.what}: {count:,} in {seconds:.1f} s{suffix}")


def counted(items: Iterable[T], what: str, shown: bool = True) -> Iterator[T]:
    """The items of `items`, with a Progress line about them while they are read."""
    progress = Progress(what, shown, announce=False)
    count = 0
    for count, item in enumerate(items, 1):
        progress.update(count)
        yield item
    progress.done(count)
