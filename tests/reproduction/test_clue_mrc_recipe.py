"""cmrcx against CLUE's PyTorch CMRC 2018 recipe (run_mrc.py and the modules it imports,
ported in `cmrcx.reproduction.clue_mrc`), step for step, from the same weights on the same
batches: the recipe's windows equal cmrcx's, the same rates and losses, then the same
dev predictions and the same official-scorer EM / F1. BERT with the script's optimizer
(runs/clue_mrc_script.gin) on the bundled official-format sample in the default suite;
the paper setting, the real trial file and XLNet in the slow one."""

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from cmrcx.benchmarks.clue.cmrc2018_evaluate import score_files  # noqa: E402
from cmrcx.cli import launch  # noqa: E402
from cmrcx.common.errors import ConfigError  # noqa: E402
from cmrcx.reproduction import (  # noqa: E402
    check,
    clue_mrc,
    clue_mrc_features,
    clue_mrc_optimization,
)
from cmrcx.training import released_optimizer  # noqa: E402

TRIAL = Path(__file__).parents[2] / ".." / "shared" / "data" / "cmrc2018" / "cmrc2018_trial.json"
STEPS = 3
TOLERANCE = 1e-5  # float32, tiny geometry
SCRIPT = "runs/clue_mrc_script.gin"


