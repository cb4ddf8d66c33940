"""CLUE reading comprehension on the generic runner: each tiny gin trains, evaluates the
validation split with the task's metrics and writes the official files of the test split
(CMRC 2018 {qid: text}, ChID {tag: index}, C3 {"id","label"} lines); the metrics the run
reports equal the scorers' on the prediction file it wrote."""

import json

import numpy as np
import pytest

from cmrcx.benchmarks.clue import c3, chid, chid_decoding, cmrc2018_evaluate
from cmrcx.cli import launch
from cmrcx.common.paths import package_path
from cmrcx.training.runner import Runner

SAMPLES = package_path("data/clue_mrc_sample")


@pytest.fixture(scope="module")
def tfds_cache(tmp_path_factory):
    """One prepared-data cache for the module: each task's splits are prepared once, for
    its run and its gold-score decoding alike (a store is keyed by the data it holds)."""
    return tmp_path_factory.mktemp("tfds")


def runner(gin_file, model_dir, tfds_cache, steps=6):
    argv = [
        f"--gin_file={gin_file}",
        f"--gin.MODEL_DIR='{model_dir}'",
        f"--gin.RunConfig.num_train_steps={steps}",
        f"--gin.RunConfig.tfds_cache_dir='{tfds_cache}'",
        "--gin.RunConfig.log_every=3",
    ]
    args = launch.parse_flags(argv, "test")
    launch.parse_gin(args.gin_file, args.gin_bindings)
    return Runner(launch.run_config_from_gin())


def train_and_evaluate(gin_file, tmp_path, tfds_cache):
    run = runner(gin_file, tmp_path / "run", tfds_cache)
    state, losses = run.train()
    assert all(np.isfinite(loss) for _, loss in losses)
    results = run.evaluate(state, 6, "validation")
    run.evaluate(state, 6, "test")
    return run, results, tmp_path / "run"


def test_cmrc2018_tiny_run(tmp_path, tfds_cache):
    run, results, model_dir = train_and_evaluate("clue_cmrc2018_tiny.gin", tmp_path, tfds_cache)
    assert set(results) == {"EM", "F1", "AVERAGE"}
    name = run.task.train_task
    predictions = model_dir / "predictions" / f"{name}_validation.json"
    official = cmrc2018_evaluate.score_files(f"{SAMPLES}/cmrc2018_public/dev.json", predictions)
    assert {k: official[k] for k in results} == pytest.approx(results)
    submission = json.loads((model_dir / "submission" / "cmrc2018_predict.json").read_text())
    test = json.loads((tmp_path / "run" / "predictions" / f"{name}_test.json").read_text())
    assert submission == test and all(isinstance(v, str) for v in submission.values())
    assert len(submission) == 3


def test_chid_tiny_run(tmp_path, tfds_cache):
    run, results, model_dir = train_and_evaluate("clue_chid11_tiny.gin", tmp_path, tfds_cache)
    assert set(results) == {"accuracy", "accuracy_assignment"}
    dev = chid.read_split(f"{SAMPLES}/chid_public", "validation")
    written = model_dir / "predictions" / f"{run.task.train_task}_validation.json"
    predictions = chid_decoding.read_submission(written, dev)
    assert chid_decoding.accuracy(dev.answers(), predictions)["accuracy"] == pytest.approx(
        results["accuracy"]
    )
    submission = chid_decoding.read_submission(model_dir / "submission" / "chid11_predict.json")
    test = chid.read_split(f"{SAMPLES}/chid_public", "test")
    assert set(submission) == {blank.tag for blank in test.blanks}


def test_c3_tiny_run(tmp_path, tfds_cache):
    run, results, model_dir = train_and_evaluate("clue_c311_tiny.gin", tmp_path, tfds_cache)
    assert set(results) == {"accuracy"}
    dev = c3.read_split(f"{SAMPLES}/c3_public", "validation")
    lines = (model_dir / "predictions" / f"{run.task.train_task}_validation.json").read_text()
    labels = [json.loads(line)["label"] for line in lines.splitlines()]
    right = sum(int(q.label == label) for q, label in zip(dev, labels, strict=True))
    assert 100.0 * right / len(dev) == pytest.approx(results["accuracy"])
    submission = (model_dir / "submission" / "c311_predict.json").read_text().splitlines()
    test = c3.read_split(f"{SAMPLES}/c3_public", "test")
    assert [json.loads(line)["id"] for line in submission] == [q.id for q in test]


def oracle_scores(run_task, split):
    """Scores that put all weight on the gold answer of every example, in split order."""
    if run_task.row.dataset == "cmrc2018":
        windows = run_task.windows(split)
        length = windows["input_ids"].shape[1]
        scores = np.full((len(windows["input_ids"]), 2, length), -10.0, np.float32)
        rows = np.arange(len(scores))
        scores[rows, 0, windows["start_position"]] = 10.0
        scores[rows, 1, windows["end_position"]] = 10.0
        return scores, windows["example_index"]
    records = run_task.records(split)
    scores = np.full((len(records), run_task.row.num_choices), -10.0, np.float32)
    scores[np.arange(len(records)), [r.label for r in records]] = 10.0
    return scores, np.arange(len(records))


@pytest.mark.parametrize(
    "gin_file, split, metric",
    [("clue_cmrc2018_tiny.gin", "train", "EM"), ("clue_chid11_tiny.gin", "validation", "accuracy"),
     ("clue_c311_tiny.gin", "validation", "accuracy")],
)  # fmt: skip
def test_decoding_the_gold_scores_gives_full_marks(gin_file, split, metric, tmp_path, tfds_cache):
    """Scores peaked at the gold answers decode to the gold answers: 100, so the rows, the
    decoding and the metric line up (a shifted or shuffled row would cost points)."""
    run_task = runner(gin_file, tmp_path / "run", tfds_cache).task
    scores, example_index = oracle_scores(run_task, split)
    evaluation = run_task.evaluation(split)
    for start in range(0, len(scores), 5):  # in batches, as the runner feeds them
        part = slice(start, start + 5)
        evaluation.add(scores[part], {"example_index": example_index[part]})
    assert evaluation.finish(str(tmp_path / "run"))[metric] == 100.0
    shuffled = run_task.evaluation(split)
    with pytest.raises(ValueError, match="out of the split's order"):
        shuffled.add(scores[:2], {"example_index": example_index[:2][::-1]})
