"""The task names people type, resolved to the registered (versioned) task names.

Registered names are versioned (``clue_tnews11``, ``clue_cluewsc10``, ``clue_chid11``...)
because CLUE 1.1 changed some test sets. The papers and the CLUE repository call the
tasks by their data-set names (``CLUEWSC2020``, ``ChID``, ``C³``, ``CMRC 2018``), so
those resolve too, to the current version, CLUE 1.1, where a task has two:

>>> resolve("CLUEWSC2020")
'clue_cluewsc11'
>>> resolve("chid"), resolve("clue_c3"), resolve("CMRC 2018"), resolve("tnews1.0")
('clue_chid11', 'clue_c311', 'clue_cmrc2018', 'clue_tnews10')

A data-set name followed by a CLUE version names that version's task:

>>> resolve("CLUEWSC2020 1.0"), resolve("ChID 1.1"), resolve("clue_c3_1.0")
('clue_cluewsc10', 'clue_chid11', 'clue_c310')

Matching ignores case, spaces, dots, hyphens, underscores and apostrophes (Table 2 of
the CLUE paper writes ``TNEWS'``), and reads ``³`` as ``3``. LOT's tasks are
``lot_clozet``, ``lot_senpos``, ``lot_plotcom``, ``lot_outgen``, also under the paper's
names (``ClozeT``...). A name that is not a task raises `UnknownTaskName` listing what is
accepted.
"""

from __future__ import annotations

import functools
import re

from cmrcx.benchmarks.clue.reading_tasks import TASKS as CLUE_MRC_TASKS
from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_CLASSIFICATION_TASKS
from cmrcx.benchmarks.lot.paper import TASK_NAMES as LOT_TASK_NAMES

CMRC2019 = "cmrc2019"
CURRENT_CLUE_VERSION = "1.1"  # the leaderboard's current version ([SUBMIT] *11_predict.json)


class UnknownTaskName(KeyError):
    """A task name that no benchmark registers; the message lists the accepted names."""

    def __str__(self) -> str:
        return str(self.args[0])


def _key(name: str) -> str:
    return re.sub(r"[\s._\-']", "", name.lower().replace("³", "3"))


@functools.cache
def _names() -> dict[str, str]:
    """Normalised name -> registered name."""
    names = {_key(CMRC2019): CMRC2019}
    rows = [*CLUE_CLASSIFICATION_TASKS.values(), *CLUE_MRC_TASKS.values()]
    for row in rows:
        names[_key(row.name)] = row.name
        names[_key(row.name.removeprefix("clue_"))] = row.name
        if row.clue_version is not None:  # "CLUEWSC2020 1.0", "clue_c3_1.1": data set + version
            names[_key(f"{row.dataset}{row.clue_version}")] = row.name
            names[_key(f"clue_{row.dataset}{row.clue_version}")] = row.name
    for task in LOT_TASK_NAMES.values():
        names[_key(task)] = task
    for dataset, task in paper_names().items():  # the current version's task
        names.setdefault(_key(dataset), task)
        if task.startswith("clue_"):
            names.setdefault(_key(f"clue_{dataset}"), task)
    return names


def registered_names() -> list[str]:
    """Every registered task name of the benchmarks, sorted."""
    return sorted(set(_names().values()))


def paper_names() -> dict[str, str]:
    """The data-set names that resolve to a task (e.g. ``cluewsc2020`` -> ``clue_cluewsc11``,
    ``ClozeT`` -> ``lot_clozet``)."""
    rows = [*CLUE_CLASSIFICATION_TASKS.values(), *CLUE_MRC_TASKS.values()]
    names = {
        row.dataset: row.name
        for row in rows
        if row.clue_version in (None, CURRENT_CLUE_VERSION) and row.dataset != row.name
    }
    return {**names, **LOT_TASK_NAMES}  # LOT: ClozeT -> lot_clozet, ...


def paper_names_text() -> str:
    """``afqmc (clue_afqmc), c3 (clue_c311), ...`` for messages."""
    return ", ".join(f"{name} ({task})" for name, task in sorted(paper_names().items()))


def accepted_names_text() -> str:
    """One line for error messages: the registered names and the data-set names."""
    return f"{', '.join(registered_names())}; also the papers' names: {paper_names_text()}"


def find(name: str) -> str | None:
    """The registered name ``name`` stands for, or None."""
    return _names().get(_key(name))


def resolve(name: str) -> str:
    """The registered name ``name`` stands for; UnknownTaskName listing the accepted ones."""
    registered = find(name)
    if registered is None:
        raise UnknownTaskName(f"unknown task {name!r}; accepted: {accepted_names_text()}")
    return registered