def _run(tmp_path: Path, gin_files: list[str], *overrides: str):
    launch.parse_gin(
        gin_files,
        [f"MODEL_DIR = '{tmp_path / 'unused'}'",
         f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'", *overrides],
    )  # fmt: skip
    return launch.run_config_from_gin()


def _trial_dir(tmp_path: Path) -> Path:
    """The real trial file as both train.json and dev.json (linked, not copied)."""
    if not TRIAL.is_file():
        pytest.skip(f"{TRIAL} is absent (the CMRC 2018 trial file of ../shared/data)")
    directory = tmp_path / "cmrc2018_public"
    directory.mkdir()
    for name in ("train.json", "dev.json"):
        (directory / name).symlink_to(TRIAL.resolve())
    return directory


def _vocab(tmp_path: Path, data_file: Path) -> tuple[Path, int]:
    """A BERT vocab.txt with every character of the file (the ids are real, no [UNK])."""
    text = data_file.read_text("utf-8")
    chars = sorted({c for c in text if not c.isspace() and not c.isascii()})
    ascii_words = sorted({c.lower() for c in text if c.isascii() and c.isalnum()})
    tokens = ["[PAD]", *(f"[unused{i}]" for i in range(1, 100)), "[UNK]", "[CLS]", "[SEP]",
              "[MASK]", *ascii_words, *chars]  # fmt: skip
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", "utf-8")
    return path, len(tokens)


def _assert_same_steps(comparison, rates) -> None:
    print(check.table(comparison, TOLERANCE))  # the figures, with pytest -s
    assert [row.learning_rate for row in comparison.rows] == pytest.approx(rates, rel=1e-6)
    assert not comparison.learning_rates_differ
    for row in comparison.rows:
        assert row.relative_difference <= TOLERANCE, row
    # Losses move (a step that changed nothing would agree trivially).
    assert comparison.rows[-1].loss != pytest.approx(comparison.rows[0].loss, rel=1e-4)
    assert comparison.verdict == "same"


def _assert_same_windows(comparison) -> None:
    """cmrcx's training windows, in order, are the recipe's json2features."""
    ours = comparison.cmrcx.runner.task.windows(comparison.cmrcx.runner.run.train_split)
    theirs = comparison.reference.train_windows
    assert len(ours["input_ids"]) == len(theirs["input_ids"])
    for key in clue_mrc.MATCHED:
        np.testing.assert_array_equal(np.asarray(ours[key], np.int64), theirs[key], err_msg=key)


def _assert_same_predictions(comparison, tmp_path: Path) -> None:
    """The dev split after the steps: the same answer for every question (cmrcx keeps the
    passage's spaces inside an answer, the script drops them: docs/reproduction.md), and
    the official scorer's EM and F1 equal on the recipe's file and on cmrcx's written as
    the script writes answers (cmrcx's own file too when no answer holds a space)."""
    ours = comparison.cmrcx
    ours.runner.evaluate(ours.final_state, len(ours.losses), out_dir=str(tmp_path / "out"))
    name = f"{ours.runner.train_task}_validation.json"
    our_file = tmp_path / "out" / "predictions" / name
    mine = json.loads(our_file.read_text("utf-8"))
    theirs = comparison.reference.predictions("validation")
    assert mine.keys() == theirs.keys()
    as_script = dict(mine)
    if comparison.reference.script:  # the script's windows and write_predictions (BERT)
        # Without the characters the script splits doc tokens on (a no-break space, say,
        # is none of them: both keep it).
        as_script = {qid: "".join(c for c in text if c not in clue_mrc_features.WHITESPACE)
                     for qid, text in mine.items()}  # fmt: skip
    assert as_script == theirs
    gold = comparison.reference.path("validation")
    their_file = clue_mrc.write_json(theirs, str(tmp_path / "recipe_predictions.json"))
    theirs_scored = score_files(gold, their_file)
    files = [clue_mrc.write_json(as_script, str(tmp_path / "cmrcx_as_script.json"))]
    files += [our_file] if mine == theirs else []
    for path in files:
        ours_scored = score_files(gold, path)
        assert (ours_scored["EM"], ours_scored["F1"]) == (theirs_scored["EM"], theirs_scored["F1"])
    print("official scores: recipe", theirs_scored, "cmrcx", score_files(gold, our_file))


def test_same_steps_and_predictions_as_run_mrc(tmp_path):
    """BERT, the script's BERTAdam: 32 steps (8 epochs of 16 windows / 4), warm-up 10%."""
    run = _run(tmp_path, ["clue_cmrc2018_tiny.gin", SCRIPT], "RunConfig.batch_size = 4")
    comparison = check.check_reproduction(run, STEPS, work_dir=str(tmp_path / "work"))
    _assert_same_windows(comparison)
    _assert_same_steps(comparison, [0.0, 5e-4 * (1 / 32) / 0.1, 5e-4 * (2 / 32) / 0.1])
    _assert_same_predictions(comparison, tmp_path)
    # A cmrcx window the recipe would build otherwise is refused, by step and row.
    batch = dict(comparison.cmrcx.batches[0])
    batch["start_position"] = batch["start_position"] + 1
    with pytest.raises(ConfigError, match="step 1, row 0: cmrcx's window is none"):
        clue_mrc.match_windows([batch], comparison.reference.train_windows)


@pytest.mark.slow
def test_paper_setting_same_steps(tmp_path):
    """The paper gin's optimizer (AdamW, global clipping, linear warm-up over the run's
    ceil(8 * 16 / 4) = 32 steps: int(3.2) = 3 warm-up steps)."""
    run = _run(tmp_path, ["clue_cmrc2018_tiny.gin"], "RunConfig.batch_size = 4")
    comparison = check.check_reproduction(run, STEPS, work_dir=str(tmp_path / "work"))
    _assert_same_steps(comparison, [0.0, 5e-4 / 3, 5e-4 * 2 / 3])
    _assert_same_predictions(comparison, tmp_path)


@pytest.mark.slow
def test_trial_file_same_steps_and_predictions(tmp_path):
    """The real CMRC 2018 trial file (1002 questions) as train and dev, windows of 128
    tokens 64 apart (many questions span several), 6 steps of 8."""
    data_dir = _trial_dir(tmp_path)
    vocab, size = _vocab(tmp_path, TRIAL)
    run = _run(
        tmp_path,
        ["clue_cmrc2018_tiny.gin", SCRIPT],
        f"DATA_DIR = '{data_dir}'",
        f"VOCAB_FILE = '{vocab}'",
        f"cmrcx.BertConfig.vocab_size = {size}",
        "RunConfig.batch_size = 8",
        "RunConfig.eval_batch_size = 64",
        "RunConfig.num_epochs = 2.0",
        "RunConfig.learning_rate = 1e-3",
    )
    comparison = check.check_reproduction(run, 6, work_dir=str(tmp_path / "work"))
    _assert_same_windows(comparison)
    windows = len(comparison.reference.train_windows["input_ids"])
    assert windows > 1002  # some questions have more than one window
    total = 2 * -(-windows // 8)
    rates = [1e-3 * (k / total) / 0.1 for k in range(6)]
    _assert_same_steps(comparison, rates)
    _assert_same_predictions(comparison, tmp_path)


@pytest.mark.slow
def test_xlnet_same_steps_and_predictions(tmp_path):
    """XLNet (clue_cmrc2018_xlnet_mid.gin at the tiny geometry, the bundled SentencePiece
    model) against transformers' XLNetForQuestionAnsweringSimple trained by the recipe:
    the whole run, 4 epochs of 16 windows / 4 = 16 steps at 3e-3 (after 3 steps at a
    small rate the tiny model's start logits are flat, best spans a few 1e-6 apart, and
    rounding picks among them)."""
    run = _run(
        tmp_path,
        ["clue_cmrc2018_xlnet_mid.gin", "local_tiny.gin", SCRIPT],
        "DATA_DIR = 'cmrcx:data/clue_mrc_sample/cmrc2018_public'",
        "RunConfig.batch_size = 4",
        "RunConfig.num_epochs = 4.0",
        "RunConfig.learning_rate = 3e-3",
    )
    comparison = check.check_reproduction(run, 16, work_dir=str(tmp_path / "work"))
    assert len(comparison.reference.train_windows["input_ids"]) == 16
    rates = [3e-3 * clue_mrc_optimization.warmup_linear(k / 16, 0.1) for k in range(16)]
    _assert_same_steps(comparison, rates)
    _assert_same_predictions(comparison, tmp_path)


def test_bert_adam_port_and_cmrcx_schedule():
    """[OPT] BERTAdam on one tensor against its formulas (per-tensor clip, no bias
    correction, decay inside the update), and cmrcx's clue_mrc_script rate against the
    recipe's warmup_linear."""
    import torch

    weights = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3e-3]))
    model = torch.nn.Module()
    model.weight = weights
    grad = np.array([3.0, -4.0, 0.0])  # norm 5: clipped to norm 1
    step = clue_mrc_optimization.bert_adam(model, {"weight_decay": 0.01, "max_grad_norm": 1.0})
    weights.grad = torch.tensor(grad, dtype=torch.float32)
    step(1e-3)
    g = grad / 5.0
    m, v = 0.1 * g, 0.001 * g * g
    want = np.array([1.0, -2.0, 3e-3])
    want = want - 1e-3 * (m / (np.sqrt(v) + 1e-6) + 0.01 * want)
    np.testing.assert_allclose(weights.detach().numpy(), want, rtol=1e-6)
    for k in (0, 3, 4, 17, 39):
        ours = float(released_optimizer.clue_mrc_learning_rate(k, 3e-5, 40, 0.1))
        theirs = 3e-5 * clue_mrc_optimization.warmup_linear(k / 40, 0.1)
        assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-12), k


