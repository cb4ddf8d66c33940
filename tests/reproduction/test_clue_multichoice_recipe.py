"""cmrcx against CLUE's PyTorch multiple-choice recipes (run_c3.py, CHID_preprocess.py +
run_multichoice_mrc.py, ported in `cmrcx.reproduction.clue_multichoice`), step for step,
from the same random-init tiny BERT on the same batches: per-step rates and losses, then
the same dev predictions and accuracy.

Files: ChID, the bundled official-format sample (cmrcx/data/clue_mrc_sample/chid_public,
10 candidates a line); C3, that sample's questions with 4 choices, written back in the
official format (the questions with fewer are where cmrcx and the recipe differ on purpose:
the recipe scores its filler choice, cmrcx masks it; `test_c3_fillers_are_the_difference`).
The vocabulary (the classifier test's) holds every character of the files, so the
recipe's own encoding must equal cmrcx's rows token for token.
"""

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from cmrcx.benchmarks.clue import chid  # noqa: E402
from cmrcx.cli import launch  # noqa: E402
from cmrcx.common.errors import ConfigError  # noqa: E402
from cmrcx.common.paths import package_path  # noqa: E402
from cmrcx.reproduction import check, clue_classifier, clue_multichoice  # noqa: E402
from tests.reproduction.test_clue_classifier_recipe import _vocab  # noqa: E402

SAMPLE = Path(package_path("data/clue_mrc_sample"))
STEPS = 3
TOLERANCE = 1e-5  # float32, tiny geometry
# A rate at which the tiny model's near-uniform choice scores move within 3 steps (at 1e-3
# every loss stays within 1e-4 of log(choices), which a wrong head could match).
LEARNING_RATE = 3e-2


def _c3_dir(root: Path, keep=lambda question: len(question["choice"]) == 4) -> Path:
    """c3_public/ with the sample's questions that `keep` selects (documents without any
    dropped)."""
    directory = root / "c3_public"
    directory.mkdir(parents=True)
    for name in ("d-train.json", "m-train.json", "d-dev.json", "m-dev.json"):
        documents = json.loads((SAMPLE / "c3_public" / name).read_text("utf-8"))
        kept = [[d[0], [q for q in d[1] if keep(q)], *d[2:]] for d in documents]
        kept = [d for d in kept if d[1]]
        (directory / name).write_text(json.dumps(kept, ensure_ascii=False), "utf-8")
    return directory


def _comparison(tmp_path: Path, gin_file, data_dir: Path, max_length: int):
    """The gin's run (gin_file: a name, or (name, binding)) on the tiny overlay (random
    weights), 20 steps, 2 of warm-up, compared."""
    gin_file, *bindings = (gin_file,) if isinstance(gin_file, str) else gin_file
    # XLNet keeps local_tiny.gin's bundled SentencePiece model (its ids: [UNK] for most
    # characters, the same rows on both sides: they are cmrcx's).
    vocab = [] if "xlnet" in gin_file else [f"VOCAB_FILE = '{_vocab(tmp_path, data_dir)}'"]
    launch.parse_gin(
        [gin_file, "local_tiny.gin"],
        [
            *bindings,
            f"MODEL_DIR = '{tmp_path / 'unused'}'",
            f"DATA_DIR = '{data_dir}'",
            *vocab,
            f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
            "RunConfig.batch_size = 4",
            f"RunConfig.max_length = {max_length}",
            f"RunConfig.learning_rate = {LEARNING_RATE}",
            "RunConfig.num_train_steps = 20",  # the recipe's t_total
            "RunConfig.warmup_fraction = 0.1",
        ],
    )
    run = launch.run_config_from_gin()
    comparison = check.check_reproduction(run, STEPS, work_dir=str(tmp_path / "work"))
    print(check.table(comparison, TOLERANCE))  # the figures, with pytest -s
    return comparison


def _assert_same_steps(comparison) -> None:
    """Rates (warm-up 2 of 20 steps) and losses equal per step; the losses move."""
    assert not comparison.learning_rates_differ
    assert [row.learning_rate / LEARNING_RATE for row in comparison.rows] == pytest.approx(
        [0.0, 0.5, 1.0], rel=1e-6
    )
    worst = max(row.relative_difference for row in comparison.rows)
    assert worst <= TOLERANCE, comparison.rows
    # The losses move, far beyond the tolerance (ChID's 10 near-equal scores by 6e-4).
    assert abs(comparison.rows[2].loss - comparison.rows[0].loss) > 1e-4, comparison.rows
    assert comparison.verdict == "same"


