"""Synthetic benchmark files in the official formats, at the real splits' sizes times a scale.

Text is word salad from tools/make_cmrc2019_corpus.py's sampler (jieba words spelled with
the vocabulary's characters, so each character is a real WordPiece): a pool of clauses is
drawn once and passages are random runs of them, every passage different. The sizes are
the official splits' (CLUE paper Table 1 / the data sets' READMEs); the shapes (passage
lengths, blanks per line) are chosen to look like the real files, not measured.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import numpy as np

from . import harness

sys.path.insert(0, str(harness.TOOLS))
import make_cmrc2019_corpus as corpus  # noqa: E402

# Official sizes (train, validation) of each task's unit (CLUE's Table 1; ChID's 577,157
# training blanks in 84,709 lines; CMRC 2019's ~100k training blanks in 10k passages).
SIZES = {
    "clue_chid11": (84_709, 3_218),  # lines (6.8 blanks each: 577k / 23k blanks)
    "clue_cmnli": (391_783, 12_241),  # sentence pairs
    "cmrc2019": (10_000, 3_000),  # passages (~11 blanks each)
    "clue_c311": (11_869, 3_816),  # questions
    "clue_cmrc2018": (10_142, 3_219),  # questions (4 per paragraph)
}
IDIOMS = 3_848  # ChID's idiom vocabulary (Zheng et al. 2019, Table 1)
# The bundled tiny gin of each task (DATA_DIR is replaced by the synthetic folder).
GIN_FILES = {
    "clue_chid11": ["clue_chid11_tiny.gin"],
    "clue_cmnli": ["clue_afqmc_tiny.gin", "RunConfig.task = 'clue_cmnli'"],
    "cmrc2019": ["cmrc2019_tiny.gin"],
    "clue_c311": ["clue_c311_tiny.gin"],
    "clue_cmrc2018": ["clue_cmrc2018_tiny.gin"],
}


class Text:
    """Clauses and passages of word salad, a pure function of the seed."""

    def __init__(self, seed: int, pool: int = 20_000):
        sampler = _sampler()
        self.rng = np.random.default_rng(seed)
        self.clauses = [sampler.clause(self.rng, int(n)) for n in self.rng.integers(4, 16, pool)]
        self.chars = sorted({c for clause in self.clauses[:2000] for c in clause})
        self.idioms = [self.word(4) for _ in range(IDIOMS)]

    def passage(self, low: int, high: int) -> str:
        target, pieces, length = int(self.rng.integers(low, high + 1)), [], 0
        while length < target:
            clause = self.clauses[int(self.rng.integers(len(self.clauses)))]
            pieces.append(clause + ("。" if self.rng.random() < 0.3 else "，"))
            length += len(pieces[-1])
        return "".join(pieces)

    def word(self, n: int) -> str:
        return "".join(self.chars[int(i)] for i in self.rng.integers(len(self.chars), size=n))


@functools.lru_cache(maxsize=1)
def _sampler() -> corpus.WordSampler:
    vocab = harness.REPO_ROOT / "cmrcx" / "data" / "tiny_vocab.txt"
    return corpus.WordSampler(corpus.vocab_chars(vocab), corpus.jieba_dict_path())


def count(task: str, split: str, scale: float) -> int:
    official = SIZES[task][0 if split == "train" else 1]
    return max(4, round(official * scale))


def write(task: str, out_dir: str, scale: float, seed: int = 0) -> str:
    """Writes the train and validation files of `task` into out_dir; returns out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    if task == "cmrc2019":
        for offset, split in enumerate(("train", "validation")):
            corpus.write_corpus(out_dir, count(task, split, scale), seed + offset, split)
        return out_dir
    text = Text(seed, pool=20_000 if scale >= 0.01 else 1_000)
    writer = {
        "clue_chid11": _chid,
        "clue_cmnli": _cmnli,
        "clue_c311": _c3,
        "clue_cmrc2018": _cmrc2018,
    }[task]
    for split in ("train", "validation"):
        writer(text, Path(out_dir), split, count(task, split, scale))
    return out_dir


