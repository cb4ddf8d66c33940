"""Every model of the CLUE Table 2 gins and of the LOT Table 10/11 gins gets its published
row printed under the runs' row by `cmrcx.eval --mixture` (ALBERT-tiny,
ALBERT-xxlarge, XLNet-mid, GPT2-base among them). The runs are written in the layout the
table reader expects (RUNS_ROOT/<task>/run_config.json, from the gin file with
local_tiny.gin after it); their evaluation is replaced by fixed metrics, so no model runs
here. Real tiny runs through the scripts (slow): tests/e2e/test_xlnet_runs.py (XLNet-mid),
test_clue_albert_runs.py (ALBERT-tiny), test_reproduce_lot.py (GPT2-base)."""

import json
import re

import gin
import pytest

from cmrcx.benchmarks.clue.paper import TABLE_2, TABLE_7_MODELS
from cmrcx.benchmarks.lot import paper
from cmrcx.cli import launch
from cmrcx.common import errors
from cmrcx.training import mixture_eval, run_config
from tests.support import REPO_ROOT

LOT_GINS = sorted(
    p.name
    for p in (REPO_ROOT / "gin_configs" / "lot").glob("lot_*.gin")
    if re.fullmatch(r"lot_(clozet|senpos|plotcom|outgen)_.+\.gin", p.name)
    and not p.name.endswith("_tiny.gin")
)
# Fixed metrics of a run, by task (fractions for LOT, % for CLUE).
METRICS = {
    "clue_afqmc": {"accuracy": 50.0},
    "clue_chid11": {"accuracy": 40.0, "accuracy_assignment": 40.0},
    "clue_cmnli": {"accuracy": 30.0},
    "lot_clozet": {"accuracy": 0.5},
    "lot_clozet_longlm_authors": {"accuracy": 0.5},
    "lot_senpos": {"accuracy": 0.25},
    "lot_plotcom": {"bleu-1": 0.1, "bleu-2": 0.02, "word-distinct-1": 0.2, "word-distinct-2": 0.5},
    "lot_outgen": {
        "bleu-1": 0.2,
        "bleu-2": 0.05,
        "word-distinct-1": 0.1,
        "word-distinct-2": 0.3,
        "coverage": 0.4,
        "order": 0.3,
    },  # fmt: skip
}


def write_run(runs_root, experiment):
    """RUNS_ROOT/<task>/run_config.json of `experiment` + local_tiny.gin; its RunConfig."""
    gin.clear_config()
    bindings = [f"MODEL_DIR = '{runs_root}'", f"DATA_DIR = '{runs_root}'"]
    launch.parse_gin([experiment, "local_tiny.gin"], bindings)
    run = launch.gin_run_config()
    (runs_root / run.task).mkdir(parents=True)
    text = json.dumps(run_config.run_config_json(run))
    (runs_root / run.task / run_config.RUN_CONFIG_FILE).write_text(text)
    return run


@pytest.fixture
def fixed_evaluation(monkeypatch):
    monkeypatch.setattr(mixture_eval, "_evaluate_run", lambda run, split: (2, METRICS[run.task]))


@pytest.mark.parametrize("model", list(TABLE_7_MODELS))
def test_clue_table_prints_the_published_row_of_each_table_7_model(
    model, tmp_path, fixed_evaluation, capsys
):
    for task in ("clue_afqmc", "clue_chid11", "clue_cmnli"):
        assert write_run(tmp_path, f"{task}_{model}.gin").paper_model == TABLE_7_MODELS[model]
    summary = mixture_eval.evaluate_mixture("clue", str(tmp_path), "validation")
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("clue validation")
    header, ours = lines[start + 1].split(), lines[start + 2].split()
    assert lines[start + 3] == f"paper Table 2 (test), {TABLE_7_MODELS[model]}"
    published = lines[start + 4].split()
    assert len(header) == len(ours) == len(published) == 11  # Avg, nine tasks, CMNLI
    cells = dict(zip(header, published, strict=True))
    avg, *nine = TABLE_2[TABLE_7_MODELS[model]]
    assert cells["Avg"] == f"{avg:.2f}" and cells["AFQMC"] == f"{nine[3]:.2f}"
    assert cells["ChID"] == f"{nine[7]:.2f}" and cells["CMNLI"] == "-"
    assert dict(zip(header, ours, strict=True))["AFQMC"] == "50.00"
    assert summary["runs"][0]["paper_model"] == TABLE_7_MODELS[model]


def test_clue_classification_table_averages_the_published_cells_it_shows(
    tmp_path, fixed_evaluation, capsys
):
    write_run(tmp_path, "clue_afqmc_xlnet_mid.gin")
    mixture_eval.evaluate_mixture("clue_classification", str(tmp_path), "validation")
    lines = capsys.readouterr().out.splitlines()
    published = lines[lines.index("paper Table 2 (test), XLNet-mid") + 1].split()
    six = TABLE_2["XLNet-mid"][1:7]
    assert published[0] == f"{sum(six) / 6:.2f}" and published[1:7] == [f"{v:.2f}" for v in six]


def test_a_run_without_a_paper_model_prints_no_published_row(tmp_path, fixed_evaluation, capsys):
    write_run(tmp_path, "clue_afqmc_tiny.gin")
    mixture_eval.evaluate_mixture("clue", str(tmp_path), "validation")
    assert "paper Table 2" not in capsys.readouterr().out


