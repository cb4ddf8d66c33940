"""cmrcx trains as the CMRC 2019 authors' released script trains, step for step.

The authors' `run_cmrc2019_baseline.py` (../shared/reference/cmrc2019_baseline/, run as
released: the changes made from outside are `released_script_driver.py` and the list in
README.md beside this file) and `python -m cmrcx.train --gin_file=cmrc2019_bert.gin
--gin_file=runs/released_script.gin` start from the same random-init BERT, written in
the authors' format (bert_config.json, pytorch_model.bin with the `qa_outputs` head,
vocab.txt) and converted for cmrcx with `python -m cmrcx.convert`. Both train on the
official trial file (../shared/data/cmrc2019/) in file order, dropout 0, float32,
for the same capped number of steps, then predict. The only bindings beyond the two
gin files: the geometry, the steps, dropout 0, file order (`TrainRun.bindings`).

Asserted: every step's learning rate and loss (relative difference <= 1e-5), the
parameters after the last step, and the prediction files: every blank's choice the
same, and QAC/PAC (the official evaluator's, `cmrcx.score cmrc2019`) equal.

The script's t_total counts *blanks* of one epoch (int(blanks / batch)); with
--num_train_epochs 1 the capped run crosses the end of warm-up (t_total * 0.1 steps),
so both halves of warmup_linear, applied twice, are compared.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support import REPO_ROOT, write_cmrc2019_vocabulary

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SHARED = REPO_ROOT.parent / "shared"
SCRIPT = SHARED / "reference" / "cmrc2019_baseline" / "run_cmrc2019_baseline.py"
TRIAL = SHARED / "data" / "cmrc2019" / "cmrc2019_trial.json"
DRIVER = Path(__file__).with_name("released_script_driver.py")

pytestmark = pytest.mark.skipif(
    not (SCRIPT.is_file() and TRIAL.is_file()),
    reason=f"the authors' script or the trial file is not present ({SCRIPT}, {TRIAL})",
)


@dataclasses.dataclass(frozen=True)
class Geometry:
    layers: int
    hidden: int
    heads: int
    intermediate: int
    max_length: int
    doc_stride: int
    batch_size: int
    steps: int
    trained_passages: int | None  # the first N passages of the trial file; None: all
    predicted_passages: int | None  # the first N passages of the trial file; None: all
    param_atol: float  # parameters after the last step (not the head's bias), max |diff|


# Small enough for the default suite (the script's Python feature building and its
# prediction dominate: the whole trial file takes minutes). The first 24 passages hold
# 235 blanks: t_total = int(235 / 8) = 29, warm-up to step 2.9, so of 8 steps 3 are on the
# rising half of warmup_linear and 5 on the falling one.
SMALL = Geometry(2, 64, 2, 128, 128, 64, 8, 8, 24, 4, 1e-6)  # seen: 1.1e-7
# BERT-base (bert-base-chinese's config), the script's length and stride (run.sh: 512;
# default doc_stride 128), batch 1; 20 steps over the first 10 passages (93 blanks:
# t_total 93, warm-up to step 9.3), the first passage predicted (16 windows). On 2 busy
# CPU cores a step takes minutes.
BASE = Geometry(12, 768, 12, 3072, 512, 128, 1, 20, 10, 1, 1e-6)  # seen: 6.5e-7 (twice)
# The head's bias has a zero gradient (a softmax over blanks does not change when every
# logit moves alike; tests/models/test_model.py): each side's is float32 rounding of
# sum(softmax - one-hot), rounded differently by torch and XLA (unrelated noise near
# 1e-7), which BertAdam's m / (sqrt(v) + 1e-6) turns into up to a tenth of a full step.
# Its two values are only required to stay near 0 (BERT-base, 20 steps: 3.3e-7 and
# -2.8e-6; a tenth of the summed rates is 2.1e-5): README.md beside this file.
HEAD_BIAS_ATOL = 2e-5


# ---------------------------------------------------------------- the shared start


def write_vocabulary(path: Path) -> int:
    """vocab.txt for the trial file (`support.write_cmrc2019_vocabulary`); its size."""
    return write_cmrc2019_vocabulary(TRIAL, path)


def authors_config(geometry: Geometry, vocab_size: int) -> dict:
    """bert_config.json as pytorch_pretrained_bert reads it; dropout 0 (the comparison's)."""
    return {
        "vocab_size": vocab_size,
        "hidden_size": geometry.hidden,
        "num_hidden_layers": geometry.layers,
        "num_attention_heads": geometry.heads,
        "intermediate_size": geometry.intermediate,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
    }


def write_authors_checkpoint(directory: Path, config: dict, head: tuple, vocab: Path) -> None:
    """A random-init BERT (transformers, seeded) as the script loads one: bert.* tensors
    and qa_outputs.* (cmrcx's own initial head, so that both start from one model)."""
    directory.mkdir(parents=True)
    torch.manual_seed(0)
    encoder = transformers.BertModel(transformers.BertConfig(**config))
    state = {f"bert.{name}": p.detach().clone() for name, p in encoder.named_parameters()}
    kernel, bias = head  # [hidden, 1], [1]
    state["qa_outputs.weight"] = torch.tensor(np.array(kernel).T)
    state["qa_outputs.bias"] = torch.tensor(np.array(bias))
    torch.save(state, directory / "pytorch_model.bin")
    (directory / "bert_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    shutil.copyfile(vocab, directory / "vocab.txt")


# ---------------------------------------------------------------- the two runs


@dataclasses.dataclass
class TrainRun:
    geometry: Geometry
    vocab_size: int
    work: Path

    @property
    def model_dir(self) -> Path:
        return self.work / "cmrcx_run"

    def bindings(self, pretrained: Path | None = None) -> list[str]:
        """cmrcx's bindings beyond the two gin files: geometry, steps, dropout 0, file
        order, the run's folders and per-step metric lines."""
        g, model = self.geometry, "cmrcx.BertConfig"
        out = [
            f"{model}.vocab_size = {self.vocab_size}",
            f"{model}.hidden_size = {g.hidden}",
            f"{model}.num_layers = {g.layers}",
            f"{model}.num_heads = {g.heads}",
            f"{model}.intermediate_size = {g.intermediate}",
            f"{model}.hidden_dropout = 0.0",
            f"{model}.attention_dropout = 0.0",
            f"RunConfig.max_length = {g.max_length}",
            f"RunConfig.doc_stride = {g.doc_stride}",
            f"RunConfig.batch_size = {g.batch_size}",
            "RunConfig.num_epochs = 1.0",  # --num_train_epochs 1
            f"RunConfig.num_train_steps = {g.steps}",  # the script's step cap
            "RunConfig.shuffle_train = False",  # the script's sampler made sequential
            "RunConfig.train_split = 'trial'",
            "RunConfig.eval_split = 'validation'",  # cmrc2019_dev.json: the predicted file
            "RunConfig.log_every = 1",
            f"RunConfig.tfds_cache_dir = '{self.work / 'tfds'}'",
            f"MODEL_DIR = '{self.model_dir}'",
            f"DATA_DIR = '{self.work / 'data'}'",
        ]
        if pretrained is not None:
            out.append(f"PRETRAINED = '{pretrained}'")
        return out

    def initial_head(self) -> tuple[np.ndarray, np.ndarray]:
        """cmrcx's initial cloze head (kernel [hidden, 1], bias [1]): the trainer's fresh
        state for this run's gin, as `cmrcx.train` makes it (seeded)."""
        import jax

        from cmrcx.cli import launch
        from cmrcx.model_api.cloze import ClozeModel
        from cmrcx.models import registry
        from cmrcx.tasks.cmrc2019 import MAX_BLANKS
        from cmrcx.training import partitioning, released_optimizer
        from cmrcx.training.trainer import Trainer

        launch.parse_gin(["cmrc2019_bert.gin", "runs/released_script.gin"], self.bindings())
        run = launch.gin_run_config()
        model = ClozeModel(registry.network(run.model, "cloze"), run.max_length, MAX_BLANKS)
        mesh = partitioning.make_mesh(run.mesh_shape)
        optimizer = released_optimizer.released_bert_adam(run.learning_rate, 1)
        example = model.example_batch(run.batch_size)
        trainer = Trainer(model, optimizer, mesh, example, seed=run.seed)
        head = jax.device_get(trainer.init_state().params["cloze_head"])
        return np.asarray(head["kernel"], np.float32), np.asarray(head["bias"], np.float32)

    def write_data(self) -> tuple[Path, int]:
        """DATA_DIR: the trained passages of the trial file as the trial split, the
        predicted ones as the dev file; the script reads copies in its own folder (it
        caches features beside them). Returns (dev file, blanks trained on)."""
        data = self.work / "data"
        data.mkdir()
        document = json.loads(TRIAL.read_text(encoding="utf-8"))
        parts = {
            "cmrc2019_trial.json": document["data"][: self.geometry.trained_passages],
            "cmrc2019_dev.json": document["data"][: self.geometry.predicted_passages],
        }
        for name, records in parts.items():
            text = json.dumps({**document, "data": records}, ensure_ascii=False)
            (data / name).write_text(text, encoding="utf-8")
        shutil.copytree(data, self.work / "script")
        blanks = sum(len(record["answers"]) for record in parts["cmrc2019_trial.json"])
        return data / "cmrc2019_dev.json", blanks

    def start_script(self, authors: Path) -> subprocess.Popen:
        g, folder = self.geometry, self.work / "script"
        args = [
            sys.executable, str(DRIVER), str(SCRIPT), str(folder / "record.json"), str(g.steps),
            "--",
            "--vocab_file", str(authors / "vocab.txt"),
            "--bert_config_file", str(authors / "bert_config.json"),
            "--init_checkpoint", str(authors / "pytorch_model.bin"),
            "--do_train", "--do_predict", "--no_cuda",
            "--train_file", str(folder / "cmrc2019_trial.json"),
            "--predict_file", str(folder / "cmrc2019_dev.json"),
            "--train_batch_size", str(g.batch_size),
            "--learning_rate", "2e-5",  # run.sh's
            "--num_train_epochs", "1",
            "--max_seq_length", str(g.max_length),
            "--doc_stride", str(g.doc_stride),
            "--output_dir", str(folder / "out"),
        ]  # fmt: skip
        with open(folder / "log.txt", "w") as log:  # the child keeps its own copy
            return subprocess.Popen(args, cwd=folder, stdout=log, stderr=subprocess.STDOUT)

    def start_cmrcx(self, export: Path) -> subprocess.Popen:
        args = [
            sys.executable, "-m", "cmrcx.train",
            "--gin_file=cmrc2019_bert.gin", "--gin_file=runs/released_script.gin",
            *(f"--gin.{binding.replace(' = ', '=')}" for binding in self.bindings(export)),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        with open(self.work / "cmrcx_log.txt", "w") as log:
            return subprocess.Popen(
                args, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )


def finish(process: subprocess.Popen, log: Path, what: str, timeout: float) -> None:
    process.wait(timeout=timeout)
    assert process.returncode == 0, f"{what} failed:\n" + log.read_text()[-6000:]


def convert(authors: Path, export: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "cmrcx.convert", "--from", str(authors), "--to", str(export)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


# ---------------------------------------------------------------- the comparison


def cmrcx_lines(model_dir: Path) -> list[dict]:
    lines = [json.loads(x) for x in (model_dir / "metrics.jsonl").open(encoding="utf-8")]
    return [x for x in lines if x["split"] == "train"]


def relative_differences(ours, theirs) -> np.ndarray:
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    scale = np.maximum(np.abs(theirs), 1e-30)
    return np.where(theirs == ours, 0.0, np.abs(ours - theirs) / scale)


def parameter_differences(run: TrainRun, script_out: Path, authors: Path):
    """(largest |cmrcx - script| after the last step but the head's bias, largest |script -
    start|, the same over the pooler alone, both head biases); the script's saved model is
    read through cmrcx's own converter (its format is the start's)."""
    import jax

    from cmrcx.weights import bert as bert_weights
    from cmrcx.weights import exports

    def encoder_and_head(directory: Path):
        params = bert_weights.read_dir(str(directory)).params
        state = torch.load(directory / "pytorch_model.bin", map_location="cpu")
        head = {
            "kernel": state["qa_outputs.weight"].numpy().T,
            "bias": state["qa_outputs.bias"].numpy(),
        }
        return {"bert": params, "cloze_head": head}

    trained = script_out / "model"
    trained.mkdir(exist_ok=True)
    shutil.copyfile(script_out / "pytorch_model.bin", trained / "pytorch_model.bin")
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copyfile(authors / name, trained / name)
    theirs, start = encoder_and_head(trained), encoder_and_head(authors)
    step_dir = run.model_dir / "checkpoints" / str(run.geometry.steps) / "default"
    ours = exports.restore_numpy(str(step_dir))["params"]
    pooler = ("bert", "pooler")  # out of the script's optimizer, and of cmrcx's updates
    biases = (float(ours["cloze_head"]["bias"][0]), float(theirs["cloze_head"]["bias"][0]))
    ours["cloze_head"]["bias"] = theirs["cloze_head"]["bias"]  # HEAD_BIAS_ATOL's
    diff = jax.tree.map(lambda a, b: float(np.max(np.abs(a - b))), ours, theirs)
    moved = jax.tree.map(lambda a, b: float(np.max(np.abs(a - b))), theirs, start)
    flat_moved = jax.tree_util.tree_flatten_with_path(moved)[0]
    pooler_moved = [v for path, v in flat_moved if tuple(k.key for k in path[:2]) == pooler]
    return max(jax.tree.leaves(diff)), max(jax.tree.leaves(moved)), max(pooler_moved), biases


def scores(gold: Path, predictions: Path) -> dict:
    from cmrcx.benchmarks.cmrc2019.scoring import score_cmrc2019

    return score_cmrc2019(str(gold), str(predictions))


def run_both(geometry: Geometry, work: Path) -> dict:
    """Both runs from one start; their records side by side (also printed)."""
    vocab = work / "vocab.txt"
    vocab_size = write_vocabulary(vocab)
    run = TrainRun(geometry, vocab_size, work)
    gold, blanks = run.write_data()
    authors, export = work / "authors", work / "export"
    config = authors_config(geometry, vocab_size)
    write_authors_checkpoint(authors, config, run.initial_head(), vocab)
    script = run.start_script(authors)  # the two runs share the machine's cores
    convert(authors, export)
    ours = run.start_cmrcx(export)
    timeout = 600 if geometry is SMALL else 6 * 3600
    finish(script, work / "script" / "log.txt", "the authors' script", timeout)
    finish(ours, work / "cmrcx_log.txt", "cmrcx.train", timeout)
    record = json.loads((work / "script" / "record.json").read_text())
    lines = cmrcx_lines(run.model_dir)
    predictions = run.model_dir / "predictions" / "cmrc2019_bert_chinese_validation.json"
    script_out = work / "script" / "out"
    params, moved, pooler_moved, biases = parameter_differences(run, script_out, authors)
    result = {
        "blanks": blanks,
        "record": record,
        "cmrcx_loss": [x["loss"] for x in lines],
        "cmrcx_lr": [x["learning_rate"] for x in lines],
        "steps": [x["step"] for x in lines],
        "param_max_abs_diff": params,
        "param_max_abs_moved": moved,
        "pooler_moved": pooler_moved,
        "head_biases": biases,
        "ours": json.loads(predictions.read_text()),
        "theirs": json.loads((script_out / "predictions.json").read_text()),
        "ours_scores": scores(gold, predictions),
        "theirs_scores": scores(gold, script_out / "predictions.json"),
    }
    loss_diff = relative_differences(result["cmrcx_loss"], record["loss"])
    lr_diff = relative_differences(result["cmrcx_lr"], record["lr"])
    summary = {
        "max_rel_loss_diff": float(loss_diff.max()),
        "max_rel_lr_diff": float(lr_diff.max()),
        **{
            k: result[k]
            for k in ("param_max_abs_diff", "param_max_abs_moved", "pooler_moved", "head_biases")
        },
        "cmrcx": result["ours_scores"],
        "script": result["theirs_scores"],
    }
    print("script parity:", json.dumps(summary))
    return result


def check_parity(geometry: Geometry, result: dict) -> None:
    record, steps = result["record"], geometry.steps
    # The start was loaded whole into the script's model (else it logs the keys left out).
    assert record["load"] == {"missing": "[]", "unexpected": "[]", "errors": "[]"}
    assert record["num_train_examples"] == result["blanks"]  # one example per blank
    assert record["t_total"] == result["blanks"] // geometry.batch_size
    assert result["steps"] == list(range(1, steps + 1))
    assert len(record["loss"]) == len(record["lr"]) == steps
    # Step 1's loss first: it differs when the features (windows, ids, blanks) differ.
    assert relative_differences(result["cmrcx_loss"][:1], record["loss"][:1]).max() <= 1e-5
    assert relative_differences(result["cmrcx_lr"], record["lr"]).max() <= 1e-5
    assert relative_differences(result["cmrcx_loss"], record["loss"]).max() <= 1e-5
    # Warm-up's end is inside the run, so the rate rose and fell in both.
    assert max(record["lr"]) > record["lr"][-1] > 0 and record["lr"][0] == 0.0
    assert result["param_max_abs_diff"] <= geometry.param_atol
    assert result["param_max_abs_moved"] > 20 * geometry.param_atol  # the updates are seen
    assert result["pooler_moved"] == 0.0  # frozen on both sides
    assert max(abs(bias) for bias in result["head_biases"]) <= HEAD_BIAS_ATOL
    assert result["ours"] == result["theirs"]  # every blank's choice
    assert result["ours_scores"] == result["theirs_scores"]


def test_cmrcx_trains_as_the_released_script_small(tmp_path):
    check_parity(SMALL, run_both(SMALL, tmp_path))


@pytest.mark.slow  # BERT-base on CPU: hours on 2 cores (run by hand)
def test_cmrcx_trains_as_the_released_script_bert_base(tmp_path):
    check_parity(BASE, run_both(BASE, tmp_path))
