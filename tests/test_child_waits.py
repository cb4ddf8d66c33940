"""Every wait of a test on a child process is bounded: `subprocess.run`, `.wait()` and
`.communicate()` name a timeout, so a child that hangs fails its test (with its output)
instead of holding the suite. The fixture generators in tests/fixtures are run by hand."""

from __future__ import annotations

import ast

from tests.support import REPO_ROOT

RUNS = ("run", "call", "check_call", "check_output")


def unbounded(source: str) -> list[int]:
    """The lines of `source` that wait on a child with no timeout."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name, owner = node.func.attr, ast.unparse(node.func.value)
        is_run = owner == "subprocess" and name in RUNS
        # Popen.wait(seconds) and Event.wait(seconds) take the bound as their argument.
        is_wait = name in ("wait", "communicate") and not node.args
        if (is_run or is_wait) and "timeout" not in {k.arg for k in node.keywords}:
            found.append(node.lineno)
    return found


def test_every_wait_on_a_child_is_bounded():
    paths = [p for p in sorted((REPO_ROOT / "tests").rglob("*.py")) if "fixtures" not in p.parts]
    found = {
        str(path.relative_to(REPO_ROOT)): lines
        for path in paths
        if (lines := unbounded(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_check_sees_an_unbounded_wait():
    source = (
        "child.wait()\nsubprocess.run(['true'])\nchild.communicate()\n"
        "child.wait(timeout=5)\nsubprocess.run(['true'], timeout=5)\nstopped.wait(1)\n"
    )
    assert unbounded(source) == [1, 2, 3]
