"""Smoke tests of tools/bench.py (tiny geometries), its tools/benchkit modules, and
tools/make_cmrc2019_corpus.py."""

from __future__ import annotations

import functools
import importlib.util
import math
import subprocess
import sys

import numpy as np
import pytest

from cmrcx.benchmarks.cmrc2019.official_format import read_passages
from cmrcx.cpu import hugepages
from tests.support import REPO_ROOT
from tests.tools.bench_support import bench_in_process, run_bench

TOOLS = REPO_ROOT / "tools"
# 2 layers, hidden 64, 512-token vocabulary, 64-token windows: seconds per side.
TINY = ["--layers", "2", "--hidden", "64", "--heads", "2", "--intermediate", "128"]
TINY += ["--vocab", "512", "--seq", "64"]
TINY_RUN = ["--rounds", "1", "--warmup", "2", "--steps", "2"]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


sys.path.insert(0, str(TOOLS))  # benchkit, as tools/bench.py imports it
from benchkit import bert, cli, families, gpt2, harness, t5  # noqa: E402

corpus = _load("make_cmrc2019_corpus")


def test_forward_flops_of_bert_base():
    """24*T*h^2 + 4*b*s^2*h per layer (i = 4h), plus the head; 3x for training."""
    g = bert.Geometry(batch=2, seq=512)
    tokens, h = 2 * 512, 768
    expected = 12 * (24 * tokens * h * h + 4 * 2 * 512**2 * h) + 2 * tokens * h
    assert bert.forward_flops(g) == expected
    assert bert.step_flops(g, "train") == 3 * expected
    assert 190e9 < expected < 195e9


def test_synthetic_batch_is_a_valid_window():
    g = bert.Geometry(batch=3, seq=64, vocab=500)
    batch = bert.synthetic_batch(g, seed=1)
    assert {k: v.shape for k, v in batch.items()} == {
        "input_ids": (3, 64),
        "token_type_ids": (3, 64),
        "input_mask": (3, 64),
        "blank_positions": (3, 32),
        "blank_in_window": (3, 32),
        "target_blank": (3,),
        "example_mask": (3,),
    }
    assert all(v.dtype == np.int32 for v in batch.values())
    assert batch["input_ids"].max() < 500
    blanks = batch["blank_in_window"].sum(1)
    assert np.all(batch["target_blank"] < blanks)
    assert np.all(batch["blank_positions"] < 64)
    np.testing.assert_array_equal(batch["input_ids"], bert.synthetic_batch(g, 1)["input_ids"])


def test_corpus_is_official_format(tmp_path):
    path = corpus.write_corpus(tmp_path, passages=20, seed=3)
    passages = read_passages(path)
    assert len(passages) == 20
    assert all(8 <= p.num_blanks <= 15 for p in passages)
    assert all(1 <= len(p.fake_candidates) <= 3 for p in passages)
    assert all(400 <= len(p.context) <= 900 for p in passages)
    again = corpus.write_corpus(tmp_path / "again", passages=20, seed=3)
    assert again.read_bytes() == path.read_bytes()


def _check_side(side: dict) -> None:
    assert side["median_step_seconds"] > 0
    assert side["tokens_per_second"] > 0
    assert side["flops_per_second"] > 0
    assert side["matmul_2048_flops_per_second"] > 0
    assert math.isfinite(side["matmul_share"])
    assert side["first_over_steady"] > 0
    assert len(side["step_seconds_per_round"]) == 1
    assert len(side["step_seconds_per_round"][0]) == 4  # warm-up + timed


@pytest.mark.slow  # default-suite budget (15 min on 2 cores)
def test_train_compares_both_sides():
    report = run_bench("train", *TINY, *TINY_RUN)
    _check_side(report["cmrcx"])
    _check_side(report["torch"])
    assert report["torch"]["attn"] == "sdpa"
    assert report["geometry"]["layers"] == 2
    compile_seconds = report["cmrcx"]["compile_seconds"]
    assert compile_seconds["backend_compile_duration"] > 0
    assert compile_seconds["first_minus_steady"] > 0
    assert 0 < report["speed_ratio_cmrcx_over_torch"] < math.inf


@pytest.mark.slow  # child processes with jax and torch: ~20 s
def test_train_in_bfloat16():
    report = run_bench("train", *TINY, *TINY_RUN, "--dtype", "bfloat16")
    _check_side(report["cmrcx"])
    _check_side(report["torch"])
    assert report["dtype"] == "bfloat16"


