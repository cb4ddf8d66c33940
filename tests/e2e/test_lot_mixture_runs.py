"""One model for all of LOT (RunConfig.task "lot"): lot_mixture_tiny.gin on a 2-record data
root drops the leaking training record it was given, builds its training epoch, and (the
model as initialised: the slow test trains) writes each task's official prediction file
for validation and test, reports per-task metrics that `cmrcx.score` reads back from
those files, and fills both of `--mixture=lot`'s tables from the single run; the row
routing and constrained choice of its evaluation; the LongLM mixture gins. The whole demo
run (`lot_mixture_tiny.gin`: training, evaluation, the CLIs) is the slow test."""

from __future__ import annotations

import contextlib
import io
import json
import math
import types

import gin
import numpy as np
import pytest
import seqio

from cmrcx.benchmarks.lot import formats, paper, scoring
from cmrcx.benchmarks.lot import tables as lot_tables
from cmrcx.cli import launch
from cmrcx.common.paths import package_path
from cmrcx.tasks.lot import generation as generation_tasks
from cmrcx.tasks.lot import mixture as mixture_tasks
from cmrcx.tasks.lot.pretraining import Decoding
from cmrcx.training import input_pipeline, mixture_eval
from cmrcx.training.run_config import RunConfig
from cmrcx.training.run_tasks import lot_mixture as lot_mixture_run_tasks
from cmrcx.training.runner import Runner

SAMPLE = package_path("data/lot_sample")
ROWS = mixture_tasks.ROWS
SPLIT_FILES = {"validation": "val.jsonl", "test": "test.jsonl"}


def read_jsonl(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f.read().splitlines()]


