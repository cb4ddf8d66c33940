"""The device check: one script to run the day an accelerator is lent, on CPU before it.

    tools/device_check.sh --out DIR            # on one GPU/TPU: within 8 minutes
    tools/device_check.sh --smoke --out DIR    # on a CPU: the same rows at small sizes

Prints one line per row as it finishes and rewrites DIR/device_check.json after every
row, so a run stopped by a time limit still leaves what it measured. Rows run cheapest
first; each is isolated (an error is recorded in its row and the next row runs) and none
starts once the budget (--budget_s) is spent (recorded as skipped). The rows:

- platform: the default device's platform and kind, jax / jaxlib / flax versions, CUDA and
  cuDNN where present;
- logits <family> small: every family (BERT, ALBERT, XLNet, GPT-2, T5/LongLM, mT5), random
  weights (no download), at the family's tiny geometry ("small") and at the paper's
  ("paper": the gin_configs/models file named in the row), run on the default device and
  on the CPU: the largest absolute difference of the logits in float32 and in bf16 compute
  (span-extraction logits for the encoders, LM logits for GPT-2 and the T5s). On a CPU
  both sides are the CPU (0.0): the smoke run checks the plumbing, not the numbers;
- attention: dot_product_attention vs einsum: BERT, ALBERT, GPT-2 and T5's output and
  parameter gradient with `jax.nn.dot_product_attention` (cuDNN where it applies) against
  cmrcx's einsums on the device, float32 and bf16 (the largest relative differences);
- train bert_base bf16: BERT-base cloze train step, batch 24 x 512, bf16 compute: step
  time, tokens/s and MFU (FLOPs as flops.py counts them; the peak from PEAK_FLOPS by device
  kind, MFU null for a kind not in it);
- sample longlm_small: LongLM-small top-k sampling (512 in, 64 new) tokens/s at batch 1,
  8 and 64;
- e2e cmrc2019_tiny: `python -m cmrcx.train --gin_file=cmrc2019_tiny.gin` into DIR on the
  default device, and its score;
- train longlm_large bf16: LongLM-large fine-tuning step (lot_generation_finetune.gin's
  batch 12, 512 / 512), bf16: step time, tokens/s, MFU;
- logits <family> paper: last, as their CPU side is the slowest part (batch 1 x 512).
--smoke keeps the rows and shrinks them (tiny geometries, short sequences, small
batches, a 2-step tiny run), so the whole runs in a few minutes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

from . import bert, flops, harness, steps, t5

# Dense bf16 peak FLOP/s of one JAX device, by a substring of `device_kind` (first match).
# Vendor datasheets: NVIDIA H100 SXM 989.4 TFLOP/s, H100 PCIe 756, H100 NVL 835, H200 989.4,
# A100 312, V100 125 (fp16 tensor cores; V100 has no bf16 units, XLA emulates it); Google
# Cloud TPU pages, per chip: v3 123 (a JAX device is one of its 2 cores: 61.5), v4 275,
# v5e ("TPU v5 lite") 197, v5p 459, v6e ("TPU v6 lite", Trillium) 918.
PEAK_FLOPS = (
    ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("H100", 989.4e12), ("H200", 989.4e12),
    ("A100", 312e12), ("V100", 125e12),
    ("TPU v3", 61.5e12), ("TPU v4", 275e12), ("TPU v5 lite", 197e12), ("TPU v5e", 197e12),
    ("TPU v5p", 459e12), ("TPU v5", 459e12), ("TPU v6 lite", 918e12), ("TPU v6e", 918e12),
)  # fmt: skip
# Per family: (its name in the table, the tiny model file, the paper model file).
FAMILY_MODELS = (
    ("BERT", "models/bert/tiny.gin", "models/bert/base.gin"),
    ("ALBERT", "models/albert/tiny.gin", "models/albert/xxlarge.gin"),
    ("XLNet", "models/xlnet/tiny.gin", "models/xlnet/mid.gin"),
    ("GPT-2", "models/gpt2/tiny.gin", "models/gpt2/base.gin"),
    ("T5/LongLM", "models/t5/tiny.gin", "models/t5/longlm_large.gin"),
    ("mT5", "models/t5/tiny.gin", "models/t5/mt5_base.gin"),
)
# mT5's layout on the tiny T5 geometry (models/t5/mt5_base.gin).
MT5_LAYOUT = {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
MT5_LAYOUT_EXTRA = {"scale_decoder_outputs": False}
# Shares of a GPU's memory (XLA_PYTHON_CLIENT_MEM_FRACTION; JAX's default is 0.75): this
# process's, and the CMRC 2019 tiny run's beside it (a tiny BERT at batch 8 x 128).
CHECK_MEMORY_FRACTION = "0.85"
E2E_MEMORY_FRACTION = "0.08"


@dataclasses.dataclass(frozen=True)
class Sizes:
    """What each row runs at: full (one accelerator) or --smoke (a CPU)."""

    logits_batch: int = 2
    small_length: int = 64
    paper_batch: int = 1  # the CPU side of 1B parameters in bf16 is slow
    paper_length: int = 512  # the papers' maximum sequence length
    paper_target_length: int = 128
    paper_geometry: bool = True  # False: the paper rows run the tiny geometry too
    bert_train: bert.Geometry = bert.Geometry(batch=24, seq=512)  # CMRC 2019's batch 24
    sample: t5.Geometry = t5.Geometry(input_length=512, target_length=64)
    sample_batches: tuple[int, ...] = (1, 8, 64)
    large_train: t5.Geometry = dataclasses.replace(
        t5.PRESETS["longlm_large"], batch=12, input_length=512, target_length=512
    )
    timed_steps: int = 5
    e2e_bindings: tuple[str, ...] = ()


TINY_T5 = dict(d_model=32, d_ff=64, d_kv=8, heads=4, layers=2, decoder_layers=2, vocab=512)
SMOKE = Sizes(
    small_length=32,
    paper_length=64,
    paper_target_length=16,
    paper_geometry=False,
    bert_train=bert.Geometry(
        layers=2, hidden=64, heads=4, intermediate=128, vocab=512, seq=64, batch=2
    ),  # fmt: skip
    sample=t5.Geometry(**TINY_T5, input_length=32, target_length=8),
    sample_batches=(1, 2),
    large_train=t5.Geometry(**TINY_T5, input_length=32, target_length=16, batch=2),
    timed_steps=2,
    e2e_bindings=("RunConfig.num_train_steps=2",),
)


# ---------------------------------------------------------------- platform


def peak_flops(device_kind: str) -> float | None:
    """Dense bf16 FLOP/s of one device of `device_kind`; None where unknown (CPU)."""
    for pattern, peak in PEAK_FLOPS:
        if pattern.lower() in device_kind.lower():
            return peak
    return None


def platform_row(ctx) -> dict:
    import jax

    device = jax.devices()[0]
    versions = {}
    for package in ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    backend = jax.extend.backend.get_backend() if hasattr(jax, "extend") else None
    cuda = {}
    if device.platform == "gpu":
        from jax._src.lib import cuda_versions  # noqa: PLC0415 (a CUDA plugin's module)

        for name in ("cuda_runtime", "cudnn", "cuda_driver"):
            get_version = getattr(cuda_versions, f"{name}_get_version", None)
            cuda[name] = get_version() if get_version else None
    return {
        "platform": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(),
        "platform_version": getattr(backend, "platform_version", None),
        "peak_flops": peak_flops(device.device_kind),
        "versions": versions,
        **cuda,
        "machine": harness.machine_info(",".join(map(str, sorted(os.sched_getaffinity(0))))),
    }


# ---------------------------------------------------------------- logits


def model_config(gin_file: str, dtype: str, **overrides):
    """The config dataclass a gin_configs/models file binds, with `dtype` and overrides."""
    import gin

    from cmrcx.cli import launch
    from cmrcx.models import registry

    gin.clear_config()
    launch.parse_gin([gin_file], [])
    for row in registry.FAMILIES.values():
        bound = gin.get_bindings(f"cmrcx.{row.config_class.__name__}")
        if bound:
            gin.clear_config()
            return row.config_class(**{**bound, "dtype": dtype, **overrides})
    raise ValueError(f"{gin_file} binds no model family's config")


def _network_and_inputs(config, batch: int, length: int, target_length: int, seed: int = 0):
    """(module, its positional inputs): span logits for encoders, LM logits otherwise."""
    import numpy as np

    from cmrcx.models import registry

    rng = np.random.default_rng(seed)
    family = registry.family_of(config)
    vocab = config.vocab_size
    ids = rng.integers(2, min(vocab, 20000), [batch, length], dtype=np.int32)
    mask = np.ones([batch, length], np.int32)
    mask[-1, length * 3 // 4 :] = 0  # a padded row: the masks are part of the check
    if family.seq2seq is not None and family.encoder is None:
        targets = rng.integers(2, min(vocab, 20000), [batch, target_length], dtype=np.int32)
        return registry.network(config, "seq2seq"), (ids, mask, targets)
    if family.causal_lm is not None and family.encoder is None:
        return registry.network(config, "causal_lm"), (ids, mask)
    types = (np.arange(length)[None] >= length // 2).repeat(batch, 0).astype(np.int32)
    return registry.network(config, "span"), (ids, types, mask)


def _logits_function(module):
    """The module's logits, jitted (float32 out); placed where its arguments are."""
    import jax
    import jax.numpy as jnp

    return jax.jit(
        lambda p, x: module.apply({"params": p}, *x, deterministic=True).astype(jnp.float32)
    )


