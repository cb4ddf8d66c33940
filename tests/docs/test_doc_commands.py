"""Every shell command in README.md and docs/ can work: a command that cannot fails here,
with its file and line.

Every command is checked without running it: `python -m cmrcx.X` is a module of the
package and each `--flag` is one of its flags (its --help lists it); each gin file
resolves; each `--gin.KEY=VALUE` parses with the command's gin files (a bare KEY a macro
they define); `cmrcx.train` gives every binding its gin files leave %gin.REQUIRED, and
PRETRAINED where they set RunConfig.require_pretrained; `cmrcx.eval`/`cmrcx.export` name
a MODEL_DIR; `make X` is a Makefile target; a tools/ script exists (and a .sh file is
executable). The cheap commands also run, on the bundled samples, in a temporary folder:
the quick ones (cmrcx.score and cmrcx.tokenize on bundled files, --help) by default, and
every cheap one in document order (cmrcx.inspect, tiny trainings, then what reads their
outputs) as `slow`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import gin
import pytest

from cmrcx.cli import launch, saved_run
from cmrcx.common.errors import ConfigError
from tests.docs.doc_commands import (
    SYSTEM_COMMANDS,
    DocCommand,
    commands_of,
    doc_files,
    flags_of,
    gin_bindings,
    help_flags,
    option_value,
)
from tests.support import REPO_ROOT

COMMANDS = [command for path in doc_files(REPO_ROOT) for command in commands_of(path)]
PYTHONS = {".venv/bin/python", "python", "python3", "$(BIN)/python"}
GIN_ENTRY_POINTS = {"cmrcx.train", "cmrcx.eval", "cmrcx.export", "cmrcx.inspect"}
QUICK_MODULES = {"cmrcx.score", "cmrcx.tokenize"}  # seconds each (inspect: ~40 s, slow)
PLACEHOLDER = "..."  # a value the reader fills in: `--gin.MODEL_DIR=...`


# --- What a command is ------------------------------------------------------------------


def module_of(argv: list[str]) -> str | None:
    """`python -m cmrcx.train ...` -> "cmrcx.train"."""
    if argv[0] in PYTHONS and len(argv) > 2 and argv[1] == "-m":
        return argv[2]
    return None


def script_of(argv: list[str]) -> str | None:
    """`.venv/bin/python tools/bench.py ...` or `tools/reproduce_lot.sh ...` -> the path."""
    if argv[0] in PYTHONS and len(argv) > 1 and argv[1].endswith(".py"):
        return argv[1]
    if argv[0].endswith((".sh", ".py")):
        return argv[0]
    return None


@functools.cache
def makefile_targets() -> set[str]:
    text = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([\w.-]+)\s*:(?!=)", text, re.MULTILINE)}


@functools.cache
def module_help(module: str, mixture: bool) -> str:
    """What `python -m MODULE --help` prints (`cmrcx.eval --mixture=... --help` for the
    mixture form), run in process: the entry points parse their flags first."""
    argv = ["--mixture=clue", "--help"] if mixture else ["--help"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        importlib.import_module(module).main(argv)
    return out.getvalue()


@functools.cache
def script_help(script: str, subcommand: str | None) -> str:
    """`python SCRIPT [SUBCOMMAND] --help` in a child process."""
    argv = [sys.executable, str(REPO_ROOT / script), *([subcommand] if subcommand else [])]
    done = subprocess.run(
        [*argv, "--help"], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
    )
    return done.stdout if done.returncode == 0 else ""


def resolve_gin_file(name: str) -> str | None:
    """The file a --gin_file value finds, as `cmrcx.cli.launch.parse_gin` looks it up."""
    if (REPO_ROOT / name).is_file():
        return str(REPO_ROOT / name)
    try:
        return launch.bundled_gin_file(name) or launch._gin_file_of_paper_name(name)
    except ConfigError:
        return None


# --- The checks -------------------------------------------------------------------------


def problems_of(command: DocCommand) -> list[str]:
    """Why the command cannot work; [] if it can."""
    problems = []
    for argv in command.simple_commands():
        module, script = module_of(argv), script_of(argv)
        if argv[0] == "make":
            targets = [a for a in argv[1:] if not a.startswith("-") and "=" not in a]
            problems += [f"make {t}: no such Makefile target" for t in targets
                         if t not in makefile_targets()]  # fmt: skip
        elif module is not None:
            problems += module_problems(module, argv[3:], command.optional_flags)
        elif script is not None:
            problems += script_problems(script, argv)
        elif argv[0] not in SYSTEM_COMMANDS and "=" not in argv[0]:
            problems.append(
                f"{argv[0]}: not python -m cmrcx.X, make, a tools/ script or a system command"
            )
    return problems


def module_problems(module: str, args: list[str], optional_flags: list[str]) -> list[str]:
    if not module.startswith("cmrcx.") or importlib.util.find_spec(module) is None:
        return [f"python -m {module}: no such module in cmrcx"]
    mixture = module == "cmrcx.eval" and any(a.startswith("--mixture") for a in args)
    known = help_flags(module_help(module, mixture)) | {"--help", "-h"}
    problems = [
        f"{module} has no flag {flag}"
        for flag in dict.fromkeys([*flags_of(args), *optional_flags])
        if flag not in known
    ]
    if module in GIN_ENTRY_POINTS and not mixture:
        problems += gin_problems(module, args)
    return problems


def gin_problems(module: str, args: list[str]) -> list[str]:
    """The gin files resolve, the bindings parse with them, the required values are given."""
    files, bindings = option_value(args, "--gin_file"), gin_bindings(args)
    missing = [f for f in files if resolve_gin_file(f) is None]
    if missing:
        return [f"gin file {f} not found (bundled or in the repository)" for f in missing]
    model_dir_form = module in ("cmrcx.eval", "cmrcx.export") and not files
    if not files and not model_dir_form:
        return [f"{module} needs --gin_file"]
    gin.clear_config()
    try:
        launch.parse_gin(files, saved_run._MACRO_WIRING if model_dir_form else [])
        macros = {key[0] for key in gin.config._CONFIG if key[1] == "gin.macro"}
        unknown = [k for k in bindings if "." not in k and k not in macros]
        if unknown:
            return [f"--gin.{k}: no such macro in {' '.join(files) or 'the saved run'} "
                    f"(there: {', '.join(sorted(macros))})" for k in unknown]  # fmt: skip
        values = [f"{k} = {repr(v) if v == PLACEHOLDER else v}" for k, v in bindings.items()]
        launch.parse_gin([], values)
        return required_problems(module, args, bindings)
    except ConfigError as error:
        return [f"gin: {error}"]
    finally:
        gin.clear_config()


def required_problems(module: str, args: list[str], bindings: dict[str, str]) -> list[str]:
    """What the command leaves unset that it needs (gin parsed with its files and bindings)."""
    if PLACEHOLDER in args:  # `cmrcx.train --gin_file=a.gin ...`: the rest as shown above
        return []
    if module == "cmrcx.train":
        problems = [f"needs --gin.{key}=VALUE (%gin.REQUIRED in its gin files)"
                    for key in launch.unset_required_values()]  # fmt: skip
        run = launch.gin_run_config()
        if run.require_pretrained and run.pretrained in (None, gin.REQUIRED):
            problems.append("needs --gin.PRETRAINED=... (its gin file sets require_pretrained)")
        return problems
    if module in ("cmrcx.eval", "cmrcx.export"):
        given = option_value(args, "--model_dir") or "MODEL_DIR" in bindings
        if not given and launch.gin_run_config().model_dir in (None, gin.REQUIRED):
            return [f"{module} needs --model_dir=DIR (or --gin.MODEL_DIR with its gin file)"]
    if module == "cmrcx.export" and not option_value(args, "--out"):
        return ["cmrcx.export needs --out DIR"]
    return []


def script_problems(script: str, argv: list[str]) -> list[str]:
    path = REPO_ROOT / script
    if not path.is_file():
        return [f"{script}: no such file in the repository"]
    if script.endswith(".sh") and not os.access(path, os.X_OK):
        return [f"{script} is not executable"]
    if not script.endswith(".py"):
        return []
    args = argv[2:] if argv[0] in PYTHONS else argv[1:]
    subcommand = args[0] if args and not args[0].startswith("-") else None
    text = script_help(script, subcommand)
    if not text:
        return [f"{script} {subcommand or ''}: --help fails"]
    return [f"{script} {subcommand or ''} has no flag {flag}"
            for flag in flags_of(args) if flag not in help_flags(text)]  # fmt: skip


def test_the_docs_have_commands():
    # README.md's blocks alone hold more than 40 commands: a parser that finds none is broken.
    assert len(COMMANDS) > 40


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c.path.name}:{c.line}")
def test_every_documented_command_can_work(command):
    problems = problems_of(command)
    assert not problems, f"{command.where}\n  " + "\n  ".join(problems)


# --- Running the cheap ones -------------------------------------------------------------

OUTPUT_FLAGS = ("--out", "--output", "--to")
PATH_FLAGS = ("--runs_root", "--model_dir", "--vocab", "--checkpoint", "--input", "--from")


def cheap(command: DocCommand, produced: set[str]) -> bool:
    """Runs on the bundled samples in seconds to a minute: cmrcx's own commands (or echo)
    with tiny gin files only, no placeholder, and every path it reads in the repository or
    made by an earlier cheap command (`produced`: MODEL_DIRs, --out folders)."""
    if not any(module_of(argv) for argv in command.simple_commands()):
        return False  # a shell line of a loop, a make target, a tools/ script
    for argv in command.simple_commands():
        module = module_of(argv)
        if argv[0] == "echo":
            continue
        if module is None or not module.startswith("cmrcx."):
            return False
        args = argv[3:]
        if "--help" in args:
            continue
        if any(PLACEHOLDER in a for a in args) or any("tiny" not in f for f in
                                                     option_value(args, "--gin_file")):  # fmt: skip
            return False
        bindings = gin_bindings(args)
        if module in ("cmrcx.train", "cmrcx.inspect") and not option_value(args, "--gin_file"):
            return False
        # A training makes its MODEL_DIR; eval and export read theirs.
        outputs = {_unquoted(bindings.get("MODEL_DIR", ""))} if module == "cmrcx.train" else set()
        outputs |= {v for f in OUTPUT_FLAGS for v in option_value(args, f)}
        for value in _path_arguments(args, bindings):
            if value in outputs:
                continue
            if value.startswith("/"):
                return False
            if not ((REPO_ROOT / value).exists() or _made(value, produced)):
                return False
    return True


def _unquoted(value: str) -> str:
    return value.strip("'\"")


def _path_arguments(args: list[str], bindings: dict[str, str]) -> list[str]:
    """The arguments that name files or folders: `a/b`, `x.json`, a binding's path value."""
    values = [_unquoted(v) for k, v in bindings.items() if k in saved_run.PATH_MACROS]
    for arg in args:
        if arg.startswith("--gin"):
            continue
        value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
        if "/" in value or value.endswith((".json", ".jsonl", ".txt", ".model")):
            values.append(value)
    values += [v for flag in PATH_FLAGS for v in option_value(args, flag)]
    return [v for v in values if v and v != "None"]


