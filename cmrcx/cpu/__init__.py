"""What runs only to make XLA:CPU faster, in one place; the core modules read as plain
Flax/JAX and call into here at one switch each. Every path computes what the plain code
computes (each has its equivalence test in tests/cpu/) and was kept for its measured
effect (docs/performance.md, "Where the CPU paths live").

  hugepages   the entry points re-execute once with glibc's huge-page tunable, before
              JAX loads (`cmrcx.cli.startup`); no JAX here.
  threefry    JAX's threefry2x32 lowered unrolled on CPU, so a dropout mask is one fused
              kernel: the same bits. Installed by `enable()` at process start-up.
  inference   the `one_cpu_inference` switch, which the trainer turns on while it traces
              its scoring step on one CPU device, and what it selects in the BERT-shaped
              encoders: attention a few heads at a time (`attention_by_head`) and the
              feed-forward activation as one fusion (`activation_apart`).
  decode      T5's unrolled decoding step over per-layer weight slices made once per
              generation (`unrolled_layers`) instead of a scan that slices them every step.

This package imports nothing but the standard library at its top (`hugepages` must load
before JAX); `threefry`, `inference` and `decode` import JAX.
"""

from __future__ import annotations


def enable() -> None:
    """The process-wide CPU paths, once a process has started (the entry points'
    `cmrcx.cli.startup.start`, tools/bench.py): JAX's threefry lowering on CPU.
    Idempotent; changes no result, only how fast dropout masks are made."""
    from cmrcx.cpu import threefry  # JAX loads here, after any huge-page restart

    threefry.install()
