"""Entry points stay thin and gin stays in `cli/` (DESIGN.md "Layout"): each `cmrcx/*.py`
is flags plus a call into the library, and no module outside `cmrcx/cli/` imports gin."""

from __future__ import annotations

import ast

from tests.support import REPO_ROOT

CODE_LINES = 100  # an entry point's lines after its docstring (the --help text) at most


def _code_lines(path) -> int:
    """Lines after the module docstring: the flags and the call, not the usage text."""
    text = path.read_text(encoding="utf-8")
    body = ast.parse(text).body
    has_docstring = (
        body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    )
    start = body[0].end_lineno if has_docstring else 0
    return len(text.splitlines()) - start


def test_every_entry_point_is_flags_and_a_call():
    entry_points = [
        p for p in sorted((REPO_ROOT / "cmrcx").glob("*.py")) if p.name != "__init__.py"
    ]
    assert len(entry_points) >= 9
    too_long = {p.name: _code_lines(p) for p in entry_points if _code_lines(p) > CODE_LINES}
    assert not too_long, f"entry points over {CODE_LINES} lines of code: {too_long}"


def _imports_gin(path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "gin" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gin":
            return True
    return False


def _package_modules() -> list:
    """cmrcx/ and tasks/ (installed as cmrcx.tasks), not the checkout's symlinks to them."""
    package = REPO_ROOT / "cmrcx"
    modules = [
        path
        for path in package.rglob("*.py")
        if path.relative_to(package).parts[0] not in ("tasks", "gin_configs", "cli")
    ]
    return [*modules, *(REPO_ROOT / "tasks").rglob("*.py")]


def test_only_cli_imports_gin():
    modules = _package_modules()
    outside = [str(path.relative_to(REPO_ROOT)) for path in modules if _imports_gin(path)]
    assert len(modules) > 100
    assert not outside, f"gin imported outside cmrcx/cli/: {outside}"
