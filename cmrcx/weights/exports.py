"""cmrcx's own export format: EXPORT_DIR/params/ (orbax) plus EXPORT_DIR/model_config.json,
what inference or fine-tuning needs, no optimizer state.

model_config.json is {"model": the config's fields, "family": its registry name, ...}.
Exports of BERT, the family exports had before there were others, name none.
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from cmrcx.models import registry

MODEL_CONFIG_FILE = "model_config.json"


def family_key(config) -> dict:
    """{"family": name} for model_config.json, or {} for the default family (BERT)."""
    name = registry.family_of(config).name
    return {} if name == registry.DEFAULT_FAMILY else {"family": name}


def export_params(export_dir: str, params, config, extra: dict | None = None) -> None:
    """Writes parameters (orbax) and the model config (JSON) to `export_dir`.

    extra: more model_config.json fields; the config's family is added unless given.
    """
    export_dir = os.path.abspath(export_dir)
    os.makedirs(export_dir, exist_ok=True)
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(os.path.join(export_dir, "params"), params, force=True)
    checkpointer.wait_until_finished()
    if jax.process_index() == 0:
        with open(os.path.join(export_dir, MODEL_CONFIG_FILE), "w", encoding="utf-8") as f:
            record = {"model": dataclasses.asdict(config), **(extra or {})}
            for key, value in family_key(config).items():
                record.setdefault(key, value)  # where the caller put it, else last
            json.dump(record, f, indent=1)


def read_model_config(export_dir: str):
    """The network config of an export, of its `family` (BERT when absent)."""
    path = os.path.join(export_dir, MODEL_CONFIG_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path} not found: {export_dir} is not a cmrcx export "
            "(made by `python -m cmrcx.export`)"
        )
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    try:
        row = registry.family(saved.get("family", registry.DEFAULT_FAMILY))
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return row.config_class(**saved["model"])


def read_network(export_dir: str):
    """(config, params as numpy) of an export's network: params[<family>] (T5: the whole
    encoder-decoder; BERT: the encoder), or the whole tree when it has no such key."""
    config = read_model_config(export_dir)
    params = load_params(export_dir, None)
    name = registry.family_of(config).name
    return config, params[name] if name in params else params


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
