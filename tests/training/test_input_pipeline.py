"""Eval batches are padded and masked, never dropped; train order depends on seed only;
the batches do not depend on the number of hosts; with a prepared store as without."""

import numpy as np
import pytest
import seqio

from cmrcx.common.paths import package_path
from cmrcx.model_api.cloze import ClozeModel
from cmrcx.tasks import cmrc2019
from cmrcx.training import input_pipeline, partitioning, prepared_examples

SCORE_KEYS, TRAIN_KEYS = ClozeModel.score_keys, ClozeModel.train_keys


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    return cmrc2019.register(
        "pipeline_test",
        package_path("data/tiny_vocab.txt"),
        {"cmrc2019": package_path("data/cmrc2019_sample")},
        max_length=128,
        doc_stride=64,
        tfds_cache_dir=str(tmp_path_factory.mktemp("tfds")),
    )


@pytest.fixture(scope="module", params=["tf.data", "prepared"])
def store(request, tmp_path_factory):
    if request.param == "tf.data":
        return None
    return prepared_examples.PreparedStore(str(tmp_path_factory.mktemp("store")), "test")


def test_last_eval_batch_is_padded_and_masked(tasks, store):
    _, scoring = tasks
    total = input_pipeline.count_examples(scoring, "validation", store)
    batch_size = 7 if total % 7 else 11
    batches = list(
        input_pipeline.eval_batches(scoring, "validation", batch_size, SCORE_KEYS, None, store)
    )
    assert all(d["input_ids"].shape[0] == batch_size for d, _ in batches)  # one shape
    assert sum(int(d["example_mask"].sum()) for d, _ in batches) == total  # none dropped
    last_device, last_host = batches[-1]
    real = len(last_host["input_ids"])
    assert real < batch_size and not last_device["example_mask"][real:].any()


def test_train_order_is_a_function_of_seed_and_step(tasks, store):
    training, _ = tasks

    def first(seed, start, n=3):
        it = input_pipeline.train_batches(
            training, "train", 4, TRAIN_KEYS, seed, start, None, store
        )
        return [next(it)["input_ids"] for _ in range(n)]

    run = first(0, 0, 5)
    np.testing.assert_array_equal(first(0, 2), run[2:5])  # resume skips exactly
    assert not np.array_equal(first(1, 0)[0], run[0])  # another seed, another order


def test_unshuffled_training_reads_the_windows_in_file_order(tasks, store):
    """shuffle=False (RunConfig.shuffle_train): batch k holds windows k*b .. k*b+b-1 of the
    task as written, whatever the seed, and the next epoch starts again at window 0."""
    training, _ = tasks
    total = input_pipeline.count_examples(training, "train", store)
    in_order = next(
        input_pipeline.train_batches(training, "train", total, TRAIN_KEYS, 0, 0, None, store, False)
    )
    batch_size = 3
    steps = total // batch_size + 2  # into the second epoch
    for seed in (0, 5):
        it = input_pipeline.train_batches(
            training, "train", batch_size, TRAIN_KEYS, seed, 0, None, store, shuffle=False
        )
        rows = np.concatenate([next(it)["input_ids"] for _ in range(steps)])
        positions = np.arange(steps * batch_size) % total
        np.testing.assert_array_equal(rows, in_order["input_ids"][positions])
    shuffled = input_pipeline.train_batches(training, "train", total, TRAIN_KEYS, 0, 0, None, store)
    assert not np.array_equal(next(shuffled)["input_ids"], in_order["input_ids"])
    windows = seqio.get_mixture_or_task(training).get_dataset(
        sequence_length=None, split="train", shuffle=False
    )
    first = next(windows.as_numpy_iterator())  # the task's first window, as written
    np.testing.assert_array_equal(in_order["input_ids"][0], first["input_ids"])


