"""A split's model examples written once to disk, then read by index: the prepared store.

A SeqIO task's examples (ChID's blanks with their 10 candidate windows, CMRC 2019's
windows) come from Python preprocessing that takes minutes for a large split. The store
runs it once, streaming (one chunk of examples in memory at a time, a progress line
every few seconds), and writes every feature as one raw file of fixed-shape rows:

    <cache>/prepared_examples/<task>-<split>-<key>/
        input_ids.bin ...        numeric features, [count, *shape] rows back to back
        context_id.npy ...       string features, one NumPy bytes array (host side only)
        features.json            count, each feature's dtype and shape, and the dtype
                                 its file holds

An integer feature's file holds the narrowest integer type its values need (token ids
of a 21,128-piece vocabulary in int16, masks and segment ids in int8: ChID's full-size
training store is 1.48 GB instead of 4.45 GB); reading gives the feature's own dtype back.
Training gathers any rows by index (`rows`): each feature file is memory-mapped
read-only (`MADV_RANDOM`: a fault reads its page, not its neighbours) and a batch is one
NumPy gather per feature, with no Python work per example (the short CLUE rows' step is
a few milliseconds; a `pread` per row and feature kept the reader at 4-8x an H100 step,
not the 10x that `tools/bench.py input` asks). The mapped pages are the page cache's,
file-backed and clean: the kernel reclaims them under memory pressure before it kills
anything; the anonymous memory is the batch. Evaluation reads blocks in order (`block`)
with one `os.pread` per feature and block. The key is a SHA-1 of the store's format
version, the installed versions of the libraries that turn text into examples
(LIBRARIES), the task name, the split, and the caller's fingerprint
(`cmrcx.training.runner` gives the run's data-shaping configuration, the official files'
and vocabulary's contents and the preprocessing code), so a change in any of them makes
a new store; building one removes the split's stores unused for UNUSED_DAYS.

Every host of a multi-host run builds the same store; each writes a private temporary
folder and renames it into place, and a host that finds the folder there uses it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import mmap
import os
import shutil
import socket
import time
from collections.abc import Sequence

import jax
import numpy as np
import seqio
import tensorflow as tf

from cmrcx.common import tf_iterators
from cmrcx.common.paths import subpackage_folders
from cmrcx.common.progress import Progress
from cmrcx.datasets import prepared_splits

STORE_VERSION = 2  # bump when the file layout changes (2: narrow integer files)
FEATURES_FILE = "features.json"
CHUNK = 256  # examples per write while building
# Their versions are part of a store's key: an upgrade that tokenizes differently makes
# new stores.
LIBRARIES = (
    "seqio",
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-text",
    "tensorflow-datasets",
    "sentencepiece",
    "jieba",
)
# A new store of a task's split removes the others of that split not used for this long
# (older data, configurations or code; ChID's training split takes GBs).
UNUSED_DAYS = 7


class PreparedSplit:
    """One split's examples on disk; `rows` and `block` read them back."""

    def __init__(self, directory: str):
        self.directory = directory
        with open(os.path.join(directory, FEATURES_FILE), encoding="utf-8") as f:
            meta = json.load(f)
        self.count: int = meta["count"]
        self.numeric = {k: (np.dtype(d), tuple(s)) for k, (d, s) in meta["numeric"].items()}
        self.stored = {k: np.dtype(d) for k, d in meta["stored"].items()}
        self.string_keys: list[str] = meta["strings"]
        self._strings: dict[str, np.ndarray] = {}
        self._mapped: dict[str, np.ndarray] = {}  # key -> its file's whole records, mapped

    def __len__(self) -> int:
        return self.count

    def _row_bytes(self, key: str) -> int:
        return self.stored[key].itemsize * int(np.prod(self.numeric[key][1], dtype=np.int64))

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, f"{key}.bin")

    def rows(self, indices: Sequence[int], keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Numeric features of the examples `indices` (any order): [len(indices), ...]."""
        indices = np.asarray(indices, np.int64)
        low, high = (int(indices.min()), int(indices.max())) if len(indices) else (0, -1)
        out = {}
        for key in keys:
            records = self._records(key)
            if high >= len(records) or low < 0:
                self._missing_record(key, indices, len(records))
            out[key] = records[indices].astype(self.numeric[key][0], copy=False)
        return out

    def _records(self, key: str) -> np.ndarray:
        """The whole records of `key`'s file, memory-mapped read-only: [records, *shape]
        in the stored dtype (a file cut short holds fewer than `count`)."""
        if key not in self._mapped:
            size = self._row_bytes(key)
            shape = self.numeric[key][1]
            with open(self._path(key), "rb") as f:
                whole = os.fstat(f.fileno()).st_size // size if size else 0
                if whole:
                    region = mmap.mmap(f.fileno(), whole * size, prot=mmap.PROT_READ)
                    if hasattr(mmap, "MADV_RANDOM"):
                        region.madvise(mmap.MADV_RANDOM)
                    data = np.frombuffer(region, self.stored[key])
                else:  # nothing to map (mmap refuses an empty region)
                    data = np.empty(0, self.stored[key])
            self._mapped[key] = data.reshape(whole, *shape)
        return self._mapped[key]

    def _missing_record(self, key: str, indices: np.ndarray, whole: int) -> None:
        """`_short_read` for the first index (in file order) past the whole records."""
        record = int(indices[(indices >= whole) | (indices < 0)].min())
        size = self._row_bytes(key)
        got = min(size, max(0, os.path.getsize(self._path(key)) - record * size))
        self._short_read(key, record, got, size)

    def _short_read(self, key: str, record: int, got: int, size: int) -> None:
        """ValueError naming the file and record a read came back short from (a store cut
        short on disk, or an index past its end)."""
        raise ValueError(
            f"{self._path(key)}: record {record} of feature {key!r} is {got} of its {size} bytes "
            f"(the store holds {self.count} records, the file "
            f"{os.path.getsize(self._path(key)) // size}); remove {self.directory} to prepare "
            "it again"
        )

    def block(self, start: int, stop: int, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Examples [start, stop) of every key in `keys`, numeric or string."""
        stop = min(stop, self.count)
        out = {}
        for key in keys:
            if key in self.string_keys:
                out[key] = self.strings(key)[start:stop]
                continue
            dtype, shape = self.numeric[key]
            size = self._row_bytes(key)
            with open(self._path(key), "rb") as f:
                data = os.pread(f.fileno(), size * (stop - start), start * size)
            if len(data) != size * (stop - start):
                short = start + len(data) // size
                self._short_read(key, short, len(data) - (short - start) * size, size)
            values = np.frombuffer(data, self.stored[key]).reshape(stop - start, *shape)
            out[key] = values.astype(dtype)  # a copy: the bytes object is not writable
        return out

    def strings(self, key: str) -> np.ndarray:
        if key not in self._strings:
            path = os.path.join(self.directory, f"{key}.npy")
            self._strings[key] = np.load(path, allow_pickle=False)
        return self._strings[key]

    @property
    def keys(self) -> list[str]:
        return [*self.numeric, *self.string_keys]


class PreparedStore:
    """Where a run's prepared splits live (`root`) and what keys them (`fingerprint`)."""

    def __init__(self, root: str, fingerprint: str):
        self.root = root
        self.fingerprint = fingerprint
        self._splits: dict[tuple[str, str], PreparedSplit | None] = {}

    def directory(self, task_name: str, split: str) -> str:
        parts = [str(STORE_VERSION), *library_versions(), task_name, split, self.fingerprint]
        key = hashlib.sha1("\0".join(parts).encode()).hexdigest()[:16]
        return os.path.join(self.root, "prepared_examples", f"{task_name}-{split}-{key}")

    @staticmethod
    def holds(task_name: str) -> bool:
        """Whether the store prepares `task_name`'s splits: a SeqIO task, not a mixture."""
        return isinstance(seqio.get_mixture_or_task(task_name), seqio.Task)

    def split(self, task_name: str, split: str) -> PreparedSplit | None:
        """The prepared split (built now if absent); None for a SeqIO mixture, whose
        examples the input pipeline samples from its tasks instead."""
        if (task_name, split) not in self._splits:
            prepared = None
            if self.holds(task_name):
                directory = self.directory(task_name, split)
                if not os.path.isfile(os.path.join(directory, FEATURES_FILE)):
                    build(seqio.get_mixture_or_task(task_name), split, directory)
                    _remove_unused_since(directory, UNUSED_DAYS)
                os.utime(os.path.join(directory, FEATURES_FILE))  # last used: now
                prepared = PreparedSplit(directory)
            self._splits[(task_name, split)] = prepared
        return self._splits[(task_name, split)]


def build(task: seqio.Task, split: str, directory: str) -> None:
    """Runs the task's preprocessing over `split` once and writes its store to `directory`
    (in a private folder renamed into place: a reader never sees half a store)."""
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    host = socket.gethostname()
    _remove_abandoned(f"{directory}.partial-{host}-")
    partial = f"{directory}.partial-{host}-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    dataset = task.get_dataset(sequence_length=None, split=split, shuffle=False, use_cached=False)
    with Progress(
        f"preparing {task.name} {split} examples",
        shown=jax.process_index() == 0,
        note=" (once; cached for later runs)",
    ) as progress:
        meta, strings = _write_numeric(dataset, partial, progress)
        for key, values in strings.items():
            np.save(os.path.join(partial, f"{key}.npy"), np.asarray(values, dtype=np.bytes_))
        with open(os.path.join(partial, FEATURES_FILE), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
        progress.done(meta["count"], f" -> {directory}")
    try:
        os.rename(partial, directory)
    except OSError:  # another host (or process) put a whole copy there first
        if not os.path.isfile(os.path.join(directory, FEATURES_FILE)):
            raise
        shutil.rmtree(partial, ignore_errors=True)


def _write_numeric(dataset: tf.data.Dataset, partial: str, progress: Progress):
    """Writes the dataset's numeric features to `partial`/<key>.bin, each in the narrowest
    type its values need; returns the store's metadata and the string features' values."""
    files, strings, numeric, stored, count = {}, {}, {}, {}, 0
    try:
        for chunk in tf_iterators.numpy_iterator(dataset.batch(CHUNK).prefetch(2)):
            rows = len(next(iter(chunk.values())))
            for key, value in chunk.items():
                if value.dtype.kind in "SUO":
                    strings.setdefault(key, []).extend(value)
                    continue
                path = os.path.join(partial, f"{key}.bin")
                needed = narrowest_dtype(value)
                if key not in files:
                    numeric[key] = (value.dtype.str, list(value.shape[1:]))
                    stored[key] = needed
                    files[key] = open(path, "wb")  # noqa: SIM115
                needed = np.promote_types(stored[key], needed)
                if needed != stored[key]:  # a value the earlier chunks' type cannot hold
                    files[key].close()
                    _widen(path, stored[key], needed)
                    stored[key], files[key] = needed, open(path, "ab")  # noqa: SIM115
                files[key].write(np.ascontiguousarray(value, stored[key]).tobytes())
            count += rows
            progress.update(count)
    finally:
        for f in files.values():
            f.close()
    meta = {
        "count": count,
        "numeric": numeric,
        "stored": {key: dtype.str for key, dtype in stored.items()},
        "strings": sorted(strings),
    }
    return meta, strings


@functools.cache
def library_versions() -> tuple[str, ...]:
    """Each of LIBRARIES as "name==version" ("name absent" when it is not installed)."""
    versions = []
    for name in LIBRARIES:
        try:
            versions.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    return tuple(versions)


def narrowest_dtype(values: np.ndarray) -> np.dtype:
    """The narrowest integer dtype of `values`' kind (signed or not) that holds them all;
    other dtypes (floats, booleans) unchanged."""
    if values.dtype.kind not in "iu":
        return values.dtype
    if values.size == 0:  # holds nothing: any later chunk decides
        return np.dtype(f"{values.dtype.kind}1")
    low, high = int(values.min()), int(values.max())
    for bits in (8, 16, 32):
        dtype = np.dtype(f"{values.dtype.kind}{bits // 8}")
        info = np.iinfo(dtype)
        if dtype.itemsize >= values.dtype.itemsize or info.min <= low and high <= info.max:
            return dtype
    return values.dtype


def _widen(path: str, old: np.dtype, new: np.dtype, block: int = 1 << 24) -> None:
    """Rewrites the file of `old` values at `path` as `new` ones, `block` values at a time
    (a chunk whose values do not fit the type the earlier chunks needed)."""
    wider = f"{path}.wider"
    with open(path, "rb") as source, open(wider, "wb") as target:
        while data := source.read(block * old.itemsize):
            target.write(np.frombuffer(data, old).astype(new).tobytes())
    os.replace(wider, path)


def _remove_unused_since(directory: str, days: float) -> None:
    """Removes the other stores of `directory`'s task and split last used over `days` ago."""
    parent, name = os.path.split(directory)
    prefix = name.rsplit("-", 1)[0] + "-"
    for other in os.listdir(parent):
        path = os.path.join(parent, other, FEATURES_FILE)
        if other == name or not other.startswith(prefix) or not os.path.isfile(path):
            continue
        if time.time() - os.path.getmtime(path) > days * 86400:
            shutil.rmtree(os.path.join(parent, other), ignore_errors=True)


def _remove_abandoned(prefix: str) -> None:
    """Removes the partial stores of this host's processes that no longer run (a build
    killed midway leaves one, GBs for ChID)."""
    parent, start = os.path.split(prefix)
    for name in os.listdir(parent):
        pid = name[len(start) :]
        if not (name.startswith(start) and pid.isdigit()):
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except PermissionError:  # another user's live process
            pass


def file_digest(paths: Sequence[str], suffix: str = "") -> str:
    """SHA-1 of the bytes of every regular file under `paths` (files or folders, walked
    in sorted order; hidden entries and names not ending in `suffix` skipped), with
    their relative names."""
    digest = hashlib.sha1()
    for root in paths:
        if os.path.isfile(root):
            entries = [(os.path.basename(root), root)]
        else:
            entries = []
            for folder, dirs, names in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                chosen = (n for n in names if not n.startswith(".") and n.endswith(suffix))
                for name in sorted(chosen):
                    path = os.path.join(folder, name)
                    entries.append((os.path.relpath(path, root), path))
        for name, path in entries:
            digest.update(name.encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(hashlib.file_digest(f, "sha1").digest())
    return digest.hexdigest()


# RunConfig fields that do not change a split's examples: the prepared store's key leaves
# them out (a new field is in the key until it is listed here, so a store is never stale).
_NOT_DATA_FIELDS = (
    "model_dir require_pretrained batch_size grad_accum_steps check_memory eval_batch_size "
    "num_epochs num_train_steps learning_rate warmup_fraction weight_decay max_grad_norm "
    "adam_epsilon optimizer seed mesh_shape dcn_mesh_shape partitioning logical_rules "
    "attention_implementation log_every save_every "
    "keep_checkpoints eval_every select_best select_mode eval_every_epochs decoding "
    "tfds_cache_dir prefetch_batches max_decoded_examples generation_method generation_top_k "
    "generation_temperature generation_max_new_tokens generation_start_token_id "
    "generation_seed drop_last_char_without_eos paper_model"
).split()
# The code that turns official files into examples: a change in it makes a new store.
_PREPROCESSING_CODE = ("benchmarks", "datasets", "tasks", "vocab")


def prepared_store(run) -> PreparedStore:
    """The run's prepared examples (`cmrcx.training.prepared_examples`), in its TFDS cache
    folder, keyed by the data-shaping RunConfig fields and the contents of the official
    files, the vocabulary and the preprocessing code."""
    from cmrcx.training import run_config  # the RunConfig module imports no store

    config = run_config.run_config_json(run)
    for field in _NOT_DATA_FIELDS:
        config.pop(field, None)
    code = [folder for name in _PREPROCESSING_CODE for folder in subpackage_folders(name)]
    held_out = getattr(run.options, "validation_data_dir", None)  # LongLM's option
    files = [p for p in (run.data_dir, held_out, run.vocab_file) if p]
    fingerprint = "\0".join(
        [
            json.dumps(config, sort_keys=True, default=str),
            file_digest([p for p in files if os.path.exists(p)]),
            file_digest(code, suffix=".py"),
        ]
    )
    root = run.tfds_cache_dir or prepared_splits.DEFAULT_CACHE_DIR
    return PreparedStore(root, fingerprint)
