"""Benchmarks: cmrcx's BERT cloze and classification steps against Hugging Face's
PyTorch BERT, the input pipeline, and the train step's compiled memory.

    .venv/bin/python tools/bench.py train [--attn eager] [--json]   # batch 2 x 512
    .venv/bin/python tools/bench.py eval [--json]                   # batch 8 x 512
    .venv/bin/python tools/bench.py classify [--classes 3] [--json] # batch 32 x 128
    .venv/bin/python tools/bench.py input [--passages 10000] [--json]
    .venv/bin/python tools/bench.py memory [--json]                 # batch 24 x 512
    .venv/bin/python tools/bench.py generate [--batch 1,8] [--json] # LongLM-small, 512 -> 64
    .venv/bin/python tools/bench.py train_t5 [--batch 4] [--json]   # LongLM-small, 512 / 128
    .venv/bin/python tools/bench.py memory --models longlm_large --batch 12 --seq 512

train / eval / classify: each side runs in its own child process (`_worker`), pinned with
`taskset -c CPUS`, torch with `torch.set_num_threads(len(CPUS))`; the sides alternate
(cmrcx, torch, cmrcx, torch, ...) for `--rounds`; each child runs `--warmup` steps
(excluded; the first includes compilation) and then `--steps` timed steps. Reported:
the median over all timed steps of a side. Both sides: float32, the same geometry, the
same random token ids, dropout 0.1 on (train), AdamW with global-norm clipping at 1.0.
classify is a fine-tuning step as CLUE's classifiers (AFQMC, TNEWS, IFLYTEK: max length
128, CLUE Table 7; batch 32; 2 classes by default, as AFQMC): cmrcx's ClassificationModel
against transformers' BertForSequenceClassification, sentence pairs of random ids.

FLOPs (matmuls only; embeddings gathers, softmax, LayerNorm, GeLU and the optimizer
are not counted), for L layers, hidden h, intermediate i, batch b, sequence s, T = b*s:
    forward = L * (2*T*(4*h*h + 2*h*i) + 2*2*b*s*s*h) + 2*T*h
              (Q, K, V, output and the two FFN projections; Q.K^T and probs.V; cloze head)
    train   = 3 * forward (the backward pass does two matmuls per forward matmul)
classify replaces the cloze head by the pooler and classifier: 2*b*h*h + 2*b*h*C.
BERT-base at b=2, s=512: forward 193 GFLOP, train 580 GFLOP. The rate is compared with a
2048^3 float32 `jnp.dot` (2*2048^3 FLOP) timed in the cmrcx process.

generate / train_t5 (T5 v1.0 at LongLM geometry, random init, float32), with the same
children, pinning and alternation, once per batch size. generate: cmrcx's
`decoding.sample` (one jitted while_loop, KV cache) against transformers'
`generate(do_sample=True, top_k=40, use_cache=True)`, exactly --target_length new
tokens per row (EOS disabled, see NO_EOS); a "step" is one whole generate call and
tokens/s counts generated tokens. train_t5: Seq2SeqModel's teacher-forced step under
the Trainer against T5ForConditionalGeneration(labels=...), both AdamW lr 1e-4 with
global-norm clipping at 1.0, dropout 0.1; tokens/s counts input + target tokens.
memory --models longlm_large: the same step's compiled memory at LongLM-large.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime
import importlib.metadata
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
TINY_VOCAB = REPO_ROOT / "cmrcx" / "data" / "tiny_vocab.txt"
RESULT_PREFIX = "BENCH_RESULT "
MAX_BLANKS = 32  # tasks/cmrc2019.py MAX_BLANKS: width of blank_positions
BLANKS_IN_WINDOW = 10  # about the blanks a 512-token CMRC 2019 window holds
CANDIDATE_TOKENS = 16  # [CLS] candidate [SEP]: token type 0
MATMUL_SIZE = 2048
# HF PyTorch BERT-base train step, seq 512 batch 2, SDPA, 2-core CPU: the issue's
# reference figure, used by `input` when no `bench train --json` output is given.
REFERENCE_TRAIN_STEP = {"seconds": 4.6, "batch": 2, "source": "issue reference (HF PyTorch)"}
CAPACITIES_GIB = (16, 32, 80)


# ---------------------------------------------------------------- geometry & FLOPs


@dataclasses.dataclass(frozen=True)
class Geometry:
    """BERT geometry and batch shape of one benchmark."""

    layers: int = 12
    hidden: int = 768
    heads: int = 12
    intermediate: int = 3072
    vocab: int = 21128  # bert-base-chinese
    seq: int = 512
    batch: int = 2

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


PRESETS = {
    "base": Geometry(),
    # RoBERTa-wwm-ext-large (the paper's strongest baseline): BERT-large geometry.
    "large": Geometry(layers=24, hidden=1024, heads=16, intermediate=4096),
}
GEOMETRY_FIELDS = [f.name for f in dataclasses.fields(Geometry)]


def forward_flops(g: Geometry, num_classes: int = 0) -> float:
    """Matmul FLOPs of one forward pass (formula in the module docstring).

    num_classes 0: the cloze head; else the pooler and a `num_classes` classifier.
    """
    dense = 2 * g.tokens * (4 * g.hidden**2 + 2 * g.hidden * g.intermediate)
    attention = 2 * 2 * g.batch * g.seq**2 * g.hidden
    if num_classes:
        head = 2 * g.batch * g.hidden * (g.hidden + num_classes)
    else:
        head = 2 * g.tokens * g.hidden
    return g.layers * (dense + attention) + head


def step_flops(g: Geometry, mode: str, num_classes: int = 0) -> float:
    """Forward FLOPs for eval; 3x for a train or classify (fine-tuning) step."""
    return (1 if mode == "eval" else 3) * forward_flops(g, num_classes)


def synthetic_batch(g: Geometry, seed: int = 0) -> dict[str, np.ndarray]:
    """A full-length window batch (int32), the same for both sides.

    input_ids, token_type_ids, input_mask: [batch, seq]; blank_positions,
    blank_in_window: [batch, 32]; target_blank, example_mask: [batch].
    """
    rng = np.random.default_rng(seed)
    b, s = g.batch, g.seq
    candidate = min(CANDIDATE_TOKENS, s // 4)
    blanks = min(BLANKS_IN_WINDOW, s - candidate - 1)
    positions = np.zeros([b, MAX_BLANKS], np.int32)
    for row in range(b):
        positions[row, :blanks] = np.sort(rng.choice(np.arange(candidate, s), blanks, False))
    return {
        "input_ids": rng.integers(104, g.vocab, [b, s], dtype=np.int32),
        "token_type_ids": (np.arange(s)[None, :] >= candidate).repeat(b, 0).astype(np.int32),
        "input_mask": np.ones([b, s], np.int32),
        "blank_positions": positions,
        "blank_in_window": (np.arange(MAX_BLANKS) < blanks)[None].repeat(b, 0).astype(np.int32),
        "target_blank": rng.integers(0, blanks, [b], dtype=np.int32),
        "example_mask": np.ones([b], np.int32),
    }


def classification_batch(g: Geometry, num_classes: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A sentence-pair batch (int32) as AFQMC's: two halves, token types 0 and 1.

    input_ids, token_type_ids, input_mask: [batch, seq]; label, example_mask: [batch].
    """
    rng = np.random.default_rng(seed)
    b, s = g.batch, g.seq
    return {
        "input_ids": rng.integers(104, g.vocab, [b, s], dtype=np.int32),
        "token_type_ids": (np.arange(s)[None, :] >= s // 2).repeat(b, 0).astype(np.int32),
        "input_mask": np.ones([b, s], np.int32),
        "label": rng.integers(0, num_classes, [b], dtype=np.int32),
        "example_mask": np.ones([b], np.int32),
    }


def bench_batch(args, g: Geometry) -> dict[str, np.ndarray]:
    """The worker's batch: a cloze window batch, or a classification batch for classify."""
    if args.mode == "classify":
        return classification_batch(g, args.classes, args.seed)
    return synthetic_batch(g, args.seed)


def measured_steps(step, warmup: int, steps: int, after_first=None) -> dict:
    """Per-step seconds of warmup + steps calls; kernel work over the timed steps.

    Page faults and system time show the cost of fresh buffers being mapped each
    step (see --glibc_tunables).
    """
    times = timed(step, 1)
    if after_first is not None:
        after_first()
    times += timed(step, warmup - 1)
    start = resource.getrusage(resource.RUSAGE_SELF)
    times += timed(step, steps)
    end = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "step_seconds": times,
        "minor_faults_per_step": (end.ru_minflt - start.ru_minflt) / steps,
        "system_seconds_per_step": (end.ru_stime - start.ru_stime) / steps,
        "user_seconds_per_step": (end.ru_utime - start.ru_utime) / steps,
    }


