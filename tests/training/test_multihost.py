"""A 2-host run (JAX's CPU multi-process mode, gloo over loopback) trains the 1-host losses.

`python -m cmrcx.train` runs three times at once on the bundled sample: as one
process on 2 simulated CPU devices, and as a 2-process job, one CPU device each,
whose processes meet at JAX_COORDINATOR_ADDRESS on 127.0.0.1 (launch.py calls
jax.distributed.initialize()). Every host reads the same global batches and
feeds its rows, so losses, predictions and checkpoints agree with the single
process; only process 0 writes metrics and predictions.
"""

import json
import os
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from cmrcx.common.paths import package_path
from cmrcx.datasets import cmrc2019 as cmrc2019_tfds
from cmrcx.weights import exports

SIMULATED_DEVICES = "--xla_force_host_platform_device_count=2"
PREDICTIONS = os.path.join("predictions", "cmrc2019_tiny_validation.json")
TRAIN = [sys.executable, "-m", "cmrcx.train"]
TIMEOUT = 600  # seconds for the three runs together; ~1-2 min on 2 idle cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_train(root, name: str, log: str, tfds_dir: str, env: dict) -> subprocess.Popen:
    """`cmrcx.train` for 2 steps into MODEL_DIR root/name, output in root/log."""
    base = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    with open(root / log, "w") as output:  # the child keeps its own copy of the file
        return subprocess.Popen(
            [
                *TRAIN,
                "--gin_file=cmrc2019_tiny.gin",
                f"--gin.MODEL_DIR='{root / name}'",
                f"--gin.RunConfig.tfds_cache_dir='{tfds_dir}'",
                "--gin.RunConfig.num_train_steps=2",
                "--gin.RunConfig.log_every=1",
            ],
            env={**base, "JAX_PLATFORMS": "cpu", **env},
            cwd=root,  # not the caller's directory: a runs/ folder there confuses gin includes
            stdout=output,
            stderr=subprocess.STDOUT,
        )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Directory with one/ (1 process, 2 devices) and two/ (2 processes) model dirs."""
    root = tmp_path_factory.mktemp("multihost")
    # Prepared once up front: hosts preparing one cache together race on TFDS's rename.
    tfds_dir = str(root / "tfds")
    for split in ("train", "validation"):
        cmrc2019_tfds.prepare(package_path("data/cmrc2019_sample"), split, tfds_dir)
    cluster = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{free_port()}", "JAX_NUM_PROCESSES": "2"}
    processes = {
        "one": start_train(root, "one", "one.log", tfds_dir, {"XLA_FLAGS": SIMULATED_DEVICES}),
        **{
            f"two.{i}": start_train(
                root, "two", f"two.{i}.log", tfds_dir, {**cluster, "JAX_PROCESS_ID": str(i)}
            )
            for i in range(2)
        },
    }
    deadline = time.monotonic() + TIMEOUT
    try:
        for process in processes.values():
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:  # a host that lost its peer would wait for the coordinator's timeout
        for process in processes.values():
            if process.poll() is None:
                process.kill()
    for name, process in processes.items():
        log = (root / f"{name}.log").read_text()
        assert process.returncode == 0, f"{name}:\n{log[-4000:]}"
    return root


def metric_lines(model_dir) -> list[dict]:
    with open(model_dir / "metrics.jsonl") as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow  # ~40 s quiet: default-suite budget (15 min on 2 cores)
def test_two_hosts_train_the_one_host_losses(runs):
    one, two = metric_lines(runs / "one"), metric_lines(runs / "two")
    losses = {
        name: [x["loss"] for x in lines if x["split"] == "train"]
        for name, lines in (("one", one), ("two", two))
    }
    assert len(losses["one"]) == 2 and losses["one"][0] != losses["one"][1]
    np.testing.assert_allclose(losses["two"], losses["one"], rtol=1e-5)
    # Evaluation: each host scored its rows, the gathered scores decode the same.
    metrics = {k: v for k, v in one[-1].items() if "/" in k}
    assert {k: two[-1][k] for k in metrics} == pytest.approx(metrics)
    with open(runs / "one" / PREDICTIONS) as f, open(runs / "two" / PREDICTIONS) as g:
        assert json.load(f) == json.load(g)


def test_only_process_zero_writes(runs):
    lines = metric_lines(runs / "two")
    assert [(x["step"], x["split"]) for x in lines] == [
        (1, "train"),
        (2, "train"),
        (2, "validation"),
    ]
    assert os.listdir(runs / "two" / "predictions") == [os.path.basename(PREDICTIONS)]
    assert len(os.listdir(runs / "two" / "events")) == 1  # one TensorBoard file
    assert (runs / "two.0.log").read_text().count("predictions: ") == 1
    assert "predictions: " not in (runs / "two.1.log").read_text()


def test_checkpoint_from_two_hosts_is_the_one_host_checkpoint(runs):
    # Both processes wrote shards of step 2 into one directory; orbax committed it once.
    step = os.path.join("checkpoints", "2", "default")
    two = exports.restore_numpy(str(runs / "two" / step))
    one = exports.restore_numpy(str(runs / "one" / step))
    assert int(two["step"]) == 2
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), two, one)
