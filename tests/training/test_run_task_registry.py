"""The run-task registry: every name RunConfig accepts has a run task, declared as a
`RunTask` (optional abilities with defaults, no probing)."""

from cmrcx.benchmarks.clue.reading_tasks import TASKS as CLUE_MRC_TASKS
from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_TASKS
from cmrcx.benchmarks.lot.understanding import TASKS as LOT_UNDERSTANDING_TASKS
from cmrcx.training import run_config, run_tasks, task_options
from cmrcx.training.run_tasks.base import RunTask


def test_run_config_tasks_are_the_registry_s():
    """RunConfig.task takes the registered names: every benchmark table's task, cmrc2019
    first (the order its error lists them in)."""
    names = run_config.run_task_names()
    assert names == tuple(run_tasks.REGISTRY) and names[0] == "cmrc2019"
    tables = [*CLUE_TASKS, *CLUE_MRC_TASKS, *LOT_UNDERSTANDING_TASKS]
    assert set(tables) <= set(names)
    assert {"longlm_pretrain", "lot_plotcom", "lot_outgen", "lot"} <= set(names)


def test_every_run_task_declares_its_options_class():
    for name, factory in run_tasks.REGISTRY.items():
        assert factory.options_class in task_options.OPTIONS_CLASSES, name


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
