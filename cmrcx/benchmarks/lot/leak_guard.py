"""The `lot` mixture's leak guard: no training record may tell a story the one model is
evaluated on.

Why: PlotCom's validation and test sets were built from ClozeT examples, the incomplete
story plus the right candidate (LOT paper section 3.3), and a model
trained on all four tasks at once sees every task's training stories. A training record
telling one of the held-out stories (PlotCom's, or any other evaluated split's) would
show the model the answer. So before training, every training record whose story is a
held-out story is dropped, and the counts are printed (`GuardReport.line`).

Held out: the records of every validation and test file of the mixture (PlotCom's,
ClozeT's, SenPos's, OutGen's). A training record's story is its completed text
(`completed_story`: ClozeT's story with the right candidate in the blank, SenPos's with
the sentence at the right gap, PlotCom's with its plot, OutGen's story). Texts are
compared normalised (`normalise`: all white space and every blank marker removed; LOT
deleted the spaces anyway). A training story C tells a held-out story when

- ClozeT or PlotCom (one blank, LEFT<blank>RIGHT): C begins with LEFT and ends with
  RIGHT (whatever fills the blank: the right candidate, the wrong one, or the plot, so
  a held-out file without labels or targets is guarded as well);
- SenPos (sentence S, the story without it J): removing one occurrence of S from C
  gives J (S at any gap);
- OutGen: C is its story (a test file without stories cannot be checked; counted).

Exact matching after normalisation: it catches the paper's construction (the same story,
completed), not a paraphrase or a story that was edited. Candidates are found through
the first `KEY_CHARACTERS` characters of the story, which a held-out record knows up to
its first blank (LOT never removes a story's first sentence); held-out stories with a
blank earlier than that are checked against every training record.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from cmrcx.benchmarks.lot.formats import (
    MASK,
    ClozeTRecord,
    OutGenRecord,
    PlotComRecord,
    Record,
    SenPosRecord,
    task_of,
)

KEY_CHARACTERS = 8  # held-out stories are looked up by their first characters
_WHITE_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """White space and blank markers removed.

    >>> normalise("甲 乙<mask>\\n丙")
    '甲乙丙'
    """
    return _WHITE_SPACE.sub("", text.replace(MASK, ""))


def completed_story(record: Record) -> str:
    """A labelled record's whole story, normalised: the blank filled with the answer.

    >>> completed_story(SenPosRecord(1, "甲。<mask>乙。<mask>丙。", "丁。", 1, {}))
    '甲。乙。丁。丙。'
    """
    if isinstance(record, ClozeTRecord):
        return normalise(record.story.replace(MASK, record.candidates[record.label]))
    if isinstance(record, SenPosRecord):
        segments = record.story.split(MASK)
        gap = record.label + 1
        return normalise("".join(segments[:gap]) + record.sentence + "".join(segments[gap:]))
    if isinstance(record, PlotComRecord):
        return normalise(record.story.replace(MASK, record.plot))
    return normalise(record.story)


@dataclasses.dataclass(frozen=True)
class HeldOutStory:
    """What is known of one held-out record's story (normalised texts)."""

    task: str
    split: str
    line: int
    kind: str  # "one_blank" (ClozeT, PlotCom), "sentence" (SenPos), "story" (OutGen)
    left: str  # one_blank: before the blank; sentence: the story without S; story: it
    right: str = ""  # one_blank: after the blank
    sentence: str = ""  # sentence: the removed sentence S
    start: str = ""  # sentence: the story before its first gap

    def key(self) -> str:
        """A training story that tells this one begins with it (may be short)."""
        return (self.start if self.kind == "sentence" else self.left)[:KEY_CHARACTERS]

    def told_by(self, story: str) -> bool:
        """Whether the normalised training story `story` tells this held-out story."""
        if self.kind == "one_blank":
            return (
                len(story) >= len(self.left) + len(self.right)
                and story.startswith(self.left)
                and story.endswith(self.right)
            )
        if self.kind == "sentence":
            s, start = self.sentence, story.find(self.sentence)
            while start >= 0:
                if story[:start] + story[start + len(s) :] == self.left:
                    return True
                start = story.find(s, start + 1)
            return False
        return story == self.left


