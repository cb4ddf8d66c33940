"""`python -m cmrcx.tokenize`: in a subprocess as a user would run it where the process is
what is checked (its locale, its quiet stderr), else in this process (TF is loaded
already): `tests.support_cli.run_main`, or `main` itself."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
import tensorflow as tf

from cmrcx import tokenize as tokenize_cli
from cmrcx.tasks.cmrc2019 import tokenize_passage
from cmrcx.vocab import line_tokenizer
from cmrcx.vocab.sentencepiece import T5SentencePieceVocabulary
from cmrcx.vocab.wordpiece import WordPieceVocabulary
from tests.support import REPO_ROOT
from tests.support_cli import run_main

REPO = str(REPO_ROOT)
TOKENS = [
    "[PAD]",
    *(f"[unused{i}]" for i in range(1, 6)),
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    *"他了。，！[]",
    "blank",
    "##1",
    "##2",
    "i",
    "##s",
    "is",
    "hello",
    "Hello",
    "café",
    "cafe",
    *"helocaf",  # single letters: what a passage's "hello" becomes
]
LINES = [
    "他[BLANK1]了。",
    "Hello，CAFÉ！",
    "",
    "他[unused2]了 [BLANK2]",
    "I İ\u3000is\u200bs",  # Turkish-locale-sensitive "I", a space and a format char
]


def _run(*args: str, stdin: str | bytes = "", env: dict[str, str] | None = None):
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    return subprocess.run(
        [sys.executable, "-m", "cmrcx.tokenize", *args],
        input=data,
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO, **(env or {})},
        timeout=300,
    )


def _json_lines(stdout: bytes) -> list[list]:
    text = stdout.decode("utf-8")
    assert text.endswith("\n") or not text
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("cli") / "vocab.txt"
    path.write_text("\n".join(TOKENS) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def vocab(vocab_file: str) -> WordPieceVocabulary:
    return WordPieceVocabulary(vocab_file)


def test_ids_per_line_under_a_turkish_locale(vocab_file: str, vocab: WordPieceVocabulary) -> None:
    """One JSON list of ids per input line, equal to `encode` in this process.

    Run under a Turkish locale: ICU's lower-casing follows the process locale (it
    would make "I" a dotless "ı"), Python's `str.lower()` and so BERT's do not.
    """
    env = {"LANG": "tr_TR.UTF-8", "LC_ALL": "tr_TR.UTF-8"}
    out = _run("--vocab", vocab_file, stdin="\n".join(LINES) + "\n", env=env)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    assert _json_lines(out.stdout) == [vocab.encode(line) for line in LINES]
    assert vocab.encode(LINES[-1]) == [vocab.token_to_id(t) for t in ("i", "i", "is", "##s")]


def test_pieces_with_cmrc2019_passage(vocab_file: str) -> None:
    """`--pieces` prints token strings, UTF-8 unescaped; `--cmrc2019_passage` marks blanks
    and splits characters, as the authors' script does."""
    lines = "\n".join(LINES[:2]) + "\r\n"  # a Windows line ending too
    out = run_main("tokenize", "--vocab", vocab_file, "--pieces", "--cmrc2019_passage", stdin=lines)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "他" in out.stdout  # not \\u4ed6
    assert _json_lines(out.stdout.encode("utf-8")) == [
        ["他", "[unused1]", "了", "。"],
        ["h", "e", "l", "l", "o", "，", "c", "a", "f", "e", "！"],
    ]


def _main_in_process(argv: list[str], stdin: str, monkeypatch, capsysbinary) -> tuple[int, str]:
    """Runs `main` here (TF is loaded already): (status, stdout)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8"))))
    status = tokenize_cli.main(argv)
    return status, capsysbinary.readouterr().out.decode("utf-8")


def test_blanks_kept_as_text_by_default(vocab_file: str, monkeypatch, capsysbinary) -> None:
    """Without `--cmrc2019_passage`, "[BLANK1]" is plain bracketed text."""
    args = ["--vocab", vocab_file, "--pieces"]
    status, out = _main_in_process(args, LINES[0], monkeypatch, capsysbinary)
    assert status == 0
    assert out == '["他", "[", "blank", "##1", "]", "了", "。"]\n'


def test_no_lower_case(vocab_file: str, monkeypatch, capsysbinary) -> None:
    """`--no_lower_case` keeps case and accents, for cased vocabularies."""
    args = ["--vocab", vocab_file, "--pieces", "--no_lower_case"]
    status, out = _main_in_process(args, "Hello café\n", monkeypatch, capsysbinary)
    assert status == 0
    assert out == '["Hello", "café"]\n'


def test_missing_vocab_file(tmp_path: Path) -> None:
    """A missing vocabulary: `error: ...` naming it on stderr, status 2, nothing on stdout."""
    missing = str(tmp_path / "nowhere" / "vocab.txt")
    out = run_main("tokenize", "--vocab", missing, stdin="他\n")
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.strip() == f"error: vocabulary file not found: {missing}"


def test_blank_rewrite_is_the_pipelines(vocab: WordPieceVocabulary) -> None:
    """`--cmrc2019_passage` gives the ids `tokenize_passage` gives the same passage."""
    context = "他[BLANK1]了，[BLANK2]。hello他[BLANK12]了"
    example = {"context": context, "choices": ["他了", "了"]}
    dataset = tokenize_passage(tf.data.Dataset.from_tensors(example), vocab, 8)
    passage_ids = next(dataset.as_numpy_iterator())["passage_ids"].tolist()
    cli = line_tokenizer.tokenize_lines(vocab, [context], pieces=False, cmrc2019_passage=True)
    assert cli == [passage_ids]


def test_not_utf8_input(vocab_file: str, monkeypatch, capsys) -> None:
    """Bytes that are not UTF-8 (say a GBK file): `error: ...`, status 2 (in-process)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("他\n".encode("gbk"))))
    assert tokenize_cli.main(["--vocab", vocab_file]) == 2
    assert capsys.readouterr().err.startswith("error: stdin is not UTF-8 text")


