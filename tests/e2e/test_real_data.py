"""Integration: the real official files of ../shared/data, where present.

Readers and ``python -m cmrcx.score`` on the CMRC 2018 trial file (ymcui/cmrc2018 @c0eb1b6
``squad-style-data/cmrc2018_trial.json``, the same file as CLUE's trial.json: two empty
questions, first answers away from their answer_start) and the CMRC 2019 trial file, and the
CMRC 2018 training path (TFDS build, windows, labels) on the trial file with the tiny
vocabulary; each takes seconds. Then the tiny CMRC 2019 config trains one epoch on its trial
file and must write a prediction for every blank of all 139 passages (minutes). Each test is
skipped, saying so, where its file is absent; the ordinary tests cover the same shapes with
small fixtures.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from cmrcx.benchmarks.clue import cmrc2018_format
from cmrcx.benchmarks.cmrc2019.official_format import read_passages
from tests.support import REPO_ROOT

REPO = REPO_ROOT
SHARED_DATA = REPO.parent / "shared" / "data"
SHARED = SHARED_DATA / "cmrc2019"
TRIAL = SHARED / "cmrc2019_trial.json"
CMRC2018_TRIAL = SHARED_DATA / "cmrc2018" / "cmrc2018_trial.json"
# The trial file's questions whose "question" is "", in file order.
EMPTY_QUESTIONS = ("TRIAL_776_QUERY_4", "TRIAL_20_QUERY_0")

needs_cmrc2018 = pytest.mark.skipif(
    not CMRC2018_TRIAL.is_file(), reason=f"real data not present: {CMRC2018_TRIAL}"
)
needs_cmrc2019 = pytest.mark.skipif(not TRIAL.is_file(), reason=f"real data not present: {TRIAL}")


def _score(*args) -> dict:
    """``python -m cmrcx.score ARGS`` in a fresh process: its one JSON line."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    out = subprocess.run(
        [sys.executable, "-m", "cmrcx.score", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@needs_cmrc2018
def test_cmrc2018_trial_is_read_with_its_empty_questions():
    split = cmrc2018_format.read_questions(CMRC2018_TRIAL, labelled=True)
    assert len(split.questions) == 1002 and split.empty_questions == EMPTY_QUESTIONS
    assert all(q.answers and q.answers[0] for q in split.questions)
    assert "2 empty questions" in split.summary()


@needs_cmrc2018
def test_cmrc2018_trial_is_scored_as_the_official_evaluator(tmp_path):
    split = cmrc2018_format.read_questions(CMRC2018_TRIAL, labelled=True)
    gold = {q.qid: q.answers[0] for q in split.questions}
    perfect = tmp_path / "perfect.json"
    perfect.write_text(json.dumps(gold, ensure_ascii=False), encoding="utf-8")
    assert _score("cmrc2018", CMRC2018_TRIAL, perfect) == {
        "AVERAGE": 100.0, "F1": 100.0, "EM": 100.0, "TOTAL": 1002, "SKIP": 0,
    }  # fmt: skip
    # Empty answers for the empty questions (EM 0, F1 0) and one question left out (SKIP).
    predictions = dict(gold, **{qid: "" for qid in EMPTY_QUESTIONS})
    del predictions[split.questions[0].qid]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(predictions, ensure_ascii=False), encoding="utf-8")
    percent = float(f"{100 * 999 / 1002:.3f}")
    assert _score("clue_cmrc2018", CMRC2018_TRIAL, partial) == {
        "AVERAGE": percent, "F1": percent, "EM": percent, "TOTAL": 1002, "SKIP": 1,
    }  # fmt: skip


@needs_cmrc2019
def test_cmrc2019_trial_is_read_and_scored(tmp_path):
    passages = read_passages(TRIAL)
    assert len(passages) == 139 and sum(p.num_blanks for p in passages) == 1504
    gold = {p.context_id: list(p.answers) for p in passages}
    perfect = tmp_path / "perfect.json"
    perfect.write_text(json.dumps(gold), encoding="utf-8")
    assert _score("cmrc2019", TRIAL, perfect) == {
        "qac": 100.0, "pac": 100.0, "total": 1504, "skip": 0,
    }  # fmt: skip


@needs_cmrc2018
def test_cmrc2018_trial_builds_training_windows(tmp_path, capfd):
    """The training path: the TFDS build (printing the reader's summary), then every
    question's windows with the tiny vocabulary and its first answer's labels."""
    from cmrcx.benchmarks.clue.reading_tasks import TASKS
    from cmrcx.common.paths import package_path
    from cmrcx.tasks.clue import reading as clue_mrc
    from cmrcx.vocab.wordpiece import WordPieceVocabulary

    data_dir = tmp_path / "cmrc2018_public"
    data_dir.mkdir()
    (data_dir / "trial.json").symlink_to(CMRC2018_TRIAL)  # the split's official name
    vocabulary = WordPieceVocabulary(package_path("data/tiny_vocab.txt"))
    windows = clue_mrc.span_windows(
        TASKS["clue_cmrc2018"], vocabulary, str(data_dir), "trial", 512, 128,
        str(tmp_path / "tfds"), training=True,
    )  # fmt: skip
    assert "trial.json: 1,002 questions, 256 passages, 2 empty questions" in capfd.readouterr().out
    assert set(windows["example_index"].tolist()) == set(range(1002))
    questions = clue_mrc.split_records(
        TASKS["clue_cmrc2018"], str(data_dir), "trial", str(tmp_path / "tfds")
    )
    for qid in EMPTY_QUESTIONS:
        index = next(i for i, q in enumerate(questions) if q.qid == qid)
        row = windows["input_ids"][np.flatnonzero(windows["example_index"] == index)[0]]
        assert row[:2].tolist() == [vocabulary.cls_id, vocabulary.sep_id]  # [CLS] [SEP] passage
    # Every question's first answer is labelled in at least one of its windows.
    labelled = set(windows["example_index"][windows["start_position"] > 0].tolist())
    assert labelled == set(range(1002))


# Slow (about a minute): an epoch of training; reading and scoring the real files are
# the tests above.
@pytest.mark.slow
@needs_cmrc2019
def test_tiny_config_one_epoch_on_trial_predicts_every_blank(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cmrcx.train",
            "--gin_file=cmrc2019_tiny.gin",
            f"--gin.MODEL_DIR='{tmp_path}'",
            f"--gin.DATA_DIR='{SHARED}'",
            "--gin.RunConfig.train_split='trial'",
            "--gin.RunConfig.eval_split='trial'",
            "--gin.RunConfig.num_epochs=1.0",
            f"--gin.RunConfig.tfds_cache_dir='{tmp_path}/tfds'",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    passages = read_passages(TRIAL)
    assert len(passages) == 139 and sum(p.num_blanks for p in passages) == 1504
    predictions = json.loads((tmp_path / "predictions" / "cmrc2019_tiny_trial.json").read_text())
    assert set(predictions) == {p.context_id for p in passages}
    for p in passages:
        assert len(predictions[p.context_id]) == p.num_blanks
        assert all(0 <= c < len(p.choices) for c in predictions[p.context_id])
    metrics = json.loads(out.stdout.strip().splitlines()[-1])
    print("trial after one epoch:", metrics)
