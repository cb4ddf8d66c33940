"""Write a synthetic CMRC 2019 file in the official format, for input-pipeline benchmarks.

The output (``OUT/cmrc2019_train.json`` by default) has the official schema, which
`cmrcx.benchmarks.cmrc2019.official_format.read_passages` validates::

    {"data": [{"context_id": "TRAIN_0",
               "context": "...，[BLANK1]。...[BLANK2]，...",
               "choices": ["<clause>", ...],    # the blanked clauses + fake candidates
               "answers": [3, 0, ...]}]}        # choice index filling [BLANK k+1]

The text is word salad, not Chinese: words are drawn from jieba's bundled dictionary
(``jieba/dict.txt``, in proportion to their frequency), keeping only words whose
characters are all in a vocabulary (default: the tiny vocabulary bundled with cmrcx), so
every character tokenizes to a real WordPiece id. Words form clauses of
``--clause_chars``, clauses end in "，" and sentences (2-4 clauses) in "。". A passage is
``--passage_chars`` long; ``--blanks`` of its clauses become ``[BLANKk]`` markers (in
order) and move, shuffled, into ``choices`` together with ``--fake_candidates``
distractor clauses, as in the official data. The ranges are chosen to look like the
official passages (a few hundred characters, about ten blanks); they are not measured
statistics. The output is a pure function of the arguments::

    .venv/bin/python tools/make_cmrc2019_corpus.py --passages 10000 --out /tmp/cmrc_synth
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VOCAB = REPO_ROOT / "cmrcx" / "data" / "tiny_vocab.txt"
# split -> official file name (as cmrcx.datasets.cmrc2019.SPLIT_FILES; not imported
# here so that writing a corpus does not import TensorFlow).
SPLIT_FILES = {
    "train": "cmrc2019_train.json",
    "trial": "cmrc2019_trial.json",
    "validation": "cmrc2019_dev.json",
}
ID_PREFIX = {"train": "TRAIN", "trial": "TRIAL", "validation": "DEV"}


@dataclasses.dataclass(frozen=True)
class CorpusShape:
    """Inclusive (low, high) ranges, drawn uniformly per passage or clause."""

    passage_chars: tuple[int, int] = (500, 700)  # characters of text before blanking
    blanks: tuple[int, int] = (8, 15)  # [BLANKk] markers per passage (official max: 15)
    clause_chars: tuple[int, int] = (6, 18)  # characters per clause (one candidate)
    fake_candidates: tuple[int, int] = (1, 3)  # distractor choices per passage


class WordSampler:
    """Draws jieba dictionary words in proportion to their frequency."""

    def __init__(self, allowed_chars: set[str], dict_path: Path):
        words, freqs = [], []
        with open(dict_path, encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and all(char in allowed_chars for char in parts[0]):
                    words.append(parts[0])
                    freqs.append(float(parts[1]))
        if not words:
            raise ValueError(f"no word of {dict_path} is spelled with the vocabulary's characters")
        self.words = words
        self.cdf = np.cumsum(freqs) / np.sum(freqs)

    def clause(self, rng: np.random.Generator, num_chars: int) -> str:
        """About `num_chars` characters (whole words, at least one)."""
        draws = np.searchsorted(self.cdf, rng.random(num_chars), side="right")
        text = ""
        for index in draws:
            text += self.words[min(index, len(self.words) - 1)]
            if len(text) >= num_chars:
                break
        return text


def vocab_chars(vocab_file: Path) -> set[str]:
    """The single-character tokens of a BERT vocab.txt."""
    with open(vocab_file, encoding="utf-8") as f:
        return {token for token in (line.rstrip("\n") for line in f) if len(token) == 1}


def jieba_dict_path() -> Path:
    """``dict.txt`` inside the installed jieba package (found, not imported)."""
    spec = importlib.util.find_spec("jieba")
    if spec is None or spec.origin is None:
        raise SystemExit("jieba is not installed for this interpreter; use the project venv")
    return Path(spec.origin).parent / "dict.txt"


def make_passage(
    rng: np.random.Generator, sampler: WordSampler, shape: CorpusShape, context_id: str
) -> dict:
    """One official-format record: context with [BLANK1..n], shuffled choices, answers."""
    target_chars = rng.integers(shape.passage_chars[0], shape.passage_chars[1] + 1)
    clauses, length = [], 0
    while length < target_chars or len(clauses) < shape.blanks[1] + 1:
        clauses.append(sampler.clause(rng, int(rng.integers(*shape.clause_chars, endpoint=True))))
        length += len(clauses[-1]) + 1
    num_blanks = int(rng.integers(*shape.blanks, endpoint=True))
    blanked = np.sort(rng.choice(len(clauses), num_blanks, replace=False))
    fakes = [
        sampler.clause(rng, int(rng.integers(*shape.clause_chars, endpoint=True)))
        for _ in range(int(rng.integers(*shape.fake_candidates, endpoint=True)))
    ]
    candidates = [clauses[i] for i in blanked] + fakes
    order = rng.permutation(len(candidates))  # choices[j] = candidates[order[j]]
    position_of = np.argsort(order)  # candidate c sits at choices[position_of[c]]
    pieces, blank_number = [], {int(c): k + 1 for k, c in enumerate(blanked)}
    sentence_end = int(rng.integers(2, 5))
    for i, clause in enumerate(clauses):
        pieces.append(f"[BLANK{blank_number[i]}]" if i in blank_number else clause)
        last = i == len(clauses) - 1 or i == sentence_end
        pieces.append("。" if last else "，")
        if i == sentence_end:
            sentence_end += int(rng.integers(2, 5))
    return {
        "context_id": context_id,
        "context": "".join(pieces),
        "choices": [candidates[c] for c in order],
        "answers": [int(position_of[k]) for k in range(num_blanks)],
    }


def write_corpus(
    out_dir: str | os.PathLike[str],
    passages: int,
    seed: int = 0,
    split: str = "train",
    vocab_file: Path = DEFAULT_VOCAB,
    shape: CorpusShape = CorpusShape(),
) -> Path:
    """Writes `passages` records to OUT_DIR/<official file of split>; returns its path."""
    sampler = WordSampler(vocab_chars(vocab_file), jieba_dict_path())
    rng = np.random.default_rng(seed)
    records = [
        make_passage(rng, sampler, shape, f"{ID_PREFIX[split]}_{i}") for i in range(passages)
    ]
    path = Path(out_dir) / SPLIT_FILES[split]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"data": records}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    return path


def _range(text: str) -> tuple[int, int]:
    low, _, high = text.partition(",")
    return int(low), int(high or low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=10_000, help="records to write")
    parser.add_argument("--out", required=True, help="directory for the official-format file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=sorted(SPLIT_FILES), default="train")
    parser.add_argument("--vocab", type=Path, default=DEFAULT_VOCAB, help="BERT vocab.txt")
    defaults = CorpusShape()
    for field in dataclasses.fields(CorpusShape):
        low, high = getattr(defaults, field.name)
        parser.add_argument(
            f"--{field.name}", type=_range, default=(low, high), help=f"LOW,HIGH ({low},{high})"
        )
    args = parser.parse_args()
    shape = CorpusShape(**{f.name: getattr(args, f.name) for f in dataclasses.fields(CorpusShape)})
    path = write_corpus(args.out, args.passages, args.seed, args.split, args.vocab, shape)
    print(f"wrote {args.passages} passages to {path}")


if __name__ == "__main__":
    main()
