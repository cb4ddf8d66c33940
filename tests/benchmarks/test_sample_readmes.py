"""The commands the bundled samples' READMEs (cmrcx/data/*/README.md) show run as written,
from the repository root, on a PRED.json that is right on every question: their imports
and module paths follow the package's layout."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cmrcx.benchmarks.clue import c3
from tests.support import REPO_ROOT

DATA = REPO_ROOT / "cmrcx" / "data"
# An indented command line and its backslash continuations.
COMMAND = re.compile(r"^ {4}(?:\.venv/bin/)?python (?:[^\n]*\\\n)*[^\n]*$", re.MULTILINE)


def readme_commands() -> list[tuple[str, str]]:
    """(sample folder, command) of every README's indented ``python ...`` lines."""
    commands = []
    for readme in sorted(DATA.glob("*/README.md")):
        for match in COMMAND.finditer(readme.read_text(encoding="utf-8")):
            commands.append(
                (readme.parent.name, " ".join(match.group().replace("\\\n", " ").split()))
            )
    return commands


def _cmrc2018(path: Path) -> None:
    gold = json.loads((DATA / "clue_mrc_sample/cmrc2018_public/dev.json").read_text("utf-8"))
    answers = {
        qa["id"]: qa["answers"][0]["text"]
        for article in gold["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    }
    path.write_text(json.dumps(answers, ensure_ascii=False), encoding="utf-8")


def _chid(path: Path) -> None:
    path.write_bytes((DATA / "clue_mrc_sample/chid_public/dev_answer.json").read_bytes())


def _c3(path: Path) -> None:
    questions = c3.read_split(DATA / "clue_mrc_sample/c3_public", "validation")
    path.write_text("".join(json.dumps({"id": q.id, "label": q.label}) + "\n" for q in questions))


def _afqmc(path: Path) -> None:
    lines = (DATA / "clue_sample/afqmc_public/dev.json").read_text("utf-8").splitlines()
    labels = [{"id": i, "label": json.loads(line)["label"]} for i, line in enumerate(lines)]
    path.write_text("".join(json.dumps(label) + "\n" for label in labels))


# What a command scores (the first name it contains) -> a right PRED.json for it.
PREDICTIONS = {"cmrc2018": _cmrc2018, "chid": _chid, "afqmc": _afqmc, "c3": _c3}


def test_the_sample_readmes_show_commands():
    folders = [folder for folder, _ in readme_commands()]
    assert folders == ["clue_mrc_sample"] * 3 + ["clue_sample"]


@pytest.mark.parametrize("folder, command", readme_commands())
def test_readme_command_runs(folder, command, tmp_path):
    scored = next(name for name in PREDICTIONS if name in command)
    predictions = tmp_path / "PRED.json"
    PREDICTIONS[scored](predictions)
    # The README's python is the one running the tests; PRED.json (a bare argument or a
    # path in the -c code) is the file just written.
    _, *args = shlex.split(command)
    argv = [sys.executable, *(arg.replace("PRED.json", str(predictions)) for arg in args)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{folder}: {command}\n{run.stderr[-2000:]}"
    scores = run.stdout.strip().splitlines()[-1]
    assert re.search(r"'(accuracy|AVERAGE)': 100\.0|\"accuracy\": 100\.0", scores), scores