def test_eval_with_eager_attention():
    report = run_bench("eval", *TINY, *TINY_RUN, "--attn", "eager", "--batch", "4")
    _check_side(report["cmrcx"])
    _check_side(report["torch"])
    assert report["torch"]["attn"] == "eager"
    assert report["flops_per_step"] == bert.forward_flops(
        bert.Geometry(layers=2, hidden=64, heads=2, intermediate=128, vocab=512, seq=64, batch=4)
    )


@pytest.mark.slow  # child processes with jax and torch: ~20 s
def test_classify_compares_both_sides():
    """CLUE-style fine-tuning: pooler + 3-way classifier, batch 4 x 64, AdamW."""
    report = run_bench("classify", *TINY, *TINY_RUN, "--batch", "4", "--classes", "3")
    _check_side(report["cmrcx"])
    _check_side(report["torch"])
    assert report["num_classes"] == 3
    assert report["cmrcx"]["examples_per_second"] == pytest.approx(
        4 / report["cmrcx"]["median_step_seconds"]
    )
    g = bert.Geometry(layers=2, hidden=64, heads=2, intermediate=128, vocab=512, seq=64, batch=4)
    assert report["flops_per_step"] == 3 * bert.forward_flops(g, num_classes=3)
    assert 0 < report["speed_ratio_cmrcx_over_torch"] < math.inf


def test_classification_batch_is_a_sentence_pair():
    g = bert.Geometry(batch=5, seq=16, vocab=300)
    batch = bert.classification_batch(g, num_classes=3, seed=2)
    assert {k: v.shape for k, v in batch.items()} == {
        "input_ids": (5, 16),
        "token_type_ids": (5, 16),
        "input_mask": (5, 16),
        "label": (5,),
        "example_mask": (5,),
    }
    assert all(v.dtype == np.int32 for v in batch.values())
    assert batch["input_ids"].max() < 300 and batch["label"].max() < 3
    np.testing.assert_array_equal(batch["token_type_ids"][0], [0] * 8 + [1] * 8)


def test_classifier_head_flops():
    """Pooler h x h and classifier h x C on the [CLS] rows replace the cloze head."""
    g = bert.Geometry(batch=32, seq=128)
    encoder = bert.forward_flops(g) - 2 * g.tokens * g.hidden
    assert bert.forward_flops(g, num_classes=2) == encoder + 2 * 32 * 768 * (768 + 2)


def test_families_route_subcommands_and_memory_models():
    assert families.of_command("classify") is bert and families.of_command("_worker") is bert
    assert families.of_command("generate") is t5 and families.of_command("_t5_worker") is t5
    assert families.of_command("memory") is None
    assert families.of_model("custom") is bert and families.of_model("longlm_large") is t5
    with pytest.raises(SystemExit, match="unknown model 'gpt9'"):
        families.of_model("gpt9")
    args = cli.build_parser().parse_args(["_t5_worker", "--side", "torch", "--mode", "generate"])
    assert t5.worker_geometry(args) == t5.Geometry()


def test_side_summary_uses_the_family_names():
    """Medians over the timed steps; the first (compiling) step and the counters apart."""
    run = {"step_seconds": [9.0, 1.0, 3.0, 2.0], "minor_faults_per_step": 5.0}
    run |= {"system_seconds_per_step": 0.5, "user_seconds_per_step": 1.5}
    runs = [{**run, "compile_events": {"backend_compile_duration": t}} for t in (4.0, 2.0)]
    summary = harness.side_summary(runs, 1, 10, t5.KEYS, lambda median: {"twice": 2 * median})
    assert list(summary)[:3] == ["median_seconds", "tokens_per_second", "twice"]
    assert summary["median_seconds"] == 2.0 and summary["tokens_per_second"] == 5.0
    assert summary["first_call_seconds"] == 9.0 and summary["first_over_steady"] == 4.5
    assert summary["seconds_per_round"] == [run["step_seconds"]] * 2
    assert summary["minor_faults_per_step"] == 5.0
    assert summary["compile_seconds"] == {"backend_compile_duration": 3.0}
    assert summary["round_medians"] == [2.0, 2.0] and summary["spread"] == 0.0
    assert summary["mean_step_seconds"] == 2.0 and summary["slowest_over_median"] == 1.5
    assert summary["slowest_over_fastest"] == 3.0


