"""LOT ClozeT and SenPos on the generic runner: Table 10's gin files, tiny runs end to end
(the accuracy a run reports equals `cmrcx.score` on the prediction file it writes, which
is the official file line for line with the label in the gold's type), the test split
without labels, and the T5 family (decoder states, the authors' variant) at tiny size."""

import json
import re

import pytest

from cmrcx.benchmarks.lot import paper
from cmrcx.cli import launch
from cmrcx.common.paths import package_path

SAMPLE = package_path("data/lot_sample")
MODELS = {
    "transformer": "Transformer",
    "bert": "BERT-base",
    "roberta": "RoBERTa-base",
    "mt5_base": "mT5-base",
    "longlm_small": "LongLM-small",
    "longlm_base": "LongLM-base",
    "longlm_large": "LongLM-large",
    "gpt2": "GPT2-base",
}
FAMILY = {
    "mt5_base": "T5Config", "longlm_small": "T5Config", "longlm_base": "T5Config",
    "gpt2": "GPT2Config",
}  # fmt: skip


@pytest.mark.parametrize("task", ["clozet", "senpos"])
@pytest.mark.parametrize("model", list(MODELS))
def test_table_10_gin_files(task, model, repo_root):
    """The paper's setting (section 5.2: batch 12, length 512, lr 3e-5), the family, and
    the Table 10 cells each file cites equal `cmrcx.benchmarks.lot.paper`."""
    name = f"lot_{task}_{model}.gin"
    launch.parse_gin([name], [])
    run = launch.gin_run_config()
    assert run.task == f"lot_{task}" and run.paper_model == MODELS[model]  # its published row
    assert (run.batch_size, run.max_length, run.learning_rate) == (12, 512, 3e-5)
    assert type(run.model).__name__ == FAMILY.get(model, "T5Config" if "longlm" in model
                                                   else "BertConfig")  # fmt: skip
    assert run.require_pretrained == (model != "transformer")
    if model == "transformer":
        assert run.model.num_layers == 3 and run.model.hidden_size == 768
    text = (repo_root / "gin_configs" / "lot" / name).read_text()
    cited = re.search(r"row (\S+): \w+ ([\d.]+) \(validation\),\n# ([\d.]+) \(test\)", text)
    assert cited, text
    assert cited.group(1) == MODELS[model]
    column = 0 if task == "clozet" else 1
    for split, value in (("validation", cited.group(2)), ("test", cited.group(3))):
        assert float(value) == paper.row(paper.TABLE_10, split, MODELS[model]).scores[column]


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


