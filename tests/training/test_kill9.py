"""kill -9 at any moment: a training process killed by SIGKILL (start-up, between steps,
during an asynchronous checkpoint write, during an evaluation) and started again ends
where the uninterrupted run ends: every logged loss and the final metrics equal (rtol
1e-5), no half-written checkpoint left, and metrics.jsonl holds each step's line once,
none of them contradicted by the resumed run.

A kill needs a real process: each test starts `python -m cmrcx.train` children. The
fast test kills once, during a checkpoint write, and resumes in this process, with model
selection on (RunConfig.select_best, one checkpoint kept besides the selected one): the
same checkpoints are kept and the same step is selected. The slow one kills at several
random moments (its seed is printed to replay a failure).
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import orbax.checkpoint as ocp
import pytest

from tests.support import text_has, wait_for
from tests.training.test_preemption import flags, runner_for

STEPS = 24
# Log windows (3) that do not line up with the saves (2): the resumed run must still log
# the same losses at the same steps.
INTERVALS = ["--gin.RunConfig.log_every=3", "--gin.RunConfig.save_every=2"]


def run_flags(model_dir, tfds_cache, eval_every=0):
    return [
        *flags(model_dir, tfds_cache, steps=STEPS),
        *INTERVALS,
        f"--gin.RunConfig.eval_every={eval_every}",
    ]


# Selection by validation accuracy: evaluations at 6, 12, 18, 24, one checkpoint kept
# besides the selected one. At this learning rate the tiny model's accuracy moves (the
# selected step changes during the run), at 5e-4 it would not.
SELECTING = [
    "--gin.RunConfig.select_best='accuracy'",
    "--gin.RunConfig.keep_checkpoints=1",
    "--gin.RunConfig.learning_rate=3e-3",
]


def start_child(argv, log_path):
    log = open(log_path, "w")  # noqa: SIM115 (closed by the caller's wait)
    env = {**os.environ, "TQDM_MININTERVAL": "0", "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "cmrcx.train", *argv], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    child.log = log
    return child


def kill(child) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    child.log.close()


def checkpoint_write_in_progress(model_dir, after: int = 0):
    """True while a step's checkpoint is being written, once step `after` is saved whole."""
    directory = model_dir / "checkpoints"

    def seen():
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return False
        if after and str(after) not in names:
            return False
        return any(ocp.utils.TMP_DIR_SUFFIX in name for name in names)

    return seen


