"""GPT-2 releases in the older PyTorch format: a pytorch_model.bin holding the causal-mask
buffers (`attn.bias`, `attn.masked_bias`) and a saved copy of the tied head, as UER's
gpt2-chinese-cluecorpussmall ships; `cmrcx.convert --verify` drops and reports them and
matches transformers; an untied head is refused. (safetensors: tests/models/
test_gpt2_model.py, tests/cli/test_generate_gpt2_cli.py.)"""

import pytest

from cmrcx import convert
from tests.models.test_gpt2_model import reference_model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def save_bin(model, directory, *, untie=False):
    """config.json + pytorch_model.bin with the old buffers and the head copy."""
    model.config.save_pretrained(directory)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    positions = model.config.n_positions
    for layer in range(model.config.n_layer):
        mask = torch.tril(torch.ones(positions, positions)).view(1, 1, positions, positions)
        state[f"transformer.h.{layer}.attn.bias"] = mask
        state[f"transformer.h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)
    state["lm_head.weight"] = state["transformer.wte.weight"].clone() + (1.0 if untie else 0.0)
    torch.save(state, directory / "pytorch_model.bin")


def test_a_bin_release_with_buffers_converts_and_verifies(tmp_path, capsys):
    model = reference_model(seed=5)
    save_bin(model, tmp_path / "hf")
    argv = ["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "out"), "--verify"]
    assert convert.main(argv) == 0
    out = capsys.readouterr().out
    assert "transformer.h.1.attn.masked_bias" in out and "lm_head.weight" in out
    assert "verify: OK" in out


def test_an_untied_head_is_refused(tmp_path, capsys):
    save_bin(reference_model(seed=5), tmp_path / "hf", untie=True)
    assert convert.main(["--from", str(tmp_path / "hf"), "--to", str(tmp_path / "out")]) == 2
    assert "untied" in capsys.readouterr().err
