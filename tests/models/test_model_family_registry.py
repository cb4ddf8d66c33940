"""A model family is one registry row: a toy family, written whole in this file (config,
1-layer network, weight table, weights module), is registered with
`cmrcx.models.registry` and then goes through the entry points with no other file
touched: `cmrcx.convert` of a HuggingFace-format directory, `cmrcx.train` of a CLUE
AFQMC classifier from that export (the classification head over the toy encoder), and
`cmrcx.export` to cmrcx's format and to HuggingFace's (which converts back).

This module is also the toy family's weights module (`Family.weights`): the functions
below the network have the names every `cmrcx.weights.<family>` module has.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator, Mapping

import flax.linen as nn
import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from cmrcx import convert, export, train
from cmrcx.common.paths import package_path
from cmrcx.models import registry
from cmrcx.models.common import kernel_init, zeros_init
from cmrcx.vocab import layouts
from cmrcx.weights import FAMILY_FUNCTIONS, exports, hf_io, table
from cmrcx.weights import bert as bert_weights
from cmrcx.weights import t5 as t5_weights

SAMPLE = package_path("data/clue_sample/afqmc_public")
TINY_VOCAB = package_path("data/tiny_vocab.txt")

# ---------------------------------------------------------------------------
# The toy family: a config, an encoder, a weight table


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    """Geometry of the toy encoder."""

    vocab_size: int = 4096  # the bundled tiny vocab.txt
    width: int = 8  # every token vector
    dropout: float = 0.1  # on the layer's output and before the task heads
    initializer_range: float = 0.02  # stddev of every initialiser


class ToyEncoder(nn.Module):
    """Token + segment embeddings, one tanh layer; pooled: the mean over real tokens."""

    config: ToyConfig

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic: bool = True):
        cfg = self.config
        std = cfg.initializer_range
        tokens = nn.Embed(
            cfg.vocab_size,
            cfg.width,
            embedding_init=kernel_init(std, ("vocab", "embed")),
            name="embed",
        )
        segments = nn.Embed(
            2, cfg.width, embedding_init=kernel_init(std, ("token_type", "embed")), name="segment"
        )
        layer = nn.Dense(
            cfg.width,
            kernel_init=kernel_init(std, ("embed", "mlp")),
            bias_init=zeros_init(("mlp",)),
            name="layer",
        )
        hidden = jnp.tanh(layer(tokens(input_ids) + segments(token_type_ids)))
        hidden = nn.Dropout(cfg.dropout)(hidden, deterministic=deterministic)
        real = input_mask[..., None].astype(hidden.dtype)
        pooled = jnp.sum(hidden * real, axis=1) / jnp.maximum(jnp.sum(real, axis=1), 1.0)
        return hidden, pooled


def _toy_encoder(config: ToyConfig, name: str) -> nn.Module:
    return ToyEncoder(config, name=name)


def _toy_heads(config: ToyConfig) -> registry.HeadOptions:
    return registry.HeadOptions(config.dropout, config.initializer_range)


# ---------------------------------------------------------------------------
# Its weights module: this module, under the names every family's has


def weight_table(config: ToyConfig) -> list[table.Entry]:
    return [
        table.Entry(("embed", "embedding"), "embeddings.word.weight", "same",
                    (config.vocab_size, config.width)),
        table.Entry(("segment", "embedding"), "embeddings.segment.weight", "same",
                    (2, config.width)),
        *table.dense(("layer",), "layer", config.width, config.width),
    ]  # fmt: skip


def config_from_hf(raw: Mapping, path: str = "config.json", tensors=None) -> ToyConfig:
    return ToyConfig(vocab_size=raw["vocab_size"], width=raw["width"])


def config_to_hf(config: ToyConfig) -> dict:
    return {"model_type": "toy", "vocab_size": config.vocab_size, "width": config.width}


def params_from_hf(tensors: Mapping, config: ToyConfig, source: str) -> dict:
    return table.params_from_table(tensors, weight_table(config), 1, source, "toy")


def hf_tensors(params: Mapping, config: ToyConfig) -> Iterator[tuple[str, np.ndarray]]:
    yield from table.tensors_from_table(params, weight_table(config))


def describe(config: ToyConfig) -> str:
    return f"vocab_size={config.vocab_size}, width={config.width}"


def read_dir(directory: str) -> hf_io.Release:
    raw, path = hf_io.read_hf_config(directory)
    tensors, source = hf_io.read_hf_weights(directory)
    config = config_from_hf(raw, path, tensors)
    params = params_from_hf(tensors, config, directory)
    return hf_io.Release(config, params, source, "toy", [], [], {"source_model_type": "toy"})


def vocabulary_files(directory: str) -> list[str]:
    return ["vocab.txt"]


def write_hf_dir(out: str, params, config: ToyConfig, vocab_file: str | None) -> None:
    hf_io.write_hf_model(out, config_to_hf(config), hf_tensors(params, config))
    shutil.copyfile(vocab_file, os.path.join(out, "vocab.txt"))


TOY = registry.Family(
    name="toy",
    config_class=ToyConfig,
    layout=layouts.BERT,
    hf_model_types=("toy",),
    encoder=_toy_encoder,
    head_options=_toy_heads,
    weights=sys.modules[__name__],
)
# The entry points build the RunConfig from gin: the toy config under its gin name, as
# cmrcx.cli.launch does for the families registered when it is imported.
gin.external_configurable(ToyConfig, module="cmrcx")


@pytest.fixture
def toy_family():
    registry.register(TOY)
    yield TOY
    registry.unregister(TOY.name)


# ---------------------------------------------------------------------------
# The tests


def test_every_weights_module_has_the_family_function_names():
    for module in (bert_weights, t5_weights, sys.modules[__name__]):
        missing = [name for name in FAMILY_FUNCTIONS if not callable(getattr(module, name, None))]
        assert not missing, (module.__name__, missing)


def test_the_rows_of_bert_and_t5():
    bert, t5 = registry.family("bert"), registry.family("t5")
    assert (bert.vocab_file, t5.vocab_file) == ("vocab.txt", "spiece.model")
    assert registry.family_of_hf_type("ernie") is bert
    assert registry.family_of_hf_type("mt5") is t5
    assert registry.weights(bert) is bert_weights and registry.weights(t5) is t5_weights
    with pytest.raises(ValueError, match="unknown model family 'gpt3'; known: bert, t5"):
        registry.family("gpt3")
    with pytest.raises(ValueError, match="clashes"):
        registry.register(dataclasses.replace(TOY, hf_model_types=("roberta",)))
    with pytest.raises(ValueError, match="no encoder-decoder"):
        registry.network(bert.config_class(), "seq2seq")


def _write_hf_release(directory) -> dict[str, np.ndarray]:
    """A toy HuggingFace-format release: config.json, model.safetensors, vocab.txt."""
    config = ToyConfig()
    rng = np.random.default_rng(0)
    shapes = {
        "embeddings.word.weight": (config.vocab_size, config.width),
        "embeddings.segment.weight": (2, config.width),
        "layer.weight": (config.width, config.width),  # torch: [out, in]
        "layer.bias": (config.width,),
    }
    tensors = {name: rng.normal(0, 0.5, shape).astype(np.float32) for name, shape in shapes.items()}
    os.makedirs(directory)
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config_to_hf(config), f)
    save_file(tensors, os.path.join(directory, "model.safetensors"))
    shutil.copyfile(TINY_VOCAB, os.path.join(directory, "vocab.txt"))
    return tensors


def _run_flags(tmp_path, pretrained) -> list[str]:
    return [
        "--gin_file=clue_afqmc_tiny.gin",
        f"--gin.MODEL_DIR='{tmp_path / 'run'}'",
        f"--gin.DATA_DIR='{SAMPLE}'",
        f"--gin.PRETRAINED='{pretrained}'",
        "--gin.VOCAB_FILE=None",  # the family's vocab_file in PRETRAINED: vocab.txt
        "--gin.RunConfig.model=@cmrcx.ToyConfig()",
        "--gin.RunConfig.max_length=32",
        "--gin.RunConfig.num_train_steps=4",
        "--gin.RunConfig.learning_rate=0.01",
        f"--gin.RunConfig.tfds_cache_dir='{tmp_path / 'tfds'}'",
    ]


def test_a_registered_family_converts_trains_and_exports(toy_family, tmp_path, capsys):
    # convert: a HuggingFace-format directory -> a cmrcx export of the family
    tensors = _write_hf_release(tmp_path / "hf")
    pretrained = tmp_path / "pretrained"
    assert convert.main(["--from", str(tmp_path / "hf"), "--to", str(pretrained)]) == 0
    out = capsys.readouterr().out
    assert "read safetensors from" in out and "vocab_size=4096, width=8" in out
    # Each long phase is announced before it starts, and timed when it ends.
    assert out.index(f"reading {tmp_path / 'hf'} ...") < out.index("read safetensors from")
    assert out.index(f"writing {pretrained} ...") < out.index(f"wrote {pretrained} in ")
    wrote = re.escape(f"wrote {pretrained} in ") + r"[\d.]+ s "
    assert re.search(wrote + re.escape("(params/, model_config.json, vocab.txt)"), out)
    saved = json.loads((pretrained / "model_config.json").read_text(encoding="utf-8"))
    assert saved["family"] == "toy" and saved["source_model_type"] == "toy"
    assert exports.read_model_config(str(pretrained)) == ToyConfig()
    encoder = exports.load_params(str(pretrained), None)["toy"]
    np.testing.assert_array_equal(encoder["layer"]["kernel"], tensors["layer.weight"].T)

    # train: CLUE AFQMC, the classification head over the toy encoder, from the export
    flags = _run_flags(tmp_path, pretrained)
    train.main(flags)
    out = capsys.readouterr().out
    assert f"encoder weights from {pretrained}" in out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["step"] == 4 and 0 <= result["accuracy"] <= 100
    run_config = json.loads((tmp_path / "run" / "run_config.json").read_text(encoding="utf-8"))
    assert run_config["model"]["family"] == "toy"
    assert run_config["vocab_file"] == str(pretrained / "vocab.txt")

    # export: cmrcx's format (the whole model) and HuggingFace's (the encoder)
    gin.clear_config()
    export.main([*flags, "--out", str(tmp_path / "export")])
    saved = json.loads((tmp_path / "export" / "model_config.json").read_text(encoding="utf-8"))
    assert saved["family"] == "toy" and saved["step"] == 4
    assert (tmp_path / "export" / "vocab.txt").is_file()
    params = exports.load_params(str(tmp_path / "export"), None)
    assert set(params) == {"toy", "classifier"}
    trained = params["toy"]["layer"]["kernel"]
    assert not np.allclose(trained, encoder["layer"]["kernel"])  # fine-tuned
    gin.clear_config()
    export.main([*flags, "--out", str(tmp_path / "hf_out"), "--format", "hf"])
    written = load_file(str(tmp_path / "hf_out" / "model.safetensors"))
    np.testing.assert_allclose(written["layer.weight"], np.asarray(trained).T)
    assert convert.main(["--from", str(tmp_path / "hf_out"), "--to", str(tmp_path / "again")]) == 0
    again = exports.load_params(str(tmp_path / "again"), None)["toy"]
    jax.tree.map(np.testing.assert_allclose, again, jax.device_get(params["toy"]))