def timed(step, count: int) -> list[float]:
    """Wall-clock seconds of `count` calls of `step()` (which must synchronise)."""
    times = []
    for _ in range(count):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


# ---------------------------------------------------------------- cmrcx side


def cmrcx_trainer(g: Geometry, dtype="float32", remat_policy="none", batch=None, classes=0):
    """A cmrcx Trainer on one device: the cloze model of geometry `g`, or with
    `classes` > 0 a classifier fine-tuned as CLUE's (learning rate 2e-5, Adam epsilon
    1e-8: CLUE's run_classifier.py defaults)."""
    import jax

    from cmrcx.model_api.classification import ClassificationModel
    from cmrcx.model_api.cloze import ClozeModel
    from cmrcx.training import partitioning
    from cmrcx.training.trainer import Trainer, adamw_with_warmup

    config = cmrcx_config(g, dtype, remat_policy)
    mesh = partitioning.make_mesh((1, 1), devices=jax.devices()[:1])
    if classes:
        model = ClassificationModel(config, classes, g.seq)
        batch = model.example_batch(g.batch) if batch is None else batch
        return Trainer(model, adamw_with_warmup(2e-5, 1000, adam_epsilon=1e-8), mesh, batch)
    batch = synthetic_batch(g) if batch is None else batch
    return Trainer(ClozeModel(config), adamw_with_warmup(5e-5, 1000), mesh, batch)


def cmrcx_config(g: Geometry, dtype: str, remat_policy: str):
    """cmrcx's BertConfig of geometry `g`."""
    from cmrcx.models.bert import BertConfig

    return BertConfig(
        vocab_size=g.vocab,
        hidden_size=g.hidden,
        num_layers=g.layers,
        num_heads=g.heads,
        intermediate_size=g.intermediate,
        max_position_embeddings=max(512, g.seq),
        dtype=dtype,
        remat_policy=remat_policy,
    )


def matmul_rate(size: int = MATMUL_SIZE, repeats: int = 7) -> float:
    """FLOP/s of a jitted size^3 float32 jnp.dot (median of `repeats`)."""
    import jax
    import jax.numpy as jnp

    x, y = jax.random.normal(jax.random.key(0), (2, size, size), jnp.float32)
    dot = jax.jit(jnp.dot)
    jax.block_until_ready(dot(x, y))
    seconds = timed(lambda: jax.block_until_ready(dot(x, y)), repeats)
    return 2 * size**3 / statistics.median(seconds)


def run_cmrcx(args, g: Geometry) -> dict:
    """Times cmrcx's train step or scoring step; also the matmul reference and compile."""
    import jax

    batch = bench_batch(args, g)
    trainer = cmrcx_trainer(g, batch=batch, classes=args.classes if args.mode == "classify" else 0)
    state = trainer.init_state()
    jax.block_until_ready(state)
    compile_events, after_first_step = compile_recorder()  # the first call compiles

    def train_step():
        nonlocal state
        state, metrics = trainer.train_step(state, batch)
        jax.block_until_ready((state, metrics))

    def score_step():
        trainer.score(state.params, batch)  # returns numpy: synchronous

    step = score_step if args.mode == "eval" else train_step
    result = measured_steps(step, args.warmup, args.steps, after_first_step)
    return {**result, "compile_events": compile_events, "matmul": matmul_rate()}


# ---------------------------------------------------------------- torch side


def torch_config(g: Geometry, attn: str, **extra):
    """transformers' BertConfig of geometry `g`, as cmrcx's (dropout 0.1, exact GeLU)."""
    import transformers

    return transformers.BertConfig(
        vocab_size=g.vocab,
        hidden_size=g.hidden,
        num_hidden_layers=g.layers,
        num_attention_heads=g.heads,
        intermediate_size=g.intermediate,
        max_position_embeddings=max(512, g.seq),
        type_vocab_size=2,
        hidden_act="gelu",  # exact erf GeLU, as cmrcx
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        layer_norm_eps=1e-12,
        attn_implementation=attn,
        **extra,
    )


