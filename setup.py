"""Finds cmrcx's packages under its three roots, so that a new subpackage cannot be left
out of the wheel: cmrcx/ as `cmrcx`, tasks/ as `cmrcx.tasks`, gin_configs/ as
`cmrcx.gin_configs` (the mapping is pyproject.toml's package-dir). The folders of data
files (cmrcx/data/*, gin_configs/*: no __init__.py) are listed too, as the namespace
packages Python takes them for: setuptools installs the files of a folder it was not
told of only with a "Package would be ignored" warning, and says it may stop."""

from setuptools import find_namespace_packages, find_packages, setup


def _under(root: str, directory: str, data: str | None = None) -> list[str]:
    packages = set(find_packages(directory))
    if data is not None:
        folders = find_namespace_packages(
            directory, include=[data, f"{data}.*"], exclude=["*__pycache__*"]
        )
        packages |= set(folders)
    return [root] + sorted(f"{root}.{package}" for package in packages)


setup(
    packages=_under("cmrcx", "cmrcx", data="data")
    + _under("cmrcx.tasks", "tasks")
    + _under("cmrcx.gin_configs", "gin_configs", data="*")
)
