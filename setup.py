"""Finds cmrcx's packages under its three roots, so that a new subpackage cannot be left
out of the wheel: cmrcx/ as `cmrcx`, tasks/ as `cmrcx.tasks`, gin_configs/ as
`cmrcx.gin_configs` (the mapping is pyproject.toml's package-dir)."""

from setuptools import find_packages, setup


def _under(root: str, directory: str) -> list[str]:
    return [root] + [f"{root}.{package}" for package in find_packages(directory)]


setup(
    packages=_under("cmrcx", "cmrcx")
    + _under("cmrcx.tasks", "tasks")
    + _under("cmrcx.gin_configs", "gin_configs")
)
