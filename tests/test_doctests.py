"""Every `>>>` example in cmrcx/, tasks/ and tools/ runs and prints what it says: the
modules are found by their text (a new example is run without a line here)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util

import pytest

from tests.support import REPO_ROOT

# Folder of the repository -> the package its modules import as (tools/ are scripts).
ROOTS = {"cmrcx": "cmrcx", "tasks": "cmrcx.tasks", "tools": None}


def _with_examples() -> list[str]:
    found = []
    for folder in ROOTS:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                found.append(path.relative_to(REPO_ROOT).as_posix())
    return found


def _module(relative: str, monkeypatch):
    folder, *parts = relative.removesuffix(".py").split("/")
    package = ROOTS[folder]
    if package is None:  # a script, next to the modules it imports
        monkeypatch.syspath_prepend(str(REPO_ROOT / folder))
        spec = importlib.util.spec_from_file_location(parts[-1], REPO_ROOT / relative)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    if parts[-1] == "__init__":
        parts.pop()
    return importlib.import_module(".".join([package, *parts]))


def test_the_examples_are_found():
    assert "cmrcx/benchmarks/windows.py" in _with_examples()


@pytest.mark.parametrize("relative", _with_examples())
def test_examples(relative, monkeypatch):
    result = doctest.testmod(_module(relative, monkeypatch))
    assert result.attempted > 0, f"{relative}: its '>>> ' is not a docstring example"
    assert result.failed == 0, f"{relative}: {result.failed} of {result.attempted} failed"
