"""tools/reproduce_clue.sh and tools/reproduce_lot.sh pick the model family by their MODEL
argument: DRY_RUN=1 lists the commands each would run, without training (the scripts run
end to end in tests/e2e/test_reproduce_{clue,lot}.py, slow)."""

import os
import subprocess
import sys

import pytest

from cmrcx.common.paths import package_path
from tests.support import REPO_ROOT


def dry_run(script, *args, tmp_path):
    return subprocess.run(
        ["bash", str(REPO_ROOT / "tools" / script), *map(str, args)],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "DRY_RUN": "1",
            "PYTHON": sys.executable,
            "PYTHONPATH": str(REPO_ROOT),
        },
        cwd=tmp_path,
        timeout=120,
    )


@pytest.mark.parametrize("model", ["albert_tiny", "albert_xxlarge", "xlnet_mid", "bert"])
def test_reproduce_clue_lists_the_models_runs_of_the_tasks_present(model, tmp_path):
    for folder in ("afqmc_public", "chid_public"):
        (tmp_path / "clue" / folder).mkdir(parents=True)
    out = dry_run(
        "reproduce_clue.sh", model, "clue", "export", "runs", "--gin_file=local_tiny.gin",
        tmp_path=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[3] for line in lines[:2]] == [
        f"--gin_file=clue_afqmc_{model}.gin",
        f"--gin_file=clue_chid11_{model}.gin",
    ]
    assert all(line.endswith("--gin_file=local_tiny.gin") for line in lines[:2])
    assert [line.split()[2:] for line in lines[2:]] == [
        ["cmrcx.eval", "--mixture=clue", f"--runs_root={tmp_path}/runs", "--split", split]
        for split in ("validation", "test")
    ]
    assert "skip clue_tnews11" in out.stderr and "skip clue_afqmc" not in out.stderr
    assert not (tmp_path / "runs").exists()


def test_reproduce_clue_names_the_known_models_for_an_unknown_one(tmp_path):
    out = dry_run("reproduce_clue.sh", "gpt2", tmp_path, "export", "runs", tmp_path=tmp_path)
    assert out.returncode == 2
    known = out.stderr.split("known: ")[1].split()
    assert {"albert_tiny", "albert_xxlarge", "xlnet_mid", "bert"} <= set(known)


@pytest.mark.parametrize(
    "model, tasks",
    [
        ("gpt2", ["clozet", "senpos", "plotcom", "outgen"]),
        ("bert", ["clozet", "senpos"]),
        ("longlm_small", ["clozet", "senpos", "plotcom", "outgen"]),
    ],
)
def test_reproduce_lot_lists_the_models_runs(model, tasks, tmp_path):
    data = package_path("data/lot_sample")
    out = dry_run("reproduce_lot.sh", model, data, "export", "runs", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[3] for line in lines[:-2]] == [
        f"--gin_file=lot_{task}_{model}.gin" for task in tasks
    ]
    assert all(f"--gin.PRETRAINED=\\'{tmp_path}/export\\'" in line for line in lines[:-2])
    assert [line.split()[-1] for line in lines[-2:]] == ["validation", "test"]
    for task in {"clozet", "senpos", "plotcom", "outgen"} - set(tasks):
        assert f"skip {task}: no gin for {model}" in out.stderr


def test_reproduce_lot_names_the_known_models_for_an_unknown_one(tmp_path):
    data = package_path("data/lot_sample")
    out = dry_run("reproduce_lot.sh", "xlnet_mid", data, "export", "runs", tmp_path=tmp_path)
    assert out.returncode == 2
    assert {"gpt2", "bert", "longlm_base"} <= set(out.stderr.split("known: ")[1].split())


def test_reproduce_cmrc2019_lists_convert_train_and_test_of_each_checkpoint(tmp_path):
    data = tmp_path / "cmrc2019"
    data.mkdir()
    (data / "cmrc2019_qualify.json").write_text("{}", encoding="utf-8")
    for model in ("bert", "roberta_wwm_ext_large"):
        (tmp_path / "ckpt" / model).mkdir(parents=True)
    out = dry_run("reproduce_cmrc2019.sh", data, tmp_path / "ckpt", "runs", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    commands = [line.split()[2] for line in out.stdout.splitlines()]
    assert commands == ["cmrcx.convert", "cmrcx.train", "cmrcx.eval"] * 2
    assert "--gin_file=cmrc2019_roberta_wwm_ext_large.gin" in out.stdout.splitlines()[4]
    for model in ("bert_multilingual", "bert_wwm", "bert_wwm_ext", "roberta_wwm_ext"):
        assert f"skip {model}: no {tmp_path}/ckpt/{model}" in out.stderr
    assert not (tmp_path / "runs").exists()


def test_reproduce_cmrc2019_without_any_checkpoint_folder_names_them(tmp_path):
    out = dry_run("reproduce_cmrc2019.sh", tmp_path, tmp_path, "runs", tmp_path=tmp_path)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == (
        f"no checkpoint folder under {tmp_path}: name them bert, bert_multilingual, bert_wwm, "
        "bert_wwm_ext, roberta_wwm_ext, roberta_wwm_ext_large"
    )
