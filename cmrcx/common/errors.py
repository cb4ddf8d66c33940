"""The error classes every layer raises and the entry points turn into one line.

`cmrcx.cli.launch.main_guard` prints each as ``error: <message>`` (``preempted: ...`` for
`Preempted`) and exits; the messages name the file, record and field, or the setting
and how to give it.
"""

from __future__ import annotations

import errno


class ConfigError(ValueError):
    """A run is missing something it needs; the message says what and how to give it."""


def raise_first(problems, prefix: str) -> None:
    """ConfigError(prefix + message) for the first (bad, message) pair whose bad is true:
    a config's checks as one table.

    >>> raise_first([(False, "a"), (True, "b < 0")], "RunConfig.")
    Traceback (most recent call last):
    ...
    cmrcx.common.errors.ConfigError: RunConfig.b < 0
    """
    for bad, message in problems:
        if bad:
            raise ConfigError(prefix + message)


class TrainingDiverged(RuntimeError):
    """The loss or the gradient norm went non-finite; nothing after it was saved."""


class Preempted(RuntimeError):
    """SIGTERM arrived: the current step finished and was saved; rerun to resume."""


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
