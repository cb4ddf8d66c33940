"""SIGTERM (preemption notice): the run finishes its step, saves it, says where to resume
and exits 143; the resumed run continues the exact trajectory."""

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import gin
import pytest

from cmrcx.cli import launch
from cmrcx.common.errors import Preempted
from cmrcx.common.paths import package_path
from cmrcx.training.runner import Runner
from tests.support import text_has, wait_for

SAMPLE = package_path("data/clue_sample/afqmc_public")


def flags(model_dir, tfds_cache, steps=6):
    return [
        "--gin_file=clue_afqmc_tiny.gin",
        f"--gin.MODEL_DIR='{model_dir}'",
        f"--gin.DATA_DIR='{SAMPLE}'",
        f"--gin.RunConfig.num_train_steps={steps}",
        "--gin.RunConfig.log_every=1",
        "--gin.RunConfig.save_every=100",
        "--gin.RunConfig.max_length=32",
        f"--gin.RunConfig.tfds_cache_dir='{tfds_cache}'",
    ]


def runner_for(argv):
    gin.clear_config()
    args = launch.parse_flags(argv, "test")
    launch.parse_gin(args.gin_file, args.gin_bindings)
    return Runner(launch.run_config_from_gin())


def test_sigterm_saves_the_step_and_the_resumed_run_continues_exactly(tmp_path):
    cache = tmp_path / "tfds"
    in_loop = "--gin.RunConfig.prefetch_batches=0"  # the stopped run reads 2 ahead (default)
    _, whole = runner_for([*flags(tmp_path / "whole", cache), in_loop]).train()

    runner = runner_for(flags(tmp_path / "split", cache))
    step_fn = runner.trainer.train_step

    def train_step(state, batch):  # the notice arrives during step 3
        if int(state.step) == 2:
            signal.raise_signal(signal.SIGTERM)
        return step_fn(state, batch)

    runner.trainer.train_step = train_step
    with pytest.raises(Preempted, match=r"stopped after step 3 and saved it .*/checkpoints/3"):
        runner.train()
    assert runner.checkpoints.latest_step() == 3  # off the save interval: saved for SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is restored
    assert not [t for t in threading.enumerate() if t.name.startswith("cmrcx-prefetch")]

    _, rest = runner_for(flags(tmp_path / "split", cache)).train()
    assert [s for s, _ in rest] == [4, 5, 6]
    assert [loss for _, loss in rest] == pytest.approx([loss for _, loss in whole[3:]], rel=1e-5)


@pytest.mark.slow
def test_a_real_sigterm_to_a_training_process(tmp_path):
    argv = flags(tmp_path / "run", tmp_path / "tfds", steps=400)
    log = tmp_path / "train.log"
    env = {**os.environ, "TQDM_MININTERVAL": "0", "PYTHONUNBUFFERED": "1"}
    with open(log, "w") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "cmrcx.train", *argv], stderr=stderr, env=env
        )
    try:  # every wait bounded: a child that dies or hangs fails the test with its output
        assert wait_for(child, text_has(log, "train:")), log.read_text()  # steps are running
        time.sleep(3)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=120) == launch.PREEMPTED_EXIT_STATUS, log.read_text()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=60)
    message = log.read_text().strip().splitlines()[-1]
    assert message.startswith("preempted: SIGTERM (here or on another host): stopped after step ")
    step = int(message.split("after step ")[1].split()[0])
    assert 0 < step < 400 and (tmp_path / "run" / "checkpoints" / str(step)).is_dir()


def test_a_second_training_process_on_the_same_model_dir_is_refused(tmp_path):
    """The lock is an flock: held while one run trains, gone when its process dies (kill -9
    included), so a crash never leaves a stale lock."""
    from cmrcx.common.errors import ConfigError
    from cmrcx.training.model_dir import model_dir_lock

    model_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time; os.makedirs(sys.argv[1], exist_ok=True);"
         "f = open(os.path.join(sys.argv[1], '.train.lock'), 'a+');"
         "fcntl.flock(f, fcntl.LOCK_EX); f.write('pid %d on test' % os.getpid()); f.flush();"
         "print('locked', flush=True); time.sleep(600)", str(model_dir)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(ConfigError, match=f"is being trained by pid {holder.pid} on test"):
        with model_dir_lock(str(model_dir)):
            pass
    holder.kill()  # SIGKILL: no clean-up code runs
    holder.wait(timeout=60)
    with model_dir_lock(str(model_dir)):
        assert (model_dir / ".train.lock").read_text().startswith(f"pid {os.getpid()} ")


def _damage(step_dir, how: str) -> None:
    """Truncates or deletes the largest file of a checkpoint (its array data)."""
    files = sorted((p for p in step_dir.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    if how == "truncate":
        files[-1].write_bytes(files[-1].read_bytes()[:100])
    else:
        files[-1].unlink()


@pytest.mark.parametrize("how", [pytest.param("truncate", marks=pytest.mark.slow), "delete"])
def test_a_damaged_latest_checkpoint_falls_back_to_the_newest_readable(tmp_path, capsys, how):
    argv = flags(tmp_path / "run", tmp_path / "tfds", steps=4) + ["--gin.RunConfig.save_every=2"]
    runner_for(argv).train()
    checkpoint_dir = tmp_path / "run" / "checkpoints"
    _damage(checkpoint_dir / "4", how)
    runner = runner_for(argv)
    step, state = runner.restore()
    assert step == 2 and int(state.step) == 2
    out = capsys.readouterr().out
    assert "checkpoint step 4 is unreadable" in out and "checkpoints_damaged/4" in out
    # The reason is tensorstore's line naming the checkpoint's files, not orbax's repr.
    reason = re.search(r"step 4 is unreadable \((.*)\); trying older", out).group(1)
    assert f"{checkpoint_dir}/4/default" in reason and "bound method" not in reason
    state, losses = runner_for(argv).train()  # resumes at 2 and saves 3, 4 again
    assert int(state.step) == 4 and [s for s, _ in losses] == [3, 4]
    steps = sorted(int(p.name) for p in checkpoint_dir.iterdir() if p.name.isdigit())
    for step in steps:
        shutil.rmtree(checkpoint_dir / str(step) / "default" / "ocdbt.process_0")
    # A new process (this one's tensorstore cache still holds the arrays it wrote).
    out = subprocess.run(
        [sys.executable, "-m", "cmrcx.train", *argv], capture_output=True, text=True, timeout=600
    )
    # orbax's asyncio threads may print "Event loop is closed" tracebacks of their own when
    # a restore fails (a known leftover); none passes through cmrcx's code.
    assert out.returncode == 2
    assert "cmrcx/" not in "".join(
        line for line in out.stderr.splitlines() if line.startswith('  File "')
    )
    damaged = ", ".join(map(str, reversed(steps)))
    assert re.search(
        rf"error: no readable checkpoint .* \(steps {damaged} are damaged\)", out.stderr
    )


def test_a_model_dir_that_cannot_be_created_is_named(tmp_path):
    from cmrcx.common.errors import ConfigError

    (tmp_path / "a_file").write_text("not a directory")
    with pytest.raises(ConfigError, match=r"MODEL_DIR .*a_file/run cannot be created or written"):
        runner_for(flags(tmp_path / "a_file" / "run", tmp_path / "tfds"))
