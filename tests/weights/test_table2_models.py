"""Every BERT-shaped model of the CLUE paper's Table 2 converts with `cmrcx.convert`.

Each release is rebuilt here as a random-initialised transformers model: its
released config.json with only the geometry shrunk (so activation, LayerNorm
epsilon, 513 positions, model_type and the extra keys stay as released), saved
under the tensor names and in the file format of the release, converted in-process,
and compared with the PyTorch model on padded inputs as long as the position table
(sequence states and pooled output, float32, 1e-5). Where a config.json comes from:

  bert-base-chinese        huggingface.co/google-bert/bert-base-chinese/blob/main/config.json
  BERT-wwm-ext             huggingface.co/hfl/chinese-bert-wwm-ext/blob/main/config.json
  ERNIE-base               huggingface.co/nghuyong/ernie-1.0-base-zh/blob/main/config.json
                           (2019-2022 as nghuyong/ernie-1.0: model_type "bert", bert.* tensors)
  RoBERTa-large            huggingface.co/clue/roberta_chinese_large/blob/main/config.json,
                           brightmart/roberta_zh's TF release (bert_config_large.json)
  RoBERTa-wwm-ext(-large)  huggingface.co/hfl/chinese-roberta-wwm-ext(-large)/blob/main/config.json
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cmrcx import convert  # noqa: E402
from cmrcx.cli import launch  # noqa: E402
from cmrcx.models.bert import BertConfig  # noqa: E402
from cmrcx.weights import bert as bert_weights  # noqa: E402
from cmrcx.weights import exports  # noqa: E402
from tests.weights.hf_references import token_batch, torch_outputs, write_vocab  # noqa: E402
from tests.weights.test_bert_conversion import (  # noqa: E402
    assert_same_outputs,
    flax_outputs,
    write_google_tf_checkpoint,
)

# config.json keys Google's Chinese BERT and HFL's releases share (bert-base-chinese's).
GOOGLE_CHINESE = {
    "architectures": ["BertForMaskedLM"],
    "attention_probs_dropout_prob": 0.1,
    "directionality": "bidi",
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 0,
    "pooler_fc_size": 768,
    "pooler_num_attention_heads": 12,
    "pooler_num_fc_layers": 3,
    "pooler_size_per_head": 128,
    "pooler_type": "first_token_transform",
    "type_vocab_size": 2,
    "vocab_size": 21128,
}
LARGE = {"hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 16}
LARGE["num_hidden_layers"] = 24
HFL_ROBERTA = {"bos_token_id": 0, "eos_token_id": 2, "output_past": True}
RELEASED_CONFIGS = {
    "bert-base-chinese": GOOGLE_CHINESE,
    "chinese-bert-wwm-ext": {**GOOGLE_CHINESE, "output_past": True},
    "ernie-1.0-base-zh": {
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "relu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 768,
        "initializer_range": 0.02,
        "max_position_embeddings": 513,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "type_vocab_size": 2,
        "vocab_size": 18000,
        "pad_token_id": 0,
        "layer_norm_eps": 1e-05,
        "model_type": "ernie",
        "architectures": ["ErnieForMaskedLM"],
        "intermediate_size": 3072,
    },
    "roberta_chinese_large": {
        **{k: v for k, v in GOOGLE_CHINESE.items() if k != "architectures"},
        **LARGE,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "model_type": "roberta",
        "pad_token_id": 1,
    },
    "chinese-roberta-wwm-ext": {**GOOGLE_CHINESE, **HFL_ROBERTA},
    "chinese-roberta-wwm-ext-large": {**GOOGLE_CHINESE, **HFL_ROBERTA, **LARGE},
}
# What each test model shrinks; the ERNIE table keeps 36 rows beyond its vocab.txt
# (18000 rows, 17964 tokens: the paper's Table 6 vocabulary).
TINY = {
    "vocab_size": 120,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 40,
}
TINY_LARGE = {**TINY, "num_hidden_layers": 3, "num_attention_heads": 8}
ERNIE_VOCAB_ROWS_UNUSED = 18000 - 17964


def tiny_config(release: str, **changes) -> dict:
    geometry = TINY_LARGE if release.endswith("large") else TINY
    return {**RELEASED_CONFIGS[release], **geometry, **changes}


def torch_model(raw: dict, kind: str, seed: int):
    """A transformers `kind` (e.g. "ForPreTraining") of config dict `raw`, every weight random."""
    torch.manual_seed(seed)
    family = "Ernie" if raw["model_type"] == "ernie" else "Bert"
    config_class = getattr(transformers, f"{family}Config")
    config = config_class(**{k: v for k, v in raw.items() if k != "model_type"})
    model = getattr(transformers, f"{family}{kind}")(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.normal_(0.0, 0.05)  # biases and LayerNorms too: no mapping hides
            if name.endswith("LayerNorm.weight"):
                param.add_(1.0)  # scales near 1: outputs of order 1, as released
    return model


def legacy_layer_norm_names(state: dict) -> dict:
    """LayerNorm.weight/bias -> LayerNorm.gamma/beta, as TF-era conversions named them."""
    renamed = {}
    for name, value in state.items():
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma")
        renamed[name.replace("LayerNorm.bias", "LayerNorm.beta")] = value
    return renamed


def write_release(directory, raw: dict, state: dict | None = None, vocab_rows: int = 0):
    """config.json as released, pytorch_model.bin (torch.save'd `state`), vocab.txt."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(raw, f, indent=2)
    if state is not None:
        torch.save(state, os.path.join(directory, "pytorch_model.bin"))
    write_vocab(os.path.join(directory, "vocab.txt"), vocab_rows or raw["vocab_size"])


# Each builder writes one release into a directory and returns the PyTorch encoder
# that defines the right answer, with the config dict it was built from.


def bert_base_chinese(directory):
    """BertForPreTraining (bert.*, cls.*, pooler) as model.safetensors."""
    raw = tiny_config("bert-base-chinese")
    model = torch_model(raw, "ForPreTraining", seed=1)
    model.save_pretrained(directory)  # safetensors; ties the MLM decoder
    write_release(directory, raw)
    return model.bert, raw


def hfl_release(release: str):
    """HFL's conversions (transformers 2.x, BertForPreTraining): pytorch_model.bin."""

    def build(directory):
        raw = tiny_config(release)
        model = torch_model(raw, "ForPreTraining", seed=2)
        write_release(directory, raw, model.state_dict())
        return model.bert, raw

    return build


def ernie_1_0_base_zh(directory):
    """nghuyong's conversion from PaddleNLP (ERNIE-Pytorch convert.py): ernie.* encoder
    and pooler, cls.predictions without the tied decoder, LayerNorm gamma/beta, .bin."""
    raw = tiny_config("ernie-1.0-base-zh")
    model = torch_model(raw, "ForPreTraining", seed=3)
    state = {
        name: value
        for name, value in model.state_dict().items()
        if not name.startswith(("cls.seq_relationship", "cls.predictions.decoder"))
    }
    rows = raw["vocab_size"] - ERNIE_VOCAB_ROWS_UNUSED
    write_release(directory, raw, legacy_layer_norm_names(state), vocab_rows=rows)
    return model.ernie, raw


def ernie_1_0_as_bert(directory):
    """nghuyong/ernie-1.0 before the ernie model type (convert_ernie_to_pytorch.py):
    model_type "bert", bert.* encoder and pooler, no heads, LayerNorm gamma/beta."""
    raw = tiny_config("ernie-1.0-base-zh", model_type="bert")
    del raw["architectures"]
    model = torch_model(raw, "ForPreTraining", seed=4)
    state = {k: v for k, v in model.state_dict().items() if k.startswith("bert.")}
    write_release(directory, raw, legacy_layer_norm_names(state))
    return model.bert, raw


def roberta_chinese_large(directory):
    """CLUE's upload: model_type "roberta", BERT tensors (bert.*, cls.*, pooler), .bin."""
    raw = tiny_config("roberta_chinese_large")
    model = torch_model(raw, "ForPreTraining", seed=5)
    write_release(directory, raw, model.state_dict())
    return model.bert, raw


def roberta_zh_large_tf(directory):
    """brightmart's TF release: bert_config_large.json, roberta_zh_large_model.ckpt.*."""
    raw = tiny_config("roberta_chinese_large", model_type="bert", pad_token_id=0)
    model = torch_model(raw, "Model", seed=6)
    write_google_tf_checkpoint(model, directory)
    os.rename(directory / "bert_config.json", directory / "bert_config_large.json")
    for name in os.listdir(directory):
        if name.startswith("bert_model.ckpt"):
            renamed = name.replace("bert_model.ckpt", "roberta_zh_large_model.ckpt")
            os.rename(directory / name, directory / renamed)
    return model, raw


# release -> (builder, run `--verify` too: the releases whose reference model
# `convert._torch_bert` builds differently from a plain HuggingFace BertModel dir).
RELEASES = {
    "bert-base-chinese": (bert_base_chinese, False),
    "chinese-bert-wwm-ext": (hfl_release("chinese-bert-wwm-ext"), False),
    "ernie-1.0-base-zh": (ernie_1_0_base_zh, True),
    "ernie-1.0-as-bert": (ernie_1_0_as_bert, False),
    "roberta_chinese_large": (roberta_chinese_large, True),
    "roberta_zh_large-tf": (roberta_zh_large_tf, True),
    "chinese-roberta-wwm-ext": (hfl_release("chinese-roberta-wwm-ext"), False),
    "chinese-roberta-wwm-ext-large": (hfl_release("chinese-roberta-wwm-ext-large"), False),
}


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_release_converts_with_parity(tmp_path, capsys, release):
    build, verify = RELEASES[release]
    reference, raw = build(tmp_path / "release")
    argv = ["--from", str(tmp_path / "release"), "--to", str(tmp_path / "out")]
    assert convert.main(argv + (["--verify"] if verify else [])) == 0
    if verify:
        assert "verify: OK" in capsys.readouterr().out
    with open(tmp_path / "out" / "model_config.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert "initialised_fresh" not in saved  # every release has its pooler
    config = exports.read_model_config(str(tmp_path / "out"))
    assert (config.hidden_act, config.layer_norm_eps, config.max_position_embeddings) == (
        raw["hidden_act"],
        raw["layer_norm_eps"],
        raw["max_position_embeddings"],
    )
    # Inputs as long as the position table: ERNIE's 513th position is looked up too.
    length = raw["max_position_embeddings"]
    assert_same_outputs(reference, str(tmp_path / "out"), raw, length=length)


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"model_type": "deberta-v2"}, "model_type 'deberta-v2'"),  # no family reads it
        ({"hidden_act": "swish"}, "hidden_act 'swish'"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
        ({"model_type": "ernie", "use_task_id": True}, "use_task_id true"),
    ],
    ids=["model_type", "hidden_act", "position_embedding_type", "use_task_id"],
)
def test_unsupported_config_is_one_clear_error(tmp_path, capsys, changes, field):
    raw = tiny_config("bert-base-chinese", **changes)
    write_release(tmp_path / "release", raw)  # config.json is read before any tensor
    argv = ["--from", str(tmp_path / "release"), "--to", str(tmp_path / "out")]
    assert convert.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'release' / 'config.json'}: {field}")
    assert "Traceback" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["RobertaForMaskedLM", "bare"])