def _chid(text: Text, out: Path, split: str, lines: int) -> None:
    name = "train" if split == "train" else "dev"
    answers, tag = {}, 0
    with open(out / f"{name}.json", "w", encoding="utf-8") as f:
        for _ in range(lines):
            idioms = [text.idioms[int(i)] for i in text.rng.choice(IDIOMS, 10, replace=False)]
            passages = []
            blanks = 0
            for _ in range(int(text.rng.integers(4, 9))):
                n = 2 if text.rng.random() < 0.135 and blanks <= 8 else 1
                if blanks + n > 10:
                    break
                parts = [text.passage(30, 90) for _ in range(n + 1)]
                pieces = [parts[0]]
                for part in parts[1:]:
                    pieces += [f"#idiom{tag:06d}#", part]
                    tag += 1
                passages.append("".join(pieces))
                blanks += n
            labels = text.rng.permutation(10)[:blanks]
            for k, label in enumerate(labels):
                answers[f"#idiom{tag - blanks + k:06d}#"] = int(label)
            line = {"content": passages, "candidates": idioms}
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    with open(out / f"{name}_answer.json", "w", encoding="utf-8") as f:
        json.dump(answers, f, ensure_ascii=False)


def _cmnli(text: Text, out: Path, split: str, pairs: int) -> None:
    labels = ("contradiction", "entailment", "neutral")
    name = "train" if split == "train" else "dev"
    with open(out / f"{name}.json", "w", encoding="utf-8") as f:
        for _ in range(pairs):
            pair = {
                "sentence1": text.passage(15, 45),
                "sentence2": text.passage(8, 25),
                "label": labels[int(text.rng.integers(3))],
            }
            f.write(json.dumps(pair, ensure_ascii=False) + "\n")


def _c3(text: Text, out: Path, split: str, questions: int) -> None:
    name = "train" if split == "train" else "dev"
    documents, asked = {"d": [], "m": []}, 0
    while asked < questions:
        kind = "d" if len(documents["d"]) <= len(documents["m"]) else "m"
        lines = int(text.rng.integers(2, 8)) if kind == "d" else int(text.rng.integers(1, 4))
        low, high = (10, 40) if kind == "d" else (60, 300)
        context = [text.passage(low, high) for _ in range(lines)]
        items = []
        for _ in range(min(int(text.rng.integers(1, 3)), questions - asked)):
            choices = [text.passage(3, 10) for _ in range(int(text.rng.integers(2, 5)))]
            answer = choices[int(text.rng.integers(len(choices)))]
            items.append({"question": text.passage(6, 15), "choice": choices, "answer": answer})
            asked += 1
        documents[kind].append([context, items, f"{kind}-{len(documents[kind])}"])
    for kind, records in documents.items():
        with open(out / f"{kind}-{name}.json", "w", encoding="utf-8") as f:
            json.dump(records, f, ensure_ascii=False)


def _cmrc2018(text: Text, out: Path, split: str, questions: int) -> None:
    name = "train" if split == "train" else "dev"
    prefix = "TRAIN" if split == "train" else "DEV"
    paragraphs, asked = [], 0
    while asked < questions:
        context = text.passage(300, 700)
        qas = []
        for _ in range(min(4, questions - asked)):
            answers = []
            for _ in range(1 if split == "train" else 3):
                start = int(text.rng.integers(0, len(context) - 12))
                answers.append({"text": context[start : start + 8], "answer_start": start})
            qas.append(
                {
                    "question": text.passage(8, 20),
                    "id": f"{prefix}_{len(paragraphs)}_QUERY_{len(qas)}",
                    "answers": answers,
                }
            )
            asked += 1
        paragraphs.append({"id": f"{prefix}_{len(paragraphs)}", "context": context, "qas": qas})
    data = {"version": "v1.0", "data": [{"id": "synthetic", "title": "", "paragraphs": paragraphs}]}
    with open(out / f"{name}.json", "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
