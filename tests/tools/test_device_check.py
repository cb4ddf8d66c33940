"""tools/device_check.sh: the rows, their isolation and the JSON written after each row.

On this CPU the "device" is the CPU itself, so the logits differences are 0 and the MFU
is null (no peak for a CPU): these tests check the plumbing and the figures' form; the
numbers come from a run on an accelerator.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.support import REPO_ROOT

TOOLS = REPO_ROOT / "tools"
sys.path.insert(0, str(TOOLS))
from benchkit import bert, device_check, flops, t5  # noqa: E402

SCRIPT = TOOLS / "device_check.sh"


def _context(tmp_path, budget_s=600.0):
    return device_check.Context(
        smoke=True, out=str(tmp_path), sizes=device_check.SMOKE,
        deadline=time.monotonic() + budget_s,
    )  # fmt: skip


def test_a_failing_row_is_recorded_and_the_next_rows_still_run(tmp_path, monkeypatch):
    def broken(ctx):
        raise RuntimeError("out of memory on the device")

    rows = [("first", lambda ctx: {"x": 1}), ("broken", broken), ("last", lambda ctx: {"y": 2})]
    monkeypatch.setattr(device_check, "row_table", lambda smoke: rows)
    report = device_check.run_rows(_context(tmp_path))
    written = json.loads((tmp_path / "device_check.json").read_text())
    assert written == report
    assert [(row["row"], row["status"]) for row in written["rows"]] == [
        ("first", "ok"), ("broken", "error"), ("last", "ok"),
    ]  # fmt: skip
    assert written["rows"][1]["error"] == "RuntimeError: out of memory on the device"
    assert "broken" in written["rows"][1]["traceback"]
    assert written["rows"][2]["y"] == 2


def test_the_json_is_written_after_each_row_and_rows_past_the_budget_are_skipped(
    tmp_path, monkeypatch
):
    seen = []

    def reads_the_file(ctx):
        seen.append(json.loads((tmp_path / "device_check.json").read_text()))
        time.sleep(0.2)
        return {}

    rows = [("a", lambda ctx: {}), ("b", reads_the_file), ("c", lambda ctx: {})]
    monkeypatch.setattr(device_check, "row_table", lambda smoke: rows)
    report = device_check.run_rows(_context(tmp_path, budget_s=0.1))
    # Row a had finished and was on disk when b ran; b started within the budget.
    assert [row["row"] for row in seen[0]["rows"]] == ["a"]
    assert [row["status"] for row in report["rows"]] == ["ok", "ok", "skipped"]


def test_peak_flops_by_device_kind():
    assert device_check.peak_flops("NVIDIA H100 80GB HBM3") == 989.4e12
    assert device_check.peak_flops("NVIDIA H100 PCIe") == 756e12
    assert device_check.peak_flops("Tesla V100-SXM2-16GB") == 125e12
    assert device_check.peak_flops("TPU v5 lite") == 197e12
    assert device_check.peak_flops("TPU v3") == 61.5e12
    assert device_check.peak_flops("cpu") is None


def test_seq2seq_flops_count_an_encoder_layer_as_flops_py_counts_one():
    # With heads*d_kv = d_model and no decoder or LM head, flops.layer_flops per layer.
    g = t5.Geometry(d_model=64, d_ff=256, d_kv=16, heads=4, layers=3, decoder_layers=0,
                    vocab=0, input_length=32, target_length=8, batch=2)  # fmt: skip
    assert device_check.seq2seq_forward_flops(g) == 3 * flops.layer_flops(2, 32, 64, 256)
    # A decoder layer adds self-attention over targets, cross-attention and its FFN.
    one = device_check.seq2seq_forward_flops(t5.Geometry(**{**vars(g), "decoder_layers": 1}))
    b, s, t, d = 2, 32, 8, 64
    self_attention = 2 * b * t * 4 * d * d + 4 * b * t * t * d
    cross_attention = 2 * b * (2 * t + 2 * s) * d * d + 4 * b * t * s * d
    assert one - 3 * flops.layer_flops(2, 32, 64, 256) == (
        self_attention + cross_attention + 2 * b * t * 2 * d * 256
    )
    assert bert.step_flops(bert.Geometry(batch=24), "train") > 0


def _smoke(tmp_path, rows: str | None) -> dict:
    # A budget past the timeout: a loaded machine must not turn rows into "skipped".
    command = [str(SCRIPT), "--smoke", "--out", str(tmp_path), "--budget_s", "3000"]
    command += ["--rows", rows] if rows else []
    proc = subprocess.run(command, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "device_check.json" in proc.stdout
    return json.loads((tmp_path / "device_check.json").read_text())


def test_smoke_rows_on_cpu(tmp_path):
    rows = "platform,logits BERT small,attention: dot_product_attention vs einsum"
    report = _smoke(tmp_path, rows + ",train bert_base bf16")
    by_name = {row["row"]: row for row in report["rows"]}
    assert all(row["status"] == "ok" for row in report["rows"]), report
    assert by_name["platform"]["platform"] == "cpu"
    assert by_name["platform"]["versions"]["jax"]
    logits = by_name["logits BERT small"]
    for dtype in ("float32", "bfloat16"):
        # The default device is the CPU here: the same computation on both sides.
        assert logits[dtype]["max_abs_diff"] == 0.0
        assert logits[dtype]["max_abs_logit"] > 0
        assert logits[dtype]["shape"] == [2, 2, device_check.SMOKE.small_length]
    attention = by_name["attention: dot_product_attention vs einsum"]
    assert set(attention["float32"]) == {"bert", "t5"}  # --smoke: the plumbing only
    for family in ("bert", "t5"):
        assert attention["float32"][family]["kernel"] == "xla"  # no cuDNN on a CPU
        assert attention["float32"][family]["forward"]["max_rel"] < 1e-5
        assert attention["float32"][family]["grad"]["max_rel"] < 1e-5
    train = by_name["train bert_base bf16"]
    g = device_check.SMOKE.bert_train
    assert train["flops_per_step"] == bert.step_flops(g, "train")
    assert train["tokens_per_second"] == pytest.approx(g.tokens / train["median_seconds"])
    assert train["mfu"] is None  # no peak FLOP/s for a CPU


@pytest.mark.slow
def test_full_smoke_run_on_cpu(tmp_path):
    report = _smoke(tmp_path, None)
    names = [name for name, _ in device_check.row_table(True)]
    assert [row["row"] for row in report["rows"]] == names
    assert all(row["status"] == "ok" for row in report["rows"]), [
        (row["row"], row.get("error")) for row in report["rows"]
    ]
    by_name = {row["row"]: row for row in report["rows"]}
    assert set(by_name["sample longlm_small"]["by_batch"]) == {"1", "2"}
    assert by_name["e2e cmrc2019_tiny"]["score"]
    assert (tmp_path / "cmrc2019_tiny" / "metrics.jsonl").is_file()
