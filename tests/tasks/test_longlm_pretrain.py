"""LongLM pretraining: the TF preprocessors of `cmrcx.tasks.lot.pretraining` against the reference
semantics of `cmrcx.benchmarks.lot.pretraining`, the registered tasks on the bundled corpus
(cmrcx/data/longlm_corpus, stories written for this project), and the Table 9 metrics.

Statistics run on 3,000 synthetic 200-token texts with fixed seeds, so they are
deterministic; tolerances are 5 standard errors of the sample, so a correct sampler
would fail them with probability < 1e-6 for a fresh seed.
"""

from __future__ import annotations

import doctest
import math
import re
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import seqio
import tensorflow as tf
from seqio import test_utils as seqio_test_utils

import cmrcx.data
from cmrcx.benchmarks.lot import pretraining
from cmrcx.tasks.lot import pretraining as longlm

DATA = Path(cmrcx.data.__file__).parent
CORPUS = DATA / "longlm_corpus"
VOCAB_SIZE = 1000  # synthetic ids: text tokens in [3, 900), sentinel k = 999 - k
SENTINELS = tuple(VOCAB_SIZE - 1 - k for k in range(1, 100))  # from <extra_id_1>, as LongLM
NUM_TEXTS, TEXT_LENGTH = 3000, 200
NUM_NOISE = 30  # round(0.15 * 200)


def _synthetic_texts(lengths, seed: int = 7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(3, 900, size=n).astype(np.int32) for n in lengths]


def _run(preprocessor, texts, seed: int) -> list[dict]:
    dataset = tf.data.Dataset.from_generator(
        lambda: ({"text_id": str(i), "tokens": t} for i, t in enumerate(texts)),
        output_signature={
            "text_id": tf.TensorSpec([], tf.string),
            "tokens": tf.TensorSpec([None], tf.int32),
        },
    )
    with seqio.utils.map_seed_manager(seed):
        dataset = preprocessor(dataset, sentinel_ids=SENTINELS)
    return list(dataset.as_numpy_iterator())


@pytest.fixture(scope="module")
def texts() -> list[np.ndarray]:
    return _synthetic_texts([TEXT_LENGTH] * NUM_TEXTS)


@pytest.fixture(scope="module")
def infilled(texts) -> list[tuple[list[int], list[int]]]:
    """(reconstructed text, span lengths) of every infilling example."""
    examples = _run(longlm.text_infilling, texts, seed=2019)
    return [
        pretraining.reconstruct_infilling(e["inputs"], e["targets"], SENTINELS) for e in examples
    ]


def test_reference_doctests() -> None:
    assert doctest.testmod(pretraining).failed == 0


# --- Text infilling -----------------------------------------------------------------------


def test_tf_construction_equals_reference() -> None:
    """`infill_from_spans` (sort-based TF) == `infilling_pair` (loop) on sampled spans."""
    rng = np.random.default_rng(0)
    for length in [2, 3, 5, 8, 20, 57]:
        for _ in range(8):
            tokens = rng.integers(3, 900, size=length)
            num_noise = pretraining.num_noise_tokens(length)
            lengths = pretraining.poisson_span_lengths(rng, num_noise)
            starts = pretraining.place_spans(rng, length, lengths)
            inputs, targets = longlm.infill_from_spans(
                tf.constant(tokens, tf.int32),
                tf.constant(starts, tf.int32),
                tf.constant(lengths, tf.int32),
                tf.constant(SENTINELS, tf.int32),
            )
            expected = pretraining.infilling_pair(tokens, starts, lengths, SENTINELS)
            assert (inputs.numpy().tolist(), targets.numpy().tolist()) == expected


def test_infilling_reconstructs_the_text_exactly(texts, infilled) -> None:
    for tokens, (text, _) in zip(texts, infilled, strict=True):
        assert text == tokens.tolist()


def test_masked_fraction_is_15_percent(infilled) -> None:
    masked = [sum(spans) for _, spans in infilled]
    assert set(masked) == {NUM_NOISE}  # exactly round(0.15 * 200) in every text
    assert sum(masked) / (NUM_TEXTS * TEXT_LENGTH) == pytest.approx(0.15)


