"""A disk that fills during a checkpoint write: one line naming the checkpoint directory
and the reason, exit status 2, the partial write removed and the previous checkpoint
intact (it restores). The run selects its model (RunConfig.select_best, every step
evaluated and saved with its score, one checkpoint kept besides the selected one): step 1
is selected (the tiny model's accuracy does not move in 3 steps: the earliest of equal
scores), step 2 the newest; the save of step 3 would delete step 2, and its failure
deletes nothing.

The disk is a real one: a 16 MiB tmpfs mounted in a private mount namespace (`unshare`;
as root, or through a user namespace otherwise), so no test leaves a mount behind. A
checkpoint of this tiny run is about 7 MB: steps 1 and 2 fit, step 3 does not.
"""

import errno
import os
import shutil
import subprocess
import sys

import orbax.checkpoint as ocp
import pytest

from cmrcx.cli import launch
from cmrcx.training import checkpoints
from tests.training.test_preemption import flags, runner_for

SCRIPT = """
mount -t tmpfs -o size=16m tmpfs "$1" || exit 90
shift
"$@"
echo $? > "$DISK_OUT/status"
cp -a "$DISK_RUN" "$DISK_OUT/run"
"""


def namespace_command():
    if shutil.which("unshare") is None:
        return None
    command = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    if subprocess.run([*command, "true"], capture_output=True, timeout=60).returncode != 0:
        return None
    return command


def test_a_disk_that_fills_during_a_checkpoint_write(tmp_path):
    command = namespace_command()
    if command is None:
        pytest.skip("no mount namespace here (unshare missing or refused)")
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    argv = flags(disk / "run", tmp_path / "tfds") + [
        "--gin.RunConfig.save_every=1",
        "--gin.RunConfig.keep_checkpoints=1",
        "--gin.RunConfig.select_best='accuracy'",
        "--gin.RunConfig.eval_every=1",
    ]
    env = {**os.environ, "DISK_OUT": str(out), "DISK_RUN": str(disk / "run")}
    child = subprocess.run(
        [*command, "sh", "-c", SCRIPT, "sh", str(disk), sys.executable, "-m", "cmrcx.train", *argv],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert (out / "status").read_text().strip() == "2", child.stderr[-3000:]
    last = child.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"error: the checkpoint of step 3 could not be written to {disk}/run/checkpoints "
        "(No space left on device); its partial files were removed and the latest whole "
        "checkpoint is step 2"
    ), child.stderr[-3000:]
    # One error line, no traceback: neither cmrcx's nor the "Event loop is closed" ones
    # tensorstore's unfinished writes report once orbax has ended the failed save.
    assert "Traceback" not in child.stderr, child.stderr[-3000:]

    # The copy of the full disk: no partial write left, step 2 whole and restorable.
    saved = out / "run" / "checkpoints"
    assert sorted(os.listdir(saved)) == ["1", "2"]
    argv[1] = f"--gin.MODEL_DIR='{out / 'run'}'"
    runner = runner_for(argv)
    step, state = runner.restore("latest")
    assert step == 2 and int(state.step) == 2
    scored = runner.checkpoints.scored_steps()
    assert scored[0][1]["accuracy"] >= scored[1][1]["accuracy"]
    assert runner.restore()[0] == 1  # the selected checkpoint, by default


def test_storage_failures_are_told_from_other_errors():
    tensorstore_text = (
        'RESOURCE_EXHAUSTED: Error writing "opt_state.1.0.count/0" in OCDBT database ...: '
        "Failed to write 651264 bytes to file 6: No space left on device [os_error_code='28']"
    )
    assert checkpoints.storage_failure(ValueError(tensorstore_text)) == "No space left on device"
    wrapped = RuntimeError("save failed")
    wrapped.__cause__ = OSError(122, "Disk quota exceeded")
    assert checkpoints.storage_failure(wrapped) == "Disk quota exceeded"
    assert checkpoints.storage_failure(ValueError("shapes do not match")) is None


def test_other_refused_writes_are_one_line(capsys):
    """A full disk under metrics.jsonl or a prediction file: the OSError of write()/close()
    has no file name; one with a name (read-only file system) is named."""

    def write_to_a_full_disk(argv):
        with open("/dev/full", "w") as f:  # every write fails with ENOSPC
            f.write("x")

    def write_to_a_read_only_disk(argv):
        raise OSError(errno.EROFS, "Read-only file system", "/mnt/ro/metrics.jsonl")

    for main, line in (
        (write_to_a_full_disk, "error: a file (see the last path printed above): No space left"),
        (write_to_a_read_only_disk, "error: /mnt/ro/metrics.jsonl: Read-only file system"),
    ):
        with pytest.raises(SystemExit) as info:
            launch.main_guard(main, [])
        assert info.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith(line)


def test_a_write_still_in_flight_after_the_failure_is_removed_too(tmp_path, capsys):
    """tensorstore writes of the failed step can land after the first removal (the space it
    freed lets them succeed) and create the temporary directory again: it is removed until
    it stays away for SETTLE_SECONDS."""
    saves = checkpoints.TrainCheckpoints(str(tmp_path / "run"))
    unfinished = os.path.join(saves.directory, "3" + ocp.utils.TMP_DIR_SUFFIX + "-1")
    os.makedirs(os.path.join(unfinished, "default", "d"))
    now = [0.0]

    def sleep(seconds):  # a late write lands 0.3 s after the first removal
        now[0] += seconds
        if abs(now[0] - 0.3) < 0.01:
            os.makedirs(os.path.join(unfinished, "default", "d"))

    removed = saves._remove_failed_write(clock=lambda: now[0], sleep=sleep)
    assert removed == [os.path.basename(unfinished)]
    assert os.listdir(saves.directory) == []
    assert capsys.readouterr().out.count("removed an unfinished checkpoint write") == 2
    assert now[0] >= 0.3 + checkpoints.TrainCheckpoints.SETTLE_SECONDS
