"""Paths as runs write them: ``cmrcx:REL`` points inside the installed package (the
bundled samples and tiny vocabularies); other paths are made absolute."""

from __future__ import annotations

import importlib.resources
import importlib.util
import os

PACKAGE_PREFIX = "cmrcx:"


def package_path(relative: str) -> str:
    return str(importlib.resources.files("cmrcx").joinpath(relative))


def resolve_path(path: str | None) -> str | None:
    """`cmrcx:data/x` -> the installed package's file; other paths made absolute."""
    if path is None:
        return None
    if path.startswith(PACKAGE_PREFIX):
        return package_path(path[len(PACKAGE_PREFIX) :])
    return os.path.abspath(os.path.expanduser(path))


def subpackage_folders(name: str) -> list[str]:
    """The folders `cmrcx.<name>` is imported from: ``cmrcx/<name>`` of an installed wheel,
    but ``tasks/`` itself for ``cmrcx.tasks`` in an editable checkout (pyproject.toml's
    package-dir), where ``cmrcx/tasks`` does not exist."""
    spec = importlib.util.find_spec(f"cmrcx.{name}")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"cmrcx.{name} is not a package")
    return list(spec.submodule_search_locations)
