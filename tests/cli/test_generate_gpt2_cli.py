"""GPT-2 through the CLIs: `cmrcx.convert --verify` of a random GPT2LMHeadModel directory
(with the bundled BERT-style vocab.txt), and `cmrcx.generate` serving the export as it
serves T5: text lines continued after [CLS] token-identical to transformers' generate,
and an official LOT OutGen file written back in its schema."""

from __future__ import annotations

import json
import shutil

import pytest

from cmrcx import convert, generate
from cmrcx.benchmarks.lot import formats
from cmrcx.common.paths import package_path
from cmrcx.vocab.wordpiece import WordPieceVocabulary
from tests.models.test_gpt2_model import reference_model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

N = 5  # max_new_tokens
LINES = ["从前，山脚下住着一个老木匠。", "[101, 200, 300]", "[unused1]他做的椅子会唱歌"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """(HF model, its directory with vocab.txt, the cmrcx export converted with --verify)."""
    root = tmp_path_factory.mktemp("gpt2_cli")
    vocab_file = package_path("data/tiny_vocab.txt")
    size = len(open(vocab_file, encoding="utf-8").read().splitlines())
    model = reference_model(seed=3, vocab_size=size, bos=101, eos=102)
    model.save_pretrained(root / "hf")
    shutil.copyfile(vocab_file, root / "hf" / "vocab.txt")
    assert convert.main(["--from", str(root / "hf"), "--to", str(root / "export"), "--verify"]) == 0
    return model, root / "hf", str(root / "export")


def test_convert_writes_the_family_and_vocabulary(release):
    _, _, export = release
    saved = json.load(open(f"{export}/model_config.json", encoding="utf-8"))
    assert saved["family"] == "gpt2" and saved["model"]["eos_token_id"] == 102
    assert open(f"{export}/vocab.txt", encoding="utf-8").read().startswith("[PAD]")


def test_text_lines_continue_after_cls_as_transformers_generate(release, tmp_path):
    model, _, export = release
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    generate.main(
        ["--checkpoint", export, "--input", str(path), "--output", str(out),
         f"--max_new_tokens={N}", "--batch_size=2"]
    )  # fmt: skip
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    vocab = WordPieceVocabulary(f"{export}/vocab.txt")
    for line, record in zip(LINES, records, strict=True):
        if line.startswith("[1"):
            prompt = json.loads(line)
        else:
            prompt = [vocab.cls_id, *vocab.encode(line)]
        with torch.no_grad():
            want = model.generate(
                input_ids=torch.tensor([prompt]), do_sample=False, max_new_tokens=N,
                eos_token_id=102, pad_token_id=0,
            ).numpy()[0, len(prompt) :].tolist()  # fmt: skip
        assert record["ids"] == want
        assert "[CLS]" not in record["text"] and "[SEP]" not in record["text"]


def test_a_lot_file_is_written_back_in_its_schema(release, tmp_path):
    _, _, export = release
    gold = package_path("data/lot_sample/outgen/val.jsonl")
    out = tmp_path / "outgen.jsonl"
    generate.main(
        ["--checkpoint", export, "--input", gold, "--output", str(out),
         f"--max_new_tokens={N}", "--batch_size=4", "--decoding=greedy"]
    )  # fmt: skip
    records, written = formats.read_file("outgen", gold), formats.read_file("outgen", str(out))
    assert len(written) == len(records)
    assert all(w.outline == r.outline for w, r in zip(written, records, strict=True))
