"""SeqIO registrations, one module per benchmark (installed as `cmrcx.tasks`):
`cmrc2019`, `clue.classification`, `clue.reading`, `lot.pretraining`, `lot.generation`.

Every module has the same two entry points:

* ``register(vocabulary_name, vocab_file, data_dirs, **options) -> list[str]`` registers
  the module's tasks for one vocabulary and returns their names. ``data_dirs`` says where
  the official files are: task name -> folder (CLUE: ``{"clue_afqmc": ".../afqmc_public"}``;
  CMRC 2019: ``{"cmrc2019": dir}``; LOT: ``{"lot_outgen": dir}``); LongLM's pretraining
  corpus has no task files but splits of .txt texts, so there it is split -> folder
  (``{"train": corpus, "validation": held_out}``). Options are keyword-only;
  ``max_length`` is the encoder's length everywhere.
* ``task_name(task, vocabulary_name, role="")`` below: the one naming rule.

The sources over official files (and the runs' function tasks) are
`sources.FileOrderSource`s: a split in file order for any shuffle or seed.
"""


def task_name(task: str, vocabulary_name: str, role: str = "") -> str:
    """The SeqIO name of ``task`` for a vocabulary: ``<task>_<vocabulary_name>[_<role>]``.

    >>> task_name("clue_afqmc", "bert_chinese"), task_name("cmrc2019", "tiny", "scoring")
    ('clue_afqmc_bert_chinese', 'cmrc2019_tiny_scoring')
    """
    return f"{task}_{vocabulary_name}" + (f"_{role}" if role else "")