def torch_classification_model(g: Geometry, attn: str, num_classes: int):
    """HF BertForSequenceClassification (pooler, dropout, linear) taking a batch dict."""
    import transformers

    class TorchClassifier(transformers.BertForSequenceClassification):
        def forward(self, batch):
            outputs = super().forward(
                input_ids=batch["input_ids"],
                token_type_ids=batch["token_type_ids"],
                attention_mask=batch["input_mask"],
            )
            return outputs.logits

    return TorchClassifier(torch_config(g, attn, num_labels=num_classes))


def torch_cloze_model(g: Geometry, attn: str):
    """HF BertModel (no pooler) + the cloze head: Linear(hidden, 1) at the blanks."""
    import torch
    import transformers

    config = torch_config(g, attn)

    class TorchCloze(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertModel(config, add_pooling_layer=False)
            self.cloze_head = torch.nn.Linear(g.hidden, 1)

        def forward(self, batch):
            hidden = self.bert(
                input_ids=batch["input_ids"],
                token_type_ids=batch["token_type_ids"],
                attention_mask=batch["input_mask"],
            ).last_hidden_state
            token_logits = self.cloze_head(hidden)[..., 0]
            logits = torch.gather(token_logits, 1, batch["blank_positions"])
            return torch.where(batch["blank_in_window"] > 0, logits, -10000.0)

    return TorchCloze()


def run_torch(args, g: Geometry) -> dict:
    """Times the PyTorch train step (AdamW) or no-grad scoring pass."""
    import torch

    torch.set_num_threads(len(args.cpus.split(",")))
    torch.manual_seed(args.seed)
    batch = {k: torch.from_numpy(v).long() for k, v in bench_batch(args, g).items()}
    if args.mode == "classify":  # CLUE's run_classifier.py: lr 2e-5, eps 1e-8
        model = torch_classification_model(g, args.attn, args.classes)
        target, lr, eps = "label", 2e-5, 1e-8
    else:
        model = torch_cloze_model(g, args.attn)
        target, lr, eps = "target_blank", 5e-5, 1e-6
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, eps=eps, weight_decay=0.01)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        losses = torch.nn.functional.cross_entropy(model(batch), batch[target], reduction="none")
        mask = batch["example_mask"].float()
        (torch.sum(losses * mask) / mask.sum().clamp(min=1.0)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    def score_step():
        with torch.inference_mode():
            model(batch).numpy()

    model.train(args.mode != "eval")
    step = score_step if args.mode == "eval" else train_step
    result = measured_steps(step, args.warmup, args.steps)
    x, y = torch.randn(2, MATMUL_SIZE, MATMUL_SIZE).unbind(0)
    mm = statistics.median(timed(lambda: torch.mm(x, y), 7))
    return {**result, "matmul": 2 * MATMUL_SIZE**3 / mm}


def worker_main(args) -> None:
    """`_worker`: one side's timings as a JSON line on stdout."""
    g = geometry_from_args(args)
    result = (run_cmrcx if args.side == "cmrcx" else run_torch)(args, g)
    print(RESULT_PREFIX + json.dumps(result), flush=True)


# ---------------------------------------------------------------- train / eval parent


def spawn_worker(args, side: str) -> dict:
    """Runs one BERT `_worker` child pinned to args.cpus; returns its result."""
    command = [sys.executable, str(Path(__file__).resolve()), "_worker", "--side", side]
    command += ["--mode", args.command, "--attn", args.attn, "--cpus", args.cpus]
    command += ["--warmup", str(args.warmup), "--steps", str(args.steps), "--seed", str(args.seed)]
    command += ["--classes", str(getattr(args, "classes", 0))]
    for name in GEOMETRY_FIELDS:
        command += [f"--{name}", str(getattr(args, name))]
    return run_child(args, side, command)


def t5_worker_command(args, side: str, g) -> list[str]:
    """The `_t5_worker` command line of one side at T5 geometry `g`."""
    command = [sys.executable, str(Path(__file__).resolve()), "_t5_worker", "--side", side]
    command += ["--mode", args.command, "--cpus", args.cpus]
    command += ["--warmup", str(args.warmup), "--steps", str(args.steps), "--seed", str(args.seed)]
    for name in T5_FIELDS:
        command += [f"--{name}", str(getattr(g, name))]
    return command


def run_child(args, side: str, command: list[str]) -> dict:
    """Runs a worker command pinned to args.cpus (taskset); returns its result."""
    if shutil.which("taskset"):
        command = ["taskset", "-c", args.cpus, *command]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO_ROOT)}
    if args.glibc_tunables is not None:  # read by glibc at process start: both sides alike
        env["GLIBC_TUNABLES"] = args.glibc_tunables
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if proc.returncode or not lines:
        raise RuntimeError(f"{side} worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def side_summary(runs: list[dict], args, g: Geometry) -> dict:
    """Medians over all timed steps of one side's runs."""
    timed_steps = [t for run in runs for t in run["step_seconds"][args.warmup :]]
    median = statistics.median(timed_steps)
    flops = step_flops(g, args.command, num_classes(args)) / median
    matmul = statistics.median(run["matmul"] for run in runs)
    first = statistics.median(run["step_seconds"][0] for run in runs)
    summary = {
        "median_step_seconds": median,
        "tokens_per_second": g.tokens / median,
        "examples_per_second": g.batch / median,
        "flops_per_second": flops,
        "matmul_2048_flops_per_second": matmul,
        "matmul_share": flops / matmul,
        "first_step_seconds": first,
        "first_over_steady": first / median,
        "step_seconds_per_round": [run["step_seconds"] for run in runs],
    }
    for key in ("minor_faults_per_step", "system_seconds_per_step", "user_seconds_per_step"):
        summary[key] = statistics.median(run[key] for run in runs)
    if "compile_events" in runs[0]:
        events = [run["compile_events"] for run in runs]
        summary["compile_seconds"] = {
            key: statistics.median(e.get(key, 0.0) for e in events) for key in events[0]
        }
        summary["compile_seconds"]["first_minus_steady"] = first - median
    return summary


def num_classes(args) -> int:
    """classify's --classes; 0 (the cloze head) for train / eval."""
    return args.classes if args.command == "classify" else 0


def compare(args) -> dict:
    """train / eval / classify: alternating cmrcx / torch children, then the summary."""
    g = geometry_from_args(args)
    runs = {"cmrcx": [], "torch": []}
    for _ in range(args.rounds):
        for side in runs:
            runs[side].append(spawn_worker(args, side))
    cmrcx, torch = (side_summary(runs[side], args, g) for side in ("cmrcx", "torch"))
    torch["attn"] = args.attn
    return {
        "benchmark": args.command,
        "machine": machine_info(args.cpus),
        "geometry": dataclasses.asdict(g),
        "num_classes": num_classes(args),
        "method": {
            "rounds": args.rounds,
            "warmup": args.warmup,
            "steps": args.steps,
            "glibc_tunables": args.glibc_tunables or os.environ.get("GLIBC_TUNABLES"),
        },
        "flops_per_step": step_flops(g, args.command, num_classes(args)),
        "flop_formula": "forward = L*(2*T*(4h^2+2hi) + 4*b*s^2*h) + head; train = 3*forward; "
        "head = 2*T*h (cloze), 2*b*h*(h+C) (classify)",
        "cmrcx": cmrcx,
        "torch": torch,
        # Throughput ratio: > 1 means cmrcx's step is faster.
        "speed_ratio_cmrcx_over_torch": torch["median_step_seconds"] / cmrcx["median_step_seconds"],
    }


def print_comparison(report: dict) -> None:
    g, c, t = report["geometry"], report["cmrcx"], report["torch"]
    print_header(report)
    classes = f", {report['num_classes']} classes" if report["num_classes"] else ""
    print(f"geometry: {g}{classes}; FLOPs/step {report['flops_per_step'] / 1e9:.1f} G")
    print(f"{'':28}{'cmrcx (JAX)':>16}{'torch (' + t['attn'] + ')':>16}")
    rows = [
        ("median step (s)", "median_step_seconds", "{:.3f}"),
        ("tokens/s", "tokens_per_second", "{:.1f}"),
        ("examples/s", "examples_per_second", "{:.2f}"),
        ("GFLOP/s", "flops_per_second", "{:.1f}", 1e-9),
        ("2048^3 matmul GFLOP/s", "matmul_2048_flops_per_second", "{:.1f}", 1e-9),
        ("share of matmul rate", "matmul_share", "{:.1%}"),
        ("first step (s)", "first_step_seconds", "{:.2f}"),
        ("first / steady", "first_over_steady", "{:.2f}"),
        ("minor page faults / step", "minor_faults_per_step", "{:.0f}"),
        ("system CPU s / step", "system_seconds_per_step", "{:.2f}"),
    ]
    for label, key, fmt, *scale in rows:
        factor = scale[0] if scale else 1
        print(f"{label:28}{fmt.format(c[key] * factor):>16}{fmt.format(t[key] * factor):>16}")
    compile_text = ", ".join(f"{k} {v:.2f}" for k, v in c.get("compile_seconds", {}).items())
    print(f"cmrcx compile (s): {compile_text}")
    print(f"speed ratio cmrcx / torch: {report['speed_ratio_cmrcx_over_torch']:.3f}")


# ---------------------------------------------------------------- T5 / LongLM: generate, train_t5


@dataclasses.dataclass(frozen=True)
class T5Geometry:
    """T5 v1.0 geometry (ReLU FFN, tied LM head) and batch shape; defaults LongLM-small
    (gin_configs/models/longlm_small.gin)."""

    d_model: int = 512
    d_ff: int = 2048
    d_kv: int = 64
    heads: int = 8
    layers: int = 6  # encoder blocks
    decoder_layers: int = 6
    vocab: int = 32128
    input_length: int = 512
    target_length: int = 128  # train_t5: target tokens; generate: new tokens
    batch: int = 4


T5_PRESETS = {
    "longlm_small": T5Geometry(),
    # gin_configs/models/longlm_large.gin (LOT paper Table 8): 1B parameters.
    "longlm_large": T5Geometry(d_model=1536, d_ff=3072, heads=12, layers=24, decoder_layers=32),
}
T5_FIELDS = [f.name for f in dataclasses.fields(T5Geometry)]
T5_COMMANDS = ("generate", "train_t5")
TOP_K = 40  # generate: top-k sampling, temperature 1.0
# generate's cmrcx eos_token_id: no sampled id (0 .. vocab-1) equals it, so no row stops
# early. The torch side keeps eos 1 and passes min_new_tokens = max_new_tokens, whose
# logits processor sets EOS's logit to -inf at every step: it never stops early either.
NO_EOS = -1
T5_LEARNING_RATE = 1e-4  # LongLM pretraining: Adam, lr 1e-4 (LOT paper section 4)


def cmrcx_t5_config(g: T5Geometry, dtype="float32", remat_policy="none", eos_token_id=1):
    """cmrcx's T5Config of geometry `g` (the rest as longlm_small.gin)."""
    from cmrcx.models.t5 import T5Config

    return T5Config(
        vocab_size=g.vocab,
        d_model=g.d_model,
        d_kv=g.d_kv,
        d_ff=g.d_ff,
        num_layers=g.layers,
        num_decoder_layers=g.decoder_layers,
        num_heads=g.heads,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
        eos_token_id=eos_token_id,
        dtype=dtype,
        remat_policy=remat_policy,
    )


def torch_t5_config(g: T5Geometry):
    """transformers' T5Config of geometry `g`, as cmrcx_t5_config's (dropout 0.1)."""
    import transformers

    return transformers.T5Config(
        vocab_size=g.vocab,
        d_model=g.d_model,
        d_kv=g.d_kv,
        d_ff=g.d_ff,
        num_layers=g.layers,
        num_decoder_layers=g.decoder_layers,
        num_heads=g.heads,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        dropout_rate=0.1,
        layer_norm_epsilon=1e-6,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )


def seq2seq_batch(g: T5Geometry, seed: int = 0) -> dict[str, np.ndarray]:
    """Random full-length rows (int32), as Seq2SeqModel reads them: inputs, inputs_mask
    [batch, input_length]; targets (ending in EOS 1), targets_mask [batch, target_length];
    example_mask [batch]. Ids avoid pad 0 and EOS 1."""
    rng = np.random.default_rng(seed)
    targets = rng.integers(2, g.vocab, [g.batch, g.target_length], dtype=np.int32)
    targets[:, -1] = 1
    return {
        "inputs": rng.integers(2, g.vocab, [g.batch, g.input_length], dtype=np.int32),
        "inputs_mask": np.ones([g.batch, g.input_length], np.int32),
        "targets": targets,
        "targets_mask": np.ones([g.batch, g.target_length], np.int32),
        "example_mask": np.ones([g.batch], np.int32),
    }


def seq2seq_trainer(g: T5Geometry, dtype="float32", remat_policy="none"):
    """A cmrcx Trainer on one device for Seq2SeqModel (teacher forcing), AdamW lr 1e-4."""
    import jax

    from cmrcx.model_api.seq2seq import Seq2SeqModel
    from cmrcx.training import partitioning
    from cmrcx.training.trainer import Trainer, adamw_with_warmup

    model = Seq2SeqModel(cmrcx_t5_config(g, dtype, remat_policy), g.input_length, g.target_length)
    mesh = partitioning.make_mesh((1, 1), devices=jax.devices()[:1])
    optimizer = adamw_with_warmup(T5_LEARNING_RATE, 1000)
    return Trainer(model, optimizer, mesh, model.example_batch(g.batch))


def compile_recorder():
    """(events, after_first): jax's compile-phase seconds, captured after the first call."""
    import jax

    events, compile_events = collections.defaultdict(float), {}
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **_: events.__setitem__(event, events[event] + seconds)
    )

    def after_first():
        compile_events.update(
            {k.rsplit("/", 1)[-1]: v for k, v in events.items() if "/compile/" in k}
        )

    return compile_events, after_first


