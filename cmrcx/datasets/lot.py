"""TFDS builder `lot`: LOT's four tasks, one BuilderConfig each (``lot/clozet``,
``lot/senpos``, ``lot/plotcom``, ``lot/outgen``), read from the official files unchanged.

Nothing is downloaded (no network is assumed): DATA_DIR is one task's folder of the
official release, holding train.jsonl, val.jsonl and test.jsonl (splits train /
validation / test). Every line goes through `cmrcx.benchmarks.lot.formats.read_file`, so
a malformed record fails the build with that reader's `DataFormatError` (file, line,
field), and the masks and labels are normalised there.

Records, in file order (``disable_shuffling``), keyed by line:

- every task: ``line`` (int32, 1-based line of the file) and ``raw`` (the line's JSON object
  as JSON text, key order kept: what a prediction line repeats);
- clozet: ``story`` (one ``<mask>``), ``candidates`` ([plot0, plot1]), ``label`` (int32,
  0-based; -1 without a label);
- senpos: ``story`` (a ``<mask>`` at every candidate position), ``sentence``, ``label``
  (int32, 0-based index of the right mask; -1 without a label);
- plotcom: ``story`` (one ``<mask>``), ``plot`` (the target; "" without one);
- outgen: ``title`` ("" if the file has none), ``outline`` (the phrases, file order),
  ``story`` (the target; "" without one).

An absent target is "": the reader reads an empty target as absent, so "" is never a real
one. `split_records` turns a prepared split back into the reader's records.

Each split is prepared on its own when first read (`prepare`, `load_split`), under a folder
keyed by the data dir, the task, the split and the file's contents: a broken or missing
test.jsonl never blocks training on train.jsonl and evaluating on val.jsonl.
"""

from __future__ import annotations

import functools
import json
import os

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from cmrcx.benchmarks.lot import formats
from cmrcx.benchmarks.lot.formats import (
    SPLIT_FILES,
    TASK_NAMES,
    TASKS,
    ClozeTRecord,
    OutGenRecord,
    PlotComRecord,
    Record,
    SenPosRecord,
)
from cmrcx.common.errors import MissingSplitError
from cmrcx.datasets import records
from cmrcx.datasets.prepared_splits import content_keyed_dir, prepare_once, require_files

HOMEPAGE = "https://github.com/thu-coai/LOT-LongLM"
HF_COPY = "https://huggingface.co/datasets/Jiann/LOT"
CITATION = """@article{guan-etal-2022-lot,
  title = "{LOT}: A Story-Centric Benchmark for Evaluating {C}hinese Long Text Understanding
           and Generation",
  author = "Guan, Jian and Feng, Zhuoer and Chen, Yamei and He, Ruilin and Mao, Xiaoxi and
            Fan, Changjie and Huang, Minlie",
  journal = "Transactions of the Association for Computational Linguistics",
  volume = "10",
  year = "2022",
  url = "https://aclanthology.org/2022.tacl-1.25",
}"""
MANUAL_INSTRUCTIONS = f"""\
Each LOT task reads one folder (DATA_DIR) holding the official files of that task, unchanged:
  {", ".join(f"{split}: {name}" for split, name in SPLIT_FILES.items())}
(only the files of the splits you use need to be there). The authors describe them in
datasets/<task>/README.md of
  {HOMEPAGE}
and published them on THUCloud (the link in its top README, dead since 2024-11:
thu-coai/LOT-LongLM#8). Their Hugging Face copy has them as clozet/, senpos/, plotcom/
and outgen/ (e.g. clozet/train.jsonl):
  {HF_COPY}"""


def _task_features(task: str) -> dict:
    text, texts = tfds.features.Text(), tfds.features.Sequence(tfds.features.Text())
    return {
        "clozet": {"story": text, "candidates": texts, "label": np.int32},
        "senpos": {"story": text, "sentence": text, "label": np.int32},
        "plotcom": {"story": text, "plot": text},
        "outgen": {"title": text, "outline": texts, "story": text},
    }[task]


def _features(record: Record) -> dict:
    """A record as the builder stores it (see the module docstring)."""
    common = {"line": record.line, "raw": json.dumps(record.raw, ensure_ascii=False)}
    if isinstance(record, ClozeTRecord):
        label = -1 if record.label is None else record.label
        return common | {
            "story": record.story,
            "candidates": list(record.candidates),
            "label": label,
        }
    if isinstance(record, SenPosRecord):
        label = -1 if record.label is None else record.label
        return common | {"story": record.story, "sentence": record.sentence, "label": label}
    if isinstance(record, PlotComRecord):
        return common | {"story": record.story, "plot": record.plot or ""}
    return common | {
        "title": record.title,
        "outline": list(record.outline),
        "story": record.story or "",
    }


