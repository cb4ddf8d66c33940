"""`python -m cmrcx.eval --mixture=cmrc2019 --runs_root=DIR [--split validation|test]`:
Table 3 of the CMRC 2019 paper for the runs present.

Every `DIR/<name>/run_config.json` of a CMRC 2019 run (as `cmrcx.train` and
`tools/reproduce_cmrc2019.sh` leave them: one folder per model) is evaluated with its own
settings (its selected checkpoint, or its latest; its official prediction file written as
a run's evaluation writes it), and one row per run is printed with the published Table 3
row of the model it names (RunConfig.paper_model, set by the six paper gin files) beside
it; `DIR/cmrc2019_<split>_results.json` gets every metric. QAC and PAC are of the run's
written decoding (RunConfig.decoding, the paper's by default). The test split has no
public answers: its rows are the prediction files for CodaLab, and the published test
figures.
"""

from __future__ import annotations

import json
import os

from cmrcx.benchmarks.cmrc2019 import paper
from cmrcx.common import errors
from cmrcx.common.files import write_atomically


def evaluate(runs, split: str, diagnostics_dir: str | None = None) -> dict:
    """Evaluates every CMRC 2019 run under runs.root; prints Table 3's rows; returns the
    results. runs: the runs under `--runs_root` (`cmrcx.training.tables.Runs`: every run
    folder, its configuration, its evaluation of a split). diagnostics_dir: CLUE's; unused."""
    rows = []
    runs_root = runs.root
    for name, run_dir in runs.every():
        run = runs.read(run_dir)
        if run.task != "cmrc2019":
            continue
        print(f"--- {name}: cmrc2019, {run.paper_model or 'no paper_model'} ({run_dir})")
        step, metrics = runs.evaluate(run, split)
        rows.append(
            {
                "run": name,
                "run_dir": run_dir,
                "step": step,
                "paper_model": run.paper_model,
                "decoding": run.decoding,
                "metrics": metrics,
            }
        )
    if not rows:
        raise errors.ConfigError(
            f"no CMRC 2019 run under {runs_root} (a folder per run holding run_config.json, "
            "as cmrcx.train leaves MODEL_DIR)"
        )
    summary = {"mixture": "cmrc2019", "split": split, "runs": rows}
    path = os.path.join(runs_root, f"cmrc2019_{split}_results.json")
    write_atomically(path, json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    print(format_table(summary))
    print(f"results: {path}")
    return summary


def format_table(summary: dict) -> str:
    """Table 3's columns for the split, a row per run, the published row beside it:

    cmrc2019 validation (Table 3: dev)
    run   paper_model  QAC    PAC    paper QAC  paper PAC
    bert  BERT         70.95  10.67  71.20      10.00
    """
    split = summary["split"]
    header = ["run", "paper_model", "QAC", "PAC", "paper QAC", "paper PAC"]
    lines = [[*header]]
    for row in summary["runs"]:
        decoding, metrics = row["decoding"], row["metrics"]
        ours = [metrics.get(f"qac/{decoding}"), metrics.get(f"pac/{decoding}")]
        theirs = paper.published(row["paper_model"], split) or (None, None)
        lines.append([row["run"], row["paper_model"] or "-", *map(_cell, (*ours, *theirs))])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    table = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
             for line in lines]  # fmt: skip
    name = {"validation": "dev", "test": "test"}.get(split)
    title = f"cmrc2019 {split}" + (f" (Table 3: {name})" if name else "")
    if split == "test":
        title += "; no public answers: the QAC/PAC columns are empty, the files are for CodaLab"
    return "\n".join([title, *table])


def _cell(value) -> str:
    return "-" if value is None else f"{value:.2f}"