def run_cmrcx_t5(args, g: T5Geometry) -> dict:
    """Times cmrcx's decoding.sample call (generate) or Seq2Seq train step (train_t5)."""
    import itertools

    import flax.linen as nn
    import jax

    from cmrcx.models import decoding
    from cmrcx.models.t5 import T5ForConditionalGeneration

    batch = seq2seq_batch(g, args.seed)
    if args.mode == "generate":
        model = T5ForConditionalGeneration(cmrcx_t5_config(g, eos_token_id=NO_EOS))
        inputs, mask = jax.device_put(batch["inputs"]), jax.device_put(batch["inputs_mask"])
        init = jax.jit(lambda rng: nn.meta.unbox(model.init(rng, inputs, mask, inputs[:, :1])))
        params = jax.block_until_ready(init(jax.random.key(args.seed))["params"])
        calls, lengths = itertools.count(), []

        def step():
            rng = jax.random.fold_in(jax.random.key(args.seed), next(calls))
            out = decoding.sample(model, params, inputs, mask, g.target_length, rng, top_k=TOP_K)
            lengths.append(int(np.min(jax.device_get(out.lengths))))  # synchronises
    else:
        trainer = seq2seq_trainer(g)
        state = jax.block_until_ready(trainer.init_state())
        lengths = [g.target_length]

        def step():
            nonlocal state
            state, metrics = trainer.train_step(state, batch)
            jax.block_until_ready((state, metrics))

    compile_events, after_first = compile_recorder()  # after init: the first call compiles
    result = measured_steps(step, args.warmup, args.steps, after_first)
    return {**result, "compile_events": compile_events, "min_new_tokens": min(lengths)}


