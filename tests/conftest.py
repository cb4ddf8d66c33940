"""Fixtures every test folder shares: a clean gin state, the repository root, the bundled
tiny vocabulary, a CLI runner (the entry points in a child process, as a user runs
them) and a tiny-run builder (a `Runner` from a gin file and bindings, in process).
Plain helpers that module-level code needs too are in `support.py`; `tests` is a package
(every folder has an `__init__.py`), so a test module imports another's helpers by their
full name (`from tests.training.test_preemption import runner_for`), with nothing added to
`sys.path`."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import gin
import pytest

import cmrcx.cpu  # (first: it hides triton from torch; cmrcx/__init__.py says why)
from tests.support import REPO_ROOT, run_cli_in

# --- One persistent XLA compilation cache per test session ------------------------------
# Compiling is most of a tiny test's time on the CPU, and the processes of a session (this
# one, its xdist workers, the entry points the CLI tests start) compile the same programs.
# They share one persistent cache (jax's own flags, read from the environment when jax is
# imported, which is after this), in a fresh temporary folder: a run starts cold, leaves
# nothing behind, and a cached program is the same HLO's executable. The process that
# made the folder (the xdist controller, or pytest without xdist) removes it at the end;
# workers and children inherit the variables. A JAX_COMPILATION_CACHE_DIR of the user's
# own is kept as it is.
_JAX_CACHE_OWNER = "CMRCX_TEST_JAX_CACHE_OWNER"
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="cmrcx-test-jax-cache-")
    os.environ[_JAX_CACHE_OWNER] = str(os.getpid())
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")


def pytest_unconfigure(config):
    if os.environ.get(_JAX_CACHE_OWNER) == str(os.getpid()):
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


# The process-wide CPU paths the entry points install at start-up (`cmrcx.cli.startup`):
# tests that build a Trainer in process make dropout masks as `cmrcx.train` does (the same
# bits either way: tests/cpu/test_threefry.py checks the lowering against the Random123
# known answers JAX is checked against).
cmrcx.cpu.enable()


@pytest.fixture(autouse=True)
def clean_gin():
    """Every test starts and ends with no gin bindings (gin's registry is global)."""
    gin.clear_config()
    yield
    gin.clear_config()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout these tests belong to (never a machine path)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def tiny_vocab() -> str:
    """The bundled 2k-token BERT vocabulary of the tiny runs."""
    from cmrcx.common.paths import package_path

    return package_path("data/tiny_vocab.txt")


@pytest.fixture
def run_cli():
    """run_cli("score", "cmrc2019", GOLD, PRED) -> CompletedProcess (see `run_cli_in`)."""
    return lambda module, *args, **kwargs: run_cli_in(REPO_ROOT, module, *args, **kwargs)


@pytest.fixture
def tiny_runner(tmp_path):
    """tiny_runner("clue_afqmc_tiny.gin", "RunConfig.num_train_steps = 4", ...) -> a Runner
    writing into tmp_path/run with its TFDS cache in tmp_path/tfds."""

    def build(gin_file: str, *bindings: str, model_dir: Path | None = None):
        from cmrcx.cli import launch
        from cmrcx.training.runner import Runner

        model_dir = model_dir or tmp_path / "run"
        launch.parse_gin(
            [gin_file],
            [
                f"MODEL_DIR = '{model_dir}'",
                f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
                *bindings,
            ],
        )
        return Runner(launch.run_config_from_gin())

    return build
