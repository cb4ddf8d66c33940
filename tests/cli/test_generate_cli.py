"""`python -m cmrcx.generate`, run in-process on a tiny random T5 export.

The export is a random transformers T5 (LongLM-shaped: ReLU, tied head) converted
with `cmrcx.convert`, plus a SentencePiece model trained on the bundled sample
stories (as test_sentencepiece_vocab.py does). The CLI's bucketed, batched output
must equal `cmrcx.models.decoding` run on all inputs in one differently padded batch.
"""

from __future__ import annotations

import dataclasses
import json
import shutil

import gin
import numpy as np
import pytest

from cmrcx import convert, generate
from cmrcx.cli import generation as generation_cli
from cmrcx.cli import launch
from cmrcx.models import decoding
from cmrcx.models.t5 import T5DecodeModel
from cmrcx.training import generation
from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary
from cmrcx.weights import exports
from tests.vocab.test_sentencepiece_vocab import train_sample_model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PIECES = 500  # the SentencePiece model; the T5 adds 100 sentinels and 12 spare ids
TINY = dict(
    vocab_size=PIECES + 112, d_model=16, d_kv=8, num_heads=2, d_ff=32, num_layers=1,
    num_decoder_layers=2, relative_attention_num_buckets=8, relative_attention_max_distance=16,
    decoder_start_token_id=0,
)  # fmt: skip
N = 6  # max_new_tokens of every run here: one compilation per bucket, shared by the tests
LINES = [
    "老木匠#椅子#孩子们<extra_id_1>",
    "[5, 17, 33, 1]",
    "",
    "从前，山脚下住着一个老木匠。他做的椅子会唱歌，孩子们都不相信。",
    "[40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56]",
]


def random_model():
    """Every parameter drawn as in test_t5_conversion.py: outputs of order 1 that vary
    with the input (transformers' own init makes this tiny model repeat one token)."""
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(transformers.T5Config(**TINY)).eval()
    inner = TINY["num_heads"] * TINY["d_kv"]
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layer_norm" in name:
                param.uniform_(0.5, 1.5)
            elif "relative_attention_bias" in name or name == "shared.weight":
                param.normal_(0.0, 1.0)
            else:
                fan_in = {"o": inner, "wo": TINY["d_ff"]}.get(name.split(".")[-2], TINY["d_model"])
                param.normal_(0.0, fan_in**-0.5)
    return model


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A cmrcx T5 export with spiece.model: its directory."""
    root = tmp_path_factory.mktemp("generate")
    spiece = train_sample_model(root / "spiece", PIECES)
    model = random_model()
    model.save_pretrained(root / "hf")
    shutil.copyfile(spiece, root / "hf" / "spiece.model")
    assert convert.main(["--from", str(root / "hf"), "--to", str(root / "export")]) == 0
    return str(root / "export")


@pytest.fixture(scope="module")
def input_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("inputs") / "inputs.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return str(path)


def run(export, input_file, out_dir, *flags) -> list[dict]:
    output = out_dir / "out.jsonl"
    generate.main(
        ["--checkpoint", export, "--input", input_file, "--output", str(output),
         f"--max_new_tokens={N}", "--batch_size=2", *flags]
    )  # fmt: skip
    return [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]


def sources(export, lines=LINES) -> list[list[int]]:
    """The source ids the CLI should build: T5Tokenizer's, EOS appended to text lines."""
    vocab = T5SentencePieceVocabulary(f"{export}/spiece.model")
    return [
        json.loads(line) if line.startswith("[") else [*vocab.encode(line), vocab.eos_id]
        for line in lines
    ]


def reference(export, function, *args, lines=LINES, start=None):
    """`function` on every input in one batch padded to the longest (with 0, whatever the
    model's pad id): tokens cut at length. start: another decoder start token id."""
    config, params = exports.read_network(export)
    if start is not None:
        config = dataclasses.replace(config, decoder_start_token_id=start)
    rows = sources(export, lines)
    ids = np.zeros([len(rows), max(map(len, rows))], np.int32)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    out = function(T5DecodeModel(config), params, ids, mask, N, *args)
    return [
        t[:n].tolist() for t, n in zip(np.asarray(out.tokens), np.asarray(out.lengths), strict=True)
    ]