def test_steps_at_two_speeds_are_flagged():
    """Steps alternating between two speeds: the median takes the faster, the mean and
    the ratio by mean show the slower ones, and the printed line says so."""
    counters = dict.fromkeys(harness.KERNEL_COUNTERS, 0.0)
    cmrcx = [{"step_seconds": [9.0, 2.0, 3.6, 2.0, 3.6, 2.0], **counters}]
    torch = [{"step_seconds": [9.0, 2.0, 2.0, 2.0, 2.0, 2.0], **counters}]
    summarize = functools.partial(harness.side_summary, warmup=1, tokens=1, keys=t5.KEYS,
                                  figures=lambda _: {})  # fmt: skip
    sides = harness.compare_sides({"cmrcx": cmrcx, "torch": torch}, summarize, "median_seconds")
    assert sides["speed_ratio_cmrcx_over_torch"] == 1.0
    assert sides["speed_ratio_by_mean"] == pytest.approx(2.0 / 2.64)
    assert "UNEVEN" in harness.evenness("cmrcx", sides["cmrcx"])
    assert "UNEVEN" not in harness.evenness("torch", sides["torch"])


def test_slow_steps_that_are_the_majority_are_flagged_too():
    """Most steps slow: the median is a slow step and the mean stays near it (bf16 on
    AMD Zen 5 had 5 slow steps of 10), but the slowest is far above the fastest."""
    counters = dict.fromkeys(harness.KERNEL_COUNTERS, 0.0)
    runs = [{"step_seconds": [9.0, 2.0, 3.7, 2.0, 3.7, 2.0, 3.7, 3.7], **counters}]
    summary = harness.side_summary(runs, 1, 1, t5.KEYS, lambda _: {})
    assert summary["mean_over_median"] < harness.UNEVEN_MEAN
    assert "UNEVEN" in harness.evenness("cmrcx", summary)
    assert harness.evenness("transformers", {"median_seconds": 1.0}) is None


def test_rounds_report_their_medians_spread_and_ratios():
    """Each round's median, (max - min) / median of them, and the ratio round by round."""
    counters = dict.fromkeys(harness.KERNEL_COUNTERS, 0.0)
    cmrcx = [
        {"step_seconds": [9.0, 1.0, 1.0], **counters},
        {"step_seconds": [9.0, 3.0, 3.0], **counters},
    ]
    torch = [
        {"step_seconds": [9.0, 4.0, 4.0], **counters},
        {"step_seconds": [9.0, 3.0, 3.0], **counters},
    ]
    summarize = functools.partial(harness.side_summary, warmup=1, tokens=1, keys=t5.KEYS,
                                  figures=lambda _: {})  # fmt: skip
    sides = harness.compare_sides({"cmrcx": cmrcx, "torch": torch}, summarize, "median_seconds")
    assert sides["cmrcx"]["round_medians"] == [1.0, 3.0]
    assert sides["cmrcx"]["spread"] == (3.0 - 1.0) / 2.0  # the median over all timed steps
    assert sides["speed_ratio_per_round"] == [4.0, 1.0]