def test_bad_batch_size(vocab_file: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        tokenize_cli.main(["--vocab", vocab_file, "--batch_size", "0"])
    assert exit_info.value.code == 2


# --- SentencePiece (LongLM / mT5): picked by the `.model` suffix -----------------------

SAMPLE_DIR = Path(REPO) / "cmrcx" / "data" / "longlm_sample"
LONGLM_LINES = [
    "老木匠#会唱歌的椅子#孩子们都不相信#秋天<extra_id_1>",  # OutGen input
    "<extra_id_1>从前，山脚下住着一个老木匠。",  # OutGen target
    "小熊<extra_id_1>  松鼠<extra_id_2><extra_id_99>",
    "",
    "  \u3000 ",
    "Tom 说：“2021年，OK！”</s>",
]


@pytest.fixture(scope="module")
def spiece_model(tmp_path_factory) -> str:
    """A 500-piece unigram model of the bundled sample stories, T5's pad/eos/unk ids."""
    prefix = tmp_path_factory.mktemp("spm") / "spiece"
    spm.SentencePieceTrainer.train(
        input=",".join(str(path) for path in sorted(SAMPLE_DIR.glob("*.txt"))),
        model_prefix=str(prefix),
        model_type="unigram",
        vocab_size=500,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        minloglevel=2,
    )
    return f"{prefix}.model"


def test_sentencepiece_ids(spiece_model: str) -> None:
    """`--vocab spiece.model` prints the T5-style ids, sentinels included, no EOS."""
    out = _run("--vocab", spiece_model, stdin="\n".join(LONGLM_LINES) + "\n")
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    assert out.stderr == b""
    vocab = T5SentencePieceVocabulary(spiece_model)
    rows = _json_lines(out.stdout)
    assert rows == [vocab.encode(line) for line in LONGLM_LINES]
    assert rows[0][-1] == vocab.sentinel_id(1) == 598 and rows[0][:1] == [6]  # "▁"
    assert rows[2][-2:] == [598 - 1, 500] and rows[3] == rows[4] == []
    assert rows[5][-1] == vocab.eos_id  # written "</s>": its id, not an appended EOS


def test_sentencepiece_pieces(spiece_model: str, monkeypatch, capsysbinary) -> None:
    """`--pieces` prints the model's pieces and the sentinels' strings."""
    args = ["--vocab", spiece_model, "--pieces"]
    status, out = _main_in_process(args, LONGLM_LINES[2] + "\n", monkeypatch, capsysbinary)
    assert status == 0
    pieces = ["▁", "小", "熊", "<extra_id_1>", "▁", "松鼠", "<extra_id_2>", "<extra_id_99>"]
    assert json.loads(out) == pieces


def test_sentencepiece_rejects_wordpiece_flags(spiece_model: str, capsys) -> None:
    """`--cmrc2019_passage` and `--no_lower_case` are for vocab.txt: usage error, status 2."""
    for flag in ("--cmrc2019_passage", "--no_lower_case"):
        with pytest.raises(SystemExit) as exit_info:
            tokenize_cli.main(["--vocab", spiece_model, flag])
        assert exit_info.value.code == 2
        assert f"{flag} is for WordPiece vocab.txt files" in capsys.readouterr().err


def test_xlnet_layout_model(tmp_path: Path, monkeypatch, capsysbinary) -> None:
    """LongLM's layout (Chinese XLNet's: unk 0, </s> 2, <pad> 5, no pad id reserved)
    tokenizes as T5Tokenizer does; a model without "<pad>" is `error:` naming it."""
    from tests.vocab.test_sentencepiece_vocab import (
        T5Tokenizer46,
        train_sample_model,
        train_xlnet_layout_model,
    )

    model = train_xlnet_layout_model(tmp_path / "spiece")
    lines = [*LONGLM_LINES, "鑫<pad>森林<sep>小熊<mask></s>"]
    status, out = _main_in_process(
        ["--vocab", model], "\n".join(lines) + "\n", monkeypatch, capsysbinary
    )
    assert status == 0
    rows = _json_lines(out.encode("utf-8"))
    reference = T5Tokenizer46(model)
    assert rows == [reference.encode(line, add_special_tokens=False) for line in lines]
    assert rows[-1][1:3] == [0, 5] and rows[-1][-1] == 2  # "▁", unk, "<pad>" ... "</s>"
    no_pad = train_sample_model(tmp_path / "no_pad", pad_id=-1, unk_id=0, bos_id=1, eos_id=2)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x\n")))
    assert tokenize_cli.main(["--vocab", no_pad]) == 2
    error = capsysbinary.readouterr().err.decode("utf-8")
    assert error.startswith(f"error: {no_pad}: expected the piece '<pad>'")


def test_not_a_sentencepiece_model(tmp_path: Path, monkeypatch, capsys) -> None:
    """A `.model` file that is not one: `error: ...` naming it, status 2."""
    bad = tmp_path / "vocab.model"
    bad.write_text("[PAD]\n[UNK]\n", encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x\n")))
    assert tokenize_cli.main(["--vocab", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {bad}: not a SentencePiece model")
