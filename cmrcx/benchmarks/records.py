"""What every benchmark's file validation shares: JSON type names and field errors."""

from __future__ import annotations

from typing import Any


class DataFormatError(ValueError):
    """An official data, prediction or submission file breaks its format; the message
    names the file, the record (or line) and the field."""


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
