"""The summary `make demo` ends with: what it ran, where the outputs are, what the numbers
mean. `python tools/demo_summary.py DEMO_DIR` reads each run's run_config.json and the
last evaluation line of its metrics.jsonl (DEMO_DIR itself, the CMRC 2019 run, and every
folder under it holding a run).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# task -> (name, [(label, metrics.jsonl key, x 100: the key holds a fraction)]). "{decoding}"
# is the run's RunConfig.decoding (the CMRC 2019 mode its prediction file holds).
SHOWN = {
    "cmrc2019": (
        "CMRC 2019",
        [("QAC", "qac/{decoding}", False), ("PAC", "pac/{decoding}", False)],
    ),
    "clue_afqmc": ("CLUE AFQMC", [("accuracy", "accuracy", False)]),
    "clue_cmrc2018": ("CLUE CMRC 2018", [("EM", "EM", False), ("F1", "F1", False)]),
    "lot_clozet": ("LOT ClozeT", [("accuracy", "accuracy", True)]),
    "lot_outgen": (
        "LOT OutGen",
        [
            ("BLEU-1", "bleu-1", True),
            ("BLEU-2", "bleu-2", True),
            ("D-1", "word-distinct-1", True),
            ("D-2", "word-distinct-2", True),
            ("Cover", "coverage", True),
            ("Order", "order", True),
        ],
    ),
}
# One line per metric: what it measures (the papers' definitions, in short).
MEANINGS = [
    "QAC / PAC   CMRC 2019: blanks filled with the right sentence / passages with every "
    "blank right",
    "accuracy    CLUE AFQMC (same meaning or not: chance 50), LOT ClozeT (the right one of "
    "two candidate sentences: chance 50)",
    "EM / F1     CMRC 2018: answers matching the reference exactly / character overlap "
    "with it (the official evaluator's)",
    "BLEU-n      LOT OutGen: n-gram overlap of the generated story with the reference",
    "D-n         LOT OutGen: distinct word n-grams among all generated (diversity)",
    "Cover/Order LOT OutGen: outline phrases found in the story (ROUGE-L recall) / in the "
    "reference's order",
]


def run_dirs(demo_dir: Path) -> list[Path]:
    """DEMO_DIR and its sub-folders that hold a run (a run_config.json), DEMO_DIR first."""
    found = [demo_dir] if (demo_dir / "run_config.json").is_file() else []
    return found + sorted(p.parent for p in demo_dir.glob("*/run_config.json"))


def model_evaluation(run_dir: Path, config: dict) -> dict:
    """The metrics.jsonl line of the run's model on its eval split ({} if there is none):
    the last one, or with RunConfig.select_best the selected (best, earliest) one."""
    path = run_dir / "metrics.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    split = config.get("eval_split", "validation")
    records = [json.loads(line) for line in lines if line.strip()]
    records = [r for r in records if r.get("split") == split]
    metric, sign = config.get("select_best"), -1 if config.get("select_mode") == "min" else 1
    scored = [r for r in records if metric is not None and r.get(metric) is not None]
    if scored:
        return max(scored, key=lambda r: (sign * r[metric], -r["step"]))
    return records[-1] if records else {}


def run_line(run_dir: Path) -> str:
    """`  CLUE AFQMC      demo_run/clue_afqmc   step 50  accuracy 56.25`."""
    config = json.loads((run_dir / "run_config.json").read_text(encoding="utf-8"))
    task, split = config["task"], config.get("eval_split", "validation")
    name, shown = SHOWN.get(task, (task, []))
    metrics = model_evaluation(run_dir, config)
    figures = []
    for label, key, fraction in shown:
        value = metrics.get(key.format(decoding=config.get("decoding", "paper")))
        if value is not None:
            figures.append(f"{label} {100 * value if fraction else value:.2f}")
    said = "  ".join(figures) or "no evaluation in metrics.jsonl"
    step = f"step {metrics['step']}" if "step" in metrics else ""
    return f"  {name:<15} {str(run_dir) + '/':<26} {step:<9} {split}: {said}"


def summary(demo_dir: Path) -> str:
    runs = run_dirs(demo_dir)
    lines = [
        "",
        f"== make demo: {len(runs)} tiny runs, each a model trained from random weights for "
        "a few steps on a bundled sample (cmrcx/data/), evaluated, and its prediction file "
        "re-scored with cmrcx.score ==",
        *[run_line(run_dir) for run_dir in runs],
        "",
        "Each run folder holds checkpoints/ (orbax), predictions/ (the official format: what "
        "cmrcx.score read), metrics.jsonl, events/ (TensorBoard) and run_config.json, which "
        f"eval and export reuse: python -m cmrcx.eval --model_dir={runs[-1] if runs else 'DIR'}",
        "",
        "The figures above are percentages with two decimals (56.25 = 56.25 %), as the papers "
        "print them; cmrcx.score's JSON keeps each official scorer's scale (LOT's: fractions).",
        *[f"  {meaning}" for meaning in MEANINGS],
        "Tiny random models on 16 to 24 examples score near chance: the demo shows the "
        "pipeline working, not a model learning (the paper configs need PRETRAINED).",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python tools/demo_summary.py DEMO_DIR (the folder make demo wrote)")
        return 2
    print(summary(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