class Lot(tfds.core.GeneratorBasedBuilder):
    """LOT: ClozeT, SenPos (understanding), PlotCom, OutGen (generation) records."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Official files read unchanged; file order kept."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_INSTRUCTIONS
    BUILDER_CONFIGS = [
        tfds.core.BuilderConfig(name=task, description=f"LOT {TASK_NAMES[task]}") for task in TASKS
    ]

    def __init__(self, *, split: str | None = None, **kwargs):
        """split: build only this split's file; None builds every official file present."""
        self._only_split = split
        super().__init__(**kwargs)

    @property
    def task(self) -> str:
        return self.builder_config.name

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {"line": np.int32, "raw": tfds.features.Text(), **_task_features(self.task)}
            ),
            homepage=HOMEPAGE,
            citation=CITATION,
            # Keep the official file order: prediction files follow it line by line.
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        data_dir = str(dl_manager.manual_dir)
        if self._only_split is not None:
            require_split(self.task, data_dir, self._only_split)
            present = [self._only_split]
        else:
            present = available_splits(self.task, data_dir)
        if not present:
            raise MissingSplitError(
                f"no LOT {TASK_NAMES[self.task]} file in {data_dir}.\n{MANUAL_INSTRUCTIONS}"
            )
        return {split: self._generate_examples(data_dir, split) for split in present}

    def _generate_examples(self, data_dir: str, split: str):
        for record in formats.read_split(self.task, data_dir, split):
            yield record.line, _features(record)


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown LOT task {task!r}; tasks: {', '.join(TASKS)}")


def available_splits(task: str, data_dir: str) -> list[str]:
    """The splits whose official file is in ``data_dir``, in SPLIT_FILES order."""
    _check_task(task)
    return [s for s in SPLIT_FILES if os.path.isfile(formats.split_path(data_dir, s))]


def require_split(task: str, data_dir: str, split: str) -> str:
    """Path of the official file of ``split``; MissingSplitError naming it otherwise."""
    _check_task(task)
    formats.split_path(data_dir, split)  # ValueError for an unknown split
    names = [SPLIT_FILES[split]]
    return require_files(f"LOT {TASK_NAMES[task]}", data_dir, split, names, MANUAL_INSTRUCTIONS)[0]


def prepare(task: str, data_dir: str, split: str, cache_dir: str | None = None) -> str:
    """Builds one split of ``task`` from its official file in ``data_dir`` (once).

    Only that file is read. The prepared copy lives under ``cache_dir`` (default
    ~/.cache/cmrcx/tfds) in a folder keyed by the data dir, the task, the split and the
    file's contents (SHA-1), so an edited file is re-read. Returns the TFDS data_dir to
    read ``split`` of ``lot/<task>`` from.

    Raises:
      MissingSplitError: ``data_dir`` is not a directory or lacks the split's file.
      DataFormatError: the file is malformed (names the file, line and field).
    """
    data_dir = os.path.abspath(data_dir)
    path = require_split(task, data_dir, split)
    tfds_dir = content_keyed_dir(cache_dir, f"lot-{task}-{split}", (data_dir, task, split), path)
    prepare_once(functools.partial(Lot, config=task), tfds_dir, data_dir, split=split)
    return tfds_dir


def load_split(
    task: str, data_dir: str, split: str, cache_dir: str | None = None
) -> tf.data.Dataset:
    """The records of one split, in file order, prepared first if needed (see `prepare`)."""
    builder = Lot(config=task, data_dir=prepare(task, data_dir, split, cache_dir))
    return builder.as_dataset(split=split, shuffle_files=False)


def split_records(
    task: str, data_dir: str, split: str, cache_dir: str | None = None
) -> list[Record]:
    """The records of one split rebuilt from the prepared data (``raw`` parsed from its
    text), equal to what `formats.read_split` reads: for the evaluation code, which writes
    prediction lines (`formats.write_predictions`) without re-reading the files."""
    dataset = load_split(task, data_dir, split, cache_dir)
    return [
        _record(task, example)
        for example in records.read_records(dataset, f"reading lot {task} {split} records")
    ]


def _record(task: str, example: dict) -> Record:
    text = {k: v.decode("utf-8") for k, v in example.items() if isinstance(v, bytes)}
    line, raw = int(example["line"]), json.loads(text["raw"])
    label = int(example["label"]) if "label" in example else -1
    label = None if label < 0 else label
    if task == "clozet":
        candidates = tuple(c.decode("utf-8") for c in example["candidates"])
        return ClozeTRecord(line, text["story"], candidates, label, raw)
    if task == "senpos":
        return SenPosRecord(line, text["story"], text["sentence"], label, raw)
    if task == "plotcom":
        return PlotComRecord(line, text["story"], text["plot"] or None, raw)
    outline = tuple(p.decode("utf-8") for p in example["outline"])
    return OutGenRecord(line, text["title"], outline, text["story"] or None, raw)
