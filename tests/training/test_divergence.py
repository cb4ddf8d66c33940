"""Divergence guard: the first non-finite loss or gradient norm stops the run, naming the
step; nothing after the last finite step is saved, no prediction file is written, and the
run resumes from the last good checkpoint with a sane learning rate."""

import jax
import numpy as np
import pytest

from cmrcx import train
from cmrcx.cli import launch
from cmrcx.common.errors import TrainingDiverged
from tests.training.test_preemption import flags as preemption_flags
from tests.training.test_preemption import runner_for


def flags(model_dir, tfds_cache, learning_rate):
    """test_preemption's tiny AFQMC run; later bindings override its earlier ones."""
    return preemption_flags(model_dir, tfds_cache, steps=6) + [
        f"--gin.RunConfig.learning_rate={learning_rate}",
        # One warm-up step (int(6 * 0.2)): the first update has rate 0, so the run has a
        # finite checkpoint before the rate blows it up (with no warm-up step the first
        # update takes the whole rate, as transformers' schedule does).
        "--gin.RunConfig.warmup_fraction=0.2",
        "--gin.RunConfig.save_every=2",
        "--gin.RunConfig.log_every=6",
    ]


def test_a_diverging_run_stops_and_resumes_from_the_last_good_checkpoint(tmp_path):
    cache, model_dir = tmp_path / "tfds", tmp_path / "run"
    runner = runner_for(flags(model_dir, cache, 1e30))
    with pytest.raises(TrainingDiverged, match=r"^step (\d+): the .* not finite") as info:
        runner.train()
    first_bad = int(info.value.args[0].split()[1].rstrip(":"))
    latest = runner.checkpoints.latest_step()
    assert latest is not None and latest < first_bad
    assert f"latest checkpoint is step {latest}" in str(info.value)
    assert latest < first_bad - 1  # the state that gave the non-finite loss is gone
    assert not (model_dir / "predictions").exists()
    # Every saved checkpoint holds finite parameters.
    state = runner.checkpoints.restore(latest, runner.trainer.abstract_state)
    params = jax.tree.leaves(jax.device_get(state.params))
    assert all(np.isfinite(np.asarray(x)).all() for x in params)

    resumed = runner_for(flags(model_dir, cache, 5e-4))
    state, losses = resumed.train()
    assert int(state.step) == 6 and all(np.isfinite(loss) for _, loss in losses)


@pytest.mark.slow
def test_the_cli_prints_one_line_and_exits_non_zero(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        launch.main_guard(train.main, flags(tmp_path / "run", tmp_path / "tfds", 1e30))
    assert info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: step ") and "not finite" in error
    assert "Traceback" not in capsys.readouterr().err
