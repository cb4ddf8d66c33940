"""layerops: one BERT layer's pieces at the scoring shape, cmrcx's JAX ops against PyTorch's.

Where a BERT-base forward's time goes, op by op, on the same 2 CPUs: the four dense
matmuls (fused Q/K/V, attention output, the feed-forward pair) and the attention core
as `cmrcx.models.bert.BertSelfAttention` computes it: in training two batched einsums and
a float32 softmax over the [batch, heads, length, length] scores, in the trainer's scoring
step on one CPU device `cmrcx.cpu.inference.attention_by_head` (a few heads at a time);
against the same ops in PyTorch and its fused `scaled_dot_product_attention` kernel (what
transformers' "sdpa" attention runs). The last line splits the timed ops into the dense
matmuls and the rest (attention and GeLU) on each side; LayerNorm, bias adds and
residuals are not timed. Both sides run in this process, jitted ops on JAX's side, in
`--rounds` alternating rounds; each figure is the median of `--steps` calls after 2
warm-up calls.

    .venv/bin/python tools/bench.py layerops      # batch 8 x 512, BERT-base widths
"""

from __future__ import annotations

import statistics

import numpy as np

from . import harness, steps

DENSE = ("qkv", "attention_output", "ffn_in", "ffn_out")
BY_HEAD = "attention by head (inference)"
SDPA = "sdpa (fused scores + softmax + context)"


def _median_ms(fn, count: int) -> float:
    steps.timed(fn, 2)  # warm-up (the first JAX call compiles)
    return 1000 * statistics.median(steps.timed(fn, count))


