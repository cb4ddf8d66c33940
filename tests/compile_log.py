"""Where the suite's time goes: a pytest plugin that records, per test, the XLA work done
in the test's own process (JAX's compile events: tracing, lowering to StableHLO, the
backend compile, persistent-cache hits and misses) beside the test's wall time.

    COMPILE_LOG=/tmp/compile.jsonl python -m pytest -n 2 -p tests.compile_log ...
    python -m tests.compile_log /tmp/compile.jsonl     # seconds and compiles per file

Each process (the xdist workers too) appends one JSON line per test to $COMPILE_LOG when
it ends. Entry points a test starts in a child process are not seen: their time shows as
wall time without compile time. docs/architecture.md ("Where the default test suite's
time goes") reads a run of it.
"""

from __future__ import annotations

import collections
import json
import os
import sys

_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}
_COUNTS = {
    "/jax/compilation_cache/cache_hits": "hits",
    "/jax/compilation_cache/cache_misses": "misses",
}

_current = ["<collection>"]
_totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def _on_duration(event: str, duration: float, **_) -> None:
    if event in _EVENTS:
        _totals[_current[0]][_EVENTS[event]] += duration
        _totals[_current[0]][_EVENTS[event] + "_n"] += 1


def _on_event(event: str, **_) -> None:
    if event in _COUNTS:
        _totals[_current[0]][_COUNTS[event]] += 1


def pytest_configure(config):
    # jax loads here, after tests/conftest.py has set the session's compilation-cache
    # variables (jax reads them once, when it is imported): a plugin given with `-p`
    # loads before conftest.py, and importing jax there would turn the cache off.
    from jax import monitoring

    if os.environ.get("COMPILE_LOG"):
        monitoring.register_event_duration_secs_listener(_on_duration)
        monitoring.register_event_listener(_on_event)


def pytest_runtest_logstart(nodeid, location):
    _current[0] = nodeid


def pytest_runtest_logreport(report):
    _totals[report.nodeid]["wall"] += report.duration


def pytest_sessionfinish(session):
    path = os.environ.get("COMPILE_LOG")
    controller = session.config.pluginmanager.getplugin("dsession") is not None  # xdist's
    if path and not controller:  # which sees its workers' reports again
        with open(path, "a", encoding="utf-8") as f:
            for test, totals in _totals.items():
                f.write(json.dumps({"test": test, **totals}) + "\n")


def per_file(lines) -> dict[str, collections.Counter]:
    """The JSON lines' totals summed per test file."""
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in lines:
        record = json.loads(line)
        files[record.pop("test").split("::")[0]].update(record)
    return files


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        files = per_file(f)
    total = sum(files.values(), collections.Counter())
    print(
        f"tests' wall {total['wall']:.0f} s; in process: compile {total['compile']:.0f} s "
        f"({total['compile_n']} compiles, {total['hits']} cache hits), trace and lower "
        f"{total['trace'] + total['lower']:.0f} s"
    )
    print(f"{'file':64} {'wall s':>7} {'compile s':>9} {'compiles':>8} {'hits':>5}")
    for name, t in sorted(files.items(), key=lambda item: -item[1]["wall"]):
        print(f"{name:64} {t['wall']:7.0f} {t['compile']:9.0f} {t['compile_n']:8} {t['hits']:5}")


if __name__ == "__main__":
    main(*sys.argv[1:])