def _made(value: str, produced: set[str]) -> bool:
    return any(value == p or value.startswith(p.rstrip("/") + "/") or
               p.startswith(value.rstrip("/") + "/") for p in produced)  # fmt: skip


def produced_by(command: DocCommand) -> set[str]:
    made = set()
    for argv in command.simple_commands():
        args = argv[3:]
        made.add(_unquoted(gin_bindings(args).get("MODEL_DIR", "")))
        made |= {v for f in OUTPUT_FLAGS for v in option_value(args, f)}
    return {m for m in made if m}


def quick(command: DocCommand) -> bool:
    modules = {module_of(argv) for argv in command.simple_commands()} - {None}
    helps = all("--help" in argv for argv in command.simple_commands() if module_of(argv))
    return bool(modules) and (modules <= QUICK_MODULES or helps)


def cheap_commands(path: Path) -> list[DocCommand]:
    """The file's cheap commands in order (a command may read what an earlier one made)."""
    produced, chosen = set(), []
    for command in commands_of(path):
        if cheap(command, produced):
            chosen.append(command)
            produced |= produced_by(command)
    return chosen


def run_in(folder: Path, command: DocCommand, timeout: float) -> None:
    """Runs the command with bash in `folder` (which links to the repository's cmrcx/ and
    tools/, so the docs' paths resolve), this interpreter for `python`."""
    for name in ("cmrcx", "tools"):
        if not (folder / name).exists():
            (folder / name).symlink_to(REPO_ROOT / name)
    text = re.sub(r"(^|[|;&]\s*|\bdo\s+)(\.venv/bin/python|python3?)\b",
                  lambda m: m.group(1) + sys.executable, command.text)  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONSAFEPATH": "1"}
    done = subprocess.run(["bash", "-c", text], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
    assert done.returncode == 0, f"{command.where}\n{done.stderr[-3000:]}"


DOCS = doc_files(REPO_ROOT)
QUICK = [(p, c) for p in DOCS for c in cheap_commands(p) if quick(c) and cheap(c, set())]


@pytest.mark.parametrize("path, command", QUICK, ids=[f"{p.name}:{c.line}" for p, c in QUICK])
def test_the_quick_commands_run(path, command, tmp_path):
    run_in(tmp_path, command, timeout=300)


@pytest.mark.slow  # the tiny trainings: about a minute each
def test_every_cheap_command_runs_in_order(tmp_path):
    """README.md then docs/ in order, in one folder: a page may use a run an earlier one
    trained (docs/models.md exports README's CMRC 2019 run)."""
    produced, commands = set(), []
    for path in DOCS:
        for command in commands_of(path):
            if cheap(command, produced):
                commands.append(command)
                produced |= produced_by(command)
    for command in commands:
        run_in(tmp_path, command, timeout=900)


# --- The checker itself -----------------------------------------------------------------

BROKEN_DOC = """\
Text, then a block that is no shell:

```text
python -m cmrcx.nope
```

```bash
# a comment line
python -m cmrcx.score --help   # a trailing comment
python -m cmrcx.nope --x
python -m cmrcx.eval --model_dir=runs/x --stepp 3
python -m cmrcx.train --gin_file=no_such_file.gin --gin.MODEL_DIR="'runs/x'"
python -m cmrcx.train --gin_file=clue_afqmc_tiny.gin --gin.MODEL_DIRR="'runs/x'"
python -m cmrcx.train --gin_file=clue_afqmc_tiny.gin --gin.RunConfig.batch_sise=8
python -m cmrcx.train --gin_file=clue_afqmc_bert.gin \\
    --gin.MODEL_DIR="'runs/x'" --gin.DATA_DIR="'/data/afqmc'"
python -m cmrcx.eval --gin_file=cmrc2019_bert.gin [--split test] [--stepp N]
make demo-all
tools/no_such_script.sh a b
frobnicate --all
```

```console
$ python -m cmrcx.export --model_dir=runs/x
exported step 2 to ... (orbax)
```
"""

EXPECTED = {  # line -> what its problems say
    10: "no such module in cmrcx",
    11: "cmrcx.eval has no flag --stepp",
    12: "gin file no_such_file.gin not found",
    13: "--gin.MODEL_DIRR: no such macro in clue_afqmc_tiny.gin",
    14: "gin: gin: Configurable 'RunConfig' doesn't have a parameter named 'batch_sise'",
    15: "needs --gin.PRETRAINED=... (its gin file sets require_pretrained)",
    17: "cmrcx.eval has no flag --stepp",
    18: "make demo-all: no such Makefile target",
    19: "tools/no_such_script.sh: no such file in the repository",
    20: "frobnicate: not python -m cmrcx.X",
    24: "cmrcx.export needs --out DIR",
}


def test_the_commands_of_a_doc_are_its_shell_lines(tmp_path):
    doc = tmp_path / "README.md"
    doc.write_text(BROKEN_DOC, encoding="utf-8")
    commands = commands_of(doc)
    assert [c.line for c in commands] == [9, *EXPECTED]
    assert commands[0].text == "python -m cmrcx.score --help"  # the comment dropped
    joined = next(c for c in commands if c.line == 15)  # the continuation joined
    assert joined.text.endswith("""--gin.MODEL_DIR="'runs/x'" --gin.DATA_DIR="'/data/afqmc'\"""")
    synopsis = next(c for c in commands if c.line == 17)  # optional groups set aside
    assert synopsis.text == "python -m cmrcx.eval --gin_file=cmrc2019_bert.gin"
    assert synopsis.optional_flags == ["--split", "--stepp"]


def test_each_broken_command_is_named_with_its_problem(tmp_path):
    doc = tmp_path / "README.md"
    doc.write_text(BROKEN_DOC, encoding="utf-8")
    said = {c.line: "\n".join(problems_of(c)) for c in commands_of(doc)}
    assert said.pop(9) == ""  # `cmrcx.score --help` works
    for line, problem in EXPECTED.items():
        assert problem in said[line], (line, said[line])
    # A paper gin's training without MODEL_DIR: each required value named.
    (command,) = commands_of(_doc(tmp_path, "python -m cmrcx.train --gin_file=cmrc2019_bert.gin"))
    assert problems_of(command) == [
        "needs --gin.MODEL_DIR=VALUE (%gin.REQUIRED in its gin files)",
        "needs --gin.DATA_DIR=VALUE (%gin.REQUIRED in its gin files)",
        "needs --gin.PRETRAINED=... (its gin file sets require_pretrained)",
    ]


def test_a_failing_cheap_command_fails_with_its_file_and_line(tmp_path):
    doc = _doc(tmp_path, "python -m cmrcx.score lot_clozet cmrcx/data/lot_sample/clozet/val.jsonl "
               "cmrcx/data/lot_sample/clozet/train.jsonl")  # fmt: skip
    (command,) = commands_of(doc)
    assert cheap(command, set()) and quick(command)
    with pytest.raises(AssertionError, match=r"README.md:2: python -m cmrcx.score lot_clozet"):
        run_in(tmp_path / "run", command, timeout=120)


def _doc(tmp_path: Path, command: str) -> Path:
    doc = tmp_path / "README.md"
    doc.write_text(f"```sh\n{command}\n```\n", encoding="utf-8")
    (tmp_path / "run").mkdir(exist_ok=True)
    return doc
