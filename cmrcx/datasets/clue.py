"""TFDS builder `clue`: CLUE's classification tasks, one BuilderConfig per table row.

Every row of `cmrcx.benchmarks.clue.tasks.TASKS` (AFQMC, TNEWS 1.0/1.1, IFLYTEK, OCNLI,
CMNLI, CLUEWSC2020 1.0/1.1, CSL, diagnostics) is a config named after the task without
its ``clue_`` prefix (``clue/afqmc``, ``clue/tnews10``, ...). The official files are not
downloaded (no network is assumed): DATA_DIR is the unpacked official folder of one task,
e.g. ``afqmc_public/`` holding train.json, dev.json and test.json. Which file holds which
split comes from the table (OCNLI's train split is train.50k.json, TNEWS 1.0's test split
test1.0.json), and every record goes through `cmrcx.benchmarks.clue.official_format`, so
validation and the ``"-"`` skip of OCNLI/CMNLI live in one place: a malformed record fails
the build with that reader's `DataFormatError` (file, line, field), unwrapped, and skipped
rows are counted in the ``ClueSplit.summary()`` line printed when the split is built.

Records, in file order (``disable_shuffling``): ``id`` (the record's id as JSON text, see
`record_id`), ``line_number`` (1-based), ``text_a``/``text_b`` as the baseline builds them
(`cmrcx.benchmarks.clue.inputs.encoder_texts`: WSC spans marked, CSL keywords joined;
``text_b`` is "" for single-sentence tasks), ``label`` (the official string, "" in an
unlabelled test file) and ``label_index`` (its index in the table's label order, -1 there).

Each split is prepared on its own, when first read (`prepare`, `load_split`), under a
folder keyed by the data dir, the task, the split and the file's contents: a broken
test.json never blocks training on train.json and evaluating on dev.json.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from cmrcx.benchmarks.clue.inputs import encoder_texts
from cmrcx.benchmarks.clue.official_format import read_split
from cmrcx.benchmarks.clue.tasks import TASKS, ClueTask, get_task
from cmrcx.common.errors import MissingSplitError
from cmrcx.datasets.prepared_splits import content_keyed_dir, prepare_once

# [README] in `cmrcx.benchmarks.clue.tasks`: every ``<public_dir>.zip`` is published here.
DOWNLOAD_ROOT = "https://storage.googleapis.com/cluebenchmark/tasks/"
HOMEPAGE = "https://github.com/CLUEbenchmark/CLUE"
CITATION = """@inproceedings{xu-etal-2020-clue,
  title = "{CLUE}: A {C}hinese Language Understanding Evaluation Benchmark",
  author = "Xu, Liang and Hu, Hai and Zhang, Xuanwei and Li, Lu and Cao, Chenjie and
            Li, Yudong and Xu, Yechen and Sun, Kai and Yu, Dian and Yu, Cong and Tian, Yin and
            Dong, Qianqian and Liu, Weitang and Shi, Bo and Cui, Yiming and Li, Junyi and
            Zeng, Jun and Wang, Rongzhao and Xie, Weijian and Li, Yanting and Patterson, Yina and
            Tian, Zuoyu and Zhang, Yiwen and Zhou, He and Liu, Shaoweihua and Zhao, Zhe and
            Zhao, Qipeng and Yue, Cong and Zhang, Xinrui and Yang, Zhengliang and
            Richardson, Kyle and Lan, Zhenzhong",
  booktitle = "Proceedings of the 28th International Conference on Computational Linguistics",
  year = "2020",
  pages = "4762--4772",
  url = "https://aclanthology.org/2020.coling-main.419",
}"""


def config_name(task: ClueTask) -> str:
    """The BuilderConfig name of a task: ``clue_tnews11`` -> ``tnews11``."""
    return task.name.removeprefix("clue_")


def download_url(task: ClueTask) -> str:
    """The official zip of a task, e.g. ``.../tasks/afqmc_public.zip``."""
    return f"{DOWNLOAD_ROOT}{task.public_dir}.zip"


def task_instructions(task: ClueTask) -> str:
    """One task's line of the manual-download instructions."""
    files = ", ".join(f"{split}: {name}" for split, name in task.split_files.items())
    return (
        f"  {task.name}: unzip {task.public_dir}.zip ({download_url(task)}) and pass the "
        f"{task.public_dir}/ folder as its DATA_DIR ({files})"
    )


MANUAL_INSTRUCTIONS = "\n".join(
    [
        "Each CLUE task reads the unpacked official zip of its data set, files unchanged.",
        "Only the files of the splits you use need to be there.",
        *(task_instructions(task) for task in TASKS.values()),
    ]
)


@dataclasses.dataclass(eq=False)
class ClueConfig(tfds.core.BuilderConfig):
    """A BuilderConfig holding its row of the CLUE table."""

    task: ClueTask | None = None


