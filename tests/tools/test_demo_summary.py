"""tools/demo_summary.py: the end of `make demo`, from the runs' own files."""

from __future__ import annotations

import importlib.util
import json

from tests.support import REPO_ROOT

spec = importlib.util.spec_from_file_location("demo_summary", REPO_ROOT / "tools/demo_summary.py")
demo_summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo_summary)


def _run(folder, task: str, *records: dict, select_best=None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    config = {"task": task, "eval_split": "validation", "decoding": "assignment",
              "select_best": select_best, "select_mode": "max"}  # fmt: skip
    (folder / "run_config.json").write_text(json.dumps(config))
    lines = [json.dumps(r) for r in records]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_each_run_has_a_line_of_percentages(tmp_path):
    demo = tmp_path / "demo_run"
    _run(demo, "cmrc2019", {"step": 30, "split": "train", "loss": 2.0},
         {"step": 30, "split": "validation", "qac/paper": 9.0, "pac/paper": 0.0,
          "qac/assignment": 12.5, "pac/assignment": 4.17})  # fmt: skip
    _run(demo / "clue_afqmc", "clue_afqmc", {"step": 50, "split": "validation", "accuracy": 56.25})
    clozet = [{"step": step, "split": "validation", "accuracy": accuracy}
              for step, accuracy in ((4, 0.625), (8, 0.5625), (12, 0.625))]  # fmt: skip
    _run(demo / "lot_clozet", "lot_clozet", *clozet, select_best="accuracy")
    _run(demo / "lot_outgen", "lot_outgen")  # killed before its evaluation
    text = demo_summary.summary(demo)
    lines = text.splitlines()
    assert "== make demo: 4 tiny runs" in lines[1]
    runs = [line.split() for line in lines[2:6]]
    assert runs[0][:2] == ["CMRC", "2019"] and runs[0][-4:] == ["QAC", "12.50", "PAC", "4.17"]
    assert runs[1][-2:] == ["accuracy", "56.25"] and f"{demo}/clue_afqmc/" in runs[1]
    assert runs[2][-2:] == ["accuracy", "62.50"]  # LOT's fraction, printed as a percentage
    assert "step 4 " in lines[4]  # the selected checkpoint: the best, the earliest of a tie
    assert lines[5].endswith("validation: no evaluation in metrics.jsonl")
    assert f"python -m cmrcx.eval --model_dir={demo}/lot_outgen" in text
    for name in ("QAC / PAC", "accuracy", "EM / F1", "BLEU-n", "D-n", "Cover/Order"):
        assert any(line.strip().startswith(name) for line in lines), name


def test_a_folder_that_is_no_demo_is_a_usage_line(tmp_path, capsys):
    assert demo_summary.main([str(tmp_path / "none")]) == 2
    assert capsys.readouterr().out.startswith("usage: python tools/demo_summary.py DEMO_DIR")