def run_torch_t5(args, g: T5Geometry) -> dict:
    """Times transformers' T5 generate (top-k sampling, KV cache) or train step (AdamW)."""
    import torch
    import transformers

    torch.set_num_threads(len(args.cpus.split(",")))
    torch.manual_seed(args.seed)
    batch = {k: torch.from_numpy(v).long() for k, v in seq2seq_batch(g, args.seed).items()}
    model = transformers.T5ForConditionalGeneration(torch_t5_config(g))
    lengths = [g.target_length]
    if args.mode == "generate":
        model.eval()
        lengths = []

        def step():
            with torch.inference_mode():
                out = model.generate(
                    input_ids=batch["inputs"],
                    attention_mask=batch["inputs_mask"],
                    do_sample=True,
                    top_k=TOP_K,
                    temperature=1.0,
                    max_new_tokens=g.target_length,
                    min_new_tokens=g.target_length,
                    use_cache=True,
                )
            lengths.append(out.shape[1] - 1)  # without the decoder start token
    else:
        model.train()
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=T5_LEARNING_RATE, eps=1e-6, weight_decay=0.01
        )

        def step():
            optimizer.zero_grad(set_to_none=True)
            model(
                input_ids=batch["inputs"],
                attention_mask=batch["inputs_mask"],
                labels=batch["targets"],
            ).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

    result = measured_steps(step, args.warmup, args.steps)
    return {**result, "min_new_tokens": min(lengths)}


def t5_worker_main(args) -> None:
    """`_t5_worker`: one side's timings as a JSON line on stdout."""
    g = T5Geometry(**{name: getattr(args, name) for name in T5_FIELDS})
    result = (run_cmrcx_t5 if args.side == "cmrcx" else run_torch_t5)(args, g)
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def t5_tokens(g: T5Geometry, command: str) -> int:
    """Tokens per call: generated tokens (generate); input + target tokens (train_t5)."""
    if command == "generate":
        return g.batch * g.target_length
    return g.batch * (g.input_length + g.target_length)


def t5_side_summary(runs: list[dict], warmup: int, tokens: int) -> dict:
    """Medians over the timed calls of one side's runs; the first (compiling) call apart."""
    timed_calls = [t for run in runs for t in run["step_seconds"][warmup:]]
    median = statistics.median(timed_calls)
    first = statistics.median(run["step_seconds"][0] for run in runs)
    summary = {
        "median_seconds": median,
        "tokens_per_second": tokens / median,
        "first_call_seconds": first,
        "first_over_steady": first / median,
        "seconds_per_round": [run["step_seconds"] for run in runs],
        "min_new_tokens": min(run["min_new_tokens"] for run in runs),
    }
    for key in ("minor_faults_per_step", "system_seconds_per_step", "user_seconds_per_step"):
        summary[key] = statistics.median(run[key] for run in runs)
    if "compile_events" in runs[0]:
        events = [run["compile_events"] for run in runs]
        summary["compile_seconds"] = {
            key: statistics.median(e.get(key, 0.0) for e in events) for key in events[0]
        }
    return summary