@pytest.mark.parametrize("experiment", LOT_GINS)
def test_lot_tables_print_the_published_row_of_each_model(
    experiment, tmp_path, fixed_evaluation, capsys
):
    run = write_run(tmp_path, experiment)
    model = run.paper_model
    title, table = (
        ("Table 10", paper.TABLE_10)
        if run.task.startswith(("lot_clozet", "lot_senpos"))
        else ("Table 11", paper.TABLE_11)
    )
    for split in paper.SPLITS:
        mixture_eval.evaluate_mixture("lot", str(tmp_path), split)
        lines = capsys.readouterr().out.splitlines()
        start = lines.index(f"published, {title} {model} {split}")
        row = paper.row(table, split, model)
        want = [f"{v:.2f}" for v in (*row.scores, row.overall)]
        assert lines[start + 1].split() == want
        assert len(lines[start + 1]) == len(lines[start - 2])  # aligned under the header


def test_gpt2_fills_both_lot_tables_with_its_published_rows(tmp_path, fixed_evaluation, capsys):
    for task in ("clozet", "senpos", "plotcom", "outgen"):
        write_run(tmp_path, f"lot_{task}_gpt2.gin")
    mixture_eval.evaluate_mixture("lot", str(tmp_path), "test")
    lines = capsys.readouterr().out.splitlines()
    for title, table in (("Table 10", paper.TABLE_10), ("Table 11", paper.TABLE_11)):
        start = lines.index(f"published, {title} GPT2-base test")
        assert lines[start - 3 : start - 2] == [title]
        assert lines[start - 1].split()[-1] != "-"  # every column filled: an overall score
        overall = paper.row(table, "test", "GPT2-base").overall
        assert lines[start + 1].split()[-1] == f"{overall:.2f}"


def test_a_column_with_runs_of_both_versions_names_the_one_left_out(tmp_path, capsys):
    from cmrcx.training import mixture_eval

    for task in ("clue_tnews10", "clue_tnews11"):
        (tmp_path / task).mkdir()
        (tmp_path / task / "run_config.json").write_text("{}")
    found = mixture_eval._find_run(str(tmp_path), ("clue_tnews11", "clue_tnews10"))
    assert found == ("clue_tnews11", str(tmp_path / "clue_tnews11"))
    assert f"note: {tmp_path} also has clue_tnews10; the table takes clue_tnews11" in (
        capsys.readouterr().out
    )
    assert mixture_eval._find_run(str(tmp_path), ("clue_tnews10",))[0] == "clue_tnews10"
    assert capsys.readouterr().out == ""


CMRC2019_GINS = sorted(
    p.name for p in (REPO_ROOT / "gin_configs" / "cmrc2019").glob("cmrc2019_*.gin")
    if not p.name.endswith("_tiny.gin")
)  # fmt: skip


def test_cmrc2019_table_3_rows_of_the_six_paper_gins(tmp_path, monkeypatch, capsys):
    from cmrcx.benchmarks.cmrc2019.paper import TABLE_3

    metrics = {"qac/paper": 70.0, "pac/paper": 10.0, "qac/baseline": 60.0, "pac/baseline": 5.0}
    monkeypatch.setattr(mixture_eval, "_evaluate_run", lambda run, split: (3, metrics))
    for experiment in CMRC2019_GINS:  # each in a folder named as the reproduce script names it
        gin.clear_config()
        launch.parse_gin([experiment, "local_tiny.gin"], ["MODEL_DIR = 'x'", "DATA_DIR = 'x'"])
        run = launch.gin_run_config()
        folder = tmp_path / experiment.removeprefix("cmrc2019_").removesuffix(".gin")
        folder.mkdir()
        (folder / run_config.RUN_CONFIG_FILE).write_text(
            json.dumps(run_config.run_config_json(run))
        )
    write_run(tmp_path, "clue_afqmc_tiny.gin")  # another benchmark's run: not a row
    write_run(tmp_path / "other", "clue_afqmc_tiny.gin")
    summary = mixture_eval.evaluate_mixture("cmrc2019", str(tmp_path), "validation")
    assert [r["paper_model"] for r in summary["runs"]] == [
        "BERT", "BERT-multilingual", "BERT-wwm", "BERT-wwm-ext", "RoBERTa-wwm-ext",
        "RoBERTa-wwm-ext-L",
    ]  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("cmrc2019 validation (Table 3: dev)")
    assert lines[start + 1].split() == ["run", "paper_model", "QAC", "PAC", "paper", "QAC",
                                        "paper", "PAC"]  # fmt: skip
    for line, row in zip(lines[start + 2 : start + 8], summary["runs"], strict=True):
        dev_qac, dev_pac = TABLE_3[row["paper_model"]][:2]
        assert line.split() == [row["run"], row["paper_model"], "70.00", "10.00",
                                f"{dev_qac:.2f}", f"{dev_pac:.2f}"]  # fmt: skip
    saved = json.loads((tmp_path / "cmrc2019_validation_results.json").read_text())
    assert saved["runs"][0]["metrics"] == metrics
    with pytest.raises(errors.ConfigError, match="no CMRC 2019 run under"):
        mixture_eval.evaluate_mixture("cmrc2019", str(tmp_path / "other"), "validation")


def test_the_mixtures_are_the_registered_paper_tables(tmp_path):
    """`--mixture` names a table of the registry (`cmrcx.training.tables`), in its order."""
    from cmrcx.training import tables

    assert list(tables.TABLES) == ["clue", "clue_classification", "lot", "cmrc2019"]
    message = "--mixture 'squad': use one of clue, clue_classification, lot, cmrc2019"
    with pytest.raises(errors.ConfigError, match=re.escape(message)):
        mixture_eval.evaluate_mixture("squad", str(tmp_path))
    with pytest.raises(ValueError, match="registered twice"):
        tables.register_table("lot", tables.TABLES["cmrc2019"])