def test_span_lengths_are_poisson_3(infilled) -> None:
    """The first three spans of a 30-token budget are uncut Poisson(3) draws (a cut needs
    three draws summing to >= 30: probability 1e-8): mean 3, Poisson frequencies."""
    lengths = np.array([spans[:3] for _, spans in infilled]).ravel()
    n = lengths.size
    assert abs(lengths.mean() - 3.0) < 5 * math.sqrt(3.0 / n)
    for k in range(8):
        p = math.exp(-3.0) * 3.0**k / math.factorial(k)
        assert abs(np.mean(lengths == k) - p) < 5 * math.sqrt(p * (1 - p) / n), k
    assert np.mean(lengths == 0) > 0.03  # zero-length spans exist, as in BART


def test_span_count_and_realised_mean_length(infilled) -> None:
    """Spans per text follow the renewal expectation of drawing until 30 is reached; the
    last span is cut, so the realised mean length is 30 / 10.5, not 3."""
    counts = np.array([len(spans) for _, spans in infilled])
    expected = pretraining.expected_span_count(NUM_NOISE)
    assert expected == pytest.approx(10.5)
    assert abs(counts.mean() - expected) < 5 * counts.std() / math.sqrt(counts.size)
    assert counts.max() <= NUM_NOISE + 1 <= len(SENTINELS)
    all_spans = np.concatenate([spans for _, spans in infilled])
    assert all_spans.mean() == pytest.approx(NUM_NOISE / counts.mean())


def test_span_placement(texts) -> None:
    """Spans reach both ends of a text, never touch, and keep sentinel order."""
    examples = _run(longlm.text_infilling, texts[:500], seed=5)
    starts_with_span = sum(e["inputs"][0] == SENTINELS[0] for e in examples)
    ends_with_span = sum(e["inputs"][-1] in SENTINELS for e in examples)
    assert starts_with_span > 0 and ends_with_span > 0
    for e in examples:
        at = [i for i, t in enumerate(e["inputs"]) if t in SENTINELS]
        assert np.all(np.diff(at) >= 2)  # a kept token between two sentinels
        assert [e["inputs"][i] for i in at] == list(SENTINELS[: len(at)])


def test_seeded_and_deterministic(texts) -> None:
    first = _run(longlm.text_infilling, texts[:50], seed=11)
    again = _run(longlm.text_infilling, texts[:50], seed=11)
    other = _run(longlm.text_infilling, texts[:50], seed=12)
    same = [np.array_equal(a["inputs"], b["inputs"]) for a, b in zip(first, again, strict=True)]
    differ = [np.array_equal(a["inputs"], b["inputs"]) for a, b in zip(first, other, strict=True)]
    assert all(same) and not all(differ)


def test_short_texts() -> None:
    texts = _synthetic_texts([2, 3, 4] * 30)
    for tokens, e in zip(texts, _run(longlm.text_infilling, texts, seed=3), strict=True):
        text, spans = pretraining.reconstruct_infilling(e["inputs"], e["targets"], SENTINELS)
        assert text == tokens.tolist() and sum(spans) == 1


# --- Conditional continuation ---------------------------------------------------------------


def test_continuation_front_plus_back_is_the_text(texts) -> None:
    examples = _run(longlm.conditional_continuation, texts, seed=2019)
    splits = []
    for tokens, e in zip(texts, examples, strict=True):
        assert e["inputs"][-1] == SENTINELS[0] and e["targets"][0] == SENTINELS[0]
        front, back = e["inputs"][:-1].tolist(), e["targets"][1:].tolist()
        assert front + back == tokens.tolist()
        splits.append(len(front))
    splits = np.array(splits)
    assert splits.min() == 1 and splits.max() == TEXT_LENGTH - 1  # uniform on [1, 199]
    assert abs(splits.mean() - TEXT_LENGTH / 2) < 5 * splits.std() / math.sqrt(splits.size)
    quarters = np.histogram(splits, bins=[1, 51, 101, 151, 200])[0] / splits.size
    assert np.all(np.abs(quarters - 0.25) < 5 * math.sqrt(0.25 * 0.75 / splits.size))
    two = _run(longlm.conditional_continuation, _synthetic_texts([2] * 5), seed=1)
    assert all(len(e["inputs"]) == 2 and len(e["targets"]) == 2 for e in two)


# --- Files to texts ---------------------------------------------------------------------


def test_split_into_texts() -> None:
    dataset = tf.data.Dataset.from_tensors(
        {"path": "corpus/x.txt", "tokens": tf.constant([1, 2, 3, 4, 5, 6, 7], tf.int32)}
    )
    seqio_test_utils.assert_dataset(
        longlm.split_into_texts(dataset, text_length=3),
        [{"text_id": "x.txt:0", "tokens": [1, 2, 3]}, {"text_id": "x.txt:1", "tokens": [4, 5, 6]}],
    )