def compare_t5(args) -> dict:
    """generate / train_t5: alternating cmrcx / torch children per batch size."""
    base = T5Geometry(**{name: getattr(args, name) for name in T5_FIELDS if name != "batch"})
    batches = [int(b) for b in str(args.batch).split(",")]
    results = []
    for batch in batches:
        g = dataclasses.replace(base, batch=batch)
        runs = {"cmrcx": [], "torch": []}
        for _ in range(args.rounds):
            for side in runs:
                runs[side].append(run_child(args, side, t5_worker_command(args, side, g)))
        tokens = t5_tokens(g, args.command)
        cmrcx, torch = (t5_side_summary(runs[s], args.warmup, tokens) for s in runs)
        results.append({
            "geometry": dataclasses.asdict(g),
            "tokens_per_call": tokens,
            "cmrcx": cmrcx,
            "torch": torch,
            # > 1 means cmrcx is faster.
            "speed_ratio_cmrcx_over_torch": torch["median_seconds"] / cmrcx["median_seconds"],
        })  # fmt: skip
    if args.command == "generate":
        setting = (f"top-k {TOP_K} sampling, temperature 1.0, KV cache, exactly "
                   f"{base.target_length} new tokens (cmrcx eos_token_id {NO_EOS}; torch "
                   "min_new_tokens = max_new_tokens masks EOS)")  # fmt: skip
    else:
        setting = (f"teacher-forced step, dropout 0.1, AdamW lr {T5_LEARNING_RATE} eps 1e-6 "
                   "wd 0.01, global-norm clip 1.0; tokens = batch x (input + target)")  # fmt: skip
    return {
        "benchmark": args.command,
        "machine": machine_info(args.cpus),
        "setting": setting,
        "method": {"rounds": args.rounds, "warmup": args.warmup, "steps": args.steps,
                   "glibc_tunables": args.glibc_tunables or os.environ.get("GLIBC_TUNABLES")},
        "results": results,
    }  # fmt: skip


def print_t5_comparison(report: dict) -> None:
    print_header(report)
    print(report["setting"])
    for result in report["results"]:
        g, c, t = result["geometry"], result["cmrcx"], result["torch"]
        print(f"\ngeometry: {g}; tokens/call {result['tokens_per_call']}")
        print(f"{'':28}{'cmrcx (JAX)':>16}{'torch':>16}")
        rows = [
            ("median call (s)", "median_seconds", "{:.3f}"),
            ("tokens/s", "tokens_per_second", "{:.1f}"),
            ("first call (s)", "first_call_seconds", "{:.2f}"),
            ("first / steady", "first_over_steady", "{:.2f}"),
            ("system CPU s / call", "system_seconds_per_step", "{:.2f}"),
        ]
        if report["benchmark"] == "generate":
            rows.append(("fewest new tokens in a row", "min_new_tokens", "{}"))
        for label, key, fmt in rows:
            print(f"{label:28}{fmt.format(c[key]):>16}{fmt.format(t[key]):>16}")
        compile_text = ", ".join(f"{k} {v:.2f}" for k, v in c.get("compile_seconds", {}).items())
        print(f"cmrcx compile (s): {compile_text}")
        print(f"speed ratio cmrcx / torch: {result['speed_ratio_cmrcx_over_torch']:.3f}")


# ---------------------------------------------------------------- input pipeline


def train_consumption(args) -> dict:
    """Windows/s a BERT-base train step consumes: from --train_json or a flag/reference."""
    if args.train_json:
        with open(args.train_json, encoding="utf-8") as f:
            report = json.load(f)
        seconds = report["cmrcx"]["median_step_seconds"]
        batch, source = report["geometry"]["batch"], f"cmrcx median in {args.train_json}"
    elif args.train_step_seconds:
        seconds, batch, source = args.train_step_seconds, args.train_batch, "--train_step_seconds"
    else:
        seconds, batch = REFERENCE_TRAIN_STEP["seconds"], REFERENCE_TRAIN_STEP["batch"]
        source = REFERENCE_TRAIN_STEP["source"]
    return {"step_seconds": seconds, "batch": batch, "windows_per_second": batch / seconds,
            "source": source}  # fmt: skip


