"""Print what the model gets: the first preprocessed examples of a run's SeqIO task.

`python -m cmrcx.inspect TASK_OR_MIXTURE --gin_file=NAME.gin [--gin.KEY=VALUE ...]
[--split S] [--n N] [--scoring] [--no_trim] [--json]` registers the run's SeqIO tasks (as
`cmrcx.train` does) and prints the first N examples of one, nothing else on stdout (data
preparation messages go to stderr): by default a readable view, a block per example with
the token features as text (`input_ids (12 tokens): [CLS] 他 [unused1] ...`), the other
features by name and long lists cut short; with --json the raw features, one JSON object
per example and line, the ids whole.

TASK_OR_MIXTURE is the run's task (`RunConfig.task`: `cmrc2019`, `clue_afqmc`),
whose training examples are shown, or with --scoring its scoring examples (for CMRC
2019 these differ: one training window per blank vs one window per candidate); or a
SeqIO task or mixture the run registers (`cmrc2019_tiny_scoring`, `clue_afqmc_tiny`,
`clue`). The split defaults to the run's eval split. MODEL_DIR is not needed.

Each token feature with a vocabulary gets `<name>_text` (a list, one text per choice,
for the multiple-choice tasks' [choices, length] features): for WordPiece the tokens
joined by spaces (`[CLS] 他 [unused1] 。 [SEP] ...`, the blank markers visible), for
other vocabularies their decoded text. Features as long as a `*_mask` feature are cut
where the mask ends (the padding dropped); --no_trim prints them whole.
"""

from __future__ import annotations

import tempfile

from cmrcx.cli import launch
from cmrcx.training import inspection

FLAGS = (
    ("task_or_mixture", {"help": "RunConfig.task, or a SeqIO task / mixture of the run"}),
    ("--split", {"default": None, "help": "split to read (default: the run's eval split)"}),
    ("--n", {"type": int, "default": 5, "help": "number of examples to print"}),
    ("--scoring", {"action": "store_true", "help": "the run task's scoring examples"}),
    ("--no_trim", {"action": "store_true", "help": "keep the padding of masked features"}),
    ("--json", {"action": "store_true", "help": "raw features, one JSON line per example"}),
)


def main(argv) -> None:
    # MODEL_DIR is required by RunConfig but unused here: a default if none is given.
    if not any(arg.startswith("--gin.MODEL_DIR=") for arg in argv):
        argv = [*argv, f"--gin.MODEL_DIR={tempfile.gettempdir()!r}"]
    launch.parse_flags(argv, __doc__, FLAGS)  # --help and usage errors before the redirect
    with inspection.stdout_to_stderr():
        args, run = launch.start(argv, __doc__, FLAGS)
        name, split, examples, vocabularies = inspection.first_examples(
            run, args.task_or_mixture, args.split, args.n, args.scoring
        )
    where = f"{name}, {split}"
    inspection.print_examples(examples, vocabularies, where, not args.no_trim, args.json)


if __name__ == "__main__":
    launch.main_guard(main)
