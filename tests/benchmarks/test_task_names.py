"""The papers' task names (CLUEWSC2020, ChID, C³, CMRC 2018...) resolve to the registered,
versioned names in gin file names, `RunConfig.task` and `cmrcx.score`; an unknown name is
an error that lists the accepted ones."""

import gin
import pytest

from cmrcx import score
from cmrcx.benchmarks import task_names
from cmrcx.benchmarks.clue.reading_tasks import TASKS as CLUE_MRC_TASKS
from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_TASKS
from cmrcx.cli import launch
from cmrcx.common import errors, paths
from tests.benchmarks.clue.test_clue_fixtures import FIXTURES, write_lines


@pytest.mark.parametrize(
    "typed, registered",
    [
        ("CLUEWSC2020", "clue_cluewsc11"),
        ("cluewsc2020", "clue_cluewsc11"),
        ("clue_cluewsc2020", "clue_cluewsc11"),
        ("cluewsc10", "clue_cluewsc10"),
        ("chid", "clue_chid11"),
        ("ChID 1.0", "clue_chid10"),
        ("c3", "clue_c311"),
        ("C³", "clue_c311"),
        ("CMRC 2018", "clue_cmrc2018"),
        ("cmrc2018", "clue_cmrc2018"),
        ("TNEWS'", "clue_tnews11"),
        ("tnews", "clue_tnews11"),
        ("afqmc", "clue_afqmc"),
        ("CMRC2019", "cmrc2019"),
    ],
)
def test_paper_names_resolve_to_the_current_version(typed, registered):
    assert task_names.resolve(typed) == registered


def test_every_registered_name_resolves_to_itself():
    for name in [*CLUE_TASKS, *CLUE_MRC_TASKS, "cmrc2019"]:
        assert task_names.resolve(name) == name


def test_an_unknown_name_lists_the_accepted_ones():
    with pytest.raises(task_names.UnknownTaskName, match="clue_cluewsc11.*cluewsc2020"):
        task_names.resolve("wsc2021")


def test_gin_file_under_the_paper_name(capsys):
    launch.parse_gin(["clue_cluewsc2020_bert.gin"], ["MODEL_DIR = '/tmp/unused'"])
    assert "clue_cluewsc11_bert.gin" in capsys.readouterr().err
    assert gin.query_parameter("RunConfig.task") == "clue_cluewsc11"


def test_gin_file_without_the_clue_prefix():
    launch.parse_gin(["chid_tiny.gin"], [])
    assert gin.query_parameter("RunConfig.task") == "clue_chid11"


def test_an_unknown_gin_file_says_paper_names_work():
    with pytest.raises(errors.ConfigError, match=r"not found.*cluewsc2020 \(clue_cluewsc11\)"):
        launch.parse_gin(["clue_wsc2021_bert.gin"], [])


def test_run_config_task_under_the_paper_name(tmp_path):
    launch.parse_gin(
        ["clue_afqmc_tiny.gin"],
        [f"MODEL_DIR = '{tmp_path}'", "RunConfig.task = 'CLUEWSC2020'"],
    )
    assert launch.run_config_from_gin().task == "clue_cluewsc11"


def test_run_config_unknown_task_lists_paper_names(tmp_path):
    launch.parse_gin(["clue_afqmc_tiny.gin"], [f"MODEL_DIR = '{tmp_path}'", "RunConfig.task='x'"])
    with pytest.raises(errors.ConfigError, match=r"use one of cmrc2019.*chid \(clue_chid11\)"):
        launch.run_config_from_gin()


def test_score_takes_the_paper_name(tmp_path, capsys):
    gold = paths.package_path("data/clue_mrc_sample/chid_public/dev_answer.json")
    assert score.main(["ChID", gold, gold]) == 0
    assert '"accuracy": 100.0' in capsys.readouterr().out


def test_score_unknown_name_lists_accepted_ones(capsys):
    with pytest.raises(SystemExit):
        score.main(["wsc2021", "gold", "pred"])
    assert "clue_cluewsc11" in capsys.readouterr().err


# Every task CLUE has in two versions, as (data-set name, version, registered name).
VERSIONED = [
    (row.dataset, row.clue_version, row.name)
    for row in [*CLUE_TASKS.values(), *CLUE_MRC_TASKS.values()]
    if row.clue_version is not None
]


def test_the_versioned_tasks_are_those_of_clue_1_1():
    assert sorted(name for _, _, name in VERSIONED) == [
        "clue_c310", "clue_c311", "clue_chid10", "clue_chid11",
        "clue_cluewsc10", "clue_cluewsc11", "clue_tnews10", "clue_tnews11",
    ]  # fmt: skip


@pytest.mark.parametrize("dataset, version, registered", VERSIONED)
def test_a_data_set_name_with_a_version_resolves_to_that_version(dataset, version, registered):
    for typed in (
        f"{dataset.upper()} {version}",  # "CLUEWSC2020 1.0", as cmrcx.score is called
        f"{dataset}{version}",
        f"{dataset}_{version}",
        f"clue_{dataset}_{version}",
    ):
        assert task_names.resolve(typed) == registered, typed


@pytest.mark.parametrize("dataset, version, registered", VERSIONED)
def test_gin_file_under_the_data_set_name_and_version(dataset, version, registered, capsys):
    launch.parse_gin([f"{dataset}_{version}_bert.gin"], ["MODEL_DIR = '/tmp/unused'"])
    assert f"{registered}_bert.gin" in capsys.readouterr().err
    assert gin.query_parameter("RunConfig.task") == registered


def test_score_takes_a_data_set_name_with_a_version(tmp_path, capsys):
    _, records = FIXTURES["clue_cluewsc10"]["labelled"]
    gold = write_lines(tmp_path / "dev.json", records)
    labels = [{"id": record["idx"], "label": record["label"]} for record in records]  # WSC: idx
    predictions = write_lines(tmp_path / "cluewsc10_predict.json", labels)
    assert score.main(["CLUEWSC2020 1.0", str(gold), str(predictions)]) == 0
    assert '"accuracy": 100.0' in capsys.readouterr().out