def bench_input(args) -> dict:
    """Corpus generation, TFDS build and SeqIO windows/s, in this (pinned) process."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import make_cmrc2019_corpus
    import seqio
    import tensorflow as tf
    import tensorflow_datasets as tfds

    from cmrcx.datasets import cmrc2019 as cmrc2019_tfds
    from cmrcx.tasks import cmrc2019 as cmrc2019_tasks

    tf.config.set_visible_devices([], "GPU")
    tfds.disable_progress_bar()
    # TFDS prints its progress to stdout, which must stay one JSON object.
    with (
        tempfile.TemporaryDirectory(prefix="cmrcx_bench_input_") as workdir,
        contextlib.redirect_stdout(sys.stderr),
    ):
        data_dir, cache_dir = os.path.join(workdir, "data"), os.path.join(workdir, "tfds")
        start = time.perf_counter()
        make_cmrc2019_corpus.write_corpus(data_dir, args.passages, args.seed)
        generate = time.perf_counter() - start
        start = time.perf_counter()
        cmrc2019_tfds.prepare(data_dir, "train", cache_dir)
        build = time.perf_counter() - start
        task, _ = cmrc2019_tasks.register_cmrc2019(
            "bench", str(args.vocab), data_dir, args.seq, args.doc_stride, tfds_cache_dir=cache_dir
        )
        dataset = seqio.get_mixture_or_task(task).get_dataset(
            sequence_length=None, split="train", shuffle=False, use_cached=False
        )
        start, windows = time.perf_counter(), 0
        for batch in dataset.batch(args.batch).as_numpy_iterator():
            windows += len(batch["input_ids"])
        preprocess = time.perf_counter() - start
    consumption = train_consumption(args)
    rate = windows / preprocess
    return {
        "benchmark": "input",
        "machine": machine_info(args.cpus),
        "passages": args.passages,
        "vocab": str(args.vocab),
        "max_length": args.seq,
        "doc_stride": args.doc_stride,
        "generate_seconds": generate,
        "tfds_build_seconds": build,
        "tfds_passages_per_second": args.passages / build,
        "windows": windows,
        "windows_per_passage": windows / args.passages,
        "preprocess_seconds": preprocess,
        "windows_per_second": rate,
        "passages_per_second": args.passages / preprocess,
        "train_consumption": consumption,
        "ratio_to_train_step": rate / consumption["windows_per_second"],
    }


def print_input(report: dict) -> None:
    print_header(report)
    c = report["train_consumption"]
    print(f"corpus: {report['passages']} passages generated in {report['generate_seconds']:.1f} s")
    print(f"TFDS build: {report['tfds_build_seconds']:.1f} s "
          f"({report['tfds_passages_per_second']:.0f} passages/s)")  # fmt: skip
    print(
        f"SeqIO tokenize + windows (max_length {report['max_length']}, stride "
        f"{report['doc_stride']}): {report['windows']} windows "
        f"({report['windows_per_passage']:.1f}/passage) in {report['preprocess_seconds']:.1f} s"
        f" = {report['windows_per_second']:.0f} windows/s"
    )
    print(
        f"train step consumes {c['windows_per_second']:.3f} windows/s (batch {c['batch']} / "
        f"{c['step_seconds']:.2f} s, {c['source']})"
    )
    print(f"pipeline / train consumption: {report['ratio_to_train_step']:.0f}x")
    batch_24_ms = 24 / report["windows_per_second"] * 1000
    print(f"(the pipeline keeps up with a batch-24 step every {batch_24_ms:.0f} ms or slower)")


# ---------------------------------------------------------------- memory


def memory_row(g: Geometry | T5Geometry, variant: str) -> dict:
    """Compiled memory of cmrcx's train step for one variant ("f32", "bf16+full", ...):
    the cloze model for a BERT Geometry, Seq2SeqModel (teacher forcing) for a T5Geometry."""
    import jax

    precision, _, remat = variant.partition("+")
    dtype = {"f32": "float32", "bf16": "bfloat16"}[precision]
    if isinstance(g, T5Geometry):
        trainer, example = seq2seq_trainer(g, dtype, remat or "none"), seq2seq_batch(g)
    else:
        trainer = cmrcx_trainer(g, dtype=dtype, remat_policy=remat or "none")
        example = synthetic_batch(g)
    batch = {
        key: jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=trainer.batch_sharding)
        for key, value in example.items()
    }
    start = time.perf_counter()
    compiled = trainer._train_step.lower(trainer.abstract_state, batch).compile()
    seconds = time.perf_counter() - start
    stats = compiled.memory_analysis()
    gib = {
        "argument": stats.argument_size_in_bytes / 2**30,
        "output": stats.output_size_in_bytes / 2**30,
        "alias": stats.alias_size_in_bytes / 2**30,
        "temp": stats.temp_size_in_bytes / 2**30,
        "generated_code": stats.generated_code_size_in_bytes / 2**30,
    }
    # Donated state: outputs aliased to arguments need no second buffer.
    gib["total"] = gib["argument"] + gib["output"] - gib["alias"] + gib["temp"]
    fits = [capacity for capacity in CAPACITIES_GIB if gib["total"] <= capacity]
    return {"variant": variant, "gib": gib, "fits_gib": fits, "compile_seconds": seconds}


def bench_memory(args) -> dict:
    """memory: every model x variant, compiled from shapes only (nothing allocated)."""
    models = {}
    for name in args.models.split(","):
        if name in T5_PRESETS:  # inputs --seq, targets --target_length (default --seq)
            target = args.target_length or args.seq
            g = dataclasses.replace(
                T5_PRESETS[name], batch=args.batch, input_length=args.seq, target_length=target
            )
        else:
            g = geometry_from_args(args) if name == "custom" else PRESETS[name]
            g = dataclasses.replace(g, batch=args.batch, seq=args.seq)
        rows = [memory_row(g, variant) for variant in args.variants.split(",")]
        models[name] = {"geometry": dataclasses.asdict(g), "variants": rows}
    return {
        "benchmark": "memory",
        "machine": machine_info(args.cpus),
        "models": models,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "note": "XLA:CPU memory analysis; total = argument + output - alias + temp. GPU/TPU "
        "fusion differs, and the runtime's own reserve is not included.",
    }


def print_memory(report: dict) -> None:
    print_header(report)
    print(report["note"])
    columns = ("argument", "output", "alias", "temp", "generated_code", "total")
    for name, model in report["models"].items():
        g = model["geometry"]
        if "d_model" in g:
            print(f"\n{name}: {g['layers']}+{g['decoder_layers']} layers, d_model "
                  f"{g['d_model']}, batch {g['batch']} x {g['input_length']}/"
                  f"{g['target_length']}  (GiB)")  # fmt: skip
        else:
            print(f"\n{name}: {g['layers']} layers, hidden {g['hidden']}, batch {g['batch']} x "
                  f"{g['seq']}  (GiB)")  # fmt: skip
        print(f"{'variant':12}" + "".join(f"{c:>10}" for c in columns[:4]) + f"{'code':>10}"
              f"{'total':>10}  fits (GiB)  compile s")  # fmt: skip
        for row in model["variants"]:
            cells = "".join(f"{row['gib'][c]:>10.3f}" for c in columns)
            fits = ",".join(map(str, row["fits_gib"])) or "-"
            print(f"{row['variant']:12}{cells}  {fits:10}  {row['compile_seconds']:.1f}")
    print(f"\npeak host RSS while compiling: {report['max_rss_gib']:.2f} GiB")


# ---------------------------------------------------------------- shared


def machine_info(cpus: str) -> dict:
    """CPU model, core counts, date, library versions and the exact command."""
    model = "unknown"
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        model = names[0] if names else model
    versions = {}
    for package in ("jax", "jaxlib", "flax", "optax", "torch", "transformers", "tensorflow"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "cpus_used": cpus,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        # Other processes on the machine skew timings: the 1/5/15-minute load at the end.
        "load_average": list(os.getloadavg()),
        "versions": versions,
        "command": " ".join(["python", *sys.argv]),
        "git": git_state(),
    }


def git_state() -> str:
    """HEAD's short hash, "+dirty" when cmrcx/ has uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "cmrcx"], capture_output=True, text=True, cwd=REPO_ROOT
        ).stdout.strip()
    except OSError:
        return "unknown"
    return head + ("+dirty" if dirty else "")


