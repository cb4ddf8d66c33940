"""cmrcx against CMRC 2019's two reference recipes (`cmrcx.reproduction.cmrc2019`), step
for step, from the same weights on the same batches of the official trial file: the
authors' own run_cmrc2019_baseline.py (its features, model, BertAdam and loop lines, run
from ../shared/reference/) for cmrc2019_bert.gin + runs/released_script.gin, and the
paper setting (transformers' BertModel, AdamW, linear warm-up) for cmrc2019_bert.gin.
A tiny random-init BERT whose vocabulary holds every character of the file."""

import json
from pathlib import Path

import numpy as np
import pytest

from tests.support import REPO_ROOT, write_cmrc2019_vocabulary

pytest.importorskip("torch")
pytest.importorskip("transformers")

from cmrcx.cli import launch  # noqa: E402
from cmrcx.common.errors import ConfigError  # noqa: E402
from cmrcx.reproduction import check, cmrc2019  # noqa: E402

SHARED = REPO_ROOT.parent / "shared"
REFERENCE = SHARED / "reference" / "cmrc2019_baseline"
TRIAL = SHARED / "data" / "cmrc2019" / "cmrc2019_trial.json"
TOLERANCE = 1e-5  # float32, tiny geometry
needs_trial = pytest.mark.skipif(not TRIAL.is_file(), reason=f"no trial file {TRIAL}")
needs_script = pytest.mark.skipif(
    not (REFERENCE / cmrc2019.SCRIPT_NAME).is_file(), reason=f"no authors' script in {REFERENCE}"
)


def _data_dir(root: Path, passages: int) -> Path:
    """The trial file's first `passages` passages as the trial and dev splits."""
    document = json.loads(TRIAL.read_text(encoding="utf-8"))
    text = json.dumps({**document, "data": document["data"][:passages]}, ensure_ascii=False)
    directory = root / "data"
    directory.mkdir()
    for name in ("cmrc2019_trial.json", "cmrc2019_dev.json"):
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def _run(tmp_path: Path, gin_files: list[str], bindings: tuple = (), passages: int = 4):
    """The gins' run over a tiny random-init BERT (lr 1e-3, batch 4, length 128)."""
    vocab = tmp_path / "vocab.txt"
    size = write_cmrc2019_vocabulary(TRIAL, vocab)
    launch.parse_gin(
        [*gin_files, "local_tiny.gin"],
        [
            f"MODEL_DIR = '{tmp_path / 'unused'}'",
            f"DATA_DIR = '{_data_dir(tmp_path, passages)}'",
            f"VOCAB_FILE = '{vocab}'",
            f"cmrcx.BertConfig.vocab_size = {size}",
            f"RunConfig.tfds_cache_dir = '{tmp_path / 'tfds'}'",
            "RunConfig.train_split = 'trial'",
            "RunConfig.batch_size = 4",
            "RunConfig.max_length = 128",
            "RunConfig.doc_stride = 64",
            "RunConfig.learning_rate = 1e-3",
            *bindings,
        ],
    )
    return launch.run_config_from_gin()


def _assert_same(comparison, steps: int) -> None:
    assert [row.step for row in comparison.rows] == list(range(1, steps + 1))
    assert not comparison.learning_rates_differ
    for row in comparison.rows:
        assert row.relative_difference <= TOLERANCE, row
    assert comparison.verdict == "same"
    # The steps update (a step that changed nothing would agree trivially).
    assert comparison.rows[-1].loss != pytest.approx(comparison.rows[0].loss, rel=1e-3)


@needs_trial
@needs_script
def test_same_steps_as_the_released_script(tmp_path):
    gins = ["cmrc2019_bert.gin", "runs/released_script.gin"]
    run = _run(tmp_path, gins)
    work = tmp_path / "work"
    comparison = check.check_reproduction(run, 4, work_dir=str(work), reference_dir=str(REFERENCE))
    _assert_same(comparison, 4)
    # The script's schedule: t_total in blanks (4 passages: 37 blanks / batch 4 = 9),
    # warmup_linear applied twice; step 1 at rate 0.
    reference = comparison.reference
    assert int(reference.features["examples"]) == 37
    t_total = 9
    want = [1e-3 * (0.0 if k == 0 else 1 - k / t_total) ** 2 for k in range(4)]
    assert [row.learning_rate for row in comparison.rows] == pytest.approx(want, rel=1e-6)
    # A cmrcx window that the script would build otherwise is refused, by step and row.
    batch = dict(comparison.cmrcx.batches[0])
    batch["blank_in_window"] = batch["blank_in_window"].copy()
    batch["blank_in_window"][1, np.flatnonzero(batch["blank_in_window"][1])[0]] = 0
    with pytest.raises(ConfigError, match="step 1, row 1: cmrcx's window is none"):
        cmrc2019.match_rows([batch], reference.features)