def held_out_story(record: Record, split: str) -> HeldOutStory | None:
    """What a validation/test record reveals of its story; None: nothing (an OutGen
    record without its story)."""
    task = task_of(record)
    if isinstance(record, ClozeTRecord | PlotComRecord):
        left, right = (normalise(part) for part in record.story.split(MASK))
        return HeldOutStory(task, split, record.line, "one_blank", left, right)
    if isinstance(record, SenPosRecord):
        story, sentence = normalise(record.story), normalise(record.sentence)
        start = normalise(record.story.split(MASK)[0])
        return HeldOutStory(
            task, split, record.line, "sentence", story, sentence=sentence, start=start
        )
    assert isinstance(record, OutGenRecord)
    if record.story is None:
        return None
    return HeldOutStory(task, split, record.line, "story", normalise(record.story))


class HeldOutStories:
    """The held-out stories, indexed by their first characters."""

    def __init__(self, stories: Iterable[HeldOutStory]):
        self.stories = list(stories)
        self._by_key: dict[str, list[HeldOutStory]] = {}
        self._short: list[HeldOutStory] = []  # a key shorter than KEY_CHARACTERS
        for story in self.stories:
            key = story.key()
            if len(key) < KEY_CHARACTERS:
                self._short.append(story)
            else:
                self._by_key.setdefault(key, []).append(story)

    def told_by(self, story: str) -> HeldOutStory | None:
        """The first held-out story the normalised training story tells, or None."""
        candidates = self._by_key.get(story[:KEY_CHARACTERS], [])
        for held_out in (*candidates, *self._short):
            if held_out.told_by(story):
                return held_out
        return None


@dataclasses.dataclass
class GuardReport:
    """What the guard did: kept and dropped training records per task."""

    kept: dict[str, list[Record]]
    dropped: dict[str, list[tuple[Record, HeldOutStory]]]
    held_out: dict[str, int]  # held-out stories checked, per task
    unchecked: dict[str, int]  # held-out records without a story to check, per task

    def line(self) -> str:
        """One line: the records dropped per task, and what they were checked against."""
        dropped = ", ".join(f"{len(records)} {task}" for task, records in self.dropped.items())
        held = ", ".join(f"{n} {task}" for task, n in self.held_out.items())
        line = (
            f"lot leak guard: dropped from training {dropped} record(s) telling a "
            f"validation/test story (checked against {held} held-out stories"
        )
        unchecked = ", ".join(f"{n} {task}" for task, n in self.unchecked.items() if n)
        if unchecked:
            line += f"; {unchecked} held-out record(s) without a story not checked"
        return line + ")"

    def dropped_lines(self) -> dict[str, list[dict]]:
        """Per task, each dropped training line and the held-out record it tells."""
        return {
            task: [
                {"line": record.line, "tells": f"{held.task} {held.split} line {held.line}"}
                for record, held in records
            ]
            for task, records in self.dropped.items()
        }


def guard(
    training: Mapping[str, Sequence[Record]],
    held_out: Mapping[str, Mapping[str, Sequence[Record]]],
) -> GuardReport:
    """Drops the training records that tell a held-out story.

    Args:
      training: task -> its labelled training records.
      held_out: task -> split ("validation", "test") -> its records (labelled or not).

    Returns the kept records per task (file order kept) and the dropped ones.
    """
    stories, counts, unchecked = [], {}, {}
    for task, splits in held_out.items():
        counts[task] = unchecked[task] = 0
        for split, records in splits.items():
            for record in records:
                story = held_out_story(record, split)
                if story is None:
                    unchecked[task] += 1
                else:
                    stories.append(story)
                    counts[task] += 1
    index = HeldOutStories(stories)
    kept, dropped = {}, {}
    for task, records in training.items():
        kept[task], dropped[task] = [], []
        for record in records:
            told = index.told_by(completed_story(record))
            if told is None:
                kept[task].append(record)
            else:
                dropped[task].append((record, told))
    return GuardReport(kept, dropped, counts, unchecked)
