"""tools/bench.py outgen (tools/benchkit/outgen.py) at the tiny T5 geometry: the parts
in-process (fast), the command line with its child processes (slow)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from cmrcx.benchmarks.lot import formats
from tests.support import REPO_ROOT

TOOLS = REPO_ROOT / "tools"
sys.path.insert(0, str(TOOLS))  # benchkit, as tools/bench.py imports it
from benchkit import cli, families, outgen  # noqa: E402

# 2+2 layers, d_model 32, vocabulary 512 (the bundled tiny spiece.model's 500 ids).
TINY = ["--model_gin", "models/t5/tiny.gin", "--outlines", "5", "--new_tokens", "4"]


def in_process(args, part: str, command: list[str]) -> dict:
    """harness.run_child's stand-in: the worker command's part run here, its result
    through JSON as a child prints it."""
    assert command[2:4] == [outgen.WORKER, "--part"] and command[4] == part
    return json.loads(json.dumps(outgen.run_part(cli.build_parser().parse_args(command[2:]))))


def check_report(report: dict, batches: list[int], rounds: int) -> None:
    assert report["benchmark"] == "outgen"
    machine = report["machine"]
    assert machine["cpu"] and machine["date"] and machine["git"]
    assert len(machine["load_average"]) == len(machine["load_average_before"]) == 3
    assert report["model"]["vocab_size"] == 512 and report["model"]["parameters"] > 0
    data = report["data"]
    assert data["outlines"] == 5 and data["phrases_per_outline"] == 8
    # Title + 8 phrases + '#'s + sentinel + EOS with the tiny vocabulary: tens of tokens.
    assert 20 < data["input_tokens"]["mean"] <= data["input_tokens"]["max"] < 100
    assert report["new_tokens"] == 4 and "top-k 40" in report["setting"]
    assert [result["batch"] for result in report["results"]] == batches
    for result in report["results"]:
        assert result["tokens_per_pass"] == 5 * 4
        for side in ("cmrcx", "torch"):
            summary = result[side]
            assert summary["median_seconds"] > 0
            assert summary["tokens_per_second"] == pytest.approx(20 / summary["median_seconds"])
            assert len(summary["seconds_per_round"]) == rounds
            assert summary["min_new_tokens"] == summary["max_new_tokens"] == 4
            assert summary["spread"] >= 0 and summary["warmup_seconds"] > 0
        # cmrcx pads to a power-of-two bucket, transformers to the batch's longest.
        assert result["cmrcx"]["mean_padded_input_length"] in (32, 64, 128)
        assert result["torch"]["mean_padded_input_length"] <= data["input_tokens"]["max"]
        assert result["cmrcx"]["compile_seconds"]["backend_compile_duration"] > 0
        assert 0 < result["speed_ratio_cmrcx_over_torch"] < math.inf
        assert len(result["ratio_per_round"]) == rounds


def test_outgen_parts_in_process(tmp_path, capsys):
    """Prepare, cmrcx (cmrcx.generate's LOT path) and transformers at batch 2, one round."""
    args = cli.build_parser().parse_args(
        ["outgen", *TINY, "--batch", "2", "--rounds", "1", "--workdir", str(tmp_path)]
    )
    report = outgen.compare(args, run_child=in_process)
    check_report(report, [2], 1)
    records = formats.read_file("outgen", tmp_path / outgen.RECORDS_FILE)
    assert len(records) == 5 and all(len(r.outline) == 8 for r in records)
    outgen.print_report(report)
    assert "speed ratio cmrcx / torch" in capsys.readouterr().out


def test_synthetic_records_are_sample_phrases():
    titles, phrases = outgen.sample_pool()
    records = outgen.synthetic_records(242, seed=3)
    assert len(records) == 242 and records == outgen.synthetic_records(242, seed=3)
    for record in records:
        assert record["title"] in titles
        assert len(set(record["outline"])) == 8 and set(record["outline"]) <= set(phrases)


def _canned(pass_seconds: float, new_tokens: int = 4, decoding=outgen.DECODING) -> dict:
    return {"pass_seconds": pass_seconds, "batch_seconds": [pass_seconds / 5] * 5, "rows": 5,
            "min_new_tokens": new_tokens, "max_new_tokens": new_tokens, "user_seconds": 1.0,
            "system_seconds": 0.1, "warmup_seconds": 2.0, "padded_input_lengths": [64] * 5,
            "decoding": decoding}  # fmt: skip


def test_compare_batch_medians_ratio_and_refusals():
    """Medians and spread over the rounds; refused when a side made other lengths or
    cmrcx decodes otherwise than transformers."""
    args = cli.build_parser().parse_args(["outgen", *TINY, "--rounds", "3"])
    seconds = iter([2.0, 4.0, 1.0, 5.0, 3.0, 6.0])  # cmrcx, torch, cmrcx, torch, ...
    result = outgen.compare_batch(args, 2, "w", lambda *_: _canned(next(seconds)))
    assert result["cmrcx"]["median_seconds"] == 2.0 and result["torch"]["median_seconds"] == 5.0
    assert result["cmrcx"]["spread"] == pytest.approx((3.0 - 1.0) / 2.0)
    assert result["speed_ratio_cmrcx_over_torch"] == 2.5
    assert result["ratio_per_round"] == [2.0, 5.0, 2.0]
    with pytest.raises(SystemExit, match="torch made"):
        outgen.compare_batch(args, 2, "w", lambda _, side, __: _canned(1.0, 4 - (side == "torch")))
    other = {**outgen.DECODING, "temperature": 1.0}
    with pytest.raises(SystemExit, match="cmrcx decodes with"):
        outgen.compare_batch(args, 2, "w", lambda *_: _canned(1.0, decoding=other))


def test_outgen_is_a_family():
    assert families.of_command("outgen") is outgen
    assert families.of_command(outgen.WORKER) is outgen


@pytest.mark.slow  # five child processes with jax or torch: ~60 s
def test_outgen_command_line():
    proc = subprocess.run(
        [sys.executable, str(TOOLS / "bench.py"), "outgen", *TINY, "--batch", "1,2",
         "--rounds", "1", "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_report(json.loads(proc.stdout), [1, 2], 1)
