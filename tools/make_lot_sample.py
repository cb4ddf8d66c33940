"""Write the bundled LOT sample (``cmrcx/data/lot_sample/<task>/{train,val,test}.jsonl``)
from the stories written for cmrcx in ``tools/lot_sample_stories.txt``.

The source lists titled stories (one line each, no spaces, no dialogue) under section
headers, each followed by what is built from it (sentence numbers are 1-based)::

    === 标题
    句子一。句子二。...
    C 4 <the wrong ClozeT candidate for sentence 4>
    O 短语#短语#...            (the OutGen outline; phrases occur in the story)
    S 3                       (the SenPos sentence, in the senpos sections)

Sections and what they feed, as LOT builds its splits (LOT paper section 3):

- ``[train]`` (32): ClozeT, SenPos and PlotCom train (SenPos and PlotCom remove a
  seeded-random sentence, as LOT's automatically built train sets do); the first 24 are
  OutGen train.
- ``[val]``, ``[test]`` (16 each): ClozeT val / test, and PlotCom val / test made from
  them (the incomplete story and the right candidate, as the paper builds PlotCom's); the
  first 8 are OutGen val / test.
- ``[senpos-val]``, ``[senpos-test]`` (16 each): SenPos val / test (separate stories, as
  LOT's annotated SenPos sets are).

The output is a pure function of the source (fixed seeds)::

    .venv/bin/python tools/make_lot_sample.py [--out cmrcx/data/lot_sample]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tools" / "lot_sample_stories.txt"
SENTENCE = re.compile(r"[^。！？]+[。！？]+")
MIN_REMOVED_CHARS = 10  # the LOT paper's Notes
MAX_PHRASES = 8  # OutGen outlines hold at most 8 phrases (paper section 3.4)


@dataclasses.dataclass
class Story:
    title: str
    sentences: list[str]
    cloze: tuple[int, str] | None = None  # (removed sentence number, wrong candidate)
    senpos: int | None = None  # removed sentence number
    outline: list[str] | None = None


def parse(text: str) -> dict[str, list[Story]]:
    sections: dict[str, list[Story]] = {}
    stories: list[Story] = []
    for line in text.splitlines():
        if line.startswith("["):
            stories = sections.setdefault(line.strip("[]"), [])
        elif line.startswith("=== "):
            stories.append(Story(line[4:], []))
        elif line.startswith("C "):
            number, wrong = line[2:].split(" ", 1)
            stories[-1].cloze = (int(number), wrong)
        elif line.startswith("S "):
            stories[-1].senpos = int(line[2:])
        elif line.startswith("O "):
            stories[-1].outline = line[2:].split("#")
        elif line:
            stories[-1].sentences = SENTENCE.findall(line)
            assert "".join(stories[-1].sentences) == line, f"{stories[-1].title}: unsplit text"
    return sections


def check(story: Story) -> None:
    text = "".join(story.sentences)
    assert 5 <= len(story.sentences) <= 9, (story.title, len(story.sentences))
    assert not re.search(r"\s", text), story.title
    removed = [n for n in (story.cloze and story.cloze[0], story.senpos) if n]
    for n in removed:
        assert len(story.sentences[n - 1]) >= MIN_REMOVED_CHARS, (story.title, n)
    if story.cloze:
        assert story.cloze[0] >= 2, story.title  # ClozeT never removes the first sentence
        assert len(story.cloze[1]) >= MIN_REMOVED_CHARS, story.title
    if story.senpos:  # SenPos never removes the first or the last sentence
        assert 2 <= story.senpos < len(story.sentences), story.title
    if story.outline:
        assert len(story.outline) <= MAX_PHRASES, story.title
        for phrase in story.outline:
            assert phrase and phrase in text, (story.title, phrase)


def without(story: Story, number: int, mask: str) -> str:
    parts = list(story.sentences)
    parts[number - 1] = mask
    return "".join(parts)


def clozet(story: Story, label: int, labelled: bool) -> dict:
    number, wrong = story.cloze
    right = story.sentences[number - 1]
    plots = [right, wrong] if label == 0 else [wrong, right]
    record = {"story": without(story, number, "<mask>"), "plot0": plots[0], "plot1": plots[1]}
    return record | ({"label": str(label)} if labelled else {})


def senpos(story: Story, number: int, labelled: bool) -> dict:
    """A [MASK] between every two adjacent sentences left; the label is the 1-based gap."""
    kept = story.sentences[: number - 1] + story.sentences[number:]
    record = {"story": "[MASK]".join(kept), "sentence": story.sentences[number - 1]}
    return record | ({"label": number - 1} if labelled else {})


def plotcom(story: Story, number: int, labelled: bool) -> dict:
    record = {"story": without(story, number, "<MASK>")}
    return record | ({"plot": story.sentences[number - 1]} if labelled else {})


def outgen(story: Story, rng: random.Random, labelled: bool) -> dict:
    outline = list(story.outline)
    rng.shuffle(outline)
    if labelled:
        return {"story": "".join(story.sentences), "outline": outline, "title": story.title}
    return {"outline": outline, "title": story.title}


def balanced_labels(count: int, rng: random.Random) -> list[int]:
    labels = [k % 2 for k in range(count)]
    rng.shuffle(labels)
    return labels


def build(sections: dict[str, list[Story]]) -> dict[str, dict[str, list[dict]]]:
    files: dict[str, dict[str, list[dict]]] = {t: {} for t in ("clozet", "senpos", "plotcom")}
    files["outgen"] = {}
    outgen_sizes = {"train": 24, "val": 8, "test": 8}
    for split in ("train", "val", "test"):
        stories = sections[split]
        labelled = split != "test"
        rng = random.Random(f"lot-sample-{split}")
        labels = balanced_labels(len(stories), rng)
        files["clozet"][split] = [
            clozet(s, k, labelled) for s, k in zip(stories, labels, strict=True)
        ]
        if split == "train":  # automatic: a seeded-random sentence removed
            files["plotcom"][split] = [
                plotcom(s, rng.choice(removable(s, last=True)), True) for s in stories
            ]
            files["senpos"][split] = [
                senpos(s, rng.choice(removable(s, last=False)), True) for s in stories
            ]
        else:
            files["plotcom"][split] = [plotcom(s, s.cloze[0], labelled) for s in stories]
            annotated = sections[f"senpos-{split}"]
            files["senpos"][split] = [senpos(s, s.senpos, labelled) for s in annotated]
        chosen = stories[: outgen_sizes[split]]
        files["outgen"][split] = [outgen(s, rng, labelled) for s in chosen]
    return files


def removable(story: Story, last: bool) -> list[int]:
    """Sentences an automatic train example may remove: not the first (nor the last, for
    SenPos: ``last=False``), at least 10 characters."""
    final = len(story.sentences) if last else len(story.sentences) - 1
    return [
        n
        for n, sentence in enumerate(story.sentences, start=1)
        if 2 <= n <= final and len(sentence) >= MIN_REMOVED_CHARS
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "cmrcx" / "data" / "lot_sample"))
    args = parser.parse_args()
    sections = parse(SOURCE.read_text(encoding="utf-8"))
    for stories in sections.values():
        for story in stories:
            check(story)
    for task, splits in build(sections).items():
        for split, records in splits.items():
            path = Path(args.out) / task / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
            path.write_text("".join(lines), encoding="utf-8")
            print(f"{path}: {len(records)} records")


if __name__ == "__main__":
    main()