def test_greedy_equals_decoding_greedy(export, input_file, tmp_path):
    records = run(export, input_file, tmp_path)
    assert [r["input"] for r in records] == [
        json.loads(line) if line.startswith("[") else line for line in LINES
    ]
    assert [r["ids"] for r in records] == reference(export, decoding.greedy)
    vocab = T5SentencePieceVocabulary(f"{export}/spiece.model")
    for record in records:  # T5Tokenizer's decode(skip_special_tokens=True)
        plain = [i for i in record["ids"] if 2 < i < PIECES]
        assert record["text"] == vocab.decode(plain)
        assert "<extra_id" not in record["text"] and "</s>" not in record["text"]


def test_longlm_layout_export(tmp_path_factory, capsys):
    """A release with LongLM's spiece.model layout (Chinese XLNet's: <unk> 0, </s> 2,
    <pad> 5) and those ids in config.json (decoder start 1, as gen.py): the export
    carries them, text lines end in EOS 2, id 0 in a line is a token, and the output
    equals decoding.greedy on a batch padded with 0 rather than 5."""
    from tests.vocab.test_sentencepiece_vocab import train_xlnet_layout_model

    root = tmp_path_factory.mktemp("longlm_layout")
    model = random_model()
    model.config.update({"pad_token_id": 5, "eos_token_id": 2, "decoder_start_token_id": 1})
    model.save_pretrained(root / "hf")
    shutil.copyfile(train_xlnet_layout_model(root / "spiece"), root / "hf" / "spiece.model")
    assert convert.main(["--from", str(root / "hf"), "--to", str(root / "export")]) == 0
    export = str(root / "export")
    config = exports.read_model_config(export)
    assert (config.pad_token_id, config.eos_token_id, config.decoder_start_token_id) == (5, 2, 1)
    lines = [*LINES, "鑫龘森林<extra_id_1>", "[0, 17, 0, 0, 2]"]
    path = root / "inputs.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    records = run(export, str(path), root)
    assert "note:" not in capsys.readouterr().out  # the export's ids are the vocabulary's
    rows = sources(export, lines)
    assert rows[0][-1] == 2 and rows[-2][1] == 0  # EOS 2; "▁", then unk for "鑫龘"
    assert [r["ids"] for r in records] == reference(export, decoding.greedy, lines=lines)
    vocab = T5SentencePieceVocabulary(f"{export}/spiece.model")
    for record in records:  # T5Tokenizer's decode(skip_special_tokens=True)
        plain = [i for i in record["ids"] if i not in (0, 2, 5) and i < PIECES]
        assert record["text"] == vocab.decode(plain)


def test_text_lines_are_cut_and_end_with_one_eos(export, tmp_path):
    vocab = T5SentencePieceVocabulary(f"{export}/spiece.model")
    path = tmp_path / "inputs.txt"
    path.write_text("  结尾</s>\r\n" + "老木匠" * 20 + "\n[7, 8]\n", encoding="utf-8")
    inputs = generation.read_inputs(str(path), vocab, TINY["vocab_size"], 6)
    ending, long, ids = (source for _, source in inputs)
    assert [written for written, _ in inputs] == ["结尾</s>", "老木匠" * 20, [7, 8]]
    # A written "</s>" is the EOS: no second one (T5Tokenizer's rule).
    assert ending == vocab.encode("结尾</s>") and ending.count(vocab.eos_id) == 1
    # Cut to max_input_length - 1, then EOS, as gen.py's truncation=True does.
    assert long == [*vocab.encode("老木匠" * 20)[:5], vocab.eos_id]
    assert ids == [7, 8]


