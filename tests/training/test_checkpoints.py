"""Parameters-only export and load."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cmrcx.models.bert import BertConfig
from cmrcx.models.t5 import T5Config
from cmrcx.weights import exports


def test_export_round_trip(tmp_path):
    config = BertConfig(
        vocab_size=64, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32
    )
    params = {"bert": {"w": jnp.arange(6.0).reshape(2, 3)}, "cloze_head": {"b": jnp.ones(1)}}
    exports.export_params(str(tmp_path), params, config, extra={"step": 7})
    assert exports.read_model_config(str(tmp_path)) == config
    restored = exports.load_params(str(tmp_path), None)
    jax.tree.map(np.testing.assert_array_equal, restored, jax.device_get(params))


def test_not_an_export_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="model_config.json"):
        exports.read_model_config(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no exported parameters"):
        exports.load_params(str(tmp_path), None)


def test_model_config_of_each_family(tmp_path):
    config = T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2)
    exports.export_params(str(tmp_path), {"t5": {"w": jnp.ones(2)}}, config, {"family": "t5"})
    assert exports.read_model_config(str(tmp_path)) == config
