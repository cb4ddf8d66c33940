"""Mixture evaluation: every task of a benchmark that has a run, one table, one upload.

`python -m cmrcx.eval --mixture=clue --runs_root=DIR [--split validation|test]` looks for
`DIR/<task>/run_config.json` (written by `cmrcx.train`) for each task of the mixture,
evaluates each run's model with that run's own settings (its selected checkpoint if it
selects by a validation metric, RunConfig.select_best; else its latest), prints the
paper's table (Table 2 of the CLUE paper: one row, the average over the tasks present,
the missing ones named; under it the published Table 2 row of each model the runs name,
RunConfig.paper_model) and writes `DIR/<mixture>_<split>_results.json`. For `test` it
gathers every task's official submission file under `DIR/submission/` and packs them into
`DIR/<mixture>_submission.zip`, ready to upload. `--mixture=lot` prints LOT's Tables 10
and 11 (`cmrcx.training.lot_tables`): of the one model of the `lot` mixture at DIR/lot/
if there is one, else of the per-task runs. `--mixture=cmrc2019` prints the CMRC 2019
paper's Table 3 for every CMRC 2019 run under DIR (`cmrcx.training.cmrc2019_table`).
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
from cmrcx.common import errors
from cmrcx.common.files import write_atomically
from cmrcx.training import cmrc2019_table, lot_tables, run_config

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


def _find_run(runs_root: str, tasks: tuple[str, ...]) -> tuple[str, str] | None:
    """(task, run dir) of the first of `tasks` (a column's, in preference order: CLUE 1.1
    before 1.0) with a run under runs_root; a line names the runs it leaves out."""
    found = [
        (task, os.path.join(runs_root, task))
        for task in tasks
        if os.path.isfile(os.path.join(runs_root, task, run_config.RUN_CONFIG_FILE))
    ]
    if len(found) > 1:
        others = ", ".join(task for task, _ in found[1:])
        print(f"note: {runs_root} also has {others}; the table takes {found[0][0]}", flush=True)
    return found[0] if found else None


def _evaluate_run(run: run_config.RunConfig, split: str) -> tuple[int, dict[str, float]]:
    from cmrcx.training.runner import Runner

    runner = Runner(run.checked(), for_training=False)
    step, state = runner.restore()
    return step, runner.evaluate(state, step, split)


def _submission_file(run: run_config.RunConfig) -> str | None:
    row = CLUE_TASKS.get(run.task) or CLUE_MRC_TASKS.get(run.task)
    path = os.path.join(run.model_dir, "submission", row.submission_file) if row else None
    return path if path and os.path.isfile(path) else None


def evaluate_mixture(
    mixture: str, runs_root: str, split: str = "validation", diagnostics_dir: str | None = None
) -> dict:
    """Evaluates every run of the mixture under runs_root; returns the results JSON data."""
    if mixture not in (*MIXTURES, "lot", "cmrc2019"):
        raise errors.ConfigError(
            f"--mixture {mixture!r}: use one of {', '.join((*MIXTURES, 'lot', 'cmrc2019'))}"
        )
    if not os.path.isdir(runs_root):
        raise errors.ConfigError(f"--runs_root {runs_root} is not a directory")
    if mixture == "cmrc2019":  # Table 3 (cmrcx.training.cmrc2019_table)
        return cmrc2019_table.evaluate_cmrc2019(
            runs_root, split, _evaluate_run, run_config.read_run_config
        )
    if mixture == "lot":  # Tables 10 and 11 (cmrcx.training.lot_tables)
        return lot_tables.evaluate_lot(
            runs_root, split, _find_run, _evaluate_run, run_config.read_run_config
        )
    columns, extra = MIXTURES[mixture]
    results: list[TaskResult] = []
    missing = []
    for column, tasks in (*columns, *extra):
        found = _find_run(runs_root, tasks)
        if found is None:
            missing.append(column)
            continue
        task, run_dir = found
        run = dataclasses.replace(run_config.read_run_config(run_dir), model_dir=run_dir)
        print(f"--- {column}: {task} ({run_dir})", flush=True)
        step, metrics = _evaluate_run(run, split)
        submission = _submission_file(run)
        results.append(TaskResult(column, task, step, metrics, submission, run.paper_model))
        if task == "clue_cmnli" and split == "test" and diagnostics_dir:
            # CLUE prescribes the diagnostics set be predicted by the CMNLI model.
            run = dataclasses.replace(run, task="clue_diagnostics", data_dir=diagnostics_dir)
            step, metrics = _evaluate_run(run, "test")
            submission = _submission_file(run)
            results.append(TaskResult("diagnostics", run.task, step, {}, submission))
    summary = _summary(mixture, split, columns, results, missing)
    if split == "test":
        summary["submission_zip"] = _pack_submission(mixture, runs_root, results)
    path = os.path.join(runs_root, f"{mixture}_{split}_results.json")
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
