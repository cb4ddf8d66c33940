"""cmrcx's own export format: EXPORT_DIR/params/ (orbax) plus EXPORT_DIR/model_config.json,
what inference or fine-tuning needs, no optimizer state."""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from cmrcx.models.bert import BertConfig
from cmrcx.models.t5 import T5Config

MODEL_CONFIG_FILE = "model_config.json"


def export_params(
    export_dir: str, params, config: BertConfig | T5Config, extra: dict | None = None
) -> None:
    """Writes parameters (orbax) and the model config (JSON) to `export_dir`."""
    export_dir = os.path.abspath(export_dir)
    os.makedirs(export_dir, exist_ok=True)
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(os.path.join(export_dir, "params"), params, force=True)
    checkpointer.wait_until_finished()
    if jax.process_index() == 0:
        with open(os.path.join(export_dir, MODEL_CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump({"model": dataclasses.asdict(config), **(extra or {})}, f, indent=1)


def read_model_config(export_dir: str) -> BertConfig | T5Config:
    """The network config of an export: its `family` ("bert" when absent, or "t5")."""
    path = os.path.join(export_dir, MODEL_CONFIG_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path} not found: {export_dir} is not a cmrcx export "
            "(made by `python -m cmrcx.export`)"
        )
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    families = {"bert": BertConfig, "t5": T5Config}
    family = saved.get("family", "bert")
    if family not in families:
        raise ValueError(f"{path}: unknown model family {family!r}; known: {', '.join(families)}")
    return families[family](**saved["model"])


def load_params(export_dir: str, abstract_params):
    """Parameters of an export, restored into the shapes/shardings of `abstract_params`.

    `abstract_params` None: numpy arrays on the host, whatever devices saved them.
    """
    path = os.path.join(os.path.abspath(export_dir), "params")
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path} not found: {export_dir} holds no exported parameters")
    if abstract_params is None:
        return restore_numpy(path)
    return ocp.StandardCheckpointer().restore(path, abstract_params)


def restore_numpy(path: str):
    """An orbax PyTree checkpoint (e.g. `checkpoints/<step>/default`) as numpy arrays.

    Without a target, orbax would rebuild the saved shardings, which fails when
    the saving devices are gone (an export from a 2-host run, loaded on 1 CPU).
    """
    # The handler's metadata, not the checkpointer's: an item directory has no
    # step metadata file of its own, and orbax would warn about that.
    tree = ocp.PyTreeCheckpointHandler().metadata(epath.Path(path)).tree
    checkpointer = ocp.PyTreeCheckpointer()
    as_numpy = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
    return checkpointer.restore(path, args=ocp.args.PyTreeRestore(restore_args=as_numpy))