def test_roberta_architecture_is_refused(tmp_path, capsys, kind):
    """model_type "roberta" converts only with bert.* tensors: RobertaModel's positions
    start at pad_token_id + 1, and bare tensor names do not tell the two apart."""
    raw = tiny_config("roberta_chinese_large")
    if kind == "bare":  # a BertModel's own names under model_type "roberta"
        state = torch_model(raw, "Model", seed=7).state_dict()
    else:
        config = transformers.RobertaConfig(**{k: v for k, v in raw.items() if k != "model_type"})
        state = transformers.RobertaForMaskedLM(config).state_dict()
        assert all(name.startswith(("roberta.", "lm_head.")) for name in state)
    write_release(tmp_path / "release", raw, state)
    argv = ["--from", str(tmp_path / "release"), "--to", str(tmp_path / "out")]
    assert convert.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'release' / 'config.json'}: model_type 'roberta'")
    assert not (tmp_path / "out").exists()


def test_ernie_export_round_trips_relu_back_to_transformers(tmp_path):
    """convert -> model_config.json (hidden_act, layer_norm_eps) -> write_hf_dir -> BertModel."""
    reference, raw = ernie_1_0_base_zh(tmp_path / "release")
    assert convert.main(["--from", str(tmp_path / "release"), "--to", str(tmp_path / "out")]) == 0
    with open(tmp_path / "out" / "model_config.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["source_model_type"] == "ernie"
    assert (saved["model"]["hidden_act"], saved["model"]["layer_norm_eps"]) == ("relu", 1e-5)
    config = exports.read_model_config(str(tmp_path / "out"))
    params = exports.load_params(str(tmp_path / "out"), None)["bert"]
    bert_weights.write_hf_dir(
        str(tmp_path / "back"), params, config, str(tmp_path / "out" / "vocab.txt")
    )
    with open(tmp_path / "back" / "config.json", encoding="utf-8") as f:
        back = json.load(f)
    assert (back["hidden_act"], back["layer_norm_eps"], back["max_position_embeddings"]) == (
        "relu",
        1e-5,
        513,
    )
    reloaded = transformers.BertModel.from_pretrained(str(tmp_path / "back")).eval()
    ids, types, mask = token_batch(raw["vocab_size"])
    want_hidden, want_pooled = torch_outputs(reference, ids, types, mask)
    for got in (
        torch_outputs(reloaded, ids, types, mask),
        flax_outputs(tmp_path / "out", ids, types, mask),
    ):
        np.testing.assert_allclose(got[0], want_hidden, atol=1e-5, rtol=0)
        np.testing.assert_allclose(got[1], want_pooled, atol=1e-5, rtol=0)


def test_model_config_without_hidden_act_reads_as_gelu(tmp_path):
    """Exports written before the field existed (no hidden_act) keep BERT's exact GeLU."""
    old = {"vocab_size": 64, "hidden_size": 16, "num_layers": 1, "num_heads": 2}
    with open(tmp_path / exports.MODEL_CONFIG_FILE, "w", encoding="utf-8") as f:
        json.dump({"model": old}, f)
    assert exports.read_model_config(str(tmp_path)).hidden_act == "gelu"
    with pytest.raises(ValueError, match="hidden_act 'swish'"):
        BertConfig(hidden_act="swish")


@pytest.mark.parametrize(
    "model_gin, release",
    [
        ("models/ernie_base.gin", "ernie-1.0-base-zh"),
        ("models/roberta_large.gin", "roberta_chinese_large"),
        ("models/bert_large.gin", "chinese-roberta-wwm-ext-large"),
        ("models/bert_base.gin", "chinese-roberta-wwm-ext"),
    ],
)
def test_model_gin_is_the_released_config(tmp_path, clean_gin, model_gin, release):
    """The gin geometry is what `cmrcx.convert` reads from the release's config.json:
    a fine-tuning run builds its encoder from gin, so activation and epsilon count too."""
    launch.parse_gin([model_gin], ["RunConfig.model = @cmrcx.BertConfig()"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(RELEASED_CONFIGS[release]), encoding="utf-8")
    assert launch.gin_run_config().model == bert_weights.config_from_hf(
        RELEASED_CONFIGS[release], str(path)
    )
