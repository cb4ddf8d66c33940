"""Reading JSON and writing result files so that a crash never leaves half a file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from cmrcx.common.errors import DataFormatError


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


def write_atomically(path: str | os.PathLike[str], content: str | bytes) -> None:
    """Temporary sibling + `os.replace`: a crash never leaves a truncated file behind.
    Text is written as UTF-8, bytes as they are (e.g. a zip archive)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_path = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        if isinstance(content, bytes):
            with os.fdopen(fd, "wb") as f:
                f.write(content)
        else:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                f.write(content)
        os.chmod(tmp_path, 0o644)  # mkstemp's 0600 would hide results from other users
        os.replace(tmp_path, path)
    except BaseException:
        os.unlink(tmp_path)
        raise
