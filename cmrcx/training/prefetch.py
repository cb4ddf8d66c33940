"""Training batches read ahead on a background thread, so the step does not wait on the disk.

The prepared store's reader (`PreparedSplit.rows`, `os.pread` per row) runs in the training
loop's thread unless something reads ahead: at a 3.5 s CPU step that costs nothing, at an
accelerator's tens of milliseconds the device would wait for every batch. `Prefetched`
pulls the next `depth` batches of any batch iterator on one daemon thread (the reads
release the GIL) into a bounded queue; the loop takes them in the same order.

What stays as without it:
- the batches and their order (the thread only runs the same iterator earlier);
- exact resume: a checkpoint records the step, and a resumed run's batches are computed
  from that step (`input_pipeline.train_batches`), never from the reader's position, so
  the batches read ahead but not consumed are simply read again;
- errors: an exception of the reader is raised in the training thread, when the loop
  asks for the batch it broke on, as the same exception (its message names the file and
  record) with a note saying it came from the prefetch thread.

`close()` (or leaving the `with` block) stops the thread and joins it: after a loop that
ends, breaks on SIGTERM or raises, no thread is left reading.
depth=0 reads in the caller's thread, as before.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

# Seconds between the thread's checks for `close()` while the queue is full.
_POLL_SECONDS = 0.05
# close() waits this long for a read in flight; a reader stuck longer (a hung network
# file system) is left to die with the process (the thread is a daemon).
JOIN_SECONDS = 60.0


class _End:
    """Queue item: the source iterator is exhausted (or failed, with `error`)."""

    def __init__(self, error: BaseException | None = None):
        self.error = error


class Prefetched:
    """The items of `source`, `depth` of them read ahead on a background thread.

    >>> with Prefetched(iter(range(5)), depth=2) as items:
    ...     list(items)
    [0, 1, 2, 3, 4]
    """

    def __init__(self, source: Iterator, depth: int, name: str = "cmrcx-prefetch"):
        if depth < 0:
            raise ValueError(f"prefetch depth {depth}: use 0 (no read-ahead) or more")
        self._source, self.depth = source, depth
        self._stop = threading.Event()
        self._queue: queue.Queue = queue.Queue(maxsize=max(depth, 1))
        self._done = False
        self.thread = None
        if depth:
            self.thread = threading.Thread(target=self._fill, name=name, daemon=True)
            self.thread.start()

    def _fill(self) -> None:
        """The thread: the source's items into the queue until it ends, fails or is closed."""
        try:
            for item in self._source:
                if not self._put(item):
                    return
            self._put(_End())
        except BaseException as error:  # noqa: BLE001 - handed to the training thread
            error.add_note(f"(raised in the input's prefetch thread {self.thread.name!r})")
            self._put(_End(error))
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:  # a generator's files close in the thread that ran it
                close()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Prefetched:
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        if self.thread is None:
            return next(self._source)
        item = self._queue.get()
        if isinstance(item, _End):
            self._done = True
            self.close()
            if item.error is not None:
                raise item.error
            raise StopIteration
        return item

    def close(self) -> None:
        """Stops the read-ahead and joins the thread (idempotent)."""
        self._done = True
        if self.thread is None:
            close = getattr(self._source, "close", None)
            if close is not None:
                close()
            return
        self._stop.set()
        if self.thread is not threading.current_thread():
            self.thread.join(JOIN_SECONDS)

    def __enter__(self) -> Prefetched:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