@needs_trial
def test_same_steps_as_the_paper_setting(tmp_path):
    run = _run(tmp_path, ["cmrc2019_bert.gin"], ["RunConfig.num_train_steps = 20"])
    comparison = check.check_reproduction(run, 4, work_dir=str(tmp_path / "work"))
    _assert_same(comparison, 4)
    rates = [row.learning_rate for row in comparison.rows]
    assert rates == pytest.approx([0.0, 5e-4, 1e-3, 1e-3 * 17 / 18], rel=1e-6)  # 2 warm-up
    # After the steps the encoders agree, but for the pooler, which no loss reaches:
    # transformers' loop skips a tensor without a gradient, cmrcx's AdamW (one update of
    # every leaf) decays its kernel by lr x 0.01 a step (kept: docs/reproduction.md).
    import jax

    from cmrcx.weights import bert as bert_weights

    ours = dict(
        bert_weights.hf_tensors(
            jax.device_get(comparison.cmrcx.final_state.params)["bert"], run.model
        )
    )
    start = dict(bert_weights.hf_tensors(comparison.cmrcx.initial_params["bert"], run.model))
    theirs = {n: p.detach().numpy() for n, p in comparison.reference.model.bert.named_parameters()}
    moved = max(float(np.abs(theirs[n] - start[n]).max()) for n in start)
    for name, tensor in ours.items():
        if name != "pooler.dense.weight":
            np.testing.assert_allclose(tensor, theirs[name], atol=1e-5, err_msg=name)
    assert moved > 1e-3
    np.testing.assert_array_equal(theirs["pooler.dense.weight"], start["pooler.dense.weight"])
    decay = np.prod([1 - rate * 0.01 for rate in rates])
    np.testing.assert_allclose(
        ours["pooler.dense.weight"], start["pooler.dense.weight"] * decay, rtol=1e-6
    )


@needs_trial
def test_optax_adamw_is_not_the_papers_optimizer(tmp_path):
    """With optax's AdamW (epsilon after the bias correction) the comparison says
    "different": why the paper gin trains with "transformers2_adamw"."""
    bindings = ["RunConfig.num_train_steps = 20", "RunConfig.optimizer = 'adamw'"]
    run = _run(tmp_path, ["cmrc2019_bert.gin"], bindings)
    comparison = check.check_reproduction(run, 3, work_dir=str(tmp_path / "work"))
    assert comparison.verdict == "different"
    assert comparison.rows[0].relative_difference <= TOLERANCE  # same start
    assert comparison.max_relative_difference > 1e-4


BIGGER = (  # 4 layers x 256, length 256, stride 128, batch 8, the gins' own rates
    "cmrcx.BertConfig.hidden_size = 256",
    "cmrcx.BertConfig.num_layers = 4",
    "cmrcx.BertConfig.num_heads = 4",
    "cmrcx.BertConfig.intermediate_size = 1024",
    "RunConfig.max_length = 256",
    "RunConfig.doc_stride = 128",
    "RunConfig.batch_size = 8",
)


@pytest.mark.slow  # minutes on 2 CPU cores
@needs_trial
@needs_script
@pytest.mark.parametrize(
    "gins, rate",
    [(["cmrc2019_bert.gin", "runs/released_script.gin"], 2e-5), (["cmrc2019_bert.gin"], 3e-5)],
)
def test_same_steps_at_a_bigger_size(tmp_path, gins, rate):
    """12 steps over the first 24 passages, at the learning rate each gin sets."""
    run = _run(tmp_path, gins, (*BIGGER, f"RunConfig.learning_rate = {rate}"), passages=24)
    comparison = check.check_reproduction(
        run, 12, work_dir=str(tmp_path / "work"), reference_dir=str(REFERENCE)
    )
    assert not comparison.learning_rates_differ
    assert comparison.max_relative_difference <= TOLERANCE, check.table(comparison)
    assert comparison.verdict == "same"


def test_the_released_recipe_needs_the_authors_code(tmp_path, monkeypatch):
    monkeypatch.delenv(cmrc2019.REFERENCE_ENV, raising=False)
    with pytest.raises(ConfigError, match="--reference_dir or \\$CMRCX_CMRC2019_REFERENCE"):
        cmrc2019.reference_dir_of(None)
    with pytest.raises(ConfigError, match=f"{tmp_path}: no run_cmrc2019_baseline.py"):
        cmrc2019.reference_dir_of(str(tmp_path))
    monkeypatch.setenv(cmrc2019.REFERENCE_ENV, str(tmp_path))
    with pytest.raises(ConfigError, match="no run_cmrc2019_baseline.py"):
        cmrc2019.reference_dir_of(None)
