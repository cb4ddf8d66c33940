"""Every task family registered on the bundled samples, read with a seed: SeqIO passes one
(`seqio.Evaluator` 42 by default, a mixture its sampling seed), and a source that cannot
take it fails before the first example. The official-file sources keep file order for any
shuffle or seed (`cmrcx.tasks.sources.FileOrderSource`)."""

from __future__ import annotations

import numpy as np
import pytest
import seqio
import tensorflow as tf

from cmrcx.common.paths import package_path
from cmrcx.tasks import cmrc2019
from cmrcx.tasks.clue import classification, reading
from cmrcx.tasks.lot import generation, mixture, pretraining, understanding
from cmrcx.tasks.sources import FileOrderSource
from tests.tasks.test_clue_mrc_tasks import SAMPLES as MRC_SAMPLES
from tests.tasks.test_clue_mrc_tasks import VOCAB
from tests.tasks.test_lot_generation_tasks import SPIECE

NAME = "seeded"
LOT = package_path("data/lot_sample")
CORPUS = package_path("data/longlm_corpus")
MIXTURES = ("cmrc2019", "clue_classification", "clue", "clue_multiple_choice", "lot")
MIXTURES += (pretraining.MIXTURE_NAME,)


@pytest.fixture(scope="module")
def task_names(tmp_path_factory) -> list[str]:
    """Every family's tasks (17) and its mixtures, on the bundled samples, short lengths."""
    cache = str(tmp_path_factory.mktemp("tfds"))
    lot = {row: f"{LOT}/{folder}" for row, folder in mixture.ROWS.items()}
    mrc = {
        "clue_cmrc2018": f"{MRC_SAMPLES}/cmrc2018_public",
        "clue_chid11": f"{MRC_SAMPLES}/chid_public",
        "clue_c311": f"{MRC_SAMPLES}/c3_public",
    }
    short = dict(max_length=64, tfds_cache_dir=cache)
    return [
        *cmrc2019.register(
            NAME, VOCAB, {"cmrc2019": package_path("data/cmrc2019_sample")},
            doc_stride=32, max_candidate_tokens=32, **short,
        ),
        *classification.register(
            NAME, VOCAB, {"clue_afqmc": package_path("data/clue_sample/afqmc_public")}, **short
        ),
        *reading.register(NAME, VOCAB, mrc, doc_stride=32, **short),
        *understanding.register(
            NAME, VOCAB, {row: lot[row] for row in mixture.UNDERSTANDING_ROWS}, **short
        ),
        *understanding.register(
            NAME, SPIECE, {understanding.AUTHORS: lot["lot_clozet"]}, **short
        ),
        *generation.register(NAME, SPIECE, {row: lot[row] for row in generation.TASKS}, **short),
        *mixture.register(NAME, SPIECE, lot, target_length=64, **short),
        *pretraining.register(
            NAME, SPIECE, {"train": CORPUS, "validation": CORPUS},
            max_length=64, target_length=64,
        ),
    ]  # fmt: skip


def _as_lists(dataset) -> list[dict]:
    return [
        {key: np.asarray(value).tolist() for key, value in example.items()}
        for example in dataset.as_numpy_iterator()
    ]


def test_every_family_is_registered(task_names):
    assert len(task_names) == 17
    assert all(name.endswith(NAME) or name.endswith(f"{NAME}_scoring") or "_t2t" in name
               for name in task_names)  # fmt: skip


def test_every_task_and_mixture_reads_with_a_seed(task_names):
    for name in [*task_names, *MIXTURES]:
        dataset = seqio.get_mixture_or_task(name).get_dataset(
            None, split="validation", shuffle=False, seed=42
        )
        assert next(iter(dataset)), name


def test_a_seed_or_shuffle_keeps_file_order(task_names):
    sources = 0
    for name in task_names:
        source = seqio.get_mixture_or_task(name).source
        if not isinstance(source, FileOrderSource):
            continue  # LongLM's corpus: a seqio.FileDataSource
        sources += 1
        plain = source.get_dataset(split="validation", shuffle=False)
        seeded = source.get_dataset(split="validation", shuffle=True, seed=42)
        assert _as_lists(seeded) == _as_lists(plain), name
    assert sources == 15


def test_an_evaluator_is_built_for_a_seq2seq_task(task_names):
    """`seqio.Evaluator` reads the split with its default seed (42) while it is built."""
    name = f"lot_outgen_{NAME}"
    evaluator = seqio.Evaluator(name, feature_converter=seqio.EncDecFeatureConverter(pack=False))
    assert list(evaluator.eval_tasks) == [seqio.get_mixture_or_task(name)]
    examples = list(evaluator.cached_task_datasets[name].as_numpy_iterator())
    assert len(examples) == 8  # lot_sample/outgen/val.jsonl


def test_a_run_task_over_a_function_reads_with_a_seed(task_names):
    """`pretraining.register_function_task`: the LongLM and LOT runs' fixed-length tasks."""
    example = {"inputs": [5, 6, 1], "targets": [7, 1]}

    def examples(split: str):
        return tf.data.Dataset.from_tensors(
            {k: tf.constant(v, tf.int32) for k, v in example.items()}
        )

    name = pretraining.register_function_task(
        f"run_{NAME}", examples, ["validation"], like=f"longlm_infilling_{NAME}"
    )
    dataset = seqio.get_mixture_or_task(name).get_dataset(
        None, split="validation", shuffle=False, seed=42
    )
    assert _as_lists(dataset) == [example]