class Clue(tfds.core.GeneratorBasedBuilder):
    """CLUE classification tasks: sentence (pair) classification records."""

    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {
        "1.0.0": "Official files read unchanged; file order kept.",
        "1.1.0": "dev.json is the 'validation' split (SeqIO's and TFDS's name).",
    }
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_INSTRUCTIONS
    BUILDER_CONFIGS = [
        ClueConfig(name=config_name(task), description=task_instructions(task).strip(), task=task)
        for task in TASKS.values()
    ]

    def __init__(self, *, split: str | None = None, **kwargs):
        """split: build only this split's file; None builds every official file present."""
        self._only_split = split
        super().__init__(**kwargs)

    @property
    def task(self) -> ClueTask:
        return self.builder_config.task

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "id": tfds.features.Text(),
                    "line_number": np.int32,
                    "text_a": tfds.features.Text(),
                    "text_b": tfds.features.Text(),
                    "label": tfds.features.Text(),
                    "label_index": np.int32,
                }
            ),
            homepage=HOMEPAGE,
            citation=CITATION,
            # What was skipped ("-" rows), kept with the prepared split.
            metadata=tfds.core.MetadataDict(),
            # Keep the official file order: submissions follow it line by line.
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
                f"no {self.task.name} file in {data_dir}.\n{task_instructions(self.task)}"
            )
        return {split: self._generate_examples(data_dir, split) for split in present}

    def _generate_examples(self, data_dir: str, split: str):
        records = read_split(self.task, data_dir, split)
        if records.notes():
            print(records.summary(), flush=True)
        self.info.metadata[split] = {
            "examples": len(records.examples),
            "skipped_ids": list(records.skipped_ids),
        }
        labels = {label: index for index, label in enumerate(self.task.labels)}
        for example in records.examples:
            text_a, text_b = encoder_texts(self.task, example)
            yield (
                example.line_number,
                {
                    "id": json.dumps(example.id, ensure_ascii=False),
                    "line_number": example.line_number,
                    "text_a": text_a,
                    "text_b": text_b or "",
                    "label": example.label or "",
                    "label_index": -1 if example.label is None else labels[example.label],
                },
            )


def record_id(id_text: str | bytes) -> int | str:
    """The id of a prepared record as the file has it: ``b"2415"`` -> 2415, ``'"a7"'`` -> "a7".

    The ``id`` feature is the id's JSON text, so integer and string ids stay apart
    (``0`` and ``"0"``); `cmrcx.benchmarks.clue.submission.write_submission` takes this.
    """
    return json.loads(id_text)


def available_splits(task: ClueTask | str, data_dir: str) -> list[str]:
    """The splits of ``task`` whose official file is in ``data_dir``, in table order."""
    task = get_task(task) if isinstance(task, str) else task
    return [
        split
        for split, name in task.split_files.items()
        if os.path.isfile(os.path.join(data_dir, name))
    ]


def require_split(task: ClueTask | str, data_dir: str, split: str) -> str:
    """Path of the official file of ``split``; MissingSplitError naming it otherwise."""
    task = get_task(task) if isinstance(task, str) else task
    if split not in task.split_files:
        raise ValueError(
            f"{task.name} has no {split!r} split; it has {', '.join(task.split_files)}"
        )
    if not os.path.isdir(data_dir):
        raise MissingSplitError(
            f"{task.name}: DATA_DIR={data_dir} is not a directory.\n{task_instructions(task)}"
        )
    path = os.path.join(data_dir, task.split_files[split])
    if not os.path.isfile(path):
        raise MissingSplitError(
            f"{task.name}: split {split!r} needs {task.split_files[split]} in "
            f"DATA_DIR={data_dir}, which is not there.\n{task_instructions(task)}"
        )
    return path


def prepare(task: ClueTask | str, data_dir: str, split: str, cache_dir: str | None = None) -> str:
    """Builds one split of ``task`` from its official file in ``data_dir`` (once).

    Only that file is read. The prepared copy lives under ``cache_dir`` (default
    ~/.cache/cmrcx/tfds) in a folder keyed by the data dir, the task, the split and the
    file's contents (SHA-1), so an edited file is re-read. Returns the TFDS data_dir to
    read ``split`` of ``clue/<config>`` from.

    Raises:
      MissingSplitError: ``data_dir`` is not a directory or lacks the split's file.
      DataFormatError: the file is malformed (names the file, line and field).
    """
    task = get_task(task) if isinstance(task, str) else task
    data_dir = os.path.abspath(data_dir)
    path = require_split(task, data_dir, split)
    tfds_dir = content_keyed_dir(
        cache_dir, f"clue-{config_name(task)}-{split}", (data_dir, task.name, split), path
    )
    prepare_once(functools.partial(Clue, config=config_name(task)), tfds_dir, data_dir, split=split)
    return tfds_dir


def prepared_builder(
    task: ClueTask | str, data_dir: str, split: str, cache_dir: str | None = None
) -> Clue:
    """The `Clue` builder holding ``split`` of ``task``, prepared first if needed."""
    task = get_task(task) if isinstance(task, str) else task
    return Clue(config=config_name(task), data_dir=prepare(task, data_dir, split, cache_dir))


def load_split(
    task: ClueTask | str, data_dir: str, split: str, cache_dir: str | None = None
) -> tf.data.Dataset:
    """The records of one split, in file order, prepared first if needed (see `prepare`)."""
    builder = prepared_builder(task, data_dir, split, cache_dir)
    return builder.as_dataset(split=split, shuffle_files=False)


def num_examples(
    task: ClueTask | str, data_dir: str, split: str, cache_dir: str | None = None
) -> int:
    """How many records ``split`` has (after the "-" skip), prepared first if needed."""
    return prepared_builder(task, data_dir, split, cache_dir).info.splits[split].num_examples


def skipped_ids(
    task: ClueTask | str, data_dir: str, split: str, cache_dir: str | None = None
) -> list[int | str]:
    """Ids of the rows of ``split`` skipped for label "-" (no majority label)."""
    builder = prepared_builder(task, data_dir, split, cache_dir)
    return list(builder.info.metadata[split]["skipped_ids"])
