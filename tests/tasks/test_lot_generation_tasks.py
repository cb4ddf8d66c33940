"""SeqIO tasks of PlotCom and OutGen (`cmrcx.tasks.lot.generation`) on the bundled LOT
sample: the TF texts equal the reference `cmrcx.benchmarks.lot.generation`, ids are
T5Tokenizer's cut to length - 1 plus EOS, and every example carries its place, line and
official JSON object; the postprocessor and metric function the run uses."""

from __future__ import annotations

import importlib
import json
import sys
import types

import pytest
import seqio

from cmrcx.benchmarks.lot import formats, generation
from cmrcx.common.paths import package_path
from cmrcx.tasks.lot import generation as lot_tasks
from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary

SPIECE = package_path("data/longlm_tiny/spiece.model")
DATA = {task: package_path(f"data/lot_sample/{task[4:]}") for task in lot_tasks.TASKS}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tfds"))


@pytest.fixture(scope="module")
def vocab():
    return T5SentencePieceVocabulary(SPIECE)


def examples(name: str, split: str) -> list[dict]:
    dataset = seqio.get_mixture_or_task(name).get_dataset(
        sequence_length=None, split=split, shuffle=False
    )
    return list(dataset.as_numpy_iterator())


@pytest.mark.parametrize("split", ["validation", "test"])
def test_examples_are_the_reference_texts_tokenized(cache, vocab, split):
    names = lot_tasks.register("tiny", SPIECE, DATA, tfds_cache_dir=cache)
    assert names == ["lot_plotcom_tiny", "lot_outgen_tiny"]
    sentinel = vocab.sentinel_id(1)
    for name, (task, data_dir) in zip(names, DATA.items(), strict=True):
        records = formats.read_split(task[4:], data_dir, split)
        got = examples(name, split)
        assert len(got) == len(records)
        for index, (example, record) in enumerate(zip(got, records, strict=True)):
            source, target = generation.source_and_target(record)
            assert example["inputs"].tolist() == [*vocab.encode(source), vocab.eos_id]
            assert example["targets"].tolist() == [*vocab.encode(target), vocab.eos_id]
            assert example["targets"][0] == sentinel  # <extra_id_1> starts every target
            assert sentinel in example["inputs"].tolist()
            if task == "lot_outgen":
                assert example["inputs"][-2] == sentinel  # ... and ends every OutGen input
            assert (example["example_index"], example["line"]) == (index, record.line)
            assert json.loads(example["raw"]) == record.raw


def test_long_texts_lose_their_end_as_the_authors_truncation(cache, vocab):
    (name,) = lot_tasks.register(
        "short", SPIECE, {"lot_outgen": DATA["lot_outgen"]},
        max_length=16, target_length=8, tfds_cache_dir=cache,
    )  # fmt: skip
    record = formats.read_split("outgen", DATA["lot_outgen"], "validation")[0]
    source, target = generation.source_and_target(record)
    first = examples(name, "validation")[0]
    assert first["inputs"].tolist() == [*vocab.encode(source)[:15], vocab.eos_id]
    assert first["targets"].tolist() == [*vocab.encode(target)[:7], vocab.eos_id]
    assert vocab.sentinel_id(1) not in first["inputs"].tolist()  # cut with the end


def test_a_long_plotcom_story_keeps_its_blank_in_view(cache, vocab):
    """PlotCom (cmrcx's format): a source past the input length is cut around its blank,
    in the SeqIO task (TF) as in `generation.cut_source` (the mixture, cmrcx.generate)."""
    (name,) = lot_tasks.register(
        "short_plotcom", SPIECE, {"lot_plotcom": DATA["lot_plotcom"]},
        max_length=12, target_length=8, tfds_cache_dir=cache,
    )  # fmt: skip
    blank = vocab.sentinel_id(1)
    records = formats.read_split("plotcom", DATA["lot_plotcom"], "validation")
    late = 0
    for record, example in zip(records, examples(name, "validation"), strict=True):
        source_ids = vocab.encode(generation.source_and_target(record)[0])
        cut = generation.cut_source(source_ids, 11, blank)
        assert example["inputs"].tolist() == [*cut, vocab.eos_id]
        assert blank in cut and len(cut) == min(11, len(source_ids))
        late += source_ids.index(blank) >= 11  # a blank the first 11 ids would lose
    assert late > 0


