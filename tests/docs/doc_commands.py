"""The shell commands of the documentation (README.md, docs/*.md) and what each needs to
work: read from their fenced ```sh / ```bash / ```shell / ```console blocks, a command per
line once backslash continuations are joined, comments dropped.

A command's synopsis notation stays checkable: an optional group `[--split test]` is
dropped from what runs and its flags are checked; `...` as a gin value stands for a value
the reader fills in. `test_doc_commands.py` checks every command and runs the cheap ones.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

SHELL_LANGUAGES = ("sh", "bash", "shell", "console")
_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w-]*)")
_OPTIONAL_GROUP = re.compile(r"\[(-[^\[\]]*)\]")  # `[--step latest|best|N]`, not `[BLANK1]`
_FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][\w.-]*)")
SHELL_WORDS = {"for", "do", "done", "then", "fi", "if", "while"}
# Commands of the shell and the system that the docs may use around cmrcx's own.
SYSTEM_COMMANDS = {
    "echo", "cd", "export", "ls", "cat", "head", "tail", "mkdir", "rm", "cp", "mv", "git",
    "pip", "unzip", "tar", "wget", "curl", "nvidia-smi", "tensorboard", "du", "printf",
    "env", "source", "set", "wc", "diff", "jq", "taskset", "time", "sha256sum", "python3.11",
}  # fmt: skip


@dataclasses.dataclass
class DocCommand:
    """One command line of a doc: where it is, its text (synopsis groups removed), the
    flags of its optional groups."""

    path: Path  # the doc file
    line: int  # its first line, 1-based
    text: str  # what runs, continuations joined, comments and `$ ` prompts dropped
    optional_flags: list[str]  # flags inside `[...]` synopsis groups

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}: {self.text}"

    def simple_commands(self) -> list[list[str]]:
        """The argv of each simple command (split at `|`, `;`, `&&`, `||`), shell keywords
        (`for t in ...; do`) left out."""
        lexer = shlex.shlex(self.text, posix=True, punctuation_chars="|;&")
        lexer.whitespace_split = True
        lexer.commenters = ""
        commands, current = [], []
        for token in lexer:
            if token in ("|", ";", "&&", "||", "&"):
                commands.append(current)
                current = []
            else:
                current.append(token)
        commands.append(current)
        out = []
        for argv in commands:
            while argv and argv[0] in SHELL_WORDS:
                argv = [] if argv[0] in ("for", "while", "if") else argv[1:]
            if argv:
                out.append(argv)
        return out


def doc_files(root: Path) -> list[Path]:
    """README.md and every docs/*.md (recursively), sorted."""
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    return files + sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else files


def shell_blocks(path: Path) -> list[tuple[int, str, list[str]]]:
    """(first line, language, lines) of each fenced shell block of a Markdown file."""
    blocks, inside, fence = [], None, ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = _FENCE.match(line)
        if inside is None and match:
            inside, fence = (number + 1, match.group(2).lower(), []), match.group(1)
        elif inside is not None and line.strip().startswith(fence[:3]) and not line.strip()[3:]:
            if inside[1] in SHELL_LANGUAGES:
                blocks.append(inside)
            inside = None
        elif inside is not None:
            inside[2].append(line)
    return blocks


def commands_of(path: Path) -> list[DocCommand]:
    """Every command of the file's shell blocks. In a ```console block only `$ ` lines are
    commands (the rest is output)."""
    commands = []
    for first, language, lines in shell_blocks(path):
        pending, start = "", None
        for offset, raw in enumerate(lines):
            line = raw.rstrip()
            if language == "console" and not pending:
                if not line.lstrip().startswith("$ "):
                    continue
                line = line.lstrip()[2:]
            if not pending:
                line = _without_comment(line)
                if not line.strip():
                    continue
                start = first + offset
            else:
                line = _without_comment(line)
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            text = (pending + line).strip()
            pending = ""
            groups = _OPTIONAL_GROUP.findall(text)
            flags = [flag for group in groups for flag in _FLAG.findall(group)]
            text = " ".join(_OPTIONAL_GROUP.sub(" ", text).split())
            commands.append(DocCommand(path, start, text, flags))
    return commands


def _without_comment(line: str) -> str:
    """The line up to a `#` that starts a shell comment (outside quotes, after a blank)."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line


def flags_of(argv: list[str]) -> list[str]:
    """The `--flag` names of an argv (`--out=DIR` -> `--out`), `--gin.` bindings left out."""
    return [
        arg.split("=", 1)[0]
        for arg in argv
        if arg.startswith("--") and not arg.startswith("--gin.")
    ]


def option_value(argv: list[str], flag: str) -> list[str]:
    """Every value of `flag` in argv, `--flag=V` or `--flag V`."""
    values = []
    for index, arg in enumerate(argv):
        if arg.startswith(flag + "="):
            values.append(arg[len(flag) + 1 :])
        elif arg == flag and index + 1 < len(argv):
            values.append(argv[index + 1])
    return values


def gin_bindings(argv: list[str]) -> dict[str, str]:
    """{KEY: VALUE} of the `--gin.KEY=VALUE` arguments."""
    return dict(
        arg[len("--gin.") :].split("=", 1)
        for arg in argv
        if arg.startswith("--gin.") and "=" in arg
    )


def help_flags(help_text: str) -> set[str]:
    """The `--flag` names a --help text lists."""
    return set(_FLAG.findall(help_text))