@pytest.fixture(scope="module")
def spiece(tmp_path_factory) -> str:
    """A unigram model of the bundled stories with T5's special ids; ~0.2 s."""
    prefix = tmp_path_factory.mktemp("spm") / "spiece"
    files = sorted(CORPUS.glob("*.txt")) + sorted((DATA / "longlm_sample").glob("*.txt"))
    spm.SentencePieceTrainer.train(
        input=",".join(map(str, files)),
        model_prefix=str(prefix),
        model_type="unigram",
        vocab_size=800,
        character_coverage=1.0,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        minloglevel=2,
    )
    return f"{prefix}.model"


@pytest.fixture(scope="module")
def registered(spiece) -> list[str]:
    return longlm.register(
        "pretraintest",
        spiece,
        {"train": str(CORPUS)},
        max_length=64,
        target_length=64,
    )


def _expected_texts(vocabulary, directory: Path, text_length: int) -> dict[str, list[int]]:
    """The files' texts computed in Python: lines encoded one by one, cut every text_length."""
    texts = {}
    for path in sorted(directory.glob("*.txt")):
        lines = path.read_text(encoding="utf-8").split("\n")
        ids = [i for line in lines for i in vocabulary.encode(line.removeprefix("\ufeff"))]
        for k, start in enumerate(range(0, len(ids), text_length)):
            if len(ids[start : start + text_length]) >= longlm.MIN_TEXT_TOKENS:
                texts[f"{path.name}:{k}"] = ids[start : start + text_length]
    return texts


def _texts_from_examples(names, vocabulary, length: int) -> list[dict[str, list[int]]]:
    """Per task, text_id -> the text its examples give back (inputs + targets, EOS last)."""
    sentinels = longlm.longlm_sentinel_ids(vocabulary, longlm.FIRST_SENTINEL)
    results = []
    for name in names:
        task = seqio.get_mixture_or_task(name)
        assert task.splits == ("train",)
        got = {}
        lengths = {"inputs": length, "targets": length}
        for e in task.get_dataset(lengths, "train", shuffle=False, seed=1).as_numpy_iterator():
            assert e["inputs"][-1] == e["targets"][-1] == vocabulary.eos_id
            inputs, targets = e["inputs"][:-1], e["targets"][:-1]
            if "infilling" in name:
                text, _ = pretraining.reconstruct_infilling(inputs, targets, sentinels)
            else:
                text = inputs[:-1].tolist() + targets[1:].tolist()
            got[e["text_id"].decode()] = text
        results.append(got)
    return results


def test_tasks_on_the_bundled_corpus(registered) -> None:
    """Every text of every file, once per task; inputs + targets give it back exactly."""
    assert registered == ["longlm_infilling_pretraintest", "longlm_continuation_pretraintest"]
    vocabulary = seqio.get_mixture_or_task(registered[0]).output_features["targets"].vocabulary
    sentinels = longlm.longlm_sentinel_ids(vocabulary, longlm.FIRST_SENTINEL)
    assert sentinels[0] == vocabulary.vocab_size - 2  # <extra_id_1>
    expected = _expected_texts(vocabulary, CORPUS, text_length=62)  # min(64 - 2, 64 - 1)
    assert len(expected) >= 20
    assert _texts_from_examples(registered, vocabulary, 64) == [expected, expected]


def test_mixture(registered) -> None:
    mixture = seqio.get_mixture_or_task(longlm.MIXTURE_NAME)
    assert sorted(t.name for t in mixture.tasks) == sorted(registered)
    dataset = mixture.get_dataset({"inputs": 64, "targets": 64}, "train", shuffle=True, seed=4)
    examples = list(dataset.take(80).as_numpy_iterator())
    vocabulary = mixture.tasks[0].output_features["targets"].vocabulary
    sentinels = set(longlm.longlm_sentinel_ids(vocabulary, longlm.FIRST_SENTINEL))
    spans = [sum(t in sentinels for t in e["targets"]) for e in examples]
    assert any(n >= 2 for n in spans) and any(n == 1 for n in spans)  # both objectives
    assert all(len(e["inputs"]) <= 64 and len(e["targets"]) <= 64 for e in examples)


