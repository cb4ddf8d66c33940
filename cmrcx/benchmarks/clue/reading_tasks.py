"""CLUE's reading-comprehension tasks as data: one `MrcTask` row per versioned task name.

ChID and C3 changed their test sets in CLUE 1.1 (the submission page's ``chid11`` /
``c311`` files next to ``chid10`` / ``c310``); their train and dev files are the same in
both versions, as for TNEWS and CLUEWSC2020 in `cmrcx.benchmarks.clue.tasks`.
Table 2 of the CLUE paper reports EM for CMRC 2018 and accuracy for ChID and C3 ("We
report EM for CMRC 2018 and accuracy for all other tasks"); Table 7 gives the lengths.
"""

from __future__ import annotations

import dataclasses
import types

from cmrcx.benchmarks.clue import c3, chid

SPAN, MULTIPLE_CHOICE = "span", "multiple_choice"


@dataclasses.dataclass(frozen=True)
class MrcTask:
    """One row.

    Attributes:
      name: versioned task name (RunConfig.task), e.g. ``"clue_chid11"``.
      dataset: "cmrc2018", "chid" or "c3" (the reader and TFDS builder to use).
      clue_version: "1.1" / "1.0" for the sets whose test file changed; None otherwise.
      public_dir: folder of the official download, e.g. ``"chid_public"``.
      problem: SPAN (start/end head) or MULTIPLE_CHOICE (one score per choice).
      num_choices: choices per example (ChID's 10 candidates, C3's 4 padded choices).
      max_length: tokens per window or choice sequence (paper Table 7).
      submission_file: the official name of the test-set prediction file.
      metric: the metric Table 2 reports ("EM" or "accuracy").
    """

    name: str
    dataset: str
    clue_version: str | None
    public_dir: str
    problem: str
    num_choices: int
    max_length: int
    submission_file: str
    metric: str


TASKS = types.MappingProxyType(
    {
        "clue_cmrc2018": MrcTask(
            "clue_cmrc2018", "cmrc2018", None, "cmrc2018_public", SPAN, 0, 512,
            "cmrc2018_predict.json", "EM",
        ),
        **{
            f"clue_chid{v.replace('.', '')}": MrcTask(
                f"clue_chid{v.replace('.', '')}", "chid", v, "chid_public", MULTIPLE_CHOICE,
                chid.MAX_NUM_CHOICES, chid.MAX_SEQ_LENGTH, chid.SUBMISSION_FILES[v], "accuracy",
            )
            for v in chid.VERSIONS
        },
        **{
            f"clue_c3{v.replace('.', '')}": MrcTask(
                f"clue_c3{v.replace('.', '')}", "c3", v, "c3_public", MULTIPLE_CHOICE,
                c3.NUM_CHOICES, c3.MAX_SEQ_LENGTH, c3.SUBMISSION_FILES[v], "accuracy",
            )
            for v in c3.VERSIONS
        },
    }
)  # fmt: skip


def get_task(name: str) -> MrcTask:
    if name not in TASKS:
        raise KeyError(
            f"{name!r} is not a CLUE reading-comprehension task; known: {', '.join(TASKS)}"
        )
    return TASKS[name]