def _arrays(args) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(args.seed)
    tokens, hidden, heads = args.batch * args.seq, args.hidden, args.heads
    shapes = {
        "x": (tokens, hidden),
        "h": (tokens, args.intermediate),
        "w_qkv": (hidden, 3 * hidden),
        "w_out": (hidden, hidden),
        "w_in": (hidden, args.intermediate),
        "w_ffn_out": (args.intermediate, hidden),
        "q": (args.batch, args.seq, heads, hidden // heads),
        "p": (args.batch, heads, args.seq, args.seq),
    }
    return {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()}


def _jax_ops(a: dict[str, np.ndarray]) -> dict:
    import jax
    import jax.numpy as jnp

    from cmrcx.cpu.inference import attention_by_head

    x = {k: jnp.asarray(v) for k, v in a.items()}
    no_padding = jnp.zeros((x["q"].shape[0], 1, 1, x["q"].shape[1]))
    by_head = jax.jit(lambda q: attention_by_head(q, q, q, no_padding))
    matmul = jax.jit(jnp.matmul)
    scores = jax.jit(lambda q, k: jnp.einsum("bqhd,bkhd->bhqk", q, k))
    softmax = jax.jit(lambda s: jax.nn.softmax(s, axis=-1))
    context = jax.jit(lambda p, v: jnp.einsum("bhqk,bkhd->bqhd", p, v))
    gelu = jax.jit(lambda h: jax.nn.gelu(h, approximate=False))
    calls = {
        "qkv": lambda: matmul(x["x"], x["w_qkv"]),
        "attention_output": lambda: matmul(x["x"], x["w_out"]),
        "ffn_in": lambda: matmul(x["x"], x["w_in"]),
        "ffn_out": lambda: matmul(x["h"], x["w_ffn_out"]),
        "scores": lambda: scores(x["q"], x["q"]),
        "softmax": lambda: softmax(x["p"]),
        "context": lambda: context(x["p"], x["q"]),
        "gelu": lambda: gelu(x["h"]),
        BY_HEAD: lambda: by_head(x["q"]),
    }
    return {name: (lambda call=call: call().block_until_ready()) for name, call in calls.items()}


def _torch_ops(a: dict[str, np.ndarray], threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    x = {k: torch.from_numpy(v) for k, v in a.items()}
    heads_first = x["q"].transpose(1, 2).contiguous()  # SDPA's [batch, heads, length, kv]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    calls = {
        "qkv": lambda: x["x"] @ x["w_qkv"],
        "attention_output": lambda: x["x"] @ x["w_out"],
        "ffn_in": lambda: x["x"] @ x["w_in"],
        "ffn_out": lambda: x["h"] @ x["w_ffn_out"],
        "scores": lambda: torch.einsum("bqhd,bkhd->bhqk", x["q"], x["q"]),
        "softmax": lambda: torch.softmax(x["p"], -1),
        "context": lambda: torch.einsum("bhqk,bkhd->bqhd", x["p"], x["q"]),
        "gelu": lambda: torch.nn.functional.gelu(x["h"]),
        SDPA: lambda: sdpa(heads_first, heads_first, heads_first),
    }

    def no_grad(call):
        def run():
            with torch.inference_mode():
                call()

        return run

    return {name: no_grad(call) for name, call in calls.items()}


def bench_layerops(args) -> dict:
    arrays = _arrays(args)
    sides = {"cmrcx": _jax_ops(arrays), "torch": _torch_ops(arrays, len(args.cpus.split(",")))}
    rounds = {side: {name: [] for name in ops} for side, ops in sides.items()}
    for _ in range(args.rounds):
        for side, ops in sides.items():
            for name, call in ops.items():
                rounds[side][name].append(_median_ms(call, args.steps))
    medians = {
        side: {name: statistics.median(values) for name, values in ops.items()}
        for side, ops in rounds.items()
    }
    core = ("scores", "softmax", "context")
    return {
        "benchmark": "layerops",
        "machine": harness.machine_info(args.cpus),
        "shape": {k: getattr(args, k) for k in ("batch", "seq", "hidden", "heads", "intermediate")},
        "milliseconds": medians,
        "milliseconds_per_round": rounds,
        "attention_core_ms": {
            "cmrcx": sum(medians["cmrcx"][name] for name in core),
            "cmrcx_by_head": medians["cmrcx"][BY_HEAD],
            "torch_sdpa": medians["torch"][SDPA],
        },
        "dense_ms": {side: sum(medians[side][name] for name in DENSE) for side in medians},
        "attention_and_gelu_ms": {
            "cmrcx": medians["cmrcx"][BY_HEAD] + medians["cmrcx"]["gelu"],
            "torch": medians["torch"][SDPA] + medians["torch"]["gelu"],
        },
    }


def print_layerops(report: dict) -> None:
    harness.print_header(report)
    print(f"shape: {report['shape']}; median ms per call (rounds alternate the sides)")
    c, t = report["milliseconds"]["cmrcx"], report["milliseconds"]["torch"]
    print(f"{'op':42}{'cmrcx (JAX)':>14}{'torch':>10}")
    for name in (*t, BY_HEAD):
        theirs = f"{t[name]:.1f}" if name in t else "-"
        mine = f"{c[name]:.1f}" if name in c else "-"
        print(f"{name:42}{mine:>14}{theirs:>10}")
    core, dense, rest = (
        report[k] for k in ("attention_core_ms", "dense_ms", "attention_and_gelu_ms")
    )
    print(
        f"attention core: cmrcx scores + softmax + context {core['cmrcx']:.1f} ms, "
        f"by head {core['cmrcx_by_head']:.1f} ms; torch fused SDPA {core['torch_sdpa']:.1f} ms"
    )
    print(
        f"dense matmuls: cmrcx {dense['cmrcx']:.1f} ms, torch {dense['torch']:.1f} ms; "
        f"attention (by head / SDPA) + GeLU: cmrcx {rest['cmrcx']:.1f} ms, "
        f"torch {rest['torch']:.1f} ms"
    )


def add_command(commands) -> None:
    sub = commands.add_parser("layerops", help="one BERT layer's ops, JAX against PyTorch")
    for name, default in (("batch", 8), ("seq", 512), ("hidden", 768), ("heads", 12),
                          ("intermediate", 3072), ("rounds", 2), ("steps", 10)):  # fmt: skip
        sub.add_argument(f"--{name}", type=int, default=default)
