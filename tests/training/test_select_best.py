"""Model selection by a validation metric (RunConfig.select_best): the rule, the selected
step kept through keep-N rotation and crashes, SIGTERM and resume, the checkpoint
eval/export use, the start-up checks, and the CLUE Table 7 gins adopting it. kill -9 with
a selection on is tests/training/test_kill9.py's fast test, a full disk
tests/training/test_disk_full.py's."""

import json
import math
import shutil
import signal

import gin
import jax.numpy as jnp
import orbax.checkpoint as ocp
import pytest

from cmrcx import eval as eval_main
from cmrcx import export as export_main
from cmrcx.cli import launch
from cmrcx.common.errors import ConfigError, Preempted
from cmrcx.training import selection
from cmrcx.training.checkpoints import TrainCheckpoints
from cmrcx.training.selection import Selection
from tests.training.test_preemption import flags, runner_for

# Validation accuracy by step: up, down, a tie with the best (step 10), down.
SCRIPT = {2: 50.0, 4: 60.0, 6: 75.0, 8: 70.0, 10: 75.0, 12: 65.0}


def test_the_best_step_is_the_earliest_best_score():
    scored = [(s, {"accuracy": v}) for s, v in SCRIPT.items()]
    assert Selection("accuracy").best(scored) == 6
    assert Selection("accuracy").best(reversed(scored)) == 6  # by step, not by order given
    assert Selection("accuracy", "min").best(scored) == 2
    unscored = [(1, None), (3, {"loss": 1.0}), (5, {"accuracy": math.nan})]
    assert Selection("accuracy").best(unscored + scored[:1]) == 2
    assert Selection("accuracy").best(unscored) is None


def tiny_state(step):
    return {"w": jnp.full((4,), float(step)), "step": jnp.int32(step)}


def test_the_selected_step_survives_rotation_and_a_crash_before_the_deletion(tmp_path):
    """keep=1: the newest and the selected step stay. A crash after a save committed but
    before orbax deleted what it outranked leaves an extra step: harmless, the next save
    removes it; a crash before the commit leaves a temporary directory the resumed run
    removes. The selection is read back from the checkpoints themselves."""
    checkpoints = TrainCheckpoints(str(tmp_path), keep=1, save_every=1, selection=Selection("acc"))
    for step in range(1, 9):
        checkpoints.save(
            step, tiny_state(step), metrics={"acc": SCRIPT[step]} if step in SCRIPT else None
        )
    checkpoints.close()
    directory = tmp_path / "checkpoints"
    assert sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) == [6, 8]
    # The state a kill leaves: step 4 (outranked, not yet deleted), a write of 9 unfinished.
    shutil.copytree(directory / "6", directory / "4")
    (directory / "4" / "metrics" / "metrics").write_text(json.dumps({"acc": 60.0}))
    shutil.copytree(directory / "8", directory / f"9{ocp.utils.TMP_DIR_SUFFIX}1234")

    resumed = TrainCheckpoints(str(tmp_path), keep=1, save_every=1, selection=Selection("acc"))
    assert resumed.remove_unfinished() and resumed.best_step() == 6
    for step in range(9, 13):
        resumed.save(
            step, tiny_state(step), metrics={"acc": SCRIPT[step]} if step in SCRIPT else None
        )
    resumed.close()
    assert sorted(resumed.manager.all_steps()) == [6, 12]  # 10 ties with 6: the earliest
    assert resumed.step_of(None, "validation") == resumed.step_of("best", "validation") == 6
    assert resumed.step_of("latest", "validation") is None  # the newest readable
    assert resumed.step_of("12", "validation") == 12
    with pytest.raises(ConfigError, match=r"no checkpoint of step 99 in .*; its steps: 6, 12 "):
        resumed.step_of(99, "validation")
    with pytest.raises(ConfigError, match="checkpoint 'newest': use best, latest or a step"):
        resumed.step_of("newest", "validation")

    plain = TrainCheckpoints(str(tmp_path / "plain"), keep=1, save_every=1)
    plain.save(1, tiny_state(1))
    plain.close()
    assert plain.step_of(None, "validation") is None
    with pytest.raises(ConfigError, match="without model selection"):
        plain.step_of("best", "validation")
    unscored = TrainCheckpoints(str(tmp_path / "plain"), keep=1, selection=Selection("acc"))
    with pytest.raises(ConfigError, match="no checkpoint in .* has a validation acc"):
        unscored.step_of("best", "validation")


def selecting_flags(model_dir, cache, *extra):
    return [
        *flags(model_dir, cache, steps=12),
        "--gin.RunConfig.select_best='accuracy'",
        "--gin.RunConfig.eval_every=2",
        "--gin.RunConfig.keep_checkpoints=1",
        *extra,
    ]