def test_hosts_rows_make_the_one_host_batch(tasks, store):
    """Any host count sees the same global batches: host i feeds rows block i."""
    training, scoring = tasks

    def train(shard, n=2):
        it = input_pipeline.train_batches(training, "train", 4, TRAIN_KEYS, 0, 1, shard, store)
        return [next(it) for _ in range(n)]

    whole = train(None)
    parts = [train(seqio.ShardInfo(index=i, num_shards=4)) for i in range(4)]
    for step, batch in enumerate(whole):
        for key, value in batch.items():
            rows = np.concatenate([part[step][key] for part in parts])
            np.testing.assert_array_equal(rows, value, err_msg=key)

    def evaluate(shard):
        return list(input_pipeline.eval_batches(scoring, "validation", 6, SCORE_KEYS, shard, store))

    whole = evaluate(None)
    parts = [evaluate(seqio.ShardInfo(index=i, num_shards=2)) for i in range(2)]
    assert len(parts[0]) == len(parts[1]) == len(whole)  # every host runs every step
    for (device, host), (first, host_0), (second, _) in zip(whole, *parts, strict=True):
        assert first["input_ids"].shape[0] == 3
        np.testing.assert_array_equal(host_0["input_ids"], host["input_ids"])  # all real rows
        for key, value in device.items():
            np.testing.assert_array_equal(np.concatenate([first[key], second[key]]), value)


def test_prepared_store_holds_the_tasks_examples(tasks, tmp_path):
    """Evaluation reads the examples the task makes, in its order; an epoch of training
    sees every example once, and a new epoch is another order of them."""
    training, scoring = tasks
    store = prepared_examples.PreparedStore(str(tmp_path), "test")
    keys = [*SCORE_KEYS, "context_id"]
    plain = input_pipeline.eval_batches(scoring, "validation", 5, SCORE_KEYS)
    stored = input_pipeline.eval_batches(scoring, "validation", 5, SCORE_KEYS, None, store)
    for (_, expected), (_, got) in zip(plain, stored, strict=True):
        for key in keys:
            if key != "example_mask":
                np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    count = input_pipeline.count_examples(training, "train", store)
    first, second = (input_pipeline.epoch_permutation(0, e, count) for e in (0, 1))
    assert sorted(first) == list(range(count)) and not np.array_equal(first, second)
    positions = np.arange(count - 2, count + 2)  # an epoch's end, the next one's start
    indices = input_pipeline.training_indices(0, count, positions, {})
    np.testing.assert_array_equal(indices, [*first[-2:], *second[:2]])


def test_shard_of_rows():
    assert input_pipeline.shard_of_rows([(0, 8)], 8) == seqio.ShardInfo(0, 1)
    assert input_pipeline.shard_of_rows([(4, 6), (6, 8)], 8) == seqio.ShardInfo(1, 2)
    assert input_pipeline.shard_of_rows([(2, 3)], 8) == seqio.ShardInfo(2, 8)
    for rows in ([(0, 2), (4, 6)], [(0, 3)], [(1, 3)]):  # a gap; uneven; off the grid
        with pytest.raises(ValueError, match="not one block"):
            input_pipeline.shard_of_rows(rows, 8)
    with pytest.raises(ValueError, match="does not split over 2 hosts"):
        input_pipeline.host_rows(7, seqio.ShardInfo(0, 2))


def test_one_process_holds_every_row():
    mesh = partitioning.make_mesh((-1, 1))
    sharding = partitioning.batch_sharding(mesh)
    assert input_pipeline.host_shard(sharding, 8) == seqio.ShardInfo(index=0, num_shards=1)


def test_training_indices_inside_an_epoch_and_across_one():
    """Each position p's example is permutation(seed, p // n)[p % n], for a batch inside
    one epoch (the common case, one gather) and one that crosses into the next."""
    count, cache = 10, {}
    for start in (0, 3, 8, 17):  # 8 and 17: the batch's rows span two epochs
        positions = np.arange(start, start + 4, dtype=np.int64)
        expected = [input_pipeline.epoch_permutation(5, p // count, count)[p % count]
                    for p in positions]  # fmt: skip
        got = input_pipeline.training_indices(5, count, positions, cache)
        np.testing.assert_array_equal(got, expected)
    assert set(cache) == {2}  # drawing an epoch drops the earlier ones