def logits_row(ctx, family: str, gin_file: str, size: str) -> dict:
    """Default device against CPU, float32 and bf16 compute, the same random weights
    (float32 parameters in both, as cmrcx keeps them)."""
    import flax.linen as nn
    import jax
    import numpy as np

    sizes = ctx.sizes
    length = sizes.small_length if size == "small" else sizes.paper_length
    target = length // 2 if size == "small" else sizes.paper_target_length
    overrides = {}
    if family == "mT5" and gin_file.endswith("tiny.gin"):
        overrides = {**MT5_LAYOUT, **MT5_LAYOUT_EXTRA}
    cpu, device = jax.devices("cpu")[0], jax.devices()[0]
    batch = sizes.logits_batch if size == "small" else sizes.paper_batch
    row = {"model_file": gin_file, "batch": batch, "length": length}
    params = None
    for dtype in ("float32", "bfloat16"):
        config = model_config(gin_file, dtype, **overrides)
        module, inputs = _network_and_inputs(config, batch, length, target)
        if params is None:
            with jax.default_device(cpu):
                init = jax.jit(lambda rng, x, m=module: nn.meta.unbox(m.init(rng, *x)))
                params = init(jax.random.key(0), inputs)["params"]
        logits = _logits_function(module)
        reference = np.asarray(logits(*jax.device_put((params, inputs), cpu)))
        on_device = np.asarray(logits(*jax.device_put((params, inputs), device)))
        if not np.all(np.isfinite(on_device)):
            raise FloatingPointError(f"{family} {dtype}: non-finite logits on {device}")
        row[dtype] = {
            "max_abs_diff": float(np.max(np.abs(on_device - reference))),
            "max_abs_logit": float(np.max(np.abs(reference))),
            "shape": list(reference.shape),
        }
    row["parameters"] = int(sum(p.size for p in jax.tree.leaves(params)))
    return row


