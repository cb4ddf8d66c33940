"""tools/reproduce_clue.sh end to end with a tiny random BERT, 2 steps per task. One test
with AFQMC (the bundled sample) and CMNLI plus the diagnostics set
(tests/benchmarks/clue/test_clue_fixtures.py): the other tasks' folders are missing and
must be skipped and named. One with every task: the nine columns of Table 2, their average, and the
eleven official files in the submission zip."""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_TASKS
from cmrcx.common.paths import package_path
from tests.benchmarks.clue.test_clue_fixtures import FIXTURES, write_lines, write_task_dir
from tests.support import REPO_ROOT

SCRIPT = REPO_ROOT / "tools" / "reproduce_clue.sh"


def run_script(data_root, tmp_path, model="bert"):
    runs = tmp_path / "runs"
    extra = [
        "--gin_file=local_tiny.gin",  # the model's family tiny, tiny vocabulary, random weights
        "--gin.PRETRAINED=None",  # after the script's own binding: this one wins
        "--gin.RunConfig.vocabulary_name='tiny'",
        "--gin.RunConfig.num_train_steps=2",
        "--gin.RunConfig.max_length=64",
        f"--gin.RunConfig.tfds_cache_dir='{tmp_path}/tfds'",
    ]
    out = subprocess.run(
        ["bash", str(SCRIPT), model, str(data_root), str(tmp_path / "no_export"), str(runs)]
        + extra,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        timeout=1800,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return runs, out


def table(lines, title):
    start = lines.index(title)
    header, row = lines[start + 1].split(), lines[start + 2].split()
    return start, dict(zip(header, row, strict=True))


@pytest.mark.slow  # trains two tasks through the script: ~55 s (test_clue_runs covers the parts)
def test_reproduce_clue_trains_present_tasks_and_writes_row_and_submission(tmp_path):
    data_root = tmp_path / "clue"
    shutil.copytree(package_path("data/clue_sample/afqmc_public"), data_root / "afqmc_public")
    cmnli = write_task_dir(data_root, "clue_cmnli")  # train.json, test.json
    write_lines(cmnli / "dev.json", FIXTURES["clue_cmnli"]["labelled"][1])
    write_task_dir(data_root, "clue_diagnostics")  # predicted by the CMNLI run
    runs, out = run_script(data_root, tmp_path)
    for task in ("clue_tnews11", "clue_iflytek", "clue_cluewsc11", "clue_csl", "clue_ocnli"):
        assert f"skip {task}" in out.stderr
    for task in ("clue_cmrc2018", "clue_chid11", "clue_c311"):
        assert f"skip {task}" in out.stderr
    assert "skip clue_afqmc" not in out.stderr and "skip clue_cmnli" not in out.stderr
    lines = out.stdout.splitlines()
    # The dev table (cmrcx.eval --mixture=clue): one row with an AFQMC score.
    start, scores = table(lines, "clue validation")
    assert 0.0 <= float(scores["AFQMC"]) <= 100.0
    assert 0.0 <= float(scores["CMNLI"]) <= 100.0  # trained and scored, not in the average
    assert float(scores["Avg"]) == float(scores["AFQMC"])
    assert scores["TNEWS"] == "-"
    missing = next(line for line in lines[start:] if line.startswith("missing"))
    for column in ("TNEWS", "IFLYTEK", "CLUEWSC2020", "CSL", "OCNLI"):
        assert column in missing
    assert "AFQMC" not in missing and "CMNLI" not in missing
    results = json.loads((runs / "clue_validation_results.json").read_text(encoding="utf-8"))
    assert set(results["scores"]) == {"AFQMC", "CMNLI"}
    with zipfile.ZipFile(runs / "clue_submission.zip") as archive:
        names = sorted(archive.namelist())
    assert names == ["afqmc_predict.json", "cmnli_predict.json", "diagnostics_predict.json"]
    # The paper's row for comparison, under the runs' row.
    assert lines[start + 3] == "paper Table 2 (test), BERT-base"
    published = lines[start + 4].split()
    assert published[:7] == ["69.20", "56.58", "60.29", "63.45", "73.70", "80.36", "72.20"]


@pytest.mark.slow  # trains ten tasks through the script: minutes
def test_reproduce_clue_with_every_task(tmp_path):
    data_root = tmp_path / "clue"
    for task in ("clue_tnews11", "clue_iflytek", "clue_cluewsc11", "clue_afqmc", "clue_csl",
                 "clue_ocnli", "clue_cmnli"):  # fmt: skip
        directory = write_task_dir(data_root, task)
        files = CLUE_TASKS[task].split_files
        records = FIXTURES[task]["labelled"][1]  # serves as both train and dev
        for split in ("train", "validation"):
            write_lines(directory / files[split], records)
    write_task_dir(data_root, "clue_diagnostics")
    for name in ("cmrc2018_public", "chid_public", "c3_public"):
        shutil.copytree(package_path(f"data/clue_mrc_sample/{name}"), data_root / name)
    runs, out = run_script(data_root, tmp_path)
    assert "skip" not in out.stderr
    lines = out.stdout.splitlines()
    _, scores = table(lines, "clue validation")
    columns = ["TNEWS", "IFLYTEK", "CLUEWSC2020", "AFQMC", "CSL", "OCNLI", "CMRC", "ChID", "C3"]
    assert list(scores) == ["Avg", *columns, "CMNLI"]
    values = [float(scores[c]) for c in columns]
    assert float(scores["Avg"]) == pytest.approx(sum(values) / 9, abs=0.01)
    assert not any(line.startswith("missing") for line in lines)
    with zipfile.ZipFile(runs / "clue_submission.zip") as archive:
        names = sorted(archive.namelist())
    assert names == sorted(
        ["tnews11_predict.json", "iflytek_predict.json", "cluewsc11_predict.json",
         "afqmc_predict.json", "csl_predict.json", "ocnli_50k_predict.json",
         "cmrc2018_predict.json", "chid11_predict.json", "c311_predict.json",
         "cmnli_predict.json", "diagnostics_predict.json"]
    )  # fmt: skip