def test_tasks_with_longlm_layout(tmp_path) -> None:
    """LongLM's spiece.model layout (Chinese XLNet's: unk 0, </s> 2, <pad> 5): EOS is 2,
    and the many unknown characters (id 0: a model of the sample stories only) are text
    tokens that the examples keep like any other."""
    from tests.vocab.test_sentencepiece_vocab import train_xlnet_layout_model

    spiece = train_xlnet_layout_model(tmp_path / "spiece")
    names = longlm.register(
        "pretrainxlnet",
        spiece,
        {"train": str(CORPUS)},
        max_length=64,
        target_length=64,
    )
    vocabulary = seqio.get_mixture_or_task(names[0]).output_features["targets"].vocabulary
    assert (vocabulary.pad_id, vocabulary.eos_id, vocabulary.unk_id) == (5, 2, 0)
    expected = _expected_texts(vocabulary, CORPUS, text_length=62)
    assert sum(text.count(0) for text in expected.values()) > 50
    assert _texts_from_examples(names, vocabulary, 64) == [expected, expected]


def test_validation_split(spiece, tmp_path) -> None:
    (tmp_path / "held_out.txt").write_text("从前有一座山。山里有一座庙。\n" * 4, encoding="utf-8")
    names = longlm.register(
        "pretrainsplit",
        spiece,
        {"train": str(CORPUS), "validation": str(tmp_path)},
        max_length=32,
        target_length=32,
    )
    task = seqio.get_mixture_or_task(names[1])
    assert task.splits == ("train", "validation")
    held_out = list(task.get_dataset(None, "validation", shuffle=False).as_numpy_iterator())
    assert held_out and {e["text_id"].decode().split(":")[0] for e in held_out} == {"held_out.txt"}


def test_bad_corpus_files(spiece, tmp_path) -> None:
    (tmp_path / "good.txt").write_text("从前有一座山。\n", encoding="utf-8")
    (tmp_path / "broken.txt").write_bytes("第一行\n".encode() + b"\xe4\xbd\n")
    names = longlm.register("pretrainbad", spiece, {"train": str(tmp_path)})
    dataset = seqio.get_mixture_or_task(names[0]).get_dataset(None, "train", shuffle=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"broken\.txt(.|\n)*line(.|\n)*2"):
        list(dataset.as_numpy_iterator())
    empty = tmp_path / "empty"
    empty.mkdir()
    names = longlm.register("pretrainempty", spiece, {"train": str(empty)})
    with pytest.raises(ValueError, match=re.escape(str(empty))):
        seqio.get_mixture_or_task(names[0]).get_dataset(None, "train", shuffle=False)


def test_lengths_are_checked(spiece) -> None:
    with pytest.raises(ValueError, match="needs up to 66 inputs"):
        longlm.register(
            "pretrainlen",
            spiece,
            {"train": str(CORPUS)},
            text_length=64,
            max_length=64,
            target_length=64,
        )
    with pytest.raises(ValueError, match="sentinels"):  # 2046 tokens: 308 spans > 99
        longlm.register(
            "pretrainlen",
            spiece,
            {"train": str(CORPUS)},
            max_length=2048,
            target_length=2048,
        )


def test_metadata_and_metric_fns(registered) -> None:
    assert longlm.TASKS["longlm_infilling"].decoding == longlm.Decoding("greedy")
    assert longlm.TASKS["longlm_continuation"].decoding == longlm.Decoding("sample", 40, 0.7)
    assert longlm.TASKS["longlm_infilling"].table9["longlm_large"] == (6.50, 77.08, 72.65)
    task = seqio.get_mixture_or_task(registered[0])
    assert task.score_metric_fns == [longlm.perplexity]
    assert task.predict_metric_fns == [longlm.bleu]
    example = {"targets": np.array([798, 35, 36, 1], np.int32)}
    decoded = "<extra_id_1> 山里有一座庙, 庙里住着一个老和尚。"
    target = longlm.text_postprocessor(decoded, example, is_target=True)
    assert target == {"text": "山里有一座庙，庙里住着一个老和尚。", "num_tokens": 4}
    # Every id of the (unpadded) targets counts, 0 too: <unk> in LongLM's layout.
    with_unknown = {"targets": np.array([798, 0, 0, 1], np.int32)}
    assert longlm.text_postprocessor(decoded, with_unknown, is_target=True)["num_tokens"] == 4
    prediction = longlm.text_postprocessor(decoded.replace(" ", ""), example)
    assert longlm.bleu([target], [prediction]) == {"bleu-3": 100.0, "bleu-4": 100.0}
    assert longlm.perplexity([target, target], [-4.0, -8.0]) == {
        "perplexity": pytest.approx(math.exp(1.5))
    }