def test_buckets_are_powers_of_two_up_to_the_maximum():
    assert generation.bucket_length(17, 512) == 32
    assert generation.bucket_length(17, 20) == 20
    assert generation.bucket_length(1, 512) == 1
    ids, mask = generation.padded_batch([[5, 6, 1]], 2, 512, 0)
    assert ids.shape == (2, 4) and mask.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]


def test_sample_with_a_seed_is_reproducible(export, input_file, tmp_path):
    flags = ("--decoding=sample", "--top_k=50", "--temperature=0.9")
    first = run(export, input_file, tmp_path, *flags, "--seed=3")
    again = run(export, input_file, tmp_path, *flags, "--seed=3")
    other = run(export, input_file, tmp_path, *flags, "--seed=4")
    assert first == again
    assert [r["ids"] for r in first] != [r["ids"] for r in other]
    for record in first:
        assert 1 <= len(record["ids"]) <= N


def test_beam_equals_decoding_beam_search(export, input_file, tmp_path):
    records = run(export, input_file, tmp_path, "--decoding=beam", "--num_beams=3")
    assert [r["ids"] for r in records] == reference(export, decoding.beam_search, 3)


def test_lot_gin_file_and_flags_over_it(export, input_file, tmp_path):
    launch.parse_gin(["runs/lot_generation.gin"], [])
    lot = generation_cli.GenerationConfig()
    assert (lot.decoding, lot.top_k, lot.temperature) == ("sample", 40, 0.7)
    assert (lot.max_input_length, lot.max_new_tokens) == (512, 511)
    assert lot.decoder_start_token_id == 1  # gen.py's generate(decoder_start_token_id=1)
    gin.clear_config()
    # --gin.KEY=VALUE sets, a flag overrides both gin and the file: greedy again.
    records = run(
        export, input_file, tmp_path, "--gin_file=runs/lot_generation.gin",
        "--gin.GenerationConfig.top_k=7", "--decoding=greedy",
    )  # fmt: skip
    assert generation_cli.GenerationConfig().top_k == 7
    assert [r["ids"] for r in records] == reference(export, decoding.greedy, start=1)


def error_line(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        launch.main_guard(generate.main, argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize(
    "line, message",
    [
        ("[1, 2,", "line 2: starts with '[' but is not a JSON list"),
        ('[1, "a"]', "line 2: 'a' is not a token id"),
        ("[5, 99999]", "line 2: 99999 is not a token id (0 to 611)"),
        ("[]", "line 2: expected a non-empty JSON list"),
    ],
)
def test_malformed_lines_name_file_and_line(export, tmp_path, capsys, line, message):
    path = tmp_path / "bad.txt"
    path.write_text(f"一个故事\n{line}\n", encoding="utf-8")
    argv = ["--checkpoint", export, "--input", str(path), "--output", str(tmp_path / "o.jsonl")]
    error = error_line(capsys, argv)
    assert f"{path}: {message}" in error


def test_missing_and_wrong_checkpoints(export, input_file, tmp_path, capsys):
    out = ["--input", input_file, "--output", str(tmp_path / "o.jsonl")]
    assert "checkpoint directory not found" in error_line(
        capsys, ["--checkpoint", str(tmp_path / "nowhere"), *out]
    )
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "model_config.json").write_text(json.dumps({"model": {}}))
    assert "not a T5 or GPT-2 export (a BertConfig)" in error_line(
        capsys, ["--checkpoint", str(bert), *out]
    )
    (tmp_path / "empty").mkdir()
    assert "not a cmrcx export" in error_line(
        capsys, ["--checkpoint", str(tmp_path / "empty"), *out]
    )
    missing_input = ["--input", str(tmp_path / "none.txt"), "--output", str(tmp_path / "o")]
    assert "input file not found" in error_line(capsys, ["--checkpoint", export, *missing_input])
    assert "GenerationConfig.decoding 'nucleus'" in error_line(
        capsys, ["--checkpoint", export, *out, "--decoding=nucleus"]
    )
    assert "GenerationConfig.top_k is '40' (str); it takes an integer" in error_line(
        capsys, ["--checkpoint", export, *out, "--gin.GenerationConfig.top_k='40'"]
    )
