"""Paths as runs write them: ``cmrcx:REL`` points inside the installed package (the
bundled samples and tiny vocabularies); other paths are made absolute."""

from __future__ import annotations

import importlib.resources
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
