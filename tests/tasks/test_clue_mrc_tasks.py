"""The SeqIO tasks of CLUE's reading comprehension on the bundled samples: registered names,
example shapes, metric functions, and the multiple-choice mixture with its rates."""

import numpy as np
import pytest
import seqio

from cmrcx.benchmarks.clue import c3, chid
from cmrcx.common.paths import package_path
from cmrcx.tasks.clue import reading as clue_mrc

SAMPLES = package_path("data/clue_mrc_sample")
VOCAB = package_path("data/tiny_vocab.txt")


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("tfds"))
    data_dirs = {
        "clue_cmrc2018": f"{SAMPLES}/cmrc2018_public",
        "clue_chid11": f"{SAMPLES}/chid_public",
        "clue_c311": f"{SAMPLES}/c3_public",
    }
    return clue_mrc.register(
        "mrctest",
        VOCAB,
        data_dirs,
        max_length=64,
        tfds_cache_dir=cache,
        doc_stride=32,
    )


def first_examples(task_name, split, n):
    dataset = seqio.get_mixture_or_task(task_name).get_dataset(
        sequence_length=None, split=split, shuffle=False, use_cached=False
    )
    return list(dataset.take(n).as_numpy_iterator())


def test_task_names(registered):
    assert registered == ["clue_cmrc2018_mrctest", "clue_chid11_mrctest", "clue_c311_mrctest"]


def test_span_windows_of_the_training_split(registered):
    (window,) = first_examples("clue_cmrc2018_mrctest", "train", 1)
    assert window["input_ids"].shape == (64,) and window["input_ids"][0] == 101  # [CLS]
    assert 0 < window["start_position"] <= window["end_position"] < 64
    assert window["token_type_ids"][window["start_position"]] == 1  # in the passage


def test_multiple_choice_examples(registered):
    blank, question = (
        first_examples("clue_chid11_mrctest", "validation", 1)[0],
        first_examples("clue_c311_mrctest", "validation", 1)[0],
    )
    assert blank["input_ids"].shape == (chid.MAX_NUM_CHOICES, 64)
    assert question["input_ids"].shape == (c3.NUM_CHOICES, 64)
    first_blank = chid.read_split(f"{SAMPLES}/chid_public", "validation").blanks[0]
    assert blank["label"] == first_blank.label and blank["choice_mask"].sum() == 10
    first_question = c3.read_split(f"{SAMPLES}/c3_public", "validation")[0]
    assert question["label"] == first_question.label
    assert question["choice_mask"].sum() == len(first_question.choices)
    # The test split carries no labels.
    (unlabelled,) = first_examples("clue_c311_mrctest", "test", 1)
    assert unlabelled["label"] == -1


def test_metric_functions():
    scores = clue_mrc.exact_match_and_f1([["白石桥"], ["1998年", "1998"]], ["白石桥", "1999年"])
    assert scores["EM"] == 50.0 and 50.0 < scores["F1"] < 100.0
    assert scores["AVERAGE"] == pytest.approx((scores["EM"] + scores["F1"]) / 2, abs=1e-3)
    assert clue_mrc.accuracy([1, 2, 3, 0], [1, 2, 0, 0]) == {"accuracy": 75.0}


def test_multiple_choice_mixture_rates(registered):
    mixture = seqio.get_mixture_or_task(clue_mrc.MIXTURE_NAME)
    names = sorted(task.name for task in mixture.tasks)
    assert names == ["clue_c311_mrctest", "clue_chid11_mrctest"]
    rates = {task.name: mixture.get_rate(task) for task in mixture.tasks}
    chid_train = chid.read_split(f"{SAMPLES}/chid_public", "train")
    assert rates["clue_chid11_mrctest"] == len(chid_train.blanks)
    assert rates["clue_c311_mrctest"] == len(c3.read_split(f"{SAMPLES}/c3_public", "train"))
    assert np.isfinite(list(rates.values())).all()
