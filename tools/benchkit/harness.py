"""The parent side of every cmrcx-against-PyTorch comparison, whatever the family.

Each side runs in its own child process (the family's worker subcommand of
tools/bench.py), pinned with `taskset -c CPUS`, torch with
`torch.set_num_threads(len(CPUS))`; the sides alternate (cmrcx, torch, cmrcx, torch,
...) for `--rounds`; each child runs `--warmup` steps (excluded; the first includes
compilation) and then `--steps` timed steps, and prints its timings as one JSON line.
Reported per side: the median over all timed steps of its children, the first
(compiling) step apart, and the medians of the kernel counters; and the mean, the
slowest and the fastest timed step, which show steps that run at two speeds (a median
takes whichever speed most steps had; bf16 on AMD Zen 5 ran so, README).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from cmrcx.cpu import hugepages

TOOLS = Path(__file__).resolve().parent.parent
REPO_ROOT = TOOLS.parent
BENCH_SCRIPT = TOOLS / "bench.py"  # the children run the same entry as the parent
RESULT_PREFIX = "BENCH_RESULT "
SIDES = ("cmrcx", "torch")
KERNEL_COUNTERS = ("minor_faults_per_step", "system_seconds_per_step", "user_seconds_per_step")
LOAD_AT_START = os.getloadavg()  # the parent imports this module first: the load before it ran


# ---------------------------------------------------------------- flags


def add_timing_flags(sub, unit: str, glibc_help: str) -> None:
    """--rounds / --warmup / --steps / --glibc_tunables of a compared subcommand;
    `unit` names what one timed call is ("steps", "calls")."""
    sub.add_argument("--rounds", type=int, default=2, help="A/B rounds")
    sub.add_argument("--warmup", type=int, default=2, help=f"excluded {unit} per child")
    sub.add_argument("--steps", type=int, default=5, help=f"timed {unit} per child")
    sub.add_argument("--glibc_tunables", help=glibc_help)


def add_worker_flags(sub, modes) -> None:
    """A worker subcommand's --side and --mode (the parent's subcommand)."""
    sub.add_argument("--side", choices=SIDES, required=True)
    sub.add_argument("--mode", choices=modes, required=True)


# ---------------------------------------------------------------- children


def worker_command(args, worker: str, side: str, geometry, **flags) -> list[str]:
    """The command line of one `worker` child: the parent's timing flags, every field
    of the `geometry` dataclass and the family's `flags`."""
    command = [sys.executable, str(BENCH_SCRIPT), worker, "--side", side]
    command += ["--mode", args.command, "--cpus", args.cpus]
    command += ["--warmup", str(args.warmup), "--steps", str(args.steps), "--seed", str(args.seed)]
    for name, value in [*dataclasses.asdict(geometry).items(), *flags.items()]:
        command += [f"--{name}", str(value)]
    return command


