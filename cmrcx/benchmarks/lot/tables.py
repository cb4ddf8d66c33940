"""`python -m cmrcx.eval --mixture=lot --runs_root=DIR [--split validation|test]`: LOT's
Tables 10 and 11 for the runs present.

One model for all four tasks: if `DIR/lot/run_config.json` exists (a run of the `lot`
mixture, RunConfig.task "lot", `cmrcx.training.run_tasks.lot_mixture.LotMixtureRunTask`), that
run is evaluated once and fills every column group from its per-task metrics
(`lot_<task>/<metric>`, `metrics_by_task`), writing each task's official prediction file;
the per-task runs below are then not looked at. Otherwise each task's run is looked for
as `DIR/<task>/run_config.json` (as `cmrcx.train` leaves it): ClozeT `lot_clozet` (or the
authors' variant `lot_clozet_longlm_authors`), SenPos `lot_senpos`, PlotCom
`lot_plotcom`, OutGen `lot_outgen`. Each run's model (its selected checkpoint, or its
latest) is evaluated with its own settings (its official prediction file written as a
run's evaluation writes it). The printout says which run filled which column group, and
the tables are printed in the paper's layout, in % as the paper prints them:

    Table 10  ClozeT  SenPos  Overall
    Table 11  PlotCom B-1 B-2 D-1 D-2  OutGen B-1 B-2 D-1 D-2 Cover Order  Overall

with the paper's overall score of each table (`cmrcx.benchmarks.lot.overall`: weights
from the human and BERT-base / GPT2-base rows of the split) when all of its columns are
present; under each table's row, in its columns, the published row (same split) of each
model its runs name (RunConfig.paper_model: "GPT2-base", "LongLM-small"); and, for
OutGen, the competition organisers' weighted score (their eval.py's 加权总得分, a fraction
there, printed x 100 as every figure is; LongLM-small baseline). Table 11's D-n are word-level
(`word-distinct-n`), as the paper's are; the public eval.py's character-level
`distinct-n` is in the results JSON. `DIR/lot_<split>_results.json` gets every metric.
"""

from __future__ import annotations

import json
import os

from cmrcx.benchmarks.lot import overall, paper
from cmrcx.common.files import write_atomically

# The run of the `lot` mixture (one model, all four column groups): DIR/lot/.
MIXTURE_RUN = "lot"
# Table column group -> the run tasks that can fill it, first found wins.
RUNS = {
    "lot_clozet": ("lot_clozet", "lot_clozet_longlm_authors"),
    "lot_senpos": ("lot_senpos",),
    "lot_plotcom": ("lot_plotcom",),
    "lot_outgen": ("lot_outgen",),
}
_TABLES = (
    ("Table 10", paper.TABLE_10_COLUMNS, overall.understanding_overall),
    ("Table 11", paper.TABLE_11_COLUMNS, overall.generation_overall),
)


def evaluate(runs, split: str, diagnostics_dir: str | None = None) -> dict:
    """Evaluates every LOT run under runs.root; prints the tables; returns the results.

    runs: the runs under `--runs_root` (`cmrcx.training.tables.Runs`: a task's run, its
    configuration, its evaluation of a split). diagnostics_dir: CLUE's; unused.
    """
    mixture = runs.find((MIXTURE_RUN,))
    if mixture is not None:
        summary = _evaluate_mixture_run(mixture[1], split, runs)
        return _finish(summary, runs.root, split)
    metrics: dict[str, dict[str, float]] = {}
    filled = {}
    found, missing = runs.evaluate_columns(RUNS.items(), split)
    for task, name, run, step, results in found:
        metrics[task] = results
        filled[task] = {"task": name, "run_dir": run.model_dir, "step": step}
        filled[task]["paper_model"] = run.paper_model
    summary = summarize(metrics, split)
    summary.update({"runs": filled, "missing": missing, "metrics": metrics})
    return _finish(summary, runs.root, split)


def _evaluate_mixture_run(run_dir: str, split: str, runs) -> dict:
    """The one run of the `lot` mixture, evaluated once, filling every column group it
    has metrics (or, for a split without answers, a prediction file) for."""
    run = runs.read(run_dir)
    print(f"--- {', '.join(RUNS)}: {MIXTURE_RUN}, one model for all four ({run_dir})", flush=True)
    step, results = runs.evaluate(run, split)
    metrics = metrics_by_task(results)
    written = {
        task
        for task in RUNS
        if os.path.isfile(os.path.join(run_dir, "predictions", f"{task}_{split}.jsonl"))
    }
    filled = [task for task in RUNS if task in metrics or task in written]
    summary = summarize(metrics, split)
    summary.update(
        {
            "runs": {
                t: {
                    "task": MIXTURE_RUN,
                    "run_dir": run_dir,
                    "step": step,
                    "paper_model": run.paper_model,
                }
                for t in filled
            },
            "missing": [task for task in RUNS if task not in filled],
            "metrics": metrics,
            "mixture_run": {"run_dir": run_dir, "step": step, "results": results},
        }
    )
    return summary


