"""`subpackage_folders` finds where a subpackage's code is, installed or editable: the
prepared store's key digests those folders, so a change in `tasks/` makes a new store."""

import os

import pytest

import cmrcx.tasks.clue.reading
import cmrcx.vocab.wordpiece
from cmrcx.common.paths import subpackage_folders
from cmrcx.training import prepared_examples
from cmrcx.training.run_config import RunConfig


def _holds(folders, path):
    return any(os.path.abspath(path).startswith(os.path.join(f, "")) for f in folders)


def test_the_folders_hold_the_subpackages_modules():
    assert _holds(subpackage_folders("tasks"), cmrcx.tasks.clue.reading.__file__)
    assert _holds(subpackage_folders("vocab"), cmrcx.vocab.wordpiece.__file__)
    with pytest.raises(ModuleNotFoundError):
        subpackage_folders("no_such_subpackage")


def test_the_store_key_digests_the_task_code(monkeypatch, tmp_path):
    digested = []

    def file_digest(paths, suffix=""):
        digested.extend(paths)
        return "digest"

    monkeypatch.setattr(prepared_examples, "file_digest", file_digest)
    run = RunConfig(model_dir=str(tmp_path), task="cmrc2019", tfds_cache_dir=str(tmp_path))
    prepared_examples.prepared_store(run)
    for module in (cmrcx.tasks.clue.reading, cmrcx.vocab.wordpiece):
        assert _holds([p for p in digested if os.path.isdir(p)], module.__file__)
