"""suite: docs/performance.md's compared benchmarks one after another, each on a quiet machine.

Taking the Performance table on a new machine (an Intel CPU with AMX, say) is one command:

    .venv/bin/python tools/bench.py suite --out runs/bench_suite
    .venv/bin/python tools/bench.py suite --only train,train_bf16 --out runs/bench_suite

Before each entry the suite waits until the 1-minute load average is below --quiet_load
(the previous bench's own threads decaying) and says that it waits; a machine that stays
loaded for --max_wait seconds stops the suite, since a figure taken under load is not a
result. Each entry runs `tools/bench.py ENTRY'S ARGUMENTS --json` in a child process; its
report is kept as --out/NAME.json (with the load when it started), and the suite ends
with one table in docs/performance.md's form: per comparison, both sides' median, the ratio (per
round), the ratio by the mean step and both spreads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from . import harness

# (name, bench.py arguments): docs/performance.md's rows.
ENTRIES = (
    ("train", "train --rounds 3"),
    ("train_bf16", "train --dtype bfloat16 --rounds 2 --steps 10"),
    ("train_bf16_batch8", "train --dtype bfloat16 --batch 8 --rounds 2 --steps 4"),
    ("eval", "eval --rounds 3"),
    ("classify", "classify --rounds 2"),
    ("generate", "generate --method sample,greedy,beam --batch 1,8 --rounds 2"),
    ("train_t5", "train_t5 --rounds 2"),
)


def wait_for_quiet(quiet_load: float, max_wait: float, loadavg=os.getloadavg, sleep=time.sleep):
    """Returns the 1-minute load average once it is below quiet_load; SystemExit after
    max_wait seconds of a loaded machine."""
    waited, said = 0.0, -60.0
    while (load := loadavg()[0]) >= quiet_load:
        if waited >= max_wait:
            raise SystemExit(
                f"suite: the load average stayed at or above {quiet_load} for {max_wait:.0f} s "
                f"(now {load:.2f}): another job runs, and figures taken under load are not "
                "results; stop it, or raise --max_wait"
            )
        if waited - said >= 60:
            print(f"waiting for a quiet machine: load {load:.2f}, below {quiet_load} "
                  f"wanted ({waited:.0f} s so far)", file=sys.stderr, flush=True)  # fmt: skip
            said = waited
        sleep(5)
        waited += 5
    return load


def run_entry(name: str, arguments: list[str], out: Path, args) -> dict:
    load = wait_for_quiet(args.quiet_load, args.max_wait)
    print(f"{name}: bench.py {' '.join(arguments)} (load {load:.2f}) ...", file=sys.stderr,
          flush=True)  # fmt: skip
    command = [sys.executable, str(harness.BENCH_SCRIPT), *arguments, "--json"]
    command += ["--cpus", args.cpus]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=harness.REPO_ROOT)
    if proc.returncode:
        raise SystemExit(f"suite: {name} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError as error:
        tail = proc.stdout[-2000:]
        raise SystemExit(f"suite: {name} printed no JSON report ({error}):\n{tail}") from None
    report["suite"] = {
        "name": name,
        "arguments": arguments,
        "start_load": load,
        "seconds": time.perf_counter() - start,
    }
    (out / f"{name}.json").write_text(json.dumps(report, indent=1))
    return report


def rows(report: dict) -> list[dict]:
    """One row per comparison in a report: BERT's reports are one, T5's one per method
    and batch size."""
    per_setting = "results" in report  # T5's: one result per decoding method and batch
    table = []
    for result in report["results"] if per_setting else [report]:
        label = report["suite"]["name"]
        if per_setting:
            label += f" {result['method']} batch {result['geometry']['batch']}"
        c, t = result["cmrcx"], result["torch"]
        key = "median_step_seconds" if "median_step_seconds" in c else "median_seconds"
        table.append(
            {
                "label": label,
                "arguments": " ".join(report["suite"]["arguments"]),
                "start_load": report["suite"]["start_load"],
                "cmrcx": c[key],
                "torch": t[key],
                "ratio": result["speed_ratio_cmrcx_over_torch"],
                "per_round": result["speed_ratio_per_round"],
                "by_mean": result["speed_ratio_by_mean"],
                "spread": (c["spread"], t["spread"]),
            }
        )
    return table


def bench_suite(args) -> dict:
    known = dict(ENTRIES)
    names = [name.strip() for name in args.only.split(",")] if args.only else list(known)
    if unknown := [name for name in names if name not in known]:
        raise SystemExit(f"suite: unknown entries {unknown}; known: {', '.join(known)}")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    reports = [run_entry(name, known[name].split(), out, args) for name in names]
    return {
        "benchmark": "suite",
        "machine": harness.machine_info(args.cpus),
        "out": str(out),
        "rows": [row for report in reports for row in rows(report)],
    }


def print_suite(report: dict) -> None:
    harness.print_header(report)
    print(f"reports: {report['out']}/NAME.json\n")
    print("| bench.py command (start load) | cmrcx | PyTorch | cmrcx / PyTorch (per round) | "
          "by the mean step | spread cmrcx / PyTorch |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for row in report["rows"]:
        per_round = ", ".join(f"{x:.2f}" for x in row["per_round"])
        spread = " / ".join(f"{x:.1%}" for x in row["spread"])
        print(f"| {row['label']}: `{row['arguments']}` ({row['start_load']:.2f}) | "
              f"{row['cmrcx']:.3f} s | {row['torch']:.3f} s | **{row['ratio']:.2f}x** "
              f"({per_round}) | {row['by_mean']:.2f}x | {spread} |")  # fmt: skip


def add_command(commands) -> None:
    sub = commands.add_parser("suite", help="docs/performance.md's benchmarks, each when quiet")
    names = ", ".join(name for name, _ in ENTRIES)
    sub.add_argument("--only", default="", help=f"comma-separated entries of: {names}")
    sub.add_argument("--out", default="runs/bench_suite", help="folder for the JSON reports")
    sub.add_argument("--quiet_load", type=float, default=0.5, help="1-minute load to wait for")
    sub.add_argument("--max_wait", type=float, default=1800, help="seconds; then stop")