def test_cmrcx_children_run_as_the_user_command_does(monkeypatch):
    """Without --glibc_tunables the cmrcx child gets what `python -m cmrcx.train`
    re-executes with; the torch child the environment as it is; with it, both alike."""
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv(hugepages.SWITCH, raising=False)
    args = cli.build_parser().parse_args(["train"])
    expected = hugepages.process_environment()
    cmrcx_env = harness.side_environment(args, "cmrcx")
    assert cmrcx_env.get("GLIBC_TUNABLES") == (expected or {}).get("GLIBC_TUNABLES")
    assert "GLIBC_TUNABLES" not in harness.side_environment(args, "torch")
    args = cli.build_parser().parse_args(["train", "--glibc_tunables", "glibc.malloc.hugetlb=0"])
    for side in harness.SIDES:
        assert harness.side_environment(args, side)["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=0"


def test_input_pipeline_rate():
    report = bench_in_process("input", "--passages", "30", "--train_step_seconds", "2.0")
    assert report["windows"] > 30
    assert report["tfds_build_seconds"] > 0
    assert report["windows_per_second"] > 0
    assert report["train_consumption"]["windows_per_second"] == pytest.approx(1.0)
    assert report["ratio_to_train_step"] == pytest.approx(report["windows_per_second"])


@pytest.fixture(scope="module")
def memory_report():
    geometry = ["--layers", "4", "--hidden", "64", "--heads", "2", "--intermediate", "256"]
    geometry += ["--vocab", "512", "--seq", "128", "--batch", "8"]
    return run_bench(
        "memory", "--models", "custom", *geometry, "--variants", "f32,f32+dots,f32+full,bf16"
    )


@pytest.mark.slow  # a child process measuring memory: ~18 s
def test_memory_report_fields(memory_report):
    rows = memory_report["models"]["custom"]["variants"]
    assert [row["variant"] for row in rows] == ["f32", "f32+dots", "f32+full", "bf16"]
    for row in rows:
        gib = row["gib"]
        assert gib["argument"] > 0 and gib["output"] > 0 and gib["temp"] > 0
        assert gib["total"] == pytest.approx(
            gib["argument"] + gib["output"] - gib["alias"] + gib["temp"]
        )
        assert row["fits_gib"] == [16, 32, 80]


@pytest.mark.slow  # shares the memory child process above
def test_remat_lowers_temp_memory(memory_report):
    temp = {
        row["variant"]: row["gib"]["temp"] for row in memory_report["models"]["custom"]["variants"]
    }
    assert temp["f32+full"] < temp["f32"]
    assert temp["f32+dots"] < temp["f32"]


# T5: 2+2 layers, d_model 64, 512-token vocabulary, 32 input tokens.
TINY_T5 = ["--d_model", "64", "--d_ff", "128", "--d_kv", "16", "--heads", "2", "--layers", "2"]
TINY_T5 += ["--decoder_layers", "2", "--vocab", "512", "--input_length", "32"]


def _check_t5_side(side: dict, tokens: int) -> None:
    assert side["median_seconds"] > 0
    assert side["tokens_per_second"] == pytest.approx(tokens / side["median_seconds"])
    assert side["first_over_steady"] > 0
    assert len(side["seconds_per_round"]) == 1
    assert len(side["seconds_per_round"][0]) == 3  # warm-up + timed


@pytest.mark.slow  # child processes with jax and torch: ~20 s
def test_generate_compares_both_sides_per_batch():
    """Both sides produce all 8 new tokens in every row (EOS disabled) at batches 1 and 2,
    sampling, greedy and with beam search (the default methods)."""
    report = run_bench("generate", *TINY_T5, "--target_length", "8", "--batch", "1,2",
                       "--rounds", "1", "--warmup", "1", "--steps", "2")  # fmt: skip
    runs = [(r["method"], r["geometry"]["batch"]) for r in report["results"]]
    assert runs == [(method, batch) for method in t5.METHODS for batch in (1, 2)]
    for result in report["results"]:
        assert result["tokens_per_call"] == 8 * result["geometry"]["batch"]
        for side in ("cmrcx", "torch"):
            _check_t5_side(result[side], result["tokens_per_call"])
            assert result[side]["min_new_tokens"] == 8
        assert result["cmrcx"]["compile_seconds"]["backend_compile_duration"] > 0
        assert 0 < result["speed_ratio_cmrcx_over_torch"] < math.inf


@pytest.mark.slow  # child processes with jax and torch: ~20 s
def test_train_t5_compares_both_sides():
    report = run_bench("train_t5", *TINY_T5, "--target_length", "16", "--batch", "2",
                       "--rounds", "1", "--warmup", "1", "--steps", "2")  # fmt: skip
    (result,) = report["results"]
    assert result["tokens_per_call"] == 2 * (32 + 16)
    _check_t5_side(result["cmrcx"], 96)
    _check_t5_side(result["torch"], 96)
    assert 0 < result["speed_ratio_cmrcx_over_torch"] < math.inf


def test_seq2seq_batch_is_full_length():
    g = t5.Geometry(vocab=300, input_length=12, target_length=5, batch=3)
    batch = t5.seq2seq_batch(g, seed=1)
    assert {k: v.shape for k, v in batch.items()} == {
        "inputs": (3, 12),
        "inputs_mask": (3, 12),
        "targets": (3, 5),
        "targets_mask": (3, 5),
        "example_mask": (3,),
    }
    assert all(v.dtype == np.int32 for v in batch.values())
    np.testing.assert_array_equal(batch["targets"][:, -1], 1)  # EOS
    assert batch["inputs"].min() >= 2 and batch["inputs"].max() < 300


def test_t5_configs_agree():
    """cmrcx's and transformers' T5Config describe the same LongLM-large network."""
    g = t5.PRESETS["longlm_large"]
    ours, theirs = t5.cmrcx_config(g), t5.torch_config(g)
    assert (ours.d_model, ours.d_ff, ours.num_heads, ours.num_layers, ours.num_decoder_layers) == (
        theirs.d_model, theirs.d_ff, theirs.num_heads, theirs.num_layers,
        theirs.num_decoder_layers,
    )  # fmt: skip
    assert (ours.d_model, ours.num_layers, ours.num_decoder_layers) == (1536, 24, 32)
    assert ours.vocab_size == theirs.vocab_size == 32128
    assert ours.feed_forward_proj == theirs.feed_forward_proj == "relu"


@pytest.mark.slow  # child processes with jax and torch: ~20 s
def test_t5_memory_report():
    """LongLM-small's Seq2Seq step at batch 2 x 64/32, compiled only."""
    report = run_bench("memory", "--models", "longlm_small", "--batch", "2", "--seq", "64",
                       "--target_length", "32", "--variants", "f32,bf16+full")  # fmt: skip
    model = report["models"]["longlm_small"]
    assert model["geometry"]["input_length"] == 64 and model["geometry"]["target_length"] == 32
    assert [row["variant"] for row in model["variants"]] == ["f32", "bf16+full"]
    for row in model["variants"]:
        # Parameters + AdamW's two moments, float32 either way: ~60M x 12 bytes.
        assert 0.5 < row["gib"]["argument"] < 1.0
        assert row["gib"]["temp"] > 0


# GPT-2: 2 layers, n_embd 32, 512-token vocabulary, 16-token prompts.
TINY_GPT2 = ["--n_embd", "32", "--n_layer", "2", "--n_head", "2", "--vocab", "512"]
TINY_GPT2 += ["--n_positions", "64", "--input_length", "16"]


def test_gpt2_family_and_configs_agree():
    assert families.of_command("generate_gpt2") is gpt2 and families.of_model("gpt2_base") is gpt2
    g = gpt2.PRESETS["gpt2_base"]
    ours, theirs = gpt2.cmrcx_config(g), gpt2.torch_config(g)
    assert (ours.n_embd, ours.n_layer, ours.n_head, ours.vocab_size, ours.n_positions) == (
        theirs.n_embd, theirs.n_layer, theirs.n_head, theirs.vocab_size, theirs.n_positions,
    )  # fmt: skip
    assert (ours.n_embd, ours.n_layer, ours.vocab_size) == (768, 12, 21128)


@pytest.mark.slow  # child processes with jax and torch: ~20 s each
@pytest.mark.parametrize("command", ["generate_gpt2", "train_gpt2"])
def test_gpt2_commands_compare_both_sides(command):
    report = run_bench(command, *TINY_GPT2, "--target_length", "8", "--batch", "2",
                       "--rounds", "1", "--warmup", "1", "--steps", "2")  # fmt: skip
    (result,) = report["results"]
    tokens = 2 * 8 if command == "generate_gpt2" else 2 * (16 + 8)
    assert result["tokens_per_call"] == tokens
    for side in ("cmrcx", "torch"):
        _check_t5_side(result[side], tokens)
        assert result[side]["min_new_tokens"] == 8


def test_layerops_times_each_op_on_both_sides():
    report = bench_in_process("layerops", "--batch", "1", "--seq", "16", "--hidden", "32",
                              "--heads", "2", "--intermediate", "64", "--rounds", "1",
                              "--steps", "2")  # fmt: skip
    cmrcx, torch = report["milliseconds"]["cmrcx"], report["milliseconds"]["torch"]
    assert set(cmrcx) - set(torch) == {"attention by head (inference)"}
    assert set(torch) - set(cmrcx) == {"sdpa (fused scores + softmax + context)"}
    assert all(0 < ms < math.inf for ms in [*cmrcx.values(), *torch.values()])
    assert report["attention_core_ms"]["cmrcx"] == pytest.approx(
        cmrcx["scores"] + cmrcx["softmax"] + cmrcx["context"]
    )
    dense = ("qkv", "attention_output", "ffn_in", "ffn_out")
    assert report["dense_ms"]["cmrcx"] == pytest.approx(sum(cmrcx[n] for n in dense))
    assert report["dense_ms"]["torch"] == pytest.approx(sum(torch[n] for n in dense))
    assert report["attention_and_gelu_ms"]["cmrcx"] == pytest.approx(
        cmrcx["attention by head (inference)"] + cmrcx["gelu"]
    )


def test_refault_times_each_pause():
    report = bench_in_process("refault", "--gib", "0.01", "--pauses", "0,0.1", "--rounds", "2")
    assert [row["pause_seconds"] for row in report["rows"]] == [0.0, 0.1]
    for row in report["rows"]:
        assert len(row["system_seconds_each"]) == 2
        assert 0 < row["wall_seconds"] < 60 and row["system_seconds"] >= 0
    assert isinstance(report["machine"]["free_page_reporting"], bool)


@pytest.mark.parametrize(
    ("device", "features", "reports"),
    [
        ("0x0005", "0110010100", True),
        ("0x0005", "0110000100", False),
        ("0x0001", "0000010000", False),
    ],
)  # the balloon (device 5) with feature bit 5 set; without it; bit 5 of a network device
def test_free_page_reporting_is_read_from_the_balloon(tmp_path, device, features, reports):
    assert not harness.free_page_reporting(tmp_path / "missing")
    for name, (kind, bits) in {
        "virtio0": ("0x0002", "1111111111"),
        "virtio1": (device, features),
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "device").write_text(kind + "\n")
        (tmp_path / name / "features").write_text(bits + "\n")
    assert harness.free_page_reporting(tmp_path) is reports


@pytest.mark.parametrize("changed", ["cmrcx/a.py", "tasks/b.py", "gin_configs/c.gin", "tools/d.py"])
def test_reports_name_a_tree_with_uncommitted_code_dirty(tmp_path, monkeypatch, changed):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, timeout=60)

    git("init", "-q")
    for path in ("cmrcx/a.py", "tasks/b.py", "gin_configs/c.gin", "tools/d.py", "README.md"):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.setattr(harness, "REPO_ROOT", tmp_path)
    clean = harness.git_state()
    assert clean and not clean.endswith("+dirty")
    (tmp_path / "README.md").write_text("prose only\n")
    assert harness.git_state() == clean
    (tmp_path / changed).write_text("x = 2\n")
    assert harness.git_state() == clean + "+dirty"