@pytest.mark.parametrize("length", [1, 2, 3, 4, 7])
def test_the_tf_window_is_the_reference_cut(length):
    import tensorflow as tf

    for ids in ([1, 2, 3], [9, 1, 2, 3], [1, 2, 3, 4, 5, 9], [1, 2, 3, 9, 4, 5, 6, 7], [1, 9, 9]):
        for blank in (None, 9, 8):
            got = lot_tasks.window_around(tf.constant(ids, tf.int32), blank, length).numpy()
            assert got.tolist() == generation.cut_source(ids, length, blank), (ids, blank)


def test_registration_errors():
    with pytest.raises(KeyError, match="lot_plotcom, lot_outgen"):
        lot_tasks.register("tiny", SPIECE, {"lot_clozet": "x"})
    with pytest.raises(ValueError, match="no data dirs"):
        lot_tasks.register("tiny", SPIECE, {})


def test_decoded_output_and_postprocessor(vocab):
    ids = [*vocab.encode("<extra_id_1>从前,有座山"), vocab.eos_id]
    ended = lot_tasks.decoded_output(vocab, ids, vocab.eos_id)
    assert ended.endswith(" </s>") and "<extra_id_1>" in ended
    assert lot_tasks.generation_postprocessor(ended) == "从前，有座山"
    cut = lot_tasks.decoded_output(vocab, ids[:-1], vocab.eos_id)  # no EOS: max length
    assert "</s>" not in cut
    assert lot_tasks.generation_postprocessor(cut) == "从前，有座山"
    assert lot_tasks.generation_postprocessor(cut, drop_last_char=True) == "从前，有座"
    gold = lot_tasks.generation_postprocessor(
        None, example={"raw": '{"story": "甲", "outline": ["乙"]}'.encode()}, is_target=True
    )
    assert gold == {"story": "甲", "outline": ["乙"]}


GENERATION_METRICS = "cmrcx.benchmarks.lot.generation_metrics"
OVERALL = "cmrcx.benchmarks.lot.overall"


def lot_scorer_modules() -> dict[str, types.ModuleType]:
    """The LOT scorers' modules `official_metrics` imports: the real ones when present
    (they come with the scoring work), else stand-ins with the same functions. Either
    way `generation_metrics` calls are recorded in that module's `.calls`."""
    try:
        real = importlib.import_module(GENERATION_METRICS).generation_metrics
    except ImportError:

        def real(task, golds, predictions):
            assert len(golds) == len(predictions)
            return {"bleu-1": 0.25, "distinct-1": float(len(predictions))}

    try:
        overall = importlib.import_module(OVERALL)
    except ImportError:
        overall = types.ModuleType(OVERALL)
        overall.organisers_weighted_score = lambda metrics: metrics["bleu-1"] / 2

    recorder = types.ModuleType(GENERATION_METRICS)
    recorder.calls = []

    def generation_metrics(task, golds, predictions):
        recorder.calls.append((task, golds, predictions))
        return real(task, golds, predictions)

    recorder.generation_metrics = generation_metrics
    return {GENERATION_METRICS: recorder, OVERALL: overall}


def install(patch: pytest.MonkeyPatch, modules: dict[str, types.ModuleType]) -> None:
    import cmrcx.benchmarks.lot

    for name, module in modules.items():
        patch.setitem(sys.modules, name, module)
        patch.setattr(cmrcx.benchmarks.lot, name.rsplit(".", 1)[1], module, raising=False)


def test_metric_fn_is_what_cmrcx_score_reports(monkeypatch, cache):
    modules = lot_scorer_modules()
    install(monkeypatch, modules)
    names = lot_tasks.register("tiny", SPIECE, DATA, tfds_cache_dir=cache)
    plotcom, outgen = (seqio.get_mixture_or_task(name).predict_metric_fns for name in names)
    recorder, overall = modules[GENERATION_METRICS], modules[OVERALL]
    gold, predicted = {"plot": "他回家了。"}, ["他回家了。"]
    (metric_fn,) = plotcom
    assert metric_fn([gold], predicted) == recorder.generation_metrics("plotcom", [gold], predicted)
    assert recorder.calls[0] == ("plotcom", [gold], predicted)
    gold = {"story": "他回家了。", "outline": ["回家"], "title": "甲"}
    (metric_fn,) = outgen
    scores = recorder.generation_metrics("outgen", [gold], ["他回家。"])
    expected = {**scores, "organisers-weighted-score": overall.organisers_weighted_score(scores)}
    assert metric_fn([gold], ["他回家。"]) == pytest.approx(expected)