def test_padding_row_gets_no_gradient():
    """cmrcx's CMRC 2018 optimizer never moves the [PAD] row by its gradient (the
    script's nn.Embedding(padding_idx=0)); other rows and tables move."""
    import jax.numpy as jnp
    import optax

    from cmrcx.training.trainer import with_padding_row_frozen

    params = {"word_embeddings": {"embedding": jnp.ones([3, 2])}, "other": jnp.ones([3, 2])}
    grads = {"word_embeddings": {"embedding": jnp.ones([3, 2])}, "other": jnp.ones([3, 2])}
    optimizer = with_padding_row_frozen(optax.sgd(1.0))
    updates, _ = optimizer.update(grads, optimizer.init(params), params)
    np.testing.assert_array_equal(updates["word_embeddings"]["embedding"][0], [0.0, 0.0])
    np.testing.assert_array_equal(updates["word_embeddings"]["embedding"][1:], -1.0)
    np.testing.assert_array_equal(updates["other"], -1.0)


def test_xlnet_attention_biases_are_not_decayed():
    """XLNet's r_w_bias, r_r_bias, r_s_bias are biases to the recipe's no_decay (and to
    the TF scripts'); its projections and segment embeddings are decayed."""
    import jax

    from cmrcx.training.trainer import is_decayed

    tree = {"layer_0": {"rel_attn": {n: 0 for n in ("r_w_bias", "r_r_bias", "r_s_bias", "q",
                                                    "seg_embed")}}}  # fmt: skip
    decayed = jax.tree_util.tree_map_with_path(lambda path, _: is_decayed(path), tree)
    assert decayed["layer_0"]["rel_attn"] == {
        "r_w_bias": False, "r_r_bias": False, "r_s_bias": False, "q": True, "seg_embed": True
    }  # fmt: skip


@pytest.mark.parametrize(
    "gin_file",
    [
        # albert_zh layout (CLUE's ALBERT-tiny), as the BertModel trained as ALBERT.
        "clue_cmrc2018_albert_tiny.gin",
        # Google's layout: transformers' AlbertForQuestionAnswering.
        pytest.param("clue_cmrc2018_albert_xxlarge.gin", marks=pytest.mark.slow),
    ],
)
def test_albert_same_steps(tmp_path, gin_file):
    """ALBERT through the BERT path (the recipe's json2features windows) at the tiny
    geometry, the paper setting's optimizer: 16 windows / 4 x 2 epochs = 8 steps at 1e-3,
    int(0.8) = 0 warm-up steps."""
    run = _run(
        tmp_path,
        [gin_file, "local_tiny.gin"],
        "DATA_DIR = 'cmrcx:data/clue_mrc_sample/cmrc2018_public'",
        "RunConfig.batch_size = 4",
        "RunConfig.num_epochs = 2.0",
    )
    comparison = check.check_reproduction(run, STEPS, work_dir=str(tmp_path / "work"))
    assert comparison.reference.script  # ALBERT frames as BERT: the script's features
    _assert_same_windows(comparison)
    _assert_same_steps(comparison, [1e-3 * (8 - k) / 8 for k in range(STEPS)])
