"""What every benchmark's file validation shares: JSON type names, field errors, the
files a split reads and the lines of a JSON-lines file. (Errors, JSON reading and atomic
writes are `cmrcx.common`'s.)"""

from __future__ import annotations

import os
from typing import Any

from cmrcx.common.errors import DataFormatError


class FieldError(Exception):
    """A problem in one field of one record; the reader adds the file and record."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(detail)
        self.field = field
        self.detail = detail


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):  # before int: bool is a subclass of int
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def is_json_int(value: Any) -> bool:
    """True for JSON integers; rejects booleans, which Python treats as ints."""
    return isinstance(value, int) and not isinstance(value, bool)


def versioned_split_files(
    dataset: str,
    split_files: dict[str, tuple[str, ...]],
    test_files: dict[str, tuple[str, ...]],
    split: str,
    version: str,
    data_dir: str | os.PathLike[str] | None = None,
) -> tuple[str, ...]:
    """The official files a split reads, for a data set whose test file changed with the
    CLUE version (ChID, C3): ``split_files[split]``, or for "test" the first of
    ``test_files[version]`` present in ``data_dir`` (the preferred, first, name without
    one). ValueError naming ``dataset`` for an unknown split or version."""
    if version not in test_files:
        raise ValueError(
            f"unknown {dataset} version {version!r}; versions: {', '.join(test_files)}"
        )
    if split == "test":
        names = test_files[version]
        present = [n for n in names if data_dir and os.path.isfile(os.path.join(data_dir, n))]
        return tuple(present or names)[:1]
    if split not in split_files:
        raise ValueError(f"unknown {dataset} split {split!r}; splits: train, validation, test")
    return split_files[split]


def read_lines(path: str | os.PathLike[str], encoding: str = "utf-8") -> list[str]:
    """The lines of a UTF-8 file, split on "\\n" only (never on U+2028 or U+0085).

    A final newline does not make an extra empty line. ``newline=""`` keeps a "\\r"
    of CRLF files on its line, where JSON parsing ignores it as whitespace.
    ``encoding="utf-8-sig"`` also skips a leading byte-order mark.
    """
    try:
        with open(path, encoding=encoding, newline="") as f:
            text = f.read()
    except FileNotFoundError:
        raise DataFormatError(f"{path}: file not found") from None
    except UnicodeDecodeError as e:
        raise DataFormatError(f"{path}: not valid UTF-8 (byte offset {e.start})") from None
    except OSError as e:
        raise DataFormatError(f"{path}: cannot read file: {e.strerror}") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines
