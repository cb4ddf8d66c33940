"""refault: what touching freed memory again costs, by the pause before the touch.

XLA:CPU allocates each step's temporaries afresh and frees them at its end (2.2 GiB
for the BERT-base train step at batch 2 x 512), so a step's speed depends on what the
kernel charges to hand memory back. On bare metal that is clearing the pages: about
0.1 s of system time per GiB. A virtual machine whose balloon device reports free
pages to its host (virtio's free page reporting) gives memory that stays free for
about a second back to the host, and the next touch waits for the host to provide it
again: on this project's Zen 5 VM, 0.4 to 1.6 s per GiB after pauses of 1 to 10 s,
and 2 s per GiB for memory the VM had not used for minutes (tools/bench.py refault, 2026-11-29).
Steps that free and reallocate their temporaries within a second reuse warm pages;
a first step, a step after an evaluation or a save, and steps slow enough to let the
reporting run in between pay in system time.

Each round maps --gib of anonymous memory (with the huge-page advice that
`python -m cmrcx.train` gives malloc), touches every page, unmaps it, and does so
again after each pause of --pauses; rounds repeat the pauses in order. Reported per
pause: the median wall and system seconds of the touch and system seconds per GiB.
"""

from __future__ import annotations

import mmap
import resource
import statistics
import time

import numpy as np

from . import harness

PAGE = 4096


def touch_fresh(nbytes: int, huge: bool) -> tuple[float, float]:
    """Wall and system seconds to map `nbytes`, write one byte per page and unmap."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_stime
    start = time.perf_counter()
    region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge and hasattr(mmap, "MADV_HUGEPAGE"):
        region.madvise(mmap.MADV_HUGEPAGE)
    pages = np.frombuffer(region, dtype=np.uint8)
    pages[::PAGE] = 1
    del pages  # the buffer's export, before the unmap
    region.close()
    return time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_stime - before


def bench_refault(args) -> dict:
    nbytes = int(args.gib * 2**30) // PAGE * PAGE
    pauses = [float(p) for p in args.pauses.split(",")]
    warm = [touch_fresh(nbytes, args.huge) for _ in range(2)]  # the first maps cold memory
    samples = {pause: [] for pause in pauses}
    for _ in range(args.rounds):
        for pause in pauses:
            time.sleep(pause)
            samples[pause].append(touch_fresh(nbytes, args.huge))
    rows = []
    for pause, runs in samples.items():
        wall = statistics.median(w for w, _ in runs)
        system = statistics.median(s for _, s in runs)
        rows.append({
            "pause_seconds": pause,
            "wall_seconds": wall,
            "system_seconds": system,
            "system_seconds_per_gib": system / args.gib,
            "system_seconds_each": [s for _, s in runs],
        })  # fmt: skip
    return {
        "benchmark": "refault",
        "machine": harness.machine_info(args.cpus),
        "gib": args.gib,
        "huge_page_advice": args.huge,
        "first_touches": [{"wall_seconds": w, "system_seconds": s} for w, s in warm],
        "rows": rows,
    }


def print_refault(report: dict) -> None:
    harness.print_header(report)
    advice = "with" if report["huge_page_advice"] else "without"
    print(f"{report['gib']:g} GiB mapped, touched and unmapped, {advice} huge-page advice")
    for i, first in enumerate(report["first_touches"]):
        print(f"warm-up touch {i + 1}: wall {first['wall_seconds']:.2f} s, "
              f"system {first['system_seconds']:.2f} s")  # fmt: skip
    header = f"{'pause (s)':>10}{'wall (s)':>10}{'system (s)':>12}{'sys s/GiB':>11}"
    print(header + "  each round's system s")
    for row in report["rows"]:
        each = ", ".join(f"{s:.2f}" for s in row["system_seconds_each"])
        print(f"{row['pause_seconds']:>10g}{row['wall_seconds']:>10.2f}{row['system_seconds']:>12.2f}"
              f"{row['system_seconds_per_gib']:>11.2f}  {each}")  # fmt: skip


def add_command(commands) -> None:
    sub = commands.add_parser("refault", help="cost of touching freed memory again")
    sub.add_argument("--gib", type=float, default=2.5, help="memory touched each time")
    sub.add_argument("--pauses", default="0,0.5,1,2,5,10", help="seconds before each touch")
    sub.add_argument("--rounds", type=int, default=3)
    sub.add_argument(
        "--no_huge", dest="huge", action="store_false", help="without MADV_HUGEPAGE"
    )  # fmt: skip