def attention_row(ctx) -> dict:
    """`jax.nn.dot_product_attention` against cmrcx's einsum attention on the default
    device (`cmrcx.models.attention_check.compare_implementations`): each family's output
    and parameter gradient, float32 and bf16, at the paper's length 512. --smoke: BERT and
    T5 in float32 at length 32, the plumbing only (tests/models/test_attention.py holds
    every family's CPU parity)."""
    from cmrcx.models import attention_check

    if ctx.smoke:
        families, dtypes, length = ("bert", "t5"), ("float32",), 32
    else:
        families, dtypes, length = attention_check.FAMILIES, ("float32", "bfloat16"), 512
    return {
        dtype: attention_check.compare_implementations(families, dtype, batch=2, length=length)
        for dtype in dtypes
    }


# ---------------------------------------------------------------- steps


def _timed(step, count: int) -> dict:
    """First call (compiles), then the median of `count` calls."""
    first = steps.timed(step, 1)[0]
    seconds = steps.timed(step, count)
    return {"first_call_seconds": first, "median_seconds": statistics.median(seconds)}


def _throughput(ctx, timing: dict, tokens: int, step_flops: float) -> dict:
    median = timing["median_seconds"]
    peak = ctx.peak
    return {
        **timing,
        "tokens_per_second": tokens / median,
        "flops_per_step": step_flops,
        "achieved_flops": step_flops / median,
        "mfu": None if peak is None else step_flops / median / peak,
    }


