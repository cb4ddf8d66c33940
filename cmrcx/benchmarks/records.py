"""What every benchmark's file validation shares: JSON type names, field errors, reading
a JSON file and writing a result file atomically."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any


class DataFormatError(ValueError):
    """An official data, prediction or submission file breaks its format; the message
    names the file, the record (or line) and the field."""


class StorageError(OSError):
    """A file or checkpoint could not be written (disk full, quota, read-only, permission);
    the message names the path and what is still intact."""


# errno values of a storage that refuses a read or write (not a bug of the run).
STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


class MissingSplitError(FileNotFoundError):
    """A requested split's official file is not in the data directory."""


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


def load_json(path: str | os.PathLike[str]) -> Any:
    """Parses a UTF-8 JSON file; every read or parse failure is a DataFormatError."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise DataFormatError(f"{path}: file not found") from None
    except json.JSONDecodeError as e:
        raise DataFormatError(
            f"{path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    except UnicodeDecodeError as e:
        raise DataFormatError(f"{path}: not valid UTF-8 (byte offset {e.start})") from None
    except OSError as e:
        raise DataFormatError(f"{path}: cannot read file: {e.strerror}") from None


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Temporary sibling + `os.replace`: a crash never leaves a truncated file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_path = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp_path, 0o644)  # mkstemp's 0600 would hide results from other users
        os.replace(tmp_path, path)
    except BaseException:
        os.unlink(tmp_path)
        raise


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
