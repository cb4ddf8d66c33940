"""CLUE's classification family: AFQMC, TNEWS, IFLYTEK, OCNLI, CMNLI, CLUEWSC2020, CSL
and the diagnostics set, with the official file formats, the baselines' input
construction, accuracy, and the leaderboard's submission files.

Modules:
  tasks            the metadata table (one `ClueTask` row per versioned task name)
  official_format  strict readers of the official JSON-lines files
  inputs           the text (pair) each baseline feeds its encoder
  submission       writer and validating reader of ``<task>_predict.json`` files
  metrics          accuracy and file-level scoring (``python -m cmrcx.score clue_afqmc ...``)
"""

from cmrcx.benchmarks.clue.official_format import (
    ClueExample,
    ClueSplit,
    DataFormatError,
    read_examples,
    read_split,
)
from cmrcx.benchmarks.clue.tasks import TASKS, ClueTask, get_task

__all__ = [
    "TASKS",
    "ClueExample",
    "ClueSplit",
    "ClueTask",
    "DataFormatError",
    "get_task",
    "read_examples",
    "read_split",
]