def scripted(runner):
    """The runner's evaluations during training give SCRIPT's accuracy (a line each)."""

    def evaluate(state, step, split=None, record=True):
        results = {"accuracy": SCRIPT[step]}
        runner.writer.write(step, "validation", results)
        return results

    runner.evaluate = evaluate
    return runner


@pytest.mark.slow  # ~25 s quiet; the fast kill -9 test runs a selecting run by default
def test_a_selecting_run_keeps_its_best_and_eval_and_export_use_it(tmp_path, capsys):
    argv = selecting_flags(tmp_path / "run", tmp_path / "tfds")
    runner = scripted(runner_for(argv))
    step_fn = runner.trainer.train_step

    def train_step(state, batch):  # the notice arrives during step 4, an evaluation step
        if int(state.step) == 3:
            signal.raise_signal(signal.SIGTERM)
        return step_fn(state, batch)

    runner.trainer.train_step = train_step
    with pytest.raises(Preempted, match="stopped after step 4 and saved it"):
        runner.train()
    # Evaluated before it was saved: the checkpoint carries its score (step 2 outranked).
    assert runner.checkpoints.scored_steps() == [(4, {"accuracy": 60.0})]
    runner = scripted(runner_for(argv))  # resumed: the same selection as in one go
    runner.train()
    assert sorted(runner.checkpoints.manager.all_steps()) == [6, 12]
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [x["step"] for x in lines if x["split"] == "validation"] == list(SCRIPT)

    gin.clear_config()
    eval_main.main([*argv, "--split=validation"])
    out = capsys.readouterr().out
    assert "selected checkpoint: step 6: the highest validation accuracy of the run (75)" in out
    assert json.loads(out.strip().splitlines()[-1])["step"] == 6
    predictions = tmp_path / "run" / "predictions"
    kept = {p.name: p.read_bytes() for p in predictions.iterdir()}
    gin.clear_config()
    eval_main.main([*argv, "--split=validation", "--step=12"])  # a step of the user's choice
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["step"] == 12
    assert {p.name: p.read_bytes() for p in predictions.iterdir()} == kept  # the run's own
    assert sorted(p.name for p in (tmp_path / "run" / "step_12" / "predictions").iterdir()) == [
        *kept
    ]
    gin.clear_config()
    export_main.main([*argv, f"--out={tmp_path / 'export'}"])
    assert "exported step 6 to" in capsys.readouterr().out
    assert json.loads((tmp_path / "export" / "model_config.json").read_text())["step"] == 6
    # The scores are in the checkpoints from the first evaluation on: a selection is part
    # of what the MODEL_DIR is.
    with pytest.raises(ConfigError, match="RunConfig.select_best='accuracy', this run has .*None"):
        runner_for([*argv, "--gin.RunConfig.select_best=None"])


def test_selection_errors_are_found_before_training(tmp_path):
    cache = tmp_path / "tfds"
    with pytest.raises(
        ConfigError, match=r"select_best 'qac/paper': clue_afqmc's evaluation reports accuracy"
    ):
        runner_for(
            selecting_flags(tmp_path / "a", cache, "--gin.RunConfig.select_best='qac/paper'")
        )
    with pytest.raises(
        ConfigError, match=r"accuracy is better when higher: set .*select_mode = 'max'"
    ):
        runner_for(selecting_flags(tmp_path / "b", cache, "--gin.RunConfig.select_mode='min'"))
    with pytest.raises(ConfigError, match="eval_split 'test' has no answers"):
        runner_for(selecting_flags(tmp_path / "c", cache, "--gin.RunConfig.eval_split='test'"))
    reported = {"infilling_perplexity": "min", "infilling_bleu-3": "max"}
    selection.check_metric(Selection("infilling_perplexity", "min"), reported, "longlm_infilling")
    with pytest.raises(ConfigError, match="is better when lower"):
        selection.check_metric(Selection("infilling_perplexity"), reported, "longlm_infilling")
    with pytest.raises(ConfigError, match="the validation evaluation of step 4 reports EM, F1"):
        selection.check_results(Selection("AVERAGE"), {"F1": 1.0, "EM": 1.0}, "validation", 4)


def test_clue_table_7_gins_select_the_best_validation_checkpoint():
    from tests.e2e.test_clue_runs import make_clue_gin

    for path in sorted(make_clue_gin.generated_files()):
        gin.clear_config()
        launch.parse_gin([path.name], [])
        run = launch.gin_run_config()
        cmrc2018 = run.task == "clue_cmrc2018"
        assert run.select_best == ("AVERAGE" if cmrc2018 else "accuracy"), path.name
        assert (run.select_mode, run.eval_every) == ("max", None), path.name
        assert run.eval_every_epochs == (0.5 if cmrc2018 else 1.0), path.name
    gin.clear_config()
    launch.parse_gin(["cmrc2019_bert.gin"], [])
    assert launch.gin_run_config().select_best is None  # CMRC 2019: the final model
