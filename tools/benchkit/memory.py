"""memory: the compiled memory of cmrcx's train step, per model and variant.

Compiled from shapes only (nothing allocated): XLA:CPU's memory analysis of the
family's train step (BERT's cloze model, T5's teacher-forced Seq2SeqModel) at
--batch x --seq, for each variant: float32 or bfloat16, with or without remat.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time

from . import bert, families, harness

CAPACITIES_GIB = (16, 32, 80)
COLUMNS = ("argument", "output", "alias", "temp", "generated_code", "total")


def memory_row(family, g, variant: str) -> dict:
    """Compiled memory of cmrcx's train step for one variant ("f32", "bf16+full", ...)."""
    from cmrcx.training import memory_check

    precision, _, remat = variant.partition("+")
    dtype = {"f32": "float32", "bf16": "bfloat16"}[precision]
    trainer, _ = family.memory_trainer(g, dtype, remat or "none")
    start = time.perf_counter()
    compiled = trainer.compile_train_step()
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
    gib["total"] = memory_check.step_bytes(compiled)["total"] / 2**30
    fits = [capacity for capacity in CAPACITIES_GIB if gib["total"] <= capacity]
    return {"variant": variant, "gib": gib, "fits_gib": fits, "compile_seconds": seconds}


def bench_memory(args) -> dict:
    """memory: every model x variant, compiled from shapes only (nothing allocated)."""
    models = {}
    for name in args.models.split(","):
        family = families.of_model(name)
        g = family.memory_geometry(name, args)
        rows = [memory_row(family, g, variant) for variant in args.variants.split(",")]
        models[name] = {"geometry": dataclasses.asdict(g), "variants": rows}
    return {
        "benchmark": "memory",
        "machine": harness.machine_info(args.cpus),
        "models": models,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "note": "XLA:CPU memory analysis; total = argument + output - alias + temp. GPU/TPU "
        "fusion differs, and the runtime's own reserve is not included.",
    }


def print_memory(report: dict) -> None:
    harness.print_header(report)
    print(report["note"])
    for name, model in report["models"].items():
        print(f"\n{name}: {families.of_model(name).describe(model['geometry'])}  (GiB)")
        print(f"{'variant':12}" + "".join(f"{c:>10}" for c in COLUMNS[:4]) + f"{'code':>10}"
              f"{'total':>10}  fits (GiB)  compile s")  # fmt: skip
        for row in model["variants"]:
            cells = "".join(f"{row['gib'][c]:>10.3f}" for c in COLUMNS)
            fits = ",".join(map(str, row["fits_gib"])) or "-"
            print(f"{row['variant']:12}{cells}  {fits:10}  {row['compile_seconds']:.1f}")
    print(f"\npeak host RSS while compiling: {report['max_rss_gib']:.2f} GiB")


def add_command(commands) -> None:
    sub = commands.add_parser("memory")
    bert.add_geometry_flags(sub, batch=24)
    sub.add_argument(
        "--models", default="base,large", help="base, large, custom (flags), longlm_small, "
        "longlm_large (T5 fine-tuning step: inputs --seq, targets --target_length)"
    )  # fmt: skip
    sub.add_argument("--target_length", type=int, default=0, help="T5 targets; 0: --seq")
    sub.add_argument("--variants", default="f32,f32+dots,f32+full,bf16,bf16+full")