def metric_lines(model_dir):
    with open(model_dir / "metrics.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def assert_same_run(resumed_dir, whole_dir):
    """Every line once, in step order, each equal to the uninterrupted run's (rtol 1e-5)."""
    resumed, whole = metric_lines(resumed_dir), metric_lines(whole_dir)
    key = [(line["step"], line["split"]) for line in resumed]
    assert key == [(line["step"], line["split"]) for line in whole]
    for got, expected in zip(resumed, whole, strict=True):
        for name, value in expected.items():
            if name not in ("step", "split", "time"):
                assert got[name] == pytest.approx(value, rel=1e-5), (got["step"], name)
    left = [n for n in os.listdir(resumed_dir / "checkpoints") if ocp.utils.TMP_DIR_SUFFIX in n]
    assert left == []


def test_kill_9_during_a_checkpoint_write_resumes_the_exact_run(tmp_path):
    cache = tmp_path / "tfds"
    whole_dir, killed_dir = tmp_path / "whole", tmp_path / "killed"
    whole = runner_for(run_flags(whole_dir, cache, eval_every=6) + SELECTING)
    state, _ = whole.train()
    whole_step, whole_results = whole.final_evaluation(state)

    argv = run_flags(killed_dir, cache, eval_every=6) + SELECTING
    child = start_child(argv, tmp_path / "child.log")
    # A write after step 8's (resuming at 8 or 10, inside a log window of 3 steps).
    seen = wait_for(child, checkpoint_write_in_progress(killed_dir, after=8))
    assert seen, "no checkpoint write seen"
    kill(child)
    names = os.listdir(killed_dir / "checkpoints")
    assert any(ocp.utils.TMP_DIR_SUFFIX in name for name in names), names

    resumed = runner_for(argv)
    state, _ = resumed.train()
    assert_same_run(killed_dir, whole_dir)
    kept = sorted(whole.checkpoints.manager.all_steps())
    assert sorted(resumed.checkpoints.manager.all_steps()) == kept and whole_step in kept
    step, results = resumed.final_evaluation(state)
    assert step == whole_step and results == pytest.approx(whole_results, rel=1e-5)


@pytest.mark.slow
def test_kill_9_at_random_moments(tmp_path, capsys):
    seed = random.SystemRandom().randrange(2**31)
    print(f"kill -9 moments drawn with seed {seed}")
    rng = random.Random(seed)
    whole_dir, killed_dir = tmp_path / "whole", tmp_path / "killed"
    # The uninterrupted run here; the killed one in its own TFDS cache, so a start-up kill
    # may also land in the preparation of the data.
    whole = runner_for(run_flags(whole_dir, tmp_path / "tfds_whole", eval_every=8))
    state, _ = whole.train()
    whole_results = whole.evaluate(state, STEPS)
    argv = run_flags(killed_dir, tmp_path / "tfds_killed", eval_every=8)

    log = tmp_path / "child.log"
    moments = {
        "start-up": lambda child: time.sleep(rng.uniform(0.5, 8.0)) or True,
        "steps": lambda child: (
            wait_for(child, text_has(log, "train:")) and (time.sleep(rng.uniform(0.1, 2.0)) or True)
        ),
        "checkpoint write": lambda child: wait_for(child, checkpoint_write_in_progress(killed_dir)),
        "evaluation": lambda child: wait_for(child, text_has(log, "eval validation")),
    }
    order = list(moments)
    rng.shuffle(order)
    for moment in order:
        child = start_child(argv, log)
        reached = moments[moment](child)
        print(f"{moment}: {'killed' if reached else 'the run ended first'}")
        if child.poll() is None:
            kill(child)
        child.log.close()

    child = start_child(argv, log)
    assert child.wait(timeout=600) == 0, log.read_text()
    final = json.loads(log.read_text().strip().splitlines()[-1])
    assert {k: v for k, v in final.items() if k not in ("step", "split")} == pytest.approx(
        whole_results, rel=1e-5
    )
    # The whole run's final evaluation line comes from evaluate() above; the child's from
    # its own end: both files end with it.
    assert_same_run(killed_dir, whole_dir)


@pytest.mark.slow  # default-suite budget (15 min on 2 cores)
def test_an_evaluation_cut_short_runs_again_and_metrics_are_rewound(tmp_path):
    """Deterministic: the state a kill during the evaluation of step 4 leaves (checkpoint
    4 whole, later ones absent, its validation line missing, a later line and a line cut
    short in metrics.jsonl). The resumed run evaluates step 4 once and ends with the
    uninterrupted run's lines."""
    argv = [*flags(tmp_path / "run", tmp_path / "tfds", steps=8), *INTERVALS]
    argv.append("--gin.RunConfig.eval_every=4")
    runner_for(argv).train()
    model_dir = tmp_path / "run"
    whole = (model_dir / "metrics.jsonl").read_text().splitlines(keepends=True)
    for step in (6, 8):
        shutil.rmtree(model_dir / "checkpoints" / str(step))
    kept = [line for line in whole if json.loads(line)["step"] <= 4]
    evaluation = [line for line in kept if json.loads(line)["split"] == "validation"]
    assert len(evaluation) == 1
    cut = kept[: kept.index(evaluation[0])] + [whole[-1], '{"step": 5, "spl']
    (model_dir / "metrics.jsonl").write_text("".join(cut))

    runner_for(argv).train()
    resumed = (model_dir / "metrics.jsonl").read_text().splitlines(keepends=True)
    key = ("step", "split", "time")
    strip = [json.loads(line) for line in whole]
    again = [json.loads(line) for line in resumed]
    assert [(r["step"], r["split"]) for r in again] == [(r["step"], r["split"]) for r in strip]
    for got, expected in zip(again, strip, strict=True):
        numbers = {k: v for k, v in expected.items() if k not in key}
        assert {k: got[k] for k in numbers} == pytest.approx(numbers, rel=1e-5)
