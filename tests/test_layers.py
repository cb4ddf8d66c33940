"""The package's import graph keeps DESIGN.md's layers: imports point down the layers, never
up or sideways into a higher layer, modules form no cycle, and everything but `cli/` and
the entry points imports without gin."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.support import REPO_ROOT

REPO = REPO_ROOT
ENTRY_POINTS = {"train", "eval", "export", "score", "convert", "tokenize", "generate", "inspect",
                "check_reproduction"}  # fmt: skip

# A module may import modules of its own layer and of lower ranks only.
RANKS = {
    "common": 0,
    "cpu": 0,  # cmrcx.cpu: the CPU-only speed paths, on JAX alone
    "benchmarks": 1,
    "vocab": 1,
    "models": 1,
    "datasets": 2,
    "weights": 2,
    "model_api": 2,
    "tasks": 3,
    "training": 4,
    "reproduction": 5,  # runs a training run beside its PyTorch reference recipe
    "cli": 5,
    "entry": 6,
}


def _modules() -> dict[str, Path]:
    """cmrcx.* module name -> file, with tasks/ installed as cmrcx.tasks."""
    modules = {}
    for root, prefix in ((REPO / "cmrcx", "cmrcx"), (REPO / "tasks", "cmrcx.tasks")):
        for path in root.rglob("*.py"):
            relative = path.relative_to(root).with_suffix("")
            if relative.parts[0] in ("data", "tasks", "gin_configs"):
                continue  # bundled samples; checkout symlinks to tasks/ and gin_configs/
            parts = [p for p in relative.parts if p != "__init__"]
            modules[".".join([prefix, *parts])] = path
    return modules


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "cmrcx"  # the package's own (empty) __init__
    if len(parts) == 2 and parts[1] in ENTRY_POINTS:
        return "entry"
    return parts[1]


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the cmrcx modules it imports (lazy imports inside functions included)."""
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cmrcx"):
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    found.add(target if target in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("cmrcx"))
        graph[name] = {t for t in found if t in modules and t != name}
    return graph


def test_every_module_has_a_layer():
    layers = {_layer(m) for m in _modules()} - {"cmrcx"}
    assert layers <= set(RANKS), layers - set(RANKS)


def test_imports_point_down_the_layers():
    graph = _imports(_modules())
    upward = [
        f"{module} ({_layer(module)}) imports {target} ({_layer(target)})"
        for module, targets in graph.items()
        for target in targets
        if _layer(module) != "cmrcx" and RANKS[_layer(target)] > RANKS[_layer(module)]
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycles():
    graph = _imports(_modules())
    # A package's __init__ importing its own submodules is how registries load; a
    # submodule importing its package back would be the cycle.
    edges = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in edges:
        if node not in index:
            visit(node)
    assert not cycles, cycles


def test_the_library_imports_without_gin():
    library = sorted(m for m in _modules() if _layer(m) not in ("cli", "entry") and m != "cmrcx")
    script = (
        "import importlib, sys\n"
        "sys.modules['gin'] = None  # `import gin` now raises ImportError\n"
        f"for name in {library!r}:\n"
        "    importlib.import_module(name)\n"
        "print('imported', len(" + repr(library) + "))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"imported {len(library)}" in result.stdout


def test_the_entry_points_flag_modules_load_no_tensorflow():
    """`cmrcx.cli.launch` (and the model registry, layouts and run options it imports)
    loads no TensorFlow: the entry points import it before `prepare_process()`'s quiet
    start, which alone keeps TF's CUDA start-up lines off the terminal."""
    script = (
        "import sys\n"
        "from cmrcx.cli import launch, startup\n"
        "print(sorted({'tensorflow', 'seqio'} & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["[]"], result.stdout
