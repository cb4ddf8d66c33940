"""Flags, gin file lookup and RunConfig checks of the entry-point layer."""

import dataclasses
import os

import gin
import pytest

from cmrcx.cli import launch
from cmrcx.common import errors, paths
from cmrcx.models import registry


def test_gin_dot_flags_become_bindings():
    args = launch.parse_flags(
        ["--gin_file=a.gin", "--gin.MODEL_DIR='x'", "--gin_bindings=RunConfig.seed = 3"], "t"
    )
    assert args.gin_file == ["a.gin"]
    assert args.gin_bindings == ["RunConfig.seed = 3", "MODEL_DIR = 'x'"]


def test_bare_gin_names_resolve_to_bundled_configs_with_includes():
    launch.parse_gin(["cmrc2019_tiny.gin"], ["MODEL_DIR = '/tmp/m'"])
    run = launch.run_config_from_gin()
    assert run.vocabulary_name == "tiny" and run.model.hidden_size == 128
    assert run.data_dir.endswith(os.path.join("data", "cmrc2019_sample"))
    assert os.path.isfile(run.vocab_file)


def test_includes_ignore_runs_and_models_folders_in_the_working_directory(tmp_path, monkeypatch):
    """A run directory like runs/x (from MODEL_DIR='runs/x') must not shadow the includes."""
    (tmp_path / "runs" / "tiny").mkdir(parents=True)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "bert_tiny.gin").write_text("RunConfig.seed = 99\n")
    monkeypatch.chdir(tmp_path)
    launch.parse_gin(["cmrc2019_tiny.gin"], ["MODEL_DIR = 'runs/tiny'"])
    run = launch.run_config_from_gin()
    assert run.model.hidden_size == 128 and run.seed == 0
    assert run.model_dir == str(tmp_path / "runs" / "tiny")


def test_paper_config_values():
    """cmrc2019_bert.gin: the paper's hyper-parameters (3 epochs, 3e-5, 512, 24)."""
    launch.parse_gin(["cmrc2019_bert.gin"], [])
    run = launch.gin_run_config()
    assert (run.num_epochs, run.learning_rate, run.max_length, run.batch_size) == (
        3.0,
        3e-5,
        512,
        24,
    )
    assert (run.warmup_fraction, run.weight_decay, run.doc_stride) == (0.1, 0.01, 128)
    assert run.model.vocab_size == 21128 and run.model.num_layers == 12
    assert run.require_pretrained


def test_local_tiny_overlay_turns_the_paper_config_into_a_smoke_run():
    launch.parse_gin(["cmrc2019_bert.gin", "local_tiny.gin"], [])
    run = launch.gin_run_config()
    assert run.model.hidden_size == 128 and run.max_length == 128
    assert not run.require_pretrained and run.pretrained is None
    assert run.vocab_file == "cmrcx:tiny"  # checked(): the family's bundled tiny vocabulary
    assert registry.family_of(run.model).tiny_vocab_file.endswith("tiny_vocab.txt")


def test_local_tiny_shrinks_whichever_family_the_experiment_chose():
    launch.parse_gin(["longlm_pretrain_small.gin", "local_tiny.gin"], [])
    run = launch.gin_run_config()
    assert type(run.model).__name__ == "T5Config"
    assert (run.model.d_model, run.model.vocab_size) == (32, 512)
    assert registry.family_of(run.model).tiny_vocab_file.endswith("longlm_tiny/spiece.model")


def test_unknown_gin_file_lists_the_bundled_ones():
    with pytest.raises(errors.ConfigError, match="cmrc2019_tiny.gin"):
        launch.parse_gin(["nope.gin"], [])


def test_an_unquoted_string_binding_says_how_to_quote_it():
    with pytest.raises(errors.ConfigError) as raised:
        launch.parse_gin(["cmrc2019_tiny.gin"], ["MODEL_DIR = /tmp/x"])
    said = str(raised.value)
    assert said.startswith("gin cannot parse the binding 'MODEL_DIR = /tmp/x'")
    assert "--gin.MODEL_DIR=\"'runs/x'\"" in said and "\n" not in said
    with pytest.raises(errors.ConfigError, match=r"\(Failed to parse token 'runs'\): values"):
        launch.parse_gin(["cmrc2019_tiny.gin"], ["MODEL_DIR = runs/x"])