def bert_train_row(ctx) -> dict:
    g = ctx.sizes.bert_train
    trainer = bert.cmrcx_trainer(g, dtype="bfloat16")
    step = steps.cmrcx_train_step(trainer, bert.synthetic_batch(g))
    timing = _timed(step, ctx.sizes.timed_steps)
    return {
        "geometry": dataclasses.asdict(g),
        **_throughput(ctx, timing, g.tokens, bert.step_flops(g, "train")),
    }


def longlm_train_row(ctx) -> dict:
    g = ctx.sizes.large_train
    trainer = t5.seq2seq_trainer(g, dtype="bfloat16")
    step = steps.cmrcx_train_step(trainer, t5.seq2seq_batch(g))
    timing = _timed(step, ctx.sizes.timed_steps)
    tokens = t5.tokens_per_call(g, "train_t5")
    return {
        "geometry": dataclasses.asdict(g),
        **_throughput(ctx, timing, tokens, flops.TRAIN_OVER_FORWARD * seq2seq_forward_flops(g)),
    }


def seq2seq_forward_flops(g: t5.Geometry) -> float:
    """Matmul FLOPs of a T5 teacher-forced forward pass, counted as flops.py counts a
    layer's: attention width heads*d_kv (LongLM-large: 768 of d_model 1536); a decoder
    layer's self-attention, cross-attention (keys and values over the encoder's states)
    and feed-forward; the LM head."""
    inner = g.heads * g.d_kv
    b, s, t, d = g.batch, g.input_length, g.target_length, g.d_model

    def attention(queries: int, keys: int) -> float:
        projections = 2 * b * (2 * queries + 2 * keys) * d * inner  # Q, O; K, V
        return projections + 2 * 2 * b * queries * keys * inner  # Q.K^T, probs.V

    feed_forward = 2 * 2 * d * g.d_ff
    encoder = g.layers * (attention(s, s) + b * s * feed_forward)
    decoder = g.decoder_layers * (attention(t, t) + attention(t, s) + b * t * feed_forward)
    return encoder + decoder + 2 * b * t * d * g.vocab


