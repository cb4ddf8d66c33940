"""A SIGTERM to one process of a 2-process job (JAX's CPU multi-process mode on loopback)
stops both at the same step through JAX's preemption sync point; both save that step and
exit 143, and the resumed job ends where an uninterrupted one does, loss for loss."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from cmrcx.cli import launch
from cmrcx.common.paths import package_path
from cmrcx.weights import exports

SAMPLE = package_path("data/clue_sample/afqmc_public")
STEPS = 40  # long enough that the notice arrives mid-run at any speed seen here
WAIT = 900  # seconds for any one wait (a job, a metrics line): compiles on a loaded host


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_job(tmp_path, name: str, tfds_cache, port: int) -> list[subprocess.Popen]:
    """The 2 processes of `cmrcx.train` into MODEL_DIR tmp_path/name, logs name.I.log; the
    compiled steps shared through JAX's compilation cache (the later jobs do not compile)."""
    argv = [
        sys.executable, "-m", "cmrcx.train", "--gin_file=clue_afqmc_tiny.gin",
        f"--gin.MODEL_DIR='{tmp_path / name}'", f"--gin.DATA_DIR='{SAMPLE}'",
        f"--gin.RunConfig.num_train_steps={STEPS}", "--gin.RunConfig.log_every=1",
        "--gin.RunConfig.save_every=1000", "--gin.RunConfig.max_length=32",
        f"--gin.RunConfig.tfds_cache_dir='{tfds_cache}'",
    ]  # fmt: skip
    base = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    cluster = {
        "JAX_PLATFORMS": "cpu", "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
        "JAX_NUM_PROCESSES": "2", "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax_cache"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    }  # fmt: skip
    processes = []
    for i in range(2):
        with open(tmp_path / f"{name}.{i}.log", "a") as log:  # the child keeps its own copy
            env = {**base, **cluster, "JAX_PROCESS_ID": str(i)}
            processes.append(
                subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
            )
    return processes


def wait_all(processes, deadline: float) -> list[int]:
    return [p.wait(timeout=max(1.0, deadline - time.monotonic())) for p in processes]


def train_losses(model_dir) -> dict[int, float]:
    path = model_dir / "metrics.jsonl"
    if not path.exists():
        return {}
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.endswith("\n")]
    return {x["step"]: x["loss"] for x in lines if x["split"] == "train"}


@pytest.fixture
def children():
    """Every process a test starts; killed at teardown if still running."""
    started = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


@pytest.mark.slow  # three 2-process jobs: minutes on 2 shared cores
def test_sigterm_to_one_host_stops_both_at_one_step_and_resumes_exactly(tmp_path, children):
    tfds_cache = tmp_path / "tfds"
    # The TFDS cache prepared once, by a 1-step single-process run (hosts would race).
    subprocess.run(
        [sys.executable, "-m", "cmrcx.train", "--gin_file=clue_afqmc_tiny.gin",
         f"--gin.MODEL_DIR='{tmp_path / 'warm'}'", f"--gin.DATA_DIR='{SAMPLE}'",
         "--gin.RunConfig.num_train_steps=1", "--gin.RunConfig.max_length=32",
         f"--gin.RunConfig.tfds_cache_dir='{tfds_cache}'"],
        env={**os.environ, "JAX_PLATFORMS": "cpu"}, cwd=tmp_path, timeout=WAIT, check=True,
        capture_output=True,
    )  # fmt: skip
    split = start_job(tmp_path, "split", tfds_cache, free_port())
    children += split

    deadline = time.monotonic() + WAIT
    while max(train_losses(tmp_path / "split"), default=0) < 2:  # steps are running
        assert time.monotonic() < deadline, (tmp_path / "split.0.log").read_text()[-3000:]
        assert all(p.poll() is None for p in split), (tmp_path / "split.1.log").read_text()
        time.sleep(0.2)
    split[1].send_signal(signal.SIGTERM)  # the non-coordinator host only
    deadline = time.monotonic() + WAIT
    assert wait_all(split, deadline) == [launch.PREEMPTED_EXIT_STATUS] * 2
    stopped = []
    for i in range(2):
        log = (tmp_path / f"split.{i}.log").read_text()
        found = re.search(
            r"preempted: SIGTERM \(here or on another host\): stopped after step (\d+)", log
        )
        assert found, log[-3000:]
        stopped.append(int(found.group(1)))
    step = stopped[0]
    assert stopped == [step, step] and 2 <= step < STEPS
    saved = [int(n) for n in os.listdir(tmp_path / "split" / "checkpoints") if n.isdigit()]
    assert max(saved) == step  # (besides orbax's first save, step 1)

    resumed = start_job(tmp_path, "split", tfds_cache, free_port())
    whole = start_job(tmp_path, "whole", tfds_cache, free_port())  # the uninterrupted job
    children += resumed + whole
    deadline = time.monotonic() + WAIT
    assert wait_all(resumed + whole, deadline) == [0] * 4, (tmp_path / "split.0.log").read_text()[
        -3000:
    ]
    expected, found = train_losses(tmp_path / "whole"), train_losses(tmp_path / "split")
    assert sorted(found) == sorted(expected) == list(range(1, STEPS + 1))
    np.testing.assert_allclose([found[s] for s in expected], list(expected.values()), rtol=1e-6)
    final = os.path.join("checkpoints", str(STEPS), "default")
    mine = exports.restore_numpy(str(tmp_path / "split" / final))
    reference = exports.restore_numpy(str(tmp_path / "whole" / final))
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8), mine, reference
    )