# --- BLEU ---------------------------------------------------------------------------------


def test_sentence_bleu_by_hand() -> None:
    bleu = pretraining.sentence_bleu
    assert bleu([list("abcde")], list("abcde"), 4) == pytest.approx(1.0)
    # p1..p3 = 3/4, 2/3, 1/2; no 4-gram: NLTK 3.5 takes sys.float_info.min for it.
    assert bleu([list("abce")], list("abcd"), 3) == pytest.approx(0.25 ** (1 / 3))
    tiny = (0.25 * 2.2250738585072014e-308) ** 0.25
    assert bleu([list("abce")], list("abcd"), 4) == pytest.approx(tiny, rel=1e-9)
    # Brevity: 3 words against 6, every n-gram right: exp(1 - 6/3).
    assert bleu([list("abcdef")], list("abc"), 3) == pytest.approx(math.exp(-1))
    # Clipping: "a a a a" against "a b": p1 = 1/4; p2 = 0.
    assert bleu([list("ab")], list("aaaa"), 1) == pytest.approx(0.25)
    # Several references: clipped by the max count, length from the closest (then shorter).
    assert bleu([list("xx"), list("aab")], list("aa"), 1) == pytest.approx(math.exp(1 - 2 / 2))
    assert bleu([list("xyz")], list("abc"), 3) == 0
    assert bleu([list("abc")], [], 3) == 0


def test_lot_bleu() -> None:
    story = "从前有一座山，山里有一座庙，庙里住着一个老和尚。"
    assert pretraining.lot_bleu([story], [story]) == {"bleu-3": 100.0, "bleu-4": 100.0}
    spaced = " ".join(story)
    assert pretraining.lot_bleu([story], [spaced]) == {"bleu-3": 100.0, "bleu-4": 100.0}
    other = "后来，山下修了一条路。"
    scores = pretraining.lot_bleu([story, story], [story, other])
    words = [pretraining.jieba_words(story), pretraining.jieba_words(other)]
    expected = 50.0 * (1 + pretraining.sentence_bleu([words[0]], words[1], 3))
    assert scores["bleu-3"] == pytest.approx(expected)
    with pytest.raises(ValueError, match="2 references but 1 predictions"):
        pretraining.lot_bleu([story, story], [story])


def test_bleu_equals_nltk() -> None:
    nltk_bleu = pytest.importorskip("nltk.translate.bleu_score")
    rng = np.random.default_rng(3)
    for _ in range(200):
        reference = list(rng.choice(list("abcdef"), size=rng.integers(1, 12)))
        hypothesis = list(rng.choice(list("abcdeg"), size=rng.integers(0, 12)))
        for n in (3, 4):
            ours = pretraining.sentence_bleu([reference], hypothesis, n)
            theirs = nltk_bleu.sentence_bleu([reference], hypothesis, weights=(1 / n,) * n)
            assert ours == theirs


def test_generation_text_and_perplexity() -> None:
    assert pretraining.generation_text("<pad> <extra_id_3> 他说: 好! </s> 剩下") == "他说：好！"
    assert pretraining.generation_text("等等...\u3000然后") == "等等…然后"
    assert pretraining.perplexity([-2.0, -4.0], [2, 4]) == pytest.approx(math.exp(1.0))
    with pytest.raises(ValueError, match="no target tokens"):
        pretraining.perplexity([], [])


# --- Model gin files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, parameters",
    [  # LOT Table 8 (#P); mT5 paper (Xue et al. 2021) Table 1 for mT5-Base
        ("longlm_small", 60e6),
        ("longlm_base", 223e6),
        ("longlm_large", 1e9),
        ("mt5_base", 580e6),
    ],
)
def test_model_gin_files(name: str, parameters: float) -> None:
    """The geometry gives the parameter count the paper states, to 1%."""
    import gin
    import jax

    from cmrcx.cli import launch
    from cmrcx.models.t5 import T5ForConditionalGeneration

    try:
        launch.parse_gin([f"models/{name}.gin"], [])
    except ValueError as error:
        if "cmrcx.T5Config" not in str(error):
            raise
        pytest.skip("cmrcx.T5Config is not gin-configurable yet")
    config = gin.get_configurable("cmrcx.T5Config")()
    ids = jax.numpy.ones([1, 4], jax.numpy.int32)
    model = T5ForConditionalGeneration(config)
    shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), ids, ids, ids, ids))
    count = sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(shapes))
    assert count == pytest.approx(parameters, rel=0.01)