def run_child(args, side: str, command: list[str]) -> dict:
    """Runs a worker command pinned to args.cpus (taskset); returns its result."""
    if shutil.which("taskset"):
        command = ["taskset", "-c", args.cpus, *command]
    env = side_environment(args, side)
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if proc.returncode or not lines:
        raise RuntimeError(f"{side} worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def side_environment(args, side: str) -> dict[str, str]:
    """A child's environment. --glibc_tunables: both sides alike (glibc reads it at process
    start). Without it each side gets what its user's command runs with: the cmrcx side the
    huge-page tunable `python -m cmrcx.train` re-executes itself with
    (cmrcx.cpu.hugepages), the torch side the environment as it is."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO_ROOT)}
    if args.glibc_tunables is not None:
        return {**env, "GLIBC_TUNABLES": args.glibc_tunables}
    if side == "cmrcx":
        return hugepages.process_environment(env) or env
    return env


def spawn_code(code: str, result_prefix: str, quiet: bool, log=None) -> dict:
    """Runs `python -c code` from the repository root as `python -m cmrcx.train` runs (the
    huge-page tunable; tools/ importable), echoing its lines to `log` (None: the current
    sys.stderr) unless `quiet`;
    returns the JSON of its last `result_prefix` line, with its output lines as "log"."""
    env = {**os.environ, "PYTHONPATH": f"{TOOLS}:{REPO_ROOT}"}
    env = hugepages.process_environment(env) or env
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        cwd=str(REPO_ROOT),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    result, lines = None, []
    for line in process.stdout:
        lines.append(line)
        if line.startswith(result_prefix):
            result = json.loads(line[len(result_prefix) :])
        elif not quiet:
            print("  | " + line.rstrip()[:160], file=log or sys.stderr, flush=True)
    if process.wait() != 0 or result is None:
        raise SystemExit("bench child failed:\n" + "".join(lines[-40:]))
    result["log"] = lines
    return result


def print_result(result: dict) -> None:
    """A worker's last word: its timings as one prefixed JSON line on stdout."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def alternate(args, worker: str, geometry, **flags) -> dict[str, list[dict]]:
    """`--rounds` rounds of a cmrcx child then a torch child; each side's results."""
    runs = {side: [] for side in SIDES}
    for _ in range(args.rounds):
        for side in SIDES:
            command = worker_command(args, worker, side, geometry, **flags)
            runs[side].append(run_child(args, side, command))
    return runs


# ---------------------------------------------------------------- medians


@dataclasses.dataclass(frozen=True)
class SummaryKeys:
    """What a family's report calls a side's median, first and per-round seconds."""

    median: str
    first: str
    per_round: str


def side_summary(runs: list[dict], warmup: int, tokens: int, keys: SummaryKeys, figures) -> dict:
    """Medians over all timed steps of one side's runs; the first (compiling) step apart.

    figures(median) -> dict: the family's own figures, after tokens_per_second.
    """
    timed_steps = [t for run in runs for t in run["step_seconds"][warmup:]]
    median = statistics.median(timed_steps)
    first = statistics.median(run["step_seconds"][0] for run in runs)
    summary = {keys.median: median, "tokens_per_second": tokens / median, **figures(median)}
    summary[keys.first] = first
    summary["first_over_steady"] = first / median
    summary[keys.per_round] = [run["step_seconds"] for run in runs]
    # One median per child (round): how far the rounds disagree, as (max - min) / median.
    rounds = [statistics.median(run["step_seconds"][warmup:]) for run in runs]
    summary["round_medians"] = rounds
    summary["spread"] = (max(rounds) - min(rounds)) / median
    # Uneven steps: the mean and the slowest timed step against the median.
    summary["mean_step_seconds"] = statistics.mean(timed_steps)
    summary["mean_over_median"] = summary["mean_step_seconds"] / median
    summary["slowest_over_median"] = max(timed_steps) / median
    summary["slowest_over_fastest"] = max(timed_steps) / min(timed_steps)
    for key in KERNEL_COUNTERS:
        summary[key] = statistics.median(run[key] for run in runs)
    if "compile_events" in runs[0]:
        events = [run["compile_events"] for run in runs]
        summary["compile_seconds"] = {
            key: statistics.median(e.get(key, 0.0) for e in events) for key in events[0]
        }
    return summary


def compare_sides(runs: dict[str, list[dict]], summarize, median_key: str) -> dict:
    """Both sides' summaries and the throughput ratio (> 1: cmrcx is faster)."""
    cmrcx, torch = (summarize(runs[side]) for side in SIDES)
    ratio = torch[median_key] / cmrcx[median_key]
    per_round = [t / c for c, t in zip(cmrcx["round_medians"], torch["round_medians"], strict=True)]
    return {
        "cmrcx": cmrcx,
        "torch": torch,
        "speed_ratio_cmrcx_over_torch": ratio,
        "speed_ratio_per_round": per_round,
        "speed_ratio_by_mean": torch["mean_step_seconds"] / cmrcx["mean_step_seconds"],
    }


def method(args) -> dict:
    """How the children were run: the report's "method"."""
    return {
        "rounds": args.rounds,
        "warmup": args.warmup,
        "steps": args.steps,
        "glibc_tunables": {
            side: side_environment(args, side).get("GLIBC_TUNABLES") for side in SIDES
        },
    }


# ---------------------------------------------------------------- machine


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
        # Other processes on the machine skew timings: the 1/5/15-minute load at the start
        # (before the first child) and at the end.
        "load_average_start": list(LOAD_AT_START),
        "load_average": list(os.getloadavg()),
        "versions": versions,
        "command": " ".join(["python", *sys.argv]),
        "git": git_state(),
        "free_page_reporting": free_page_reporting(),
    }