def _cmrcx_dev(comparison, tmp_path: Path):
    """(cmrcx's dev metrics after the steps, its prediction file's JSON lines or object)."""
    ours = comparison.cmrcx
    results = ours.runner.evaluate(ours.final_state, STEPS, out_dir=str(tmp_path / "out"))
    path = tmp_path / "out" / "predictions" / f"{ours.runner.train_task}_validation.json"
    text = path.read_text("utf-8")
    try:
        return results, json.loads(text)
    except json.JSONDecodeError:
        return results, [json.loads(line) for line in text.splitlines() if line.strip()]


def _refuses_a_changed_row(comparison) -> None:
    batch = dict(comparison.cmrcx.batches[0])
    batch["input_ids"] = batch["input_ids"].copy()
    batch["input_ids"][1, 0, 1] += 1
    with pytest.raises(ConfigError, match="step 1, row 1: cmrcx's input is no record"):
        clue_classifier.match_rows([batch], comparison.reference.train_features)


# The tiny demo gins, and a paper gin (BERT-base's) in tiny geometry in the slow suite.
C3_GINS = [
    "clue_c311_tiny.gin",
    pytest.param("clue_c311_bert.gin", marks=pytest.mark.slow),
    # run_mrc_c3.sh's batch as accumulated micro-batches (its 4 x 6; here 2 x 2).
    pytest.param(
        ("clue_c311_bert.gin", "RunConfig.grad_accum_steps = 2"),
        marks=pytest.mark.slow,
        id="clue_c311_bert.gin-grad_accum_steps_2",
    ),
    # ALBERT: albert_zh layout (the BertModel trained as ALBERT), Google's layout
    # (transformers' AlbertForMultipleChoice).
    "clue_c311_albert_tiny.gin",
    pytest.param("clue_c311_albert_xxlarge.gin", marks=pytest.mark.slow),
]
CHID_GINS = [
    "clue_chid11_tiny.gin",
    pytest.param("clue_chid11_bert.gin", marks=pytest.mark.slow),
    "clue_chid11_albert_xxlarge.gin",
    pytest.param("clue_chid11_albert_tiny.gin", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("gin_file", C3_GINS)
def test_c3_same_steps_and_predictions_as_the_clue_recipe(tmp_path, gin_file):
    comparison = _comparison(tmp_path, gin_file, _c3_dir(tmp_path), 64)
    _assert_same_steps(comparison)
    results, submitted = _cmrcx_dev(comparison, tmp_path)
    labels, accuracy = comparison.reference.predictions("validation")
    assert [line["label"] for line in submitted] == labels
    assert results["accuracy"] == pytest.approx(100 * accuracy)  # cmrcx reports percent
    _refuses_a_changed_row(comparison)


@pytest.mark.parametrize("gin_file", CHID_GINS)
def test_chid_same_steps_and_predictions_as_the_clue_recipe(tmp_path, gin_file):
    comparison = _comparison(tmp_path, gin_file, SAMPLE / "chid_public", 48)
    _assert_same_steps(comparison)
    results, submitted = _cmrcx_dev(comparison, tmp_path)
    decoded, accuracy = comparison.reference.predictions("validation")
    assert submitted == decoded
    assert results["accuracy"] == pytest.approx(100 * accuracy)
    _refuses_a_changed_row(comparison)


@pytest.mark.parametrize("gin_file, task", [("clue_c311_xlnet_mid.gin", "c3"),
                                            ("clue_chid11_xlnet_mid.gin", "chid")])  # fmt: skip
def test_xlnet_same_steps_as_the_clue_recipe(tmp_path, gin_file, task):
    """XLNet: transformers' XLNetForMultipleChoice under the recipe's optimizer and
    schedule, fed cmrcx's rows (XLNet's framing: <cls> last, left padding)."""
    data_dir = _c3_dir(tmp_path) if task == "c3" else SAMPLE / "chid_public"
    comparison = _comparison(tmp_path, gin_file, data_dir, 64 if task == "c3" else 128)
    assert not comparison.learning_rates_differ
    assert [row.learning_rate / LEARNING_RATE for row in comparison.rows] == pytest.approx(
        [0.0, 0.5, 1.0], rel=1e-6
    )
    worst = max(row.relative_difference for row in comparison.rows)
    assert worst <= TOLERANCE and comparison.verdict == "same", comparison.rows
    # The tiny XLNet's scores stay near uniform (its 500 pieces leave many characters
    # <unk>): the losses move by ~2e-5 in 3 steps, still 100 times the differences.
    moved = abs(comparison.rows[2].loss - comparison.rows[0].loss)
    assert moved > 100 * worst * comparison.rows[0].loss and moved > 1e-6, comparison.rows
    # and the last loss is off the uniform scores' log(choices) by far more than the
    # sides differ (a head reading other states would give other, equally small, scores).
    choices = comparison.reference.train_features.input_ids.shape[1]
    off_uniform = abs(comparison.rows[2].loss - np.log(choices))
    assert off_uniform > 10 * abs(comparison.rows[2].loss - comparison.rows[2].reference_loss)
    features = comparison.reference.train_features
    assert len(set(features.input_ids[:, :, -1].ravel().tolist())) == 1  # <cls>, every row
    with pytest.raises(ConfigError, match="XLNet's rows are cmrcx's"):
        comparison.reference.predictions("validation")


def test_chid_doc_tokens_follow_the_character_loop():
    """[PRE]'s passage split: CJK and listed punctuation alone, a blank whole, Latin and
    digit runs whole, quotes rewritten, "——" to "--", each "-" punctuation alone)."""
    tokens = clue_multichoice.doc_tokens("他在NBA打球，“#idiom000001#”——5G。")
    assert tokens == ["他", "在", "NBA", "打", "球", "，", '"', "#idiom000001#", '"', "-", "-",
                      "5G", "。"]  # fmt: skip
    # cmrcx's regular expression (cmrcx.benchmarks.clue.chid) splits every sample passage so.
    for name in ("train.json", "dev.json"):
        for line in (SAMPLE / "chid_public" / name).read_text("utf-8").splitlines():
            for passage in json.loads(line)["content"]:
                assert clue_multichoice.doc_tokens(passage) == chid.passage_tokens(passage)
    # add_tokens_for_around's negative slice start near a short passage's end.
    assert clue_multichoice.add_tokens_for_around(list(range(8)), 6, 8) == ([], [7])


def test_chid_global_greedy_decoding():
    """[PRE] logits_matrix_to_array: the best (blank, candidate) cell first, each taken once."""
    features = clue_multichoice.Features.__new__(clue_multichoice.Features)
    features.line, features.tag = np.array([0, 0, 1]), ["#a#", "#b#", "#c#"]
    logits = np.array([[5.0, 1.0, 0.0], [4.0, 3.0, 0.0], [0.0, 0.0, 1.0]])
    # Blank b's best candidate 0 is taken by a (5 > 4): b gets candidate 1.
    assert clue_multichoice.chid_decode(features, logits) == {"#a#": 0, "#b#": 1, "#c#": 2}


@pytest.mark.slow
def test_c3_fillers_are_the_difference(tmp_path):
    """On the whole sample (questions with 2 or 3 choices too) the recipe encodes every
    row as cmrcx does but scores the filler choices: step 1's loss is the recipe's when
    the filler logits are kept, cmrcx's when they are masked (kept different on purpose,
    docs/reproduction.md)."""
    import torch

    comparison = _comparison(tmp_path, "clue_c311_tiny.gin", _c3_dir(tmp_path, bool), 64)
    assert comparison.verdict == "different"
    ours, recipe = comparison.cmrcx, comparison.reference
    model = clue_multichoice.reference_model(
        recipe.run.model, ours.initial_params, ours.runner.model.encoder_name,
        str(tmp_path / "fresh"),
    )  # fmt: skip
    rows = clue_classifier.match_rows(ours.batches[:1], recipe.train_features)[0]
    batch = ours.batches[0]
    assert not batch["choice_mask"][batch["example_mask"] > 0].all()  # a filler in step 1
    features = recipe.train_features
    with torch.no_grad():
        logits = model(
            input_ids=torch.tensor(features.input_ids[rows]),
            attention_mask=torch.tensor(features.attention_mask[rows]),
            token_type_ids=torch.tensor(features.token_type_ids[rows]),
        ).logits.numpy()
    labels = features.labels[rows]

    def mean_cross_entropy(scores):
        top = scores.max(axis=1, keepdims=True)
        log_z = np.log(np.exp(scores - top).sum(axis=1)) + top[:, 0]
        return float(np.mean(log_z - scores[np.arange(len(labels)), labels]))

    real = batch["choice_mask"][batch["example_mask"] > 0] > 0
    first = comparison.rows[0]
    assert mean_cross_entropy(logits) == pytest.approx(first.reference_loss, rel=1e-5)
    assert mean_cross_entropy(np.where(real, logits, -1e9)) == pytest.approx(first.loss, rel=1e-5)
