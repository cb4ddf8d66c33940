"""`python -m cmrcx.check_reproduction --gin_file=GIN [--gin.X=...] --steps N [--json]`

Before spending GPU days on a run: runs N steps of the gin's run (its data, its
PRETRAINED checkpoint, its optimizer and schedule) twice from the same weights on the same
batches, dropout off: in cmrcx, and in the benchmark's reference recipe in PyTorch +
transformers (pip install 'cmrcx[convert]'). Prints a row per step (learning rate, cmrcx
loss, reference loss, relative difference) and a verdict, "same" or "different";
--json prints {"rows": [{"step", "learning_rate", "loss", "reference_loss",
"relative_difference"}, ...], "max_relative_difference", "verdict"}.

Recipes: CLUE classification (AFQMC, TNEWS, IFLYTEK, OCNLI, CMNLI, CLUEWSC2020, CSL;
BERT-family, ALBERT and XLNet): CLUE's classifier_pytorch/run_classifier.py. C3 and
ChID (BERT-family, ALBERT and XLNet): its run_c3.py and run_multichoice_mrc.py. CMRC 2018
(BERT-family, ALBERT and XLNet): CLUE's mrc_pytorch/run_mrc.py (its BERTAdam with
runs/clue_mrc_script.gin, the paper setting's AdamW without). LOT (T5 / LongLM):
lot_clozet_longlm_authors, the LongLM authors' baselines/understanding/finetune.py;
lot_outgen and lot_plotcom, their longlm/finetune_trainer.py. CMRC 2019 (BERT family):
with runs/released_script.gin, the authors' own run_cmrc2019_baseline.py and the
pytorch_pretrained_bert it ships, run from --reference_dir; a paper gin, the paper's
setting (transformers' BertModel, AdamW and linear warm-up). MODEL_DIR is not
used (both sides write into a temporary folder) and need not be set.
"""

from __future__ import annotations

import json
import tempfile

from cmrcx.cli import startup

if __name__ == "__main__":  # before JAX and TensorFlow load (see cmrcx.cli.startup)
    startup.start()

from cmrcx.cli import launch  # noqa: E402

FLAGS = (
    ("--steps", {"type": int, "default": 3, "help": "optimizer steps to compare (default 3)"}),
    ("--json", {"action": "store_true", "help": "print the comparison as one JSON object"}),
    (
        "--tolerance",
        {
            "type": float,
            "default": None,
            "help": "largest relative loss difference "
            "called the same (default 1e-4: float32, frameworks summing in other orders)",
        },
    ),  # fmt: skip
    (
        "--reference_dir",
        {
            "default": None,
            "help": "the authors' released code, for a recipe that runs it: CMRC 2019's "
            "baseline/ folder (run_cmrc2019_baseline.py, pytorch_pretrained_bert/) for a gin "
            "with runs/released_script.gin (default: $CMRCX_CMRC2019_REFERENCE)",
        },
    ),
)


def main(argv) -> None:
    args = launch.parse_flags(argv, __doc__, FLAGS)
    with tempfile.TemporaryDirectory() as scratch:
        # MODEL_DIR first, so a user's --gin.MODEL_DIR still parses; it is not used.
        launch.parse_gin(args.gin_file, [f"MODEL_DIR = '{scratch}/unused'", *args.gin_bindings])
        launch.prepare_process()
        run = launch.run_config_from_gin()
        from cmrcx.reproduction import check  # after gin: jax, tf and torch start here

        tolerance = check.DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
        comparison = check.check_reproduction(
            run, args.steps, tolerance, work_dir=scratch, reference_dir=args.reference_dir
        )
    if args.json:
        print(json.dumps(check.report_json(comparison)))
    else:
        print(check.table(comparison, tolerance))


if __name__ == "__main__":
    launch.main_guard(main)
