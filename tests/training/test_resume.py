"""A run stopped at step k and resumed gives the uninterrupted run's losses after k."""

import dataclasses
import threading

import numpy as np
import pytest

from cmrcx.common.paths import package_path
from cmrcx.models.bert import BertConfig
from cmrcx.training.run_config import RunConfig
from cmrcx.training.runner import Runner
from cmrcx.training.task_options import Cmrc2019Options

TINY = BertConfig(
    vocab_size=4096,
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    intermediate_size=128,
    max_position_embeddings=128,
)


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    return RunConfig(
        data_dir=package_path("data/cmrc2019_sample"),
        vocab_file=package_path("data/tiny_vocab.txt"),
        vocabulary_name="tiny",
        model=TINY,
        max_length=128,
        options=Cmrc2019Options(doc_stride=64),
        batch_size=8,
        num_train_steps=8,
        learning_rate=1e-3,
        log_every=1,
        save_every=100,
        tfds_cache_dir=str(tmp_path_factory.mktemp("tfds")),
    )


@pytest.fixture(scope="module")
def whole_run(base_run, tmp_path_factory):
    """The uninterrupted run, trained once for the module: (its runner, its losses). It
    reads its batches in the loop, saves every 2 steps and keeps the newest 2 checkpoints
    (saving changes no step's loss)."""
    whole = dataclasses.replace(
        base_run,
        model_dir=str(tmp_path_factory.mktemp("whole")),
        prefetch_batches=0,
        save_every=2,
        keep_checkpoints=2,
    )
    runner = Runner(whole)
    _, losses = runner.train()
    return runner, losses


def test_resume_continues_the_exact_trajectory(base_run, whole_run, tmp_path):
    """The uninterrupted run reads its batches in the loop; the stopped and resumed one
    reads 3 ahead (RunConfig.prefetch_batches), dropping those read past step 3."""
    _, losses_whole = whole_run

    split = dataclasses.replace(base_run, model_dir=str(tmp_path / "split"), prefetch_batches=3)
    _, first = Runner(split).train(stop_at=3)
    assert not [t for t in threading.enumerate() if t.name.startswith("cmrcx-prefetch")]
    runner = Runner(split)
    assert runner.checkpoints.latest_step() == 3
    _, rest = runner.train()

    assert [s for s, _ in first] == [1, 2, 3] and [s for s, _ in rest] == [4, 5, 6, 7, 8]
    np.testing.assert_allclose(
        [x for _, x in first + rest], [x for _, x in losses_whole], rtol=1e-6
    )
    # Different batches give different losses: equality is not trivial.
    assert len({round(x, 6) for _, x in losses_whole}) > 4


def test_keeps_the_newest_checkpoints(whole_run):
    runner, _ = whole_run  # save_every 2, keep_checkpoints 2, 8 steps
    assert sorted(runner.checkpoints.manager.all_steps()) == [6, 8]