def print_header(report: dict) -> None:
    m = report["machine"]
    versions = " ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    print(f"# {report['benchmark']}: {m['cpu']}, {m['cores']} cores (using CPUs {m['cpus_used']})")
    print(f"# {m['date']}  python {m['python']}  {versions}")
    load = " ".join(f"{x:.2f}" for x in m["load_average"])
    print(f"# {m['command']}  (git {m['git']}, load average {load})")


def geometry_from_args(args) -> Geometry:
    return Geometry(**{name: getattr(args, name) for name in GEOMETRY_FIELDS})


def add_geometry_flags(parser, batch: int, seq: int = 512) -> None:
    defaults = dataclasses.replace(Geometry(), batch=batch, seq=seq)
    for name in GEOMETRY_FIELDS:
        parser.add_argument(f"--{name}", type=int, default=getattr(defaults, name))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    default_cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))[:2]))
    # classify: CLUE's classifier setting, max length 128 (CLUE Table 7), batch 32.
    for name, batch, seq in (("train", 2, 512), ("eval", 8, 512), ("classify", 32, 128),
                             ("_worker", 2, 512)):  # fmt: skip
        sub = commands.add_parser(name)
        add_geometry_flags(sub, batch, seq)
        sub.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa")
        sub.add_argument("--rounds", type=int, default=2, help="A/B rounds")
        sub.add_argument("--warmup", type=int, default=2, help="excluded steps per child")
        sub.add_argument("--steps", type=int, default=5, help="timed steps per child")
        sub.add_argument(
            "--glibc_tunables",
            help="GLIBC_TUNABLES for both children, e.g. glibc.malloc.hugetlb=1 (transparent "
            "huge pages for malloc: no page fault per 4 KiB of each fresh step buffer)",
        )
    # AFQMC has 2 classes, CMNLI 3, TNEWS 15, IFLYTEK 119 (cmrcx/benchmarks/clue/tasks.py).
    commands.choices["classify"].add_argument("--classes", type=int, default=2)
    workers = commands.choices["_worker"]
    workers.add_argument("--side", choices=("cmrcx", "torch"), required=True)
    workers.add_argument("--mode", choices=("train", "eval", "classify"), required=True)
    workers.add_argument("--classes", type=int, default=0)
    # generate: LongLM-small, 512 input tokens, 64 new tokens, batches 1 and 8;
    # train_t5: LongLM-small, 512 inputs / 128 targets, batch 4.
    for name, batch, target in (("generate", "1,8", 64), ("train_t5", "4", 128),
                                ("_t5_worker", "4", 128)):  # fmt: skip
        sub = commands.add_parser(name)
        for field in T5_FIELDS[:-2]:
            sub.add_argument(f"--{field}", type=int, default=getattr(T5Geometry(), field))
        sub.add_argument("--target_length", type=int, default=target,
                         help="generate: new tokens; train_t5: target tokens")  # fmt: skip
        sub.add_argument("--batch", default=batch, help="batch size(s), comma-separated")
        sub.add_argument("--rounds", type=int, default=2, help="A/B rounds")
        sub.add_argument("--warmup", type=int, default=2, help="excluded calls per child")
        sub.add_argument("--steps", type=int, default=5, help="timed calls per child")
        sub.add_argument("--glibc_tunables", help="as train's")
    workers = commands.choices["_t5_worker"]
    workers.add_argument("--side", choices=("cmrcx", "torch"), required=True)
    workers.add_argument("--mode", choices=T5_COMMANDS, required=True)
    sub = commands.add_parser("input")
    sub.add_argument("--passages", type=int, default=10_000)
    sub.add_argument("--vocab", type=Path, default=TINY_VOCAB)
    sub.add_argument("--seq", type=int, default=512, help="max_length")
    sub.add_argument("--doc_stride", type=int, default=128)
    sub.add_argument("--batch", type=int, default=24, help="windows per dataset batch")
    sub.add_argument("--train_json", help="a `bench.py train --json` output file")
    sub.add_argument("--train_step_seconds", type=float)
    sub.add_argument("--train_batch", type=int, default=2)
    sub = commands.add_parser("memory")
    add_geometry_flags(sub, batch=24)
    sub.add_argument(
        "--models", default="base,large", help="base, large, custom (flags), longlm_small, "
        "longlm_large (T5 fine-tuning step: inputs --seq, targets --target_length)"
    )  # fmt: skip
    sub.add_argument("--target_length", type=int, default=0, help="T5 targets; 0: --seq")
    sub.add_argument("--variants", default="f32,f32+dots,f32+full,bf16,bf16+full")
    for sub in commands.choices.values():
        sub.add_argument("--cpus", default=default_cpus, help="CPU list for taskset")
        sub.add_argument("--seed", type=int, default=0)
        sub.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    if getattr(args, "warmup", 1) < 1:
        parser.error("--warmup must be at least 1 (the first step compiles)")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is imported
    if args.command == "_worker":
        worker_main(args)
        return
    if args.command == "_t5_worker":
        args.batch = int(args.batch)
        t5_worker_main(args)
        return
    if args.command in ("input", "memory"):
        os.sched_setaffinity(0, [int(cpu) for cpu in args.cpus.split(",")])
        sys.path.insert(0, str(REPO_ROOT))
    run, show = {
        "train": (compare, print_comparison),
        "eval": (compare, print_comparison),
        "classify": (compare, print_comparison),
        "generate": (compare_t5, print_t5_comparison),
        "train_t5": (compare_t5, print_t5_comparison),
        "input": (bench_input, print_input),
        "memory": (bench_memory, print_memory),
    }[args.command]
    report = run(args)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        show(report)
    if not all(math.isfinite(v) for v in _numbers(report)):
        raise SystemExit("non-finite figure in the report")


def _numbers(tree):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _numbers(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _numbers(value)
    elif isinstance(tree, float):
        yield tree


if __name__ == "__main__":
    main()
