"""The run-task registry: every name RunConfig accepts has a run task, declared as a
`RunTask` (optional abilities with defaults, no probing)."""

from cmrcx.training import run_config, run_tasks
from cmrcx.training.run_tasks.base import RunTask


def test_every_run_config_task_is_registered():
    assert sorted(run_tasks.REGISTRY) == sorted(run_config.RUN_TASKS)


def test_every_run_task_declares_the_protocol():
    for name, factory in run_tasks.REGISTRY.items():
        assert RunTask in factory.__mro__, name


def test_optional_abilities_have_defaults():
    class Minimal(RunTask):
        name = "minimal"

    task = Minimal()
    assert task.count_examples("train") is None
    assert task.count_training_blanks() is None
    assert task.results_table({"accuracy": 50.0}, "validation") == (
        "minimal validation accuracy: 50.00"
    )


def test_an_unknown_task_lists_the_registered_ones():
    class Run:
        task = "nope"

    try:
        run_tasks.build_run_task(Run())
    except ValueError as error:
        assert "clue_afqmc" in str(error) and "cmrc2019" in str(error)
    else:
        raise AssertionError("no error")
