"""cmrcx.cpu.hugepages: the entry points re-execute once with glibc's huge-page tunable, by
their one start-up call (`cmrcx.cli.startup.start`)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from cmrcx.cpu import hugepages
from tests.support import REPO_ROOT

MADVISE = "always [madvise] never"


def test_the_tunable_is_added_once_and_after_the_users_own():
    env = hugepages.environment_to_restart_with({"A": "1"}, MADVISE, "glibc")
    assert env["GLIBC_TUNABLES"] == hugepages.TUNABLE and env["A"] == "1"
    assert env[hugepages.SWITCH] == "1"  # the re-executed process does not restart again
    assert hugepages.environment_to_restart_with(env, MADVISE, "glibc") is None
    user = {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}
    env = hugepages.environment_to_restart_with(user, MADVISE, "glibc")
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{hugepages.TUNABLE}"


def test_evaluation_also_keeps_freed_memory_unless_the_user_set_a_tunable():
    env = hugepages.environment_to_restart_with({}, MADVISE, "glibc", keep_freed=True)
    assert env["GLIBC_TUNABLES"] == ":".join([hugepages.TUNABLE, *hugepages.KEEP_FREED])
    user = {"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"}
    env = hugepages.environment_to_restart_with(user, MADVISE, "glibc", keep_freed=True)
    tunables = env["GLIBC_TUNABLES"].split(":")
    assert tunables[0] == "glibc.malloc.arena_max=4"  # the user's, not overridden
    assert "glibc.malloc.arena_max=1" not in tunables and "glibc.malloc.mmap_max=0" in tunables


@pytest.mark.parametrize("entry, call", [
    ("train", "startup.start()"),
    ("eval", "startup.start(keep_freed=True)"),
    ("generate", "startup.start()"),
    ("check_reproduction", "startup.start()"),
])  # fmt: skip
def test_only_the_eval_entry_keeps_freed_memory(entry, call):
    """Evaluation reuses each batch's memory; a train step's doubled its peak RSS."""
    tree = ast.parse((REPO_ROOT / "cmrcx" / f"{entry}.py").read_text())
    calls = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert [c for c in calls if "startup.start" in c] == [call]


@pytest.mark.parametrize(
    "environ, thp, libc",
    [
        ({hugepages.SWITCH: "0"}, MADVISE, "glibc"),  # the user's switch
        ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, MADVISE, "glibc"),  # the user's value
        ({}, "always madvise [never]", "glibc"),  # huge pages off
        ({}, None, "glibc"),  # no transparent huge pages in this kernel
        ({}, MADVISE, ""),  # musl and the like: GLIBC_TUNABLES means nothing
    ],
)
def test_nothing_changes_where_it_cannot_help(environ, thp, libc):
    assert hugepages.environment_to_restart_with(environ, thp, libc) is None


def test_a_command_restarts_itself_once_with_the_same_pid_and_arguments(tmp_path):
    """A script that calls restart_with_hugepages() first runs again with the tunable."""
    script = tmp_path / "entry.py"
    script.write_text(
        "import os, sys\n"
        "print('start', os.getpid(), flush=True)\n"
        "from cmrcx.cpu import hugepages\n"
        "hugepages.restart_with_hugepages()\n"
        "print('run', os.getpid(), os.environ.get('GLIBC_TUNABLES'), sys.argv[1:])\n"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", hugepages.SWITCH)}
    expected = hugepages.process_environment(environ)
    proc = subprocess.run(
        [sys.executable, "-u", str(script), "--gin_file=x.gin"],
        capture_output=True, text=True, env=environ, check=True, timeout=60,
    )  # fmt: skip
    lines = proc.stdout.splitlines()
    starts, runs = (
        [ln for ln in lines if ln.startswith("start")],
        [ln for ln in lines if ln.startswith("run")],
    )
    assert len(runs) == 1 and runs[0].endswith("['--gin_file=x.gin']")
    if expected is None:  # this machine cannot use it: one start, nothing set
        assert len(starts) == 1 and " None " in runs[0]
    else:
        assert len(starts) == 2 and len({ln.split()[1] for ln in starts + runs}) == 1  # one pid
        assert f" {hugepages.TUNABLE} " in runs[0]


@pytest.mark.parametrize("entry", ["train", "eval", "generate", "check_reproduction"])
def test_entries_restart_before_jax_or_tensorflow_load(entry):
    """The call sits under `if __name__ == "__main__":` before any other cmrcx import."""
    tree = ast.parse((REPO_ROOT / "cmrcx" / f"{entry}.py").read_text())
    body = [node for node in tree.body if not isinstance(node, ast.Expr)]  # the docstring
    first_cmrcx = next(
        i for i, node in enumerate(body)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cmrcx")
    )  # fmt: skip
    assert ast.unparse(body[first_cmrcx]) == "from cmrcx.cli import startup"
    guard = body[first_cmrcx + 1]
    assert isinstance(guard, ast.If) and "__main__" in ast.unparse(guard.test)
    assert ast.unparse(guard.body[0]).startswith("startup.start(")
    before = body[:first_cmrcx]  # only the standard library loads before the restart
    modules = [n.module for n in before if isinstance(n, ast.ImportFrom)]
    modules += [a.name for n in before if isinstance(n, ast.Import) for a in n.names]
    stdlib = sys.stdlib_module_names | {"__future__"}
    assert all(module.split(".")[0] in stdlib for module in modules), modules


def test_the_start_up_restarts_before_jax_loads_and_prepare_process_enables_the_cpu_paths():
    """`cmrcx.cli.startup` loads no JAX, on import or in `start()` (the restart comes
    first); `launch.prepare_process()` then installs the unrolled threefry lowering
    (`cmrcx.cpu.enable`), after TensorFlow's quiet start."""
    script = (
        "import sys\n"
        "from cmrcx.cli import startup\n"
        "assert 'jax' not in sys.modules, 'jax loaded before the restart'\n"
        "startup.start()\n"
        "assert 'jax' not in sys.modules, 'jax loaded by start()'\n"
        "from cmrcx.cli import launch\n"
        "launch.prepare_process()\n"
        "import jax\n"
        "text = jax.jit(lambda k: jax.random.bits(k, (8,))).lower(jax.random.key(0)).as_text()\n"
        "print('loop' if 'while' in text else 'unrolled')\n"
    )
    environ = {**os.environ, hugepages.SWITCH: "0", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environ, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["unrolled"]
