"""`python -m cmrcx.generate` on an official OutGen or PlotCom jsonl file: the inputs are
built in the authors' format, decoded with runs/lot_generation.gin by default, and the
output is the file's own schema with the target filled by gen.py's cleaned text.

Reuses test_generate_cli.py's tiny random T5 export (with its sample SentencePiece model).
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from cmrcx import generate
from cmrcx.benchmarks.lot import formats, generation
from cmrcx.cli import launch
from cmrcx.common.paths import package_path
from cmrcx.models import decoding
from cmrcx.models.t5 import T5DecodeModel
from cmrcx.tasks.lot.generation import decoded_output
from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary
from cmrcx.weights import exports
from tests.cli.test_generate_cli import N, export  # noqa: F401 (the module-scoped export fixture)

OUTGEN_TEST = package_path("data/lot_sample/outgen/test.jsonl")  # no targets
PLOTCOM_VAL = package_path("data/lot_sample/plotcom/val.jsonl")


def lines(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f.read().splitlines()]


def run(export, input_file, output, *flags):  # noqa: F811
    generate.main(
        ["--checkpoint", export, "--input", str(input_file), "--output", str(output),
         f"--max_new_tokens={N}", "--batch_size=3", *flags]
    )  # fmt: skip
    return lines(output)


def test_outgen_file_by_its_fields_greedy_equals_decoding(export, tmp_path, capsys):  # noqa: F811
    written = run(export, OUTGEN_TEST, tmp_path / "out.jsonl", "--decoding=greedy")
    assert "decoding with runs/lot_generation.gin" in capsys.readouterr().out
    golds = lines(OUTGEN_TEST)
    assert len(written) == len(golds) == 8
    for line, gold in zip(written, golds, strict=True):
        story = line.pop("story")
        assert line == gold and isinstance(story, str)  # inputs unchanged, target added
    # The generations: decoding.greedy from id 1 (the gin file's gen.py start) on the
    # authors' inputs, cleaned by generation_text.
    config, params = exports.read_network(export)
    vocab = T5SentencePieceVocabulary(f"{export}/spiece.model")
    records = formats.read_file("outgen", OUTGEN_TEST)
    sources = [[*vocab.encode(generation.source_and_target(r)[0]), vocab.eos_id] for r in records]
    ids = np.zeros([len(sources), max(map(len, sources))], np.int32)
    mask = np.zeros_like(ids)
    for row, source in enumerate(sources):
        ids[row, : len(source)], mask[row, : len(source)] = source, 1
    start_1 = T5DecodeModel(dataclasses.replace(config, decoder_start_token_id=1))
    out = decoding.greedy(start_1, params, ids, mask, N)
    expected = [
        generation.generation_text(decoded_output(vocab, t[:n].tolist(), config.eos_token_id))
        for t, n in zip(np.asarray(out.tokens), np.asarray(out.lengths), strict=True)
    ]
    assert [line["story"] for line in lines(tmp_path / "out.jsonl")] == expected


def test_plotcom_file_with_task_flag_and_the_gen_py_slip(export, tmp_path):  # noqa: F811
    flags = ("--task", "lot_plotcom", "--seed=2")
    kept = run(export, PLOTCOM_VAL, tmp_path / "kept.jsonl", *flags)
    slip = run(
        export, PLOTCOM_VAL, tmp_path / "slip.jsonl", *flags,
        "--gin.GenerationConfig.drop_last_char_without_eos=True",
    )  # fmt: skip
    golds = lines(PLOTCOM_VAL)
    assert [{k: v for k, v in line.items() if k != "plot"} for line in kept] == [
        {k: v for k, v in gold.items() if k != "plot"} for gold in golds
    ]
    assert "<MASK>" in kept[0]["story"]  # the input as the file writes it
    # Sampling with a seed: the same draws. N = 6 tokens rarely end in EOS, and then the
    # slip drops the decoded text's last character: a character of the text, or the ">"
    # of a last sentinel, which is then no longer removed (as in gen.py; "_" full width).
    pairs = [(a["plot"], b["plot"]) for a, b in zip(kept, slip, strict=True)]
    for a, b in pairs:
        assert b in (a, a[:-1]) or re.fullmatch(re.escape(a) + r"<extra＿id＿\d+", b), (a, b)
    assert any(b == a[:-1] for a, b in pairs if a)


def test_a_json_object_without_lot_fields_is_an_error(export, tmp_path, capsys):  # noqa: F811
    path = tmp_path / "other.jsonl"
    path.write_text('{"text": "甲"}\n', encoding="utf-8")
    with pytest.raises(SystemExit):
        launch.main_guard(
            generate.main,
            ["--checkpoint", export, "--input", str(path), "--output", str(tmp_path / "o")],
        )
    assert "neither 'outline' (OutGen) nor 'story' (PlotCom)" in capsys.readouterr().err


@pytest.mark.parametrize("task_flag", [(), ("--task", "lot_plotcom")])
@pytest.mark.parametrize(
    ("task", "fields"), [("clozet", "'plot0', 'plot1'"), ("senpos", "'sentence'")]
)
def test_a_clozet_or_senpos_file_is_refused(export, tmp_path, capsys, task, fields, task_flag):  # noqa: F811
    """Their records have a story too (with one blank, a ClozeT one reads as PlotCom's);
    the fields only they have say which task the file is."""
    path = package_path(f"data/lot_sample/{task}/test.jsonl")
    output = tmp_path / "out.jsonl"
    argv = ["--checkpoint", export, "--input", path, "--output", str(output), *task_flag]
    with pytest.raises(SystemExit) as exit_info:
        launch.main_guard(generate.main, argv)
    assert exit_info.value.code == 2 and not output.exists()
    out, err = capsys.readouterr()
    name = formats.TASK_NAMES[task]
    assert "LOT plotcom file" not in out
    assert err == (
        f"error: {path}: line 1: looks like a LOT {name} file (it has {fields}); "
        "cmrcx.generate decodes PlotCom and OutGen files only\n"
    )


def test_sampling_draws_per_batch_so_the_batch_size_changes_outputs(export, tmp_path):  # noqa: F811
    """What docs/lot.md says of cmrcx.generate: batch b samples with
    fold_in(key(seed), b), so the same seed gives the same outputs at the same
    --batch_size only (a training run's evaluation keys each example instead:
    tests/model_api/test_seq2seq_generation.py)."""

    def stories(name, batch_size):
        flags = ["--decoding=sample", "--temperature=3", "--seed=1", f"--max_new_tokens={N}"]
        generate.main(
            ["--checkpoint", export, "--input", OUTGEN_TEST, "--output", str(tmp_path / name),
             f"--batch_size={batch_size}", *flags]
        )  # fmt: skip
        return [line["story"] for line in lines(tmp_path / name)]

    by_8 = stories("a.jsonl", 8)
    assert stories("b.jsonl", 8) == by_8
    assert stories("c.jsonl", 1) != by_8