def metrics_by_task(results: dict[str, float]) -> dict[str, dict[str, float]]:
    """A mixture run's `lot_<task>/<metric>` results -> {task: {metric: value}} (the
    overall scores, which have no task, are left out: `summarize` recomputes them).

    >>> metrics_by_task({"lot_clozet/accuracy": 0.5, "understanding-overall": 0.4})
    {'lot_clozet': {'accuracy': 0.5}}
    """
    metrics: dict[str, dict[str, float]] = {}
    for key, value in results.items():
        task, _, metric = key.partition("/")
        if metric and task in RUNS:
            metrics.setdefault(task, {})[metric] = value
    return metrics


def _finish(summary: dict, runs_root: str, split: str) -> dict:
    path = os.path.join(runs_root, f"lot_{split}_results.json")
    write_atomically(path, json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    print(format_tables(summary))
    print(f"results: {path}")
    return summary


def summarize(metrics: dict[str, dict[str, float]], split: str) -> dict:
    """The tables' cells (%) and overall scores from each task's metric dict (fractions)."""
    tables = {}
    for title, columns, overall_fn in _TABLES:
        cells = {}
        for column, task, key in columns:
            value = metrics.get(task, {}).get(key)
            cells[column] = None if value is None else 100.0 * value
        complete = all(v is not None for v in cells.values())
        scores = [cells[c] for c, _, _ in columns]
        tables[title] = {
            "columns": [c for c, _, _ in columns],
            "cells": cells,
            "overall": overall_fn(split, scores) if complete else None,
        }
    outgen = metrics.get("lot_outgen", {})
    organisers = None
    if all(k in outgen for k in overall.ORGANISERS_METRICS):
        organisers = overall.organisers_weighted_score(outgen, split)
    return {"mixture": "lot", "split": split, "tables": tables, "organisers_outgen": organisers}


def format_tables(summary: dict) -> str:
    """Tables 10 and 11 in the paper's layout; '-' where a run is missing. Under a table's
    row, the published row of each model its runs name (RunConfig.paper_model):

        Table 10
        ClozeT  SenPos  Overall
         51.00   33.00        -
        published, Table 10 GPT2-base validation
         70.07   37.78    49.62
    """
    split = summary["split"]
    lines = [f"lot {split}"]
    for title, table in summary["tables"].items():
        columns = [*table["columns"], "Overall"]
        values = [*(table["cells"][c] for c in table["columns"]), table["overall"]]
        if all(v is None for v in values):
            continue
        rows = [_cells(values)]
        titles = []
        for model in _paper_models(summary.get("runs") or {}, title):
            try:
                published = paper.row(_PUBLISHED[title], split, model)
            except KeyError:
                titles.append(f"published, {title} has no row {model!r} on {split}")
                rows.append(None)
                continue
            titles.append(f"published, {title} {model} {split}")
            rows.append(_cells([*published.scores, published.overall]))
        widths = [max(len(c), *(len(r[i]) for r in rows if r)) for i, c in enumerate(columns)]
        lines += [title, _line(columns, widths), _line(rows[0], widths)]
        for name, row in zip(titles, rows[1:], strict=True):
            lines += [name] + ([_line(row, widths)] if row else [])
        if table["overall"] is None:
            lines.append("Overall: needs every column of the table (the paper's weights)")
    if summary.get("organisers_outgen") is not None:
        lines.append(
            "OutGen, the competition organisers' weighted score (their eval.py's, x 100): "
            f"{100 * summary['organisers_outgen']:.2f}"
        )
    for line in _filled_by(summary.get("runs") or {}):
        lines.append(line)
    if summary.get("missing"):
        lines.append(f"missing (no run under runs_root): {', '.join(summary['missing'])}")
    return "\n".join(lines)


_PUBLISHED = {"Table 10": paper.TABLE_10, "Table 11": paper.TABLE_11}


def _paper_models(runs: dict, title: str) -> list[str]:
    """The models (RunConfig.paper_model) of the runs that fill the table `title`."""
    columns = next(columns for name, columns, _ in _TABLES if name == title)
    tasks = {task for _, task, _ in columns}
    models = (runs[task].get("paper_model") for task in runs if task in tasks)
    return list(dict.fromkeys(m for m in models if m))


def _cells(values) -> list[str]:
    return ["-" if v is None else f"{v:.2f}" for v in values]


def _line(cells, widths) -> str:
    return "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))


def _filled_by(runs: dict) -> list[str]:
    """`columns lot_clozet, lot_senpos: run lot (DIR/lot, step 40)`, one line per run."""
    by_run: dict[tuple, list[str]] = {}
    for task, run in runs.items():
        by_run.setdefault((run["task"], run["run_dir"], run["step"]), []).append(task)
    return [
        f"columns {', '.join(tasks)}: run {name} ({run_dir}, step {step})"
        for (name, run_dir, step), tasks in by_run.items()
    ]