def test_input_feed_flops_are_bert_base_without_its_head():
    """BERT-base 24 x 512 (CMRC 2019's paper batch): the input bench's step estimate is
    bench.py train's count less the cloze head, which it leaves out."""
    from benchkit import input_feed

    from cmrcx.models.bert import BertConfig

    g = bert.Geometry(batch=24, seq=512)
    example = {"input_ids": np.zeros((24, 512), np.int32)}
    head = 3 * 2 * g.tokens * g.hidden
    assert input_feed.train_step_flops(BertConfig(), example) == pytest.approx(
        bert.step_flops(g, "train") - head
    )


def test_input_feed_reads_a_tiny_gins_batches():
    report = bench_in_process(
        "input", "--gin_file=clue_afqmc_tiny.gin", "--rows", "300", "--seconds", "0.1",
        "--paced_steps", "2", "--prefetch", "3", "--rounds", "2",
    )  # fmt: skip
    (row,) = report["rows"]
    batch, seq = row["batch_shapes"]["input_ids"]
    assert row["task"] == "clue_afqmc" and seq == 64
    # The store as the runner's: token ids in int16, masks and segment ids in int8.
    assert row["store_bytes"] > 300 * seq * (2 + 1 + 1)
    consumption = row["h100_examples_per_second_estimate"]
    assert consumption == pytest.approx(batch / row["h100_step_seconds_estimate"])
    assert set(row["reads"]) == {"0", "3"}
    for read in row["reads"].values():
        assert read["examples_per_second"] == pytest.approx(read["batches_per_second"] * batch)
        each_round = read["batches_per_second_each_round"]
        assert len(each_round) == 2 and read["batches_per_second"] == pytest.approx(
            sum(each_round) / 2
        )  # the median of two
        assert read["ratio_to_h100_step"] == pytest.approx(
            read["examples_per_second"] / consumption
        )
        assert read["wait_per_step_seconds_at_h100_pace"] >= 0
    ratios = [read["ratio_to_h100_step"] for read in row["reads"].values()]
    assert row["meets_target"] == (min(ratios) >= report["target_ratio"])
    assert report["all_meet_target"] == row["meets_target"]
