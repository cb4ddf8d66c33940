"""Divergence guard: the first non-finite loss or gradient norm stops the run, naming the
step; nothing after the last finite step is saved, no prediction file is written, and the
run resumes from the last good checkpoint with a sane learning rate."""

import gin
import numpy as np
import pytest

from cmrcx import launch, train
from cmrcx.launch import TrainingDiverged, package_path
from cmrcx.training.runner import Runner


@pytest.fixture(autouse=True)
def clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def flags(model_dir, tfds_cache, learning_rate):
    return [
        "--gin_file=clue_afqmc_tiny.gin",
        f"--gin.MODEL_DIR='{model_dir}'",
        f"--gin.DATA_DIR='{package_path('data/clue_sample/afqmc_public')}'",
        f"--gin.RunConfig.learning_rate={learning_rate}",
        "--gin.RunConfig.num_train_steps=6",
        "--gin.RunConfig.save_every=2",
        "--gin.RunConfig.log_every=6",
        "--gin.RunConfig.max_length=32",
        f"--gin.RunConfig.tfds_cache_dir='{tfds_cache}'",
    ]


def runner_for(argv):
    gin.clear_config()
    args = launch.parse_flags(argv, "test")
    launch.parse_gin(args.gin_file, args.gin_bindings)
    return Runner(launch.run_config_from_gin())


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
    assert all(np.isfinite(np.asarray(x)).all() for x in jax_leaves(state.params))

    resumed = runner_for(flags(model_dir, cache, 5e-4))
    state, losses = resumed.train()
    assert int(state.step) == 6 and all(np.isfinite(loss) for _, loss in losses)


def jax_leaves(tree):
    import jax

    return jax.tree.leaves(jax.device_get(tree))


@pytest.mark.slow
def test_the_cli_prints_one_line_and_exits_non_zero(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        launch.main_guard(train.main, flags(tmp_path / "run", tmp_path / "tfds", 1e30))
    assert info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: step ") and "not finite" in error
    assert "Traceback" not in capsys.readouterr().err
