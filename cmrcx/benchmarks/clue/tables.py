"""`python -m cmrcx.eval --mixture=clue|clue_classification --runs_root=DIR [--split
validation|test]`: Table 2 of the CLUE paper for the runs present.

Each column's task (in preference order: CLUE 1.1 before 1.0) is looked for as
`DIR/<task>/run_config.json` (as `cmrcx.train` leaves it) and evaluated with that run's
own settings (its selected checkpoint, or its latest). One row is printed, the average
over the tasks present, the missing ones named; under it the published Table 2 row of
each model the runs name (RunConfig.paper_model); `DIR/<mixture>_<split>_results.json`
gets every metric. For `test` every task's official submission file is gathered under
`DIR/submission/` and packed into `DIR/<mixture>_submission.zip`, ready to upload; the
diagnostics set is predicted by the CMNLI run when a diagnostics folder is given.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import zipfile

from cmrcx.benchmarks.clue.paper import CLUE_EXTRA, CLUE_TABLE_2, METRICS, TABLE_2
from cmrcx.benchmarks.clue.reading_tasks import TASKS as CLUE_MRC_TASKS
from cmrcx.benchmarks.clue.tasks import TASKS as CLUE_TASKS
from cmrcx.common.files import write_atomically

# mixture -> (columns averaged, extra columns, the metric of each task: Table 2's caption
# "We report EM for CMRC 2018 and accuracy for all other tasks").
MIXTURES = {
    "clue": (CLUE_TABLE_2, CLUE_EXTRA),
    "clue_classification": (
        tuple(c for c in CLUE_TABLE_2 if c[0] not in ("CMRC", "ChID", "C3")),
        CLUE_EXTRA,
    ),
}


@dataclasses.dataclass
class TaskResult:
    column: str
    task: str
    step: int
    metrics: dict[str, float]
    submission: str | None  # the official file written (test split)
    paper_model: str | None = None  # the run's RunConfig.paper_model ("XLNet-mid")


def _submission_file(run) -> str | None:
    row = CLUE_TASKS.get(run.task) or CLUE_MRC_TASKS.get(run.task)
    path = os.path.join(run.model_dir, "submission", row.submission_file) if row else None
    return path if path and os.path.isfile(path) else None


def evaluate(mixture: str, runs, split: str, diagnostics_dir: str | None = None) -> dict:
    """Evaluates every run of the mixture under runs.root; returns the results JSON data.

    runs: the runs under `--runs_root` (`cmrcx.training.tables.Runs`: a task's run, its
    configuration, its evaluation of a split). diagnostics_dir: the unpacked diagnostics
    folder, predicted by the CMNLI run on the test split.
    """
    columns, extra = MIXTURES[mixture]
    results: list[TaskResult] = []
    found, missing = runs.evaluate_columns((*columns, *extra), split)
    for column, task, run, step, metrics in found:
        submission = _submission_file(run)
        results.append(TaskResult(column, task, step, metrics, submission, run.paper_model))
        if task == "clue_cmnli" and split == "test" and diagnostics_dir:
            # CLUE prescribes the diagnostics set be predicted by the CMNLI model.
            run = dataclasses.replace(run, task="clue_diagnostics", data_dir=diagnostics_dir)
            step, metrics = runs.evaluate(run, "test")
            submission = _submission_file(run)
            results.append(TaskResult("diagnostics", run.task, step, {}, submission))
    summary = _summary(mixture, split, columns, results, missing)
    if split == "test":
        summary["submission_zip"] = _pack_submission(mixture, runs.root, results)
    path = os.path.join(runs.root, f"{mixture}_{split}_results.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, ensure_ascii=False)
    print(format_table(summary))
    print(f"results: {path}")
    return summary


def _summary(mixture, split, columns, results: list[TaskResult], missing) -> dict:
    scores = {}
    for result in results:
        metric = METRICS.get(result.task, "accuracy")
        if metric in result.metrics:
            scores[result.column] = result.metrics[metric]
    in_average = [scores[c] for c, _ in columns if c in scores]
    return {
        "mixture": mixture,
        "split": split,
        "columns": [c for c, _ in columns],
        "scores": scores,
        "average": sum(in_average) / len(in_average) if in_average else None,
        "averaged_over": [c for c, _ in columns if c in scores],
        "missing": missing,
        "runs": [dataclasses.asdict(r) for r in results],
    }


def format_table(summary: dict) -> str:
    """Table 2's layout: one row, Avg then each task; '-' where there is no score. Under
    it, in the same columns, the published Table 2 row (test) of each model the runs name
    (RunConfig.paper_model), each after a line naming it:

        clue validation
          Avg  TNEWS  ...     C3  CMNLI
        31.25  28.00  ...  25.00  33.33
        paper Table 2 (test), XLNet-mid
        68.58  56.24  ...  67.68      -
    """
    columns = ["Avg", *summary["columns"]]
    extra = [r["column"] for r in summary["runs"] if r["column"] not in summary["columns"]]
    values = [summary["average"], *(summary["scores"].get(c) for c in summary["columns"])]
    values += [summary["scores"].get(c) for c in extra]
    columns += extra
    rows = [_cells(values)]
    titles = []
    for model in paper_models(summary):
        if model in TABLE_2:
            titles.append(f"paper Table 2 (test), {model}")
            rows.append(_cells(paper_row(model, summary["columns"], columns)))
        else:
            titles.append(f"paper Table 2 has no row {model!r} (RunConfig.paper_model)")
            rows.append(None)
    widths = [max(len(c), *(len(r[i]) for r in rows if r)) for i, c in enumerate(columns)]
    lines = [f"{summary['mixture']} {summary['split']}", _line(columns, widths)]
    lines.append(_line(rows[0], widths))
    for title, row in zip(titles, rows[1:], strict=True):
        lines += [title] + ([_line(row, widths)] if row else [])
    if summary["averaged_over"] and summary["missing"]:
        lines.append(f"Avg over {len(summary['averaged_over'])} of {len(summary['columns'])} tasks")
    if summary["missing"]:
        lines.append(f"missing (no run under runs_root): {', '.join(summary['missing'])}")
    return "\n".join(lines)


def paper_models(summary: dict) -> list[str]:
    """The models the summary's runs name (RunConfig.paper_model), in the runs' order."""
    models = (run.get("paper_model") for run in summary["runs"])
    return list(dict.fromkeys(m for m in models if m))


def paper_row(model: str, averaged: list[str], columns: list[str]) -> list[float | None]:
    """The model's published Table 2 cells in `columns` ("Avg", then task columns; None
    where Table 2 has none, e.g. CMNLI). Avg is the paper's over all nine tasks when
    `averaged` is Table 2's nine columns, else the mean of the published cells averaged."""
    published = dict(zip((c for c, _ in CLUE_TABLE_2), TABLE_2[model][1:], strict=True))
    nine = list(averaged) == [c for c, _ in CLUE_TABLE_2]
    average = TABLE_2[model][0] if nine else sum(published[c] for c in averaged) / len(averaged)
    return [average if c == "Avg" else published.get(c) for c in columns]


def _cells(values) -> list[str]:
    return ["-" if v is None else f"{v:.2f}" for v in values]


def _line(cells, widths) -> str:
    return "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))


def _pack_submission(mixture: str, runs_root: str, results: list[TaskResult]) -> str:
    """Copies each official file to runs_root/submission/ and zips them (files at the top)."""
    directory = os.path.join(runs_root, "submission")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(runs_root, f"{mixture}_submission.zip")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for result in results:
            if result.submission:
                name = os.path.basename(result.submission)
                shutil.copyfile(result.submission, os.path.join(directory, name))
                archive.write(result.submission, arcname=name)
    write_atomically(path, buffer.getvalue())
    print(f"submission: {path}")
    return path