@pytest.mark.parametrize(
    "task, label_type",
    [("clozet", str), pytest.param("senpos", int, marks=pytest.mark.slow)],  # budget
)
def test_tiny_run_reports_what_the_scorer_reads_from_its_prediction_file(
    task, label_type, tiny_runner, tmp_path, run_cli
):
    runner = tiny_runner(
        f"lot_{task}_tiny.gin", "RunConfig.num_train_steps = 2", "RunConfig.max_length = 64"
    )
    state, _ = runner.train()
    results = runner.evaluate(state, 2, "validation")
    assert set(results) == {"accuracy"} and 0.0 <= results["accuracy"] <= 1.0
    predictions = tmp_path / "run" / "predictions" / f"lot_{task}_validation.jsonl"
    gold = f"{SAMPLE}/{task}/val.jsonl"
    scored = run_cli("score", f"lot_{task}", gold, str(predictions))
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["accuracy"] == pytest.approx(results["accuracy"])
    # The official file line for line: inputs unchanged, the label in the gold's type.
    written, official = _lines(predictions), _lines(gold)
    assert len(written) == len(official)
    for mine, theirs in zip(written, official, strict=True):
        assert list(mine) == list(theirs)
        assert {k: v for k, v in mine.items() if k != "label"} == {
            k: v for k, v in theirs.items() if k != "label"
        }
        assert type(mine["label"]) is label_type

    # The test split has no labels: predictions in the official types, no metrics.
    assert runner.evaluate(state, 2, "test") == {}
    test_file = tmp_path / "run" / "predictions" / f"lot_{task}_test.jsonl"
    lines = _lines(test_file)
    assert len(lines) == len(_lines(f"{SAMPLE}/{task}/test.jsonl"))
    assert all(type(line["label"]) is label_type for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize(
    "experiment, task",
    [
        ("lot_clozet_longlm_small.gin", "clozet"),
        ("lot_senpos_mt5_base.gin", "senpos"),
        ("lot_clozet_longlm_authors.gin", "clozet"),
    ],
)
def test_t5_family_smoke_runs(experiment, task, tmp_path):
    """local_tiny.gin after a T5 row: the tiny T5 with the bundled spiece.model, the
    pointer over decoder states (or the authors' step), train and evaluate."""
    from cmrcx.training.runner import Runner

    launch.parse_gin(
        [experiment, "local_tiny.gin"],
        [
            f"MODEL_DIR = '{tmp_path / 'run'}'",
            f"DATA_DIR = '{SAMPLE}/{task}'",
            f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
            "RunConfig.num_train_steps = 2",
        ],
    )
    run = launch.run_config_from_gin()
    assert type(run.model).__name__ == "T5Config" and run.model.d_model == 32
    runner = Runner(run)
    state, _ = runner.train()
    assert 0.0 <= runner.evaluate(state, 2, "validation")["accuracy"] <= 1.0


def test_inspect_shows_the_layout_with_the_pointer_positions(run_cli, tmp_path):
    out = run_cli(
        "inspect", "lot_clozet", "--gin_file=lot_clozet_tiny.gin", "--n", "1",
        f"--gin.RunConfig.tfds_cache_dir='{tmp_path}'",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    (shown,) = [x for x in out.stdout.splitlines() if x.startswith("  layout: ")]
    layout = shown.removeprefix("  layout: ")  # the readable view
    assert layout.startswith("[CLS] ") and "[unused1]⟨context⟩" in layout
    assert "[unused2]⟨0" in layout and "[unused2]⟨1" in layout and "*⟩" in layout


def test_the_overall_score_of_a_paper_row_from_its_metrics():
    """`cmrcx.eval --mixture=lot`'s table: fractions in, the paper's % and Overall out."""
    from cmrcx.benchmarks.lot import tables as lot_tables

    bert = paper.row(paper.TABLE_10, "validation", "BERT-base")
    metrics = {"lot_clozet": {"accuracy": bert.scores[0] / 100},
               "lot_senpos": {"accuracy": bert.scores[1] / 100}}  # fmt: skip
    summary = lot_tables.summarize(metrics, "validation")
    table = summary["tables"]["Table 10"]
    assert table["overall"] == pytest.approx(bert.overall, abs=0.01)
    assert summary["tables"]["Table 11"]["overall"] is None
    text = lot_tables.format_tables({**summary, "missing": ["lot_plotcom", "lot_outgen"]})
    assert "ClozeT  SenPos  Overall" in text and "70.75   40.13    51.36" in text
    assert "Table 11" not in text and "missing (no run under runs_root): lot_plotcom" in text


@pytest.mark.slow
def test_gpt2_smoke_run(tmp_path):
    """local_tiny.gin after the GPT-2 row: the tiny GPT-2 over the bundled vocab.txt, the
    pointer over its causal states in the causal WordPiece layout, train and evaluate."""
    from cmrcx.training.runner import Runner

    launch.parse_gin(
        ["lot_clozet_gpt2.gin", "local_tiny.gin"],
        [
            f"MODEL_DIR = '{tmp_path / 'run'}'",
            f"DATA_DIR = '{SAMPLE}/clozet'",
            f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
            "RunConfig.num_train_steps = 2",
            "RunConfig.max_length = 64",
        ],
    )
    run = launch.run_config_from_gin()
    assert type(run.model).__name__ == "GPT2Config" and run.model.n_embd == 32
    runner = Runner(run)
    assert runner.task.layout.name == "gpt2" and runner.task.layout.causal
    state, _ = runner.train()
    assert 0.0 <= runner.evaluate(state, 2, "validation")["accuracy"] <= 1.0
