"""Runs the CMRC 2019 authors' `run_cmrc2019_baseline.py` as released, changed only from
outside (the list: README.md beside this file), and records what it did.

    python released_script_driver.py SCRIPT RECORD MAX_STEPS -- SCRIPT_ARGS...

SCRIPT is the file in ../shared/reference/cmrc2019_baseline/, run with `runpy` in this
process (its folder first on sys.path, for the `pytorch_pretrained_bert` it ships).
RECORD gets a JSON object: "loss" (each training step's loss, as the script's
CrossEntropyLoss returned it), "lr" (the rate each BertAdam.step applied: group['lr'] *
warmup_linear(state['step'] / t_total), the script's own lr_this_step times BertAdam's
schedule), "t_total", "load" (the script's missing / unexpected keys and error
messages when it loaded --init_checkpoint) and "num_train_examples". RECORD.npz gets
the training features the script built (its TensorDataset), int32.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import runpy
import sys
import types

import numpy as np


def install_stand_ins() -> None:
    """pytorch_pretrained_bert/file_utils.py imports boto3, botocore.exceptions.ClientError
    and requests at module level for downloads no run here makes: empty stand-ins."""
    botocore = types.ModuleType("botocore")
    exceptions = types.ModuleType("botocore.exceptions")
    exceptions.ClientError = type("ClientError", (Exception,), {})
    botocore.exceptions = exceptions
    for name, module in {
        "boto3": types.ModuleType("boto3"),
        "botocore": botocore,
        "botocore.exceptions": exceptions,
        "requests": types.ModuleType("requests"),
    }.items():
        sys.modules.setdefault(name, module)


class _ScriptLog(logging.Handler):
    """Keeps the script's log lines that say how the checkpoint loaded."""

    PREFIXES = {"missing keys:": "missing", "unexpected keys:": "unexpected"}
    PREFIXES["error msgs:"] = "errors"

    def __init__(self, record: dict):
        super().__init__()
        self.record = record

    def emit(self, log_record: logging.LogRecord) -> None:
        message = log_record.getMessage()
        for prefix, key in self.PREFIXES.items():
            if message.startswith(prefix):
                self.record["load"][key] = message[len(prefix) :]
        if message.startswith("train examples "):
            self.record["num_train_examples"] = int(message.split()[-1])


def patch(record: dict, max_steps: int, features_path: str, save) -> None:
    """The changes of README.md, each made on the library the script imports from."""
    import torch
    import torch.utils.data as torch_data
    from pytorch_pretrained_bert import optimization

    # 1. Training reads the windows in order (the script: RandomSampler(train_data)).
    torch_data.RandomSampler = torch_data.SequentialSampler

    # 2. A step cap: the training DataLoader (the one with drop_last=True) stops after
    #    max_steps batches; the schedule's t_total is still the script's own.
    class CappedDataLoader(torch_data.DataLoader):
        def __iter__(self):
            batches = super().__iter__()
            return itertools.islice(batches, max_steps) if self.drop_last else batches

        def __len__(self):
            whole = super().__len__()
            return min(whole, max_steps) if self.drop_last else whole

    torch_data.DataLoader = CappedDataLoader

    # 3. Each training step's loss, as the script's loss_fct(logits, positions) returns it.
    class RecordingCrossEntropyLoss(torch.nn.CrossEntropyLoss):
        def forward(self, logits, target):
            loss = super().forward(logits, target)
            if torch.is_grad_enabled():
                record["loss"].append(loss.item())
            return loss

    torch.nn.CrossEntropyLoss = RecordingCrossEntropyLoss

    # 4. The rate each optimizer step applies (read before BertAdam.step runs).
    bert_adam_step = optimization.BertAdam.step

    def recording_step(self, closure=None):
        group = self.param_groups[0]
        first = next(p for p in group["params"] if p.grad is not None)
        taken = self.state[first].get("step", 0)
        schedule = optimization.SCHEDULES[group["schedule"]]
        record["lr"].append(group["lr"] * schedule(taken / group["t_total"], group["warmup"]))
        record["t_total"] = group["t_total"]
        save(record)
        return bert_adam_step(self, closure)

    optimization.BertAdam.step = recording_step

    # 5. The training features: the first TensorDataset the script builds.
    tensor_dataset = torch_data.TensorDataset

    def recording_dataset(*tensors):
        if not os.path.exists(features_path):
            names = ("input_ids", "input_mask", "segment_ids", "answer_mask", "positions")
            arrays = {n: t.numpy().astype(np.int32) for n, t in zip(names, tensors, strict=True)}
            np.savez(features_path, **arrays)
        return tensor_dataset(*tensors)

    torch_data.TensorDataset = recording_dataset


def main(argv: list[str]) -> None:
    script, record_path, max_steps, separator, *script_args = argv
    if separator != "--":
        raise SystemExit(__doc__)
    record = {"loss": [], "lr": [], "t_total": None, "load": {}, "num_train_examples": None}
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    install_stand_ins()

    def save(record: dict) -> None:
        with open(record_path, "w", encoding="utf-8") as f:
            json.dump(record, f)

    patch(record, int(max_steps), record_path + ".npz", save)
    logging.getLogger("__main__").addHandler(_ScriptLog(record))
    sys.argv = [script, *script_args]
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        save(record)


if __name__ == "__main__":
    main(sys.argv[1:])