def write_jsonl(path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")


def small_root(root):
    """2 records per file of every task, and a third ClozeT training record telling
    PlotCom's first validation story (its plot the right candidate)."""
    for task in formats.TASKS:
        for name in ("train.jsonl", "val.jsonl", "test.jsonl"):
            write_jsonl(root / task / name, read_jsonl(f"{SAMPLE}/{task}/{name}")[:2])
    plotcom = read_jsonl(f"{SAMPLE}/plotcom/val.jsonl")[0]
    story = plotcom["story"].replace("<MASK>", "<mask>")
    leaked = {"story": story, "plot0": plotcom["plot"], "plot1": "不相干的句子。", "label": "0"}
    write_jsonl(root / "clozet" / "train.jsonl", [*read_jsonl(root / "clozet/train.jsonl"), leaked])
    return root


def mixture_run(tmp, data_dir, *bindings):
    gin.clear_config()
    launch.parse_gin(
        ["lot_mixture_tiny.gin"],
        [
            f"MODEL_DIR = '{tmp / 'runs' / 'lot'}'",
            f"DATA_DIR = '{data_dir}'",
            f"RunConfig.tfds_cache_dir = '{tmp / 'tfds'}'",
            *bindings,
        ],
    )
    run = launch.run_config_from_gin()
    gin.clear_config()
    return run


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """The run built (leak guard, mixture, epoch), its first training batch drawn, its
    initial parameters saved as step 0 and evaluated on validation and test (eval
    batches of 3 rows: tasks meet inside a batch, the last one padded)."""
    tmp = tmp_path_factory.mktemp("lot_mixture")
    run = mixture_run(
        tmp,
        small_root(tmp / "LOT"),
        "RunConfig.batch_size = 4",
        "RunConfig.eval_batch_size = 3",
        "RunConfig.max_length = 64",
        "RunConfig.target_length = 24",
        "RunConfig.generation_max_new_tokens = 8",
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        runner = Runner(run)
        state = runner.initial_state()
        first_batch = next(runner._batches(0))
        runner.checkpoints.save(0, state, force=True)
        runner.checkpoints.close()
        results = {split: runner.evaluate(state, 0, split) for split in SPLIT_FILES}
    return types.SimpleNamespace(
        tmp=tmp,
        run=run,
        runner=runner,
        first_batch=first_batch,
        results=results,
        printed=printed.getvalue(),
    )


def test_the_leaking_training_record_is_dropped_and_said(small_run):
    assert (
        "lot leak guard: dropped from training 1 clozet, 0 senpos, 0 plotcom, 0 outgen record(s)"
        in small_run.printed
    )
    with open(f"{small_run.run.model_dir}/lot_leak_guard.json", encoding="utf-8") as f:
        dropped = json.load(f)
    assert [d["line"] for d in dropped["clozet"]] == [3]
    # One epoch: 2 + 2 + 2 + 2 examples (proportional), the leaking one not among them.
    runner = small_run.runner
    assert runner.task.count_examples("train") == 8
    assert input_pipeline.count_examples(runner.train_task, "train") == 8
    assert "8 training examples x 8.0 epochs / batch 4 = 16 steps" in small_run.printed
    clozet = seqio.get_mixture_or_task("lot_clozet_tiny_t2t").get_dataset(
        sequence_length=None, split="train", shuffle=False
    )
    assert [int(ex["line"]) for ex in clozet.as_numpy_iterator()] == [1, 2]
    assert small_run.first_batch["inputs"].shape == (4, 64)
    assert small_run.first_batch["targets"].shape == (4, 24)


@pytest.mark.parametrize("split", list(SPLIT_FILES))
@pytest.mark.parametrize("row", list(ROWS))
def test_each_task_writes_its_official_prediction_file(small_run, row, split):
    gold = read_jsonl(small_run.tmp / "LOT" / ROWS[row] / SPLIT_FILES[split])
    path = f"{small_run.run.model_dir}/predictions/{row}_{split}.jsonl"
    predictions = read_jsonl(path)
    field = formats.TARGET_FIELDS.get(ROWS[row], "label")
    assert len(predictions) == len(gold) == 2
    for prediction, line in zip(predictions, gold, strict=True):
        answer = prediction.pop(field)
        line.pop(field, None)
        assert prediction == line  # inputs unchanged, line for line
        if row == "lot_clozet":
            assert answer in ("0", "1")
        elif row == "lot_senpos":
            assert isinstance(answer, int) and 1 <= answer <= line["story"].count("[MASK]")
        else:
            assert isinstance(answer, str) and "<extra_id" not in answer


def test_metrics_are_cmrcx_score_of_the_written_files(small_run):
    results = small_run.results["validation"]
    for row, task in ROWS.items():
        gold = str(small_run.tmp / "LOT" / task / "val.jsonl")
        path = f"{small_run.run.model_dir}/predictions/{row}_validation.jsonl"
        scored = scoring.SCORERS[row](gold, path)
        if row in mixture_tasks.UNDERSTANDING_ROWS:
            scored = {"accuracy": scored["accuracy"]}
        mine = {key.split("/", 1)[1]: v for key, v in results.items() if key.startswith(f"{row}/")}
        scored = {k: math.nan if v is None else v for k, v in scored.items()}
        assert mine == pytest.approx(scored, nan_ok=True), row
    # Tables 10 and 11's overall scores, the paper's weights (fractions here).
    assert {"understanding-overall", "generation-overall"} <= set(results)
    assert small_run.results["test"] == {}  # the sample's test files have no answers


def test_mixture_eval_fills_both_tables_from_the_one_run(small_run, capsys):
    """`--mixture=lot`'s tables (`lot_tables.evaluate`) with the run found under the
    runs root; its evaluation is the fixture's (the CLI evaluating for real is the slow
    test), so nothing compiles again."""
    evaluated = []

    def evaluate_run(run, split):
        evaluated.append((run.task, run.model_dir, split))
        return 0, small_run.results[split]

    runs_root = str(small_run.tmp / "runs")
    runs = mixture_eval.RunsUnder(runs_root, evaluate_run)
    summary = lot_tables.evaluate(runs, "validation")
    assert evaluated == [("lot", small_run.run.model_dir, "validation")]  # once, all four
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "--- lot_clozet, lot_senpos, lot_plotcom, lot_outgen: lot, one model for all four" in out
    assert lines[lines.index("Table 10") + 1].split() == ["ClozeT", "SenPos", "Overall"]
    assert lines[lines.index("Table 11") + 1].split()[:2] == ["PlotCom", "B-1"]
    assert "columns lot_clozet, lot_senpos, lot_plotcom, lot_outgen: run lot (" in out
    assert summary["missing"] == []
    results = small_run.results["validation"]
    for title, key in (("Table 10", "understanding-overall"), ("Table 11", "generation-overall")):
        assert summary["tables"][title]["overall"] == pytest.approx(100 * results[key])
    clozet = summary["tables"]["Table 10"]["cells"]["ClozeT"]
    assert clozet == pytest.approx(100 * results["lot_clozet/accuracy"])
    with open(f"{runs_root}/lot_validation_results.json", encoding="utf-8") as f:
        assert json.load(f)["runs"]["lot_outgen"]["task"] == "lot"
    # The test split: no answers, but every task's prediction file: all four filled.
    summary = lot_tables.evaluate(runs, "test")
    assert summary["missing"] == [] and summary["metrics"] == {}


def test_without_the_one_run_the_per_task_runs_fill_their_columns(tmp_path, capsys):
    """No runs_root/lot/: each task's own run, as before; the printout names them."""
    for task in ("lot_clozet", "lot_senpos"):
        (tmp_path / task).mkdir()
        (tmp_path / task / "run_config.json").write_text("{}")
    scores = {"lot_clozet": {"accuracy": 0.75}, "lot_senpos": {"accuracy": 0.5}}

    def evaluate_run(run, split):
        return 7, scores[run.task]

    class Runs(mixture_eval.RunsUnder):
        def read(self, run_dir):
            return RunConfig(task=run_dir.rsplit("/", 1)[1], model_dir=run_dir)

    summary = lot_tables.evaluate(Runs(str(tmp_path), evaluate_run), "validation")
    out = capsys.readouterr().out
    assert f"columns lot_clozet: run lot_clozet ({tmp_path}/lot_clozet, step 7)" in out
    assert f"columns lot_senpos: run lot_senpos ({tmp_path}/lot_senpos, step 7)" in out
    assert "missing (no run under runs_root): lot_plotcom, lot_outgen" in out
    assert summary["tables"]["Table 10"]["cells"] == {"ClozeT": 75.0, "SenPos": 50.0}


def test_evaluation_routes_rows_and_chooses_among_the_candidates_present():
    """Understanding rows take the best of their present candidates' columns (a padding
    slot's higher score ignored); generation rows pass their generated ids."""

    class RunTask:
        model = types.SimpleNamespace(candidate_column=3)
        num_candidates = 3

        def splits_of(self, row):
            return ["validation"]

        def part(self, row):
            if row in mixture_tasks.UNDERSTANDING_ROWS:
                return lot_mixture_run_tasks._UnderstandingPart(row, ROWS[row], None, "unused")
            run = types.SimpleNamespace(target_length=2)
            return lot_mixture_run_tasks._GenerationPart(
                row, generation_tasks.get_task(row), "unused", run, None, Decoding("greedy")
            )

    evaluation = lot_mixture_run_tasks.LotMixtureEvaluation(RunTask(), "validation")
    scores = np.array(
        [
            [0.0, 0, 0, -1.0, -2.0, 5.0],  # ClozeT: 2 candidates, slot 3 is padding
            [0.0, 0, 0, -3.0, -1.0, -2.0],  # SenPos: 3 gaps
            [0.0, 7, 8, 0, 0, 0],  # PlotCom: generated ids 7, 8
        ]
    )
    examples = {
        "task_index": np.array([0, 1, 2, 3]),  # a padding row of the batch after them
        "candidate_mask": np.array([[1, 1, 0], [1, 1, 1], [0, 0, 0], [0, 0, 0]]),
        "example_index": np.array([0, 0, 0, 0]),
        "label": np.array([0, 2, -1, -1]),
        "line": np.array([1, 1, 1, 1]),
        "raw": np.array([b"{}"] * 4, dtype=object),
    }
    evaluation.add(scores, examples)
    assert evaluation.parts["lot_clozet"].predicted == [0]
    assert evaluation.parts["lot_senpos"].predicted == [1]
    ((index, line, raw, ids),) = evaluation.parts["lot_plotcom"].rows
    assert (index, line, raw, ids.tolist()) == (0, 1, "{}", [7, 8])
    assert evaluation.parts["lot_outgen"].rows == []


LONGLM = {"small": (512, 6, "data"), "base": (768, 12, "data"), "large": (1536, 24, "fsdp")}


@pytest.mark.parametrize("size", sorted(LONGLM))
def test_longlm_mixture_gins(size, repo_root):
    launch.parse_gin([f"lot_mixture_longlm_{size}.gin"], [])
    assert launch.unset_required_values() == ["MODEL_DIR", "DATA_DIR"]
    run = launch.gin_run_config()
    d_model, layers, partitioning = LONGLM[size]
    assert (run.task, run.vocabulary_name, run.mixture_rates) == ("lot", "longlm", None)
    assert (run.model.d_model, run.model.num_layers, run.partitioning) == (
        d_model,
        layers,
        partitioning,
    )
    # Section 5.2: batch 12, length 512, lr 3e-5; top-k 40, temperature 0.7.
    assert (run.batch_size, run.max_length, run.target_length, run.learning_rate) == (
        12,
        512,
        512,
        3e-5,
    )
    assert (run.generation_top_k, run.generation_temperature) == (40, 0.7)
    assert (run.num_epochs, run.require_pretrained) == (10.0, True)
    assert (run.select_best, run.select_mode) == ("understanding-overall", "max")
    assert run.select_best in lot_mixture_run_tasks.LotMixtureRunTask.metrics_reported(None)
    # The Table 10 cells each file cites for comparison are the paper's.
    text = (repo_root / "gin_configs" / "lot" / f"lot_mixture_longlm_{size}.gin").read_text()
    name = f"LongLM-{size}"
    for split in ("validation", "test"):
        scores = paper.row(paper.TABLE_10, split, name).scores
        assert f"{scores[0]:.2f} / {scores[1]:.2f} ({split})" in text


@pytest.mark.slow
def test_the_tiny_demo_trains_on_all_four_and_scores_as_cmrcx_score(tmp_path, run_cli):
    """lot_mixture_tiny.gin as docs/lot.md runs it (the whole sample, 120 steps): the loss
    falls, each task's validation file is what `python -m cmrcx.score` scores to the
    run's metrics, and `cmrcx.eval --mixture=lot` prints both tables from the one run."""
    run = mixture_run(tmp_path, SAMPLE)
    runner = Runner(run)
    state, losses = runner.train()
    assert losses[-1][1] < losses[0][1]
    results = runner.evaluate(state, runner.num_train_steps)
    for row, task in ROWS.items():
        path = f"{run.model_dir}/predictions/{row}_validation.jsonl"
        out = run_cli("score", row, f"{SAMPLE}/{task}/val.jsonl", path)
        assert out.returncode == 0, out.stderr
        scored = json.loads(out.stdout.strip().splitlines()[-1])
        for key, value in scored.items():
            if f"{row}/{key}" in results:
                assert results[f"{row}/{key}"] == pytest.approx(
                    math.nan if value is None else value, nan_ok=True
                ), (row, key)
    out = run_cli("eval", "--mixture=lot", f"--runs_root={tmp_path / 'runs'}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Table 10" in out.stdout and "Table 11" in out.stdout
    assert "columns lot_clozet, lot_senpos, lot_plotcom, lot_outgen: run lot (" in out.stdout
