"""The six CMRC 2019 baselines of the paper's Table 3: geometry, and a CPU smoke run each.

The smoke run adds local_tiny.gin (random weights of the BERT family, tiny
geometry): 2 train steps, evaluation, then a fresh runner restores the
checkpoint and must evaluate to the same numbers.
"""

import pytest

from cmrcx.cli import launch
from cmrcx.common.paths import package_path
from cmrcx.training.runner import Runner

# experiment -> (vocab_size, hidden_size, num_layers, lower_case)
BASELINES = {
    "cmrc2019_bert.gin": (21128, 768, 12, True),
    "cmrc2019_bert_multilingual.gin": (119547, 768, 12, False),
    "cmrc2019_bert_wwm.gin": (21128, 768, 12, True),
    "cmrc2019_bert_wwm_ext.gin": (21128, 768, 12, True),
    "cmrc2019_roberta_wwm_ext.gin": (21128, 768, 12, True),
    "cmrc2019_roberta_wwm_ext_large.gin": (21128, 1024, 24, True),
}


@pytest.mark.parametrize("experiment", sorted(BASELINES))
def test_geometry_and_paper_setting(experiment):
    launch.parse_gin([experiment], [])
    run = launch.gin_run_config()
    vocab, hidden, layers, lower_case = BASELINES[experiment]
    assert (run.model.vocab_size, run.model.hidden_size, run.model.num_layers) == (
        vocab,
        hidden,
        layers,
    )
    assert run.lower_case == lower_case and run.require_pretrained
    assert (run.num_epochs, run.learning_rate, run.max_length, run.batch_size) == (
        3.0,
        3e-5,
        512,
        24,
    )


# One experiment in the default suite, all six in the slow one (each ~8 s: the default
# suite stays under 15 minutes on 2 cores).
@pytest.mark.parametrize(
    "experiment",
    [e if e == "cmrc2019_bert.gin" else pytest.param(e, marks=pytest.mark.slow)
     for e in sorted(BASELINES)],
)  # fmt: skip
def test_smoke_with_tiny_overlay(experiment, tmp_path, tfds_cache):
    launch.parse_gin(
        [experiment, "local_tiny.gin"],
        [
            f"MODEL_DIR = '{tmp_path}'",
            f"DATA_DIR = '{package_path('data/cmrc2019_sample')}'",
            "RunConfig.num_train_steps = 2",
            f"RunConfig.tfds_cache_dir = '{tfds_cache}'",
        ],
    )
    run = launch.run_config_from_gin()
    runner = Runner(run)
    state, losses = runner.train()
    assert [step for step, _ in losses] == [1, 2]  # step 1: orbax's first save, logged
    trained = runner.evaluate(state, 2)
    restored_runner = Runner(run, for_training=False)
    step, restored = restored_runner.restore()
    assert step == 2
    assert restored_runner.evaluate(restored, step) == pytest.approx(trained)


@pytest.fixture(scope="module")
def tfds_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tfds"))


def test_clue_mrc_script_overlay():
    """runs/clue_mrc_script.gin after a CMRC 2018 experiment: run_mrc.py's BERTAdam and its
    model's LayerNorm epsilon; Table 7's values (run_mrc_cmrc2018.sh's too) unchanged."""
    launch.parse_gin(["clue_cmrc2018_bert.gin", "runs/clue_mrc_script.gin"], [])
    run = launch.gin_run_config()
    assert (run.optimizer, run.model.layer_norm_eps) == ("clue_mrc_script", 1e-5)
    assert (run.learning_rate, run.batch_size, run.num_epochs) == (3e-5, 32, 2.0)
    assert (run.warmup_fraction, run.adam_epsilon, run.max_grad_norm) == (0.1, 1e-6, 1.0)


def test_released_script_overlay():
    """runs/released_script.gin after an experiment: the script's run.sh setting."""
    launch.parse_gin(["cmrc2019_bert_multilingual.gin", "runs/released_script.gin"], [])
    run = launch.gin_run_config()
    assert (run.optimizer, run.learning_rate, run.decoding) == ("released_script", 2e-5, "baseline")
    assert run.lower_case  # the script lower-cases every vocabulary, cased ones too
    assert (run.num_epochs, run.max_length, run.batch_size, run.doc_stride) == (3.0, 512, 24, 128)