def test_a_python_module_a_gin_import_loads_keeps_its_own_syntax_error(tmp_path, monkeypatch):
    (tmp_path / "broken_module_for_gin.py").write_text("x = (\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SyntaxError):
        launch.parse_gin(["cmrc2019_tiny.gin"], ["import broken_module_for_gin"])


def test_a_gin_file_syntax_error_names_the_file_and_line(tmp_path):
    bad = tmp_path / "mine.gin"
    bad.write_text("include 'cmrc2019_tiny.gin'\nRunConfig.num_train_steps = abc def\n")
    with pytest.raises(errors.ConfigError, match=rf"cannot parse {bad}:2: 'RunConfig.num_tr"):
        launch.parse_gin([str(bad)], [])


@pytest.mark.parametrize(
    "binding, said",
    [
        ("RunConfig.batchsize = 8", r"named 'batchsize' .*did you mean batch_size, eval_batch"),
        ("BertConfig.num_layer = 2", r"named 'num_layer' .*did you mean num_layers\?"),
        ("RunConfigg.seed = 2", r"No configurable matching 'RunConfigg'.*did you mean RunConfig"),
        ("RunConfig.model = @cmrcx.BertConfg()", r"reference '@cmrcx.BertConfg\(\)'.*mean Be"),
        ("RunConfig.mesh_shape = (-1,", r"^gin cannot parse a binding or gin file \(EOF in mul"),
    ],
)
def test_a_misspelt_name_gets_the_closest_ones(binding, said):
    with pytest.raises(errors.ConfigError, match=said):
        launch.parse_gin(["cmrc2019_tiny.gin"], [binding])


@pytest.mark.parametrize(
    "binding, said",
    [
        ("RunConfig.batch_size = '8'", r"RunConfig.batch_size is '8' \(str\); it takes an int"),
        ("BertConfig.num_layers = 2.5", r"BertConfig.num_layers is 2.5 \(float\); it takes an"),
        ("RunConfig.optimizer = 3", r"RunConfig.optimizer is 3 \(int\); .*needs quotes"),
        ("RunConfig.check_memory = 1", r"check_memory is 1 \(int\); it takes True or False"),
        ("RunConfig.num_train_steps = '4'", r"it takes an integer or None"),
    ],
)
def test_a_value_of_the_wrong_type_is_named_before_the_run(binding, said):
    launch.parse_gin(["cmrc2019_tiny.gin"], ["MODEL_DIR = '/tmp/m'", binding])
    with pytest.raises(errors.ConfigError, match=said):
        launch.run_config_from_gin()


def test_every_bundled_config_has_values_of_its_declared_types():
    import cmrcx.generate  # noqa: F401  (GenerationConfig, which runs/lot_generation.gin binds)
    from cmrcx.common.field_types import check_field_types

    checked = 0
    for name in launch.bundled_gin_files():
        gin.clear_config()
        launch.parse_gin([name], [])
        run = launch.gin_run_config()
        required = [f.name for f in dataclasses.fields(run) if getattr(run, f.name) is gin.REQUIRED]
        run = dataclasses.replace(run, **dict.fromkeys(required))  # MODEL_DIR, DATA_DIR
        check_field_types(run, "RunConfig")
        check_field_types(run.model, type(run.model).__name__)
        checked += 1
    assert checked == len(launch.bundled_gin_files()) > 200


def test_resolve_path():
    assert os.path.isfile(paths.resolve_path("cmrcx:data/tiny_vocab.txt"))
    assert paths.resolve_path("~/x") == os.path.expanduser("~/x")
    assert paths.resolve_path(None) is None


def test_a_vocab_txt_larger_than_the_embedding_or_unreadable_stops_at_once(tmp_path):
    tokens = open(paths.resolve_path("cmrcx:data/tiny_vocab.txt"), encoding="utf-8").read()
    big = tmp_path / "vocab.txt"
    big.write_text(tokens + "".join(f"extra{i}\n" for i in range(5000)), encoding="utf-8")
    launch.parse_gin(["cmrc2019_tiny.gin"], ["MODEL_DIR = '/tmp/m'", f"VOCAB_FILE = '{big}'"])
    with pytest.raises(errors.ConfigError, match=rf"{big} has \d+ tokens and the model \d+ emb"):
        launch.run_config_from_gin()
    big.write_text(tokens + tokens.splitlines()[5] + "\n", encoding="utf-8")  # a repeat
    with pytest.raises(errors.ConfigError, match=r"vocab.txt: line \d+: token .* repeats line 6"):
        launch.run_config_from_gin()


def test_a_t5_spiece_model_the_tasks_cannot_read_stops_at_once(tmp_path):
    bad = tmp_path / "spiece.model"
    bad.write_bytes(b"\x00not a model")
    launch.parse_gin(["lot_outgen_tiny.gin"], ["MODEL_DIR = '/tmp/m'", f"VOCAB_FILE = '{bad}'"])
    with pytest.raises(errors.ConfigError, match=r"spiece.model: not a SentencePiece model"):
        launch.run_config_from_gin()


@pytest.mark.parametrize("text", ["{}", '{"model": {"no_such_field": 1}}', '{"model": '])
def test_a_pretrained_model_config_that_does_not_read_is_one_error(tmp_path, text):
    from cmrcx.models.bert import BertConfig
    from cmrcx.training.run_config import check_pretrained

    (tmp_path / "model_config.json").write_text(text)
    with pytest.raises(errors.ConfigError, match="model_config.json does not read as a cmrcx"):
        check_pretrained(str(tmp_path), BertConfig())
