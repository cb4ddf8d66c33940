"""What every benchmark's TFDS data shares: one split prepared once, keyed by content."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence

import tensorflow_datasets as tfds

from cmrcx.common.errors import DataFormatError, MissingSplitError

DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "cmrcx", "tfds")


def content_keyed_dir(
    cache_dir: str | None, label: str, key_parts: Sequence[str], path: str
) -> str:
    """``<cache_dir>/<label>-<16 hex>``: SHA-1 of the key parts and of the file's bytes.

    The key holds the contents, not the size or mtime, so a same-size edit copied with
    its old timestamp is still seen. With ``key_parts=(data_dir, split)`` this is the key
    `cmrcx.datasets.cmrc2019.prepare` uses.
    """
    key = hashlib.sha1("\0".join(key_parts).encode())
    with open(path, "rb") as f:
        key.update(hashlib.file_digest(f, "sha1").digest())
    return os.path.join(cache_dir or DEFAULT_CACHE_DIR, f"{label}-{key.hexdigest()[:16]}")


def files_keyed_dir(
    cache_dir: str | None, label: str, key_parts: Sequence[str], paths: Sequence[str]
) -> str:
    """`content_keyed_dir` of a split read from several files (ChID's data and answer
    files, C3's d- and m- files): the SHA-1 of every file after the first joins the key."""
    digests = []
    for path in paths[1:]:  # the first file's digest is content_keyed_dir's own
        with open(path, "rb") as f:
            digests.append(hashlib.file_digest(f, "sha1").hexdigest())
    return content_keyed_dir(cache_dir, label, (*key_parts, *digests), paths[0])


def require_files(
    dataset: str, data_dir: str, split: str, names: Sequence[str], instructions: str
) -> list[str]:
    """Paths of the official files of ``split``; MissingSplitError naming the first absent
    one (or DATA_DIR, if it is not a directory) and how to get it."""
    if not os.path.isdir(data_dir):
        raise MissingSplitError(
            f"{dataset}: DATA_DIR={data_dir} is not a directory.\n{instructions}"
        )
    paths = [os.path.join(data_dir, name) for name in names]
    for name, path in zip(names, paths, strict=True):
        if not os.path.isfile(path):
            raise MissingSplitError(
                f"{dataset}: split {split!r} needs {name} in DATA_DIR={data_dir}, which is "
                f"not there.\n{instructions}"
            )
    return paths


def prepare_once(
    make_builder: Callable[..., tfds.core.DatasetBuilder],
    tfds_dir: str,
    manual_dir: str,
    **build_kwargs,
) -> None:
    """Runs ``make_builder(data_dir=tfds_dir, **build_kwargs).download_and_prepare`` once.

    Nothing happens if ``tfds_dir`` already holds the prepared dataset. Another process
    (a multi-host job on a shared disk) may rename its finished copy into place first:
    TFDS writes atomically, so the FileExistsError it causes here means a whole copy.
    """
    absl_logger = logging.getLogger("absl")
    absl_logger.addFilter(_drop_unprepared_variant_warning)
    try:
        if make_builder(data_dir=tfds_dir).is_prepared():
            return
        make_builder(data_dir=tfds_dir, **build_kwargs).download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=manual_dir)
        )
    except FileExistsError:
        if not make_builder(data_dir=tfds_dir).is_prepared():
            raise
    except AssertionError as error:  # TFDS: 'Failed to finalize ... No examples were yielded.'
        if "No examples were yielded" not in str(error):
            raise
        split = build_kwargs.get("split")
        which = f"the {split} split's official file" if split else "a split's official file"
        raise DataFormatError(
            f"{manual_dir}: {which} holds no records (an empty file, or every record "
            "skipped, as a line above says)"
        ) from None
    finally:
        absl_logger.removeFilter(_drop_unprepared_variant_warning)


def _drop_unprepared_variant_warning(record: logging.LogRecord) -> bool:
    """TFDS warns "Variant folder ... has no dataset_info.json" about the folder it is
    about to prepare (the first builder made it); nothing is wrong, so it is not shown."""
    return not record.getMessage().startswith("Variant folder ")
