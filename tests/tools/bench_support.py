"""tools/bench.py run by the tests: its command line in a child process, or a command
that bench.py runs in its own process (cli.IN_PROCESS) run in the test's."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys

from tests.support import REPO_ROOT

TOOLS = REPO_ROOT / "tools"
sys.path.insert(0, str(TOOLS))  # benchkit, as tools/bench.py imports it
from benchkit import cli  # noqa: E402


def run_bench(*args: str) -> dict:
    """`bench.py ARGS --json` in a subprocess; its JSON report."""
    proc = subprocess.run(
        [sys.executable, str(TOOLS / "bench.py"), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)  # stdout is exactly one JSON object


def bench_in_process(*args: str) -> dict:
    """`bench.py ARGS --json` for an in-process command, run here: what main() checks of
    its report (nothing else on stdout, JSON, every figure finite), without bench.py's
    start-up (the huge-page re-exec, which tests/cpu/test_hugepages.py checks, and the
    pinning to --cpus). `run_bench("eval", ...)` in test_bench.py runs the command line."""
    args = cli.build_parser().parse_args([*args, "--json"])
    run, _ = cli.IN_PROCESS[args.command]
    stdout = io.StringIO()
    if args.command == "layerops":  # it sets PyTorch's thread count to the --cpus given
        import torch

        threads = torch.get_num_threads()
    try:
        with contextlib.redirect_stdout(stdout):
            report = json.loads(json.dumps(run(args)))
    finally:
        if args.command == "layerops":
            torch.set_num_threads(threads)
    assert stdout.getvalue() == ""  # stdout stays exactly one JSON object
    cli.check_finite(report)
    return report