VIRTIO_BALLOON = "0x0005"
VIRTIO_BALLOON_F_REPORTING = 5  # feature bit (virtio 1.2, 5.5.3)


def free_page_reporting(devices: Path = Path("/sys/bus/virtio/devices")) -> bool:
    """Whether this is a VM whose balloon device reports free pages to its host: memory
    freed and touched again after a second costs system time there (`bench.py refault`)."""
    for device in devices.glob("*"):
        try:
            kind = (device / "device").read_text().strip()
            features = (device / "features").read_text().strip()
        except OSError:
            continue
        if (
            kind == VIRTIO_BALLOON
            and features[VIRTIO_BALLOON_F_REPORTING : VIRTIO_BALLOON_F_REPORTING + 1] == "1"
        ):
            return True
    return False


BENCHED_CODE = ("cmrcx", "tasks", "gin_configs", "tools")


def git_state() -> str:
    """HEAD's short hash, "+dirty" when the code a bench runs (the package, its tasks and
    gin files, the bench itself) has uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", *BENCHED_CODE],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return head + ("+dirty" if dirty else "")


# ---------------------------------------------------------------- printing


def print_header(report: dict) -> None:
    m = report["machine"]
    versions = " ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    print(f"# {report['benchmark']}: {m['cpu']}, {m['cores']} cores (using CPUs {m['cpus_used']})")
    print(f"# {m['date']}  python {m['python']}  {versions}")
    start = " ".join(f"{x:.2f}" for x in m.get("load_average_start", ()))
    load = " ".join(f"{x:.2f}" for x in m["load_average"])
    print(f"# {m['command']}  (git {m['git']})")
    print(f"# load average (1, 5, 15 min) at start {start or '?'}, at end {load}")
    if m.get("free_page_reporting"):
        print("# a VM whose balloon returns freed memory to its host: memory touched again "
              "after a pause costs system time (bench.py refault)")  # fmt: skip


def print_sides(result: dict, torch_label: str, rows) -> None:
    """The two sides' columns; rows: (label, key, format[, scale]) each."""
    c, t = result["cmrcx"], result["torch"]
    print(f"{'':28}{'cmrcx (JAX)':>16}{torch_label:>16}")
    for label, key, fmt, *scale in rows:
        factor = scale[0] if scale else 1
        print(f"{label:28}{fmt.format(c[key] * factor):>16}{fmt.format(t[key] * factor):>16}")
    compile_text = ", ".join(f"{k} {v:.2f}" for k, v in c.get("compile_seconds", {}).items())
    print(f"cmrcx compile (s): {compile_text}")
    for side, label in (("cmrcx", "cmrcx"), ("torch", torch_label)):
        rounds = ", ".join(f"{x:.3f}" for x in result[side].get("round_medians", ()))
        spread = result[side].get("spread", float("nan"))
        print(f"{label} median per round (s): {rounds}  (spread (max-min)/median {spread:.1%})")
        if (line := evenness(label, result[side])) is not None:
            print(line)
    print(f"speed ratio cmrcx / torch: {result['speed_ratio_cmrcx_over_torch']:.3f}", end="")
    per_round = ", ".join(f"{x:.3f}" for x in result.get("speed_ratio_per_round", ()))
    print(f"  (per round: {per_round})" if per_round else "")
    if "speed_ratio_by_mean" in result:
        print(f"speed ratio by the mean step: {result['speed_ratio_by_mean']:.3f}")


# The steps do not run at one speed when the mean is this far above the median (a
# minority of slow steps) or the slowest this far above the fastest (slow steps that are
# half or more of them move the median itself).
UNEVEN_MEAN, UNEVEN_RANGE = 1.1, 1.25


def evenness(label: str, side: dict) -> str | None:
    """The side's mean and slowest timed step against its median, flagged when uneven;
    None for a report without them (`outgen`'s)."""
    if "mean_step_seconds" not in side:
        return None
    line = (
        f"{label} mean step {side['mean_step_seconds']:.3f} s, {side['mean_over_median']:.2f}x"
        f" the median; slowest step {side['slowest_over_median']:.2f}x the median,"
        f" {side['slowest_over_fastest']:.2f}x the fastest"
    )
    if side["mean_over_median"] > UNEVEN_MEAN or side["slowest_over_fastest"] > UNEVEN_RANGE:
        line += "  UNEVEN: some steps run much slower; compare means, or run more --steps"
    return line