def sampling_row(ctx) -> dict:
    import types

    rows = {}
    for batch in ctx.sizes.sample_batches:
        g = dataclasses.replace(ctx.sizes.sample, batch=batch)
        args = types.SimpleNamespace(mode="generate", seed=0, method="sample")
        step, _ = t5.cmrcx_step(args, g)
        timing = _timed(step, max(1, ctx.sizes.timed_steps // 2))
        new_tokens = t5.tokens_per_call(g, "generate")
        rows[str(batch)] = {**timing, "tokens_per_second": new_tokens / timing["median_seconds"]}
    return {"geometry": dataclasses.asdict(ctx.sizes.sample), "by_batch": rows}


def e2e_row(ctx) -> dict:
    """The CMRC 2019 tiny run, a child `python -m cmrcx.train` into DIR/cmrc2019_tiny."""
    model_dir = os.path.join(ctx.out, "cmrc2019_tiny")
    for attempt in range(2, 100):  # a fresh run each time: an existing one would resume
        if not os.path.exists(model_dir):
            break
        model_dir = os.path.join(ctx.out, f"cmrc2019_tiny_{attempt}")
    command = [sys.executable, "-m", "cmrcx.train", "--gin_file=cmrc2019_tiny.gin",
               f"--gin.MODEL_DIR='{model_dir}'"]  # fmt: skip
    command += [f"--gin.{binding}" for binding in ctx.sizes.e2e_bindings]
    start = time.perf_counter()
    remaining = max(30.0, ctx.deadline - time.monotonic())
    # This process holds its share of a GPU's memory (main(): CHECK_MEMORY_FRACTION); the
    # run takes a small share beside it. A TPU is one process's: the row fails there.
    env = {**os.environ, "XLA_PYTHON_CLIENT_MEM_FRACTION": E2E_MEMORY_FRACTION}
    proc = subprocess.run(
        command, capture_output=True, text=True, cwd=harness.REPO_ROOT, timeout=remaining,
        env=env,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"cmrcx.train exit {proc.returncode}: {proc.stderr[-1500:]}")
    evaluations = []
    with open(os.path.join(model_dir, "metrics.jsonl"), encoding="utf-8") as metrics:
        for line in metrics:
            record = json.loads(line)
            if record.get("split") not in (None, "train"):
                evaluations.append(record)
    if not evaluations:
        raise RuntimeError(f"no evaluation line in {model_dir}/metrics.jsonl")
    return {"seconds": seconds, "model_dir": model_dir, "score": evaluations[-1]}


# ---------------------------------------------------------------- the rows, in order


def row_table(smoke: bool) -> list[tuple[str, object]]:
    """(name, run(ctx)) of every row, cheapest first."""
    rows = [("platform", platform_row)]
    for family, tiny, _ in FAMILY_MODELS:
        rows.append((f"logits {family} small", _bound(logits_row, family, tiny, "small")))
    rows.append(("attention: dot_product_attention vs einsum", attention_row))
    rows.append(("train bert_base bf16", bert_train_row))
    rows.append(("sample longlm_small", sampling_row))
    rows.append(("e2e cmrc2019_tiny", e2e_row))
    rows.append(("train longlm_large bf16", longlm_train_row))
    # Last: the paper geometries' CPU side (LongLM-large's bf16 forward on a CPU) is the
    # slowest part of the check.
    for family, tiny, paper in FAMILY_MODELS:
        model_file = tiny if smoke else paper
        rows.append((f"logits {family} paper", _bound(logits_row, family, model_file, "paper")))
    return rows


def _bound(run, *args):
    return lambda ctx: run(ctx, *args)


@dataclasses.dataclass
class Context:
    smoke: bool
    out: str
    sizes: Sizes
    deadline: float  # time.monotonic() after which no row starts
    peak: float | None = None


def run_rows(ctx: Context, names: list[str] | None = None) -> dict:
    """Runs the rows (all, or those named), writing the JSON after each; the report."""
    report = {"smoke": ctx.smoke, "sizes": _jsonable(dataclasses.asdict(ctx.sizes)), "rows": []}
    path = os.path.join(ctx.out, "device_check.json")
    for name, run in row_table(ctx.smoke):
        if names is not None and name not in names:
            continue
        row = {"row": name}
        start = time.perf_counter()
        if time.monotonic() > ctx.deadline:
            row.update(status="skipped", error="the time budget (--budget_s) was spent")
        else:
            try:
                row.update(status="ok", **run(ctx))
            except Exception as error:  # one row's failure is that row's result
                lines = traceback.format_exception(error)
                row.update(status="error", error=f"{type(error).__name__}: {error}"[:2000],
                           traceback="".join(lines)[-4000:])  # fmt: skip
        row["seconds"] = time.perf_counter() - start
        if name == "platform" and row["status"] == "ok":
            ctx.peak = row["peak_flops"]
        report["rows"].append(row)
        _write_atomically(path, report)
        print(summary_line(row), flush=True)
    return report


def _jsonable(tree):
    if isinstance(tree, dict):
        return {k: _jsonable(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_jsonable(v) for v in tree]
    return tree


def _write_atomically(path: str, report: dict) -> None:
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    os.replace(partial, path)


def summary_line(row: dict) -> str:
    """One table line: the row's name, status, seconds and its headline figures."""
    name, status = row["row"], row["status"]
    if status != "ok":
        figures = row.get("error", "").splitlines()[0][:90] if row.get("error") else ""
    elif name.startswith("attention"):  # largest relative differences over the families
        figures = "  ".join(
            f"{dtype} fwd {max(r['forward']['max_rel'] for r in row[dtype].values()):.1e} "
            f"grad {max(r['grad']['max_rel'] for r in row[dtype].values()):.1e}"
            for dtype in ("float32", "bfloat16")
            if dtype in row
        )
    elif "float32" in row:
        f32, bf16 = row["float32"]["max_abs_diff"], row["bfloat16"]["max_abs_diff"]
        figures = f"max |diff| f32 {f32:.2e}  bf16 {bf16:.2e}  (|logit| <= " \
            f"{row['float32']['max_abs_logit']:.2f})"  # fmt: skip
    elif "mfu" in row:
        mfu = "MFU n/a" if row["mfu"] is None else f"MFU {100 * row['mfu']:.1f}%"
        figures = f"{row['median_seconds'] * 1e3:.1f} ms/step  " \
            f"{row['tokens_per_second']:.0f} tok/s  {mfu}"  # fmt: skip
    elif "by_batch" in row:
        figures = "  ".join(f"b{b}: {r['tokens_per_second']:.0f} tok/s"
                            for b, r in row["by_batch"].items())  # fmt: skip
    elif "score" in row:
        scores = {k: v for k, v in row["score"].items() if "/" in k}  # qac/paper, ...
        figures = " ".join(f"{k} {v:.4g}" for k, v in list(scores.items())[:4])
    elif "device_kind" in row:
        versions = " ".join(f"{k} {v}" for k, v in row["versions"].items() if v)
        figures = f"{row['platform']} {row['device_kind']} x{row['device_count']}  {versions}"
    else:
        figures = str({k: v for k, v in row.items() if k not in ("row", "status", "seconds")})
    return f"{name:44}{status:8}{row['seconds']:>8.1f}s  {figures}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="DIR: device_check.json and the tiny run")
    parser.add_argument("--smoke", action="store_true", help="small sizes, for a CPU")
    parser.add_argument("--budget_s", type=float, help="no row starts after (480; smoke 170)")
    parser.add_argument("--rows", help="comma-separated row names (default: all)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", CHECK_MEMORY_FRACTION)  # before jax
    os.makedirs(args.out, exist_ok=True)
    budget = args.budget_s or (170.0 if args.smoke else 480.0)
    ctx = Context(args.smoke, os.path.abspath(args.out), SMOKE if args.smoke else Sizes(),
                  time.monotonic() + budget)  # fmt: skip
    names = None
    if args.rows:
        names = [name.strip() for name in args.rows.split(",")]
        known = [name for name, _ in row_table(args.smoke)]
        unknown = [name for name in names if name not in known]
        if unknown:
            parser.error(f"unknown rows {unknown}; the rows: {known}")
    print(f"{'row':44}{'status':8}{'time':>9}  figures", flush=True)
    report = run_rows(ctx, names)
    failed = [row["row"] for row in report["rows"] if row["status"] == "error"]
    print(f"\n{os.path.join(ctx.out, 'device_check.json')}: {len(report['rows'])} rows, "
          f"{len(failed)} failed{': ' + ', '.join(failed) if failed else ''}")  # fmt: skip


if __name__ == "__main__":
    main()
