"""Writes gin_configs/clue/clue_<task>_<model>.gin: CLUE's Table 7, one file per (task, model).

    python tools/make_clue_gin.py            # (re)write the files
    python tools/make_clue_gin.py --check    # exit 1 if a file differs (tests run this)

The table is Table 7 of Xu et al., COLING 2020 ("Parameters for fine-tuning"), cell by
cell, in `cmrcx.benchmarks.clue.paper.TABLE_7`; each generated file cites its cell.
CMNLI's values (not in Table 7) and OCNLI's missing cells are explained there.

The reading-comprehension tasks (CMRC 2018, ChID, C3) include runs/clue_mrc_finetune.gin
(the MRC scripts' BERTAdam settings) and add what Table 7 does not give from CLUE's run
scripts (baselines/models_pytorch/mrc_pytorch/): the warm-up fraction and, for CMRC 2018,
the window stride; `MRC_SCRIPT_SETTINGS` cites them.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from cmrcx.benchmarks.clue.paper import TABLE_7, TABLE_7_MODELS

GIN_DIR = pathlib.Path(__file__).resolve().parent.parent / "gin_configs" / "clue"

# model name in file names -> (Table 2/7 name, geometry models/<this>.gin, vocabulary_name)
MODELS = {
    name: (TABLE_7_MODELS[name], geometry, vocabulary_name)
    for name, geometry, vocabulary_name in (
        ("bert", "bert/base", "bert_chinese"),
        ("bert_wwm_ext", "bert/base", "bert_chinese"),
        ("ernie", "bert/ernie_base", "ernie"),
        ("roberta_large", "bert/roberta_large", "bert_chinese"),
        ("roberta_wwm_ext", "bert/base", "bert_chinese"),
        ("roberta_wwm_ext_large", "bert/large", "bert_chinese"),
        ("xlnet_mid", "xlnet/mid", "xlnet_mid"),
        ("albert_tiny", "albert/albert_tiny", "bert_chinese"),
        ("albert_xxlarge", "albert/xxlarge", "bert_chinese"),
    )
}

# CLUE data set -> the cmrcx tasks trained on it (both versions where 1.0 and 1.1 differ).
TASKS = {
    "afqmc": ("clue_afqmc",),
    "tnews": ("clue_tnews11", "clue_tnews10"),
    "iflytek": ("clue_iflytek",),
    "ocnli": ("clue_ocnli",),
    "cmnli": ("clue_cmnli",),
    "cluewsc2020": ("clue_cluewsc11", "clue_cluewsc10"),
    "csl": ("clue_csl",),
    "cmrc2018": ("clue_cmrc2018",),
    "chid": ("clue_chid11", "clue_chid10"),
    "c3": ("clue_c311", "clue_c310"),
}


CLASSIFICATION_RUN = "runs/clue_finetune.gin"
MRC_RUN = "runs/clue_mrc_finetune.gin"
_MRC_SCRIPTS = "CLUE's baselines/models_pytorch/mrc_pytorch/"
# MRC data set -> the generated lines Table 7 does not give (CLUE's run scripts).
MRC_SCRIPT_SETTINGS = {
    "cmrc2018": f"""\
# Not in Table 7: {_MRC_SCRIPTS}run_mrc_cmrc2018.sh @e9fbfd2
# (--warmup_rate=0.1) and preprocess/cmrc2018_preprocess.py @5c44cc2 (json2features:
# windows over the passage with doc_stride 128, the question cut to 64 tokens).
RunConfig.warmup_fraction = 0.1
RunConfig.doc_stride = 128
# Not RunConfig fields: the question's 64-token cap (max_query_length, above) and run_mrc.py
# @5c44cc2's decoding, answers of at most 50 tokens (max_ans_length) from the 20 best starts
# and ends (n_best), are cmrcx.benchmarks.clue.cmrc2018_windows' MAX_QUERY_TOKENS,
# MAX_ANSWER_TOKENS and N_BEST.
""",
    "chid": f"""\
# Not in Table 7: {_MRC_SCRIPTS}run_mrc_chid.sh @65dae35
# (--warmup_proportion=0.06).
RunConfig.warmup_fraction = 0.06
""",
    "c3": f"""\
# Not in Table 7: {_MRC_SCRIPTS}run_mrc_c3.sh @5c44cc2
# (--warmup_proportion=0.05, over run_c3.py's default 0.1). Its batch of 24 is 4 accumulated
# micro-batches of 6 (--gradient_accumulation_steps=4): RunConfig.grad_accum_steps = 4 does the
# same where memory needs it.
RunConfig.warmup_fraction = 0.05
""",
}


# Model selection (RunConfig.select_best), as CLUE's scripts do: evaluate on dev, keep the
# best model. data set -> the gin lines (every other data set: CLASSIFIER_SELECTION).
_SELECT = """\
# Model selection: the checkpoint of the best validation {metric}. The CLUE paper (section 6,
# "Fine-tuning"): "We also use early stopping to select the best checkpoint".
{source}RunConfig.select_best = "{metric}"
{extra}"""
CLASSIFIER_SELECTION = _SELECT.format(
    metric="accuracy",
    source="""\
# CLUE's classifier_pytorch/run_classifier.py @0059793 evaluates and saves every epoch
# (run_classifier_afqmc.sh: logging_steps = save_steps = 2146 = 34,334 pairs / batch 16);
# the checkpoint is picked by its dev accuracy.
""",
    extra="",
)
SELECTION = {
    "cmrc2018": _SELECT.format(
        metric="AVERAGE",
        source=f"""\
# {_MRC_SCRIPTS}run_mrc.py @5c44cc2 evaluates every
# half epoch (eval_epochs 0.5) and keeps the model of the best EM + F1, the order of the
# official AVERAGE = (EM + F1) / 2.
""",
        extra="RunConfig.eval_every_epochs = 0.5\n",
    ),
    "chid": _SELECT.format(
        metric="accuracy",
        source=f"""\
# {_MRC_SCRIPTS}run_multichoice_mrc.py @5c44cc2
# evaluates every epoch and keeps the model of the best accuracy.
""",
        extra="",
    ),
    "c3": _SELECT.format(
        metric="accuracy",
        source=f"""\
# {_MRC_SCRIPTS}run_c3.py @0964517 evaluates every
# epoch and keeps the model of the best accuracy (of equal ones its `>=` keeps the latest,
# cmrcx the earliest).
""",
        extra="",
    ),
}


def gin_text(
    task: str,
    model: str,
    batch: int,
    length: int,
    epochs: int,
    lr: str,
    cell: str,
    run_file: str = CLASSIFICATION_RUN,
    script_settings: str = "",
) -> str:
    paper_name, model_gin, vocabulary_name = MODELS[model]
    return f"""# CLUE {task}, {paper_name}: a cell of the paper's Table 2; settings from {cell}.
# Written by tools/make_clue_gin.py (edit the table there, not this file).
# PRETRAINED is a cmrcx export of the released checkpoint (python -m cmrcx.convert).
# python -m cmrcx.train --gin_file={task}_{model}.gin --gin.MODEL_DIR="'runs/{task}'" \\
#   --gin.DATA_DIR="'DIR'" --gin.PRETRAINED="'EXPORT'"
include '{run_file}'
include 'models/{model_gin}.gin'
include 'partitioning/data.gin'

RunConfig.task = "{task}"
RunConfig.vocabulary_name = "{vocabulary_name}"
RunConfig.paper_model = "{paper_name}"  # cmrcx.eval --mixture=clue prints its Table 2 row
RunConfig.require_pretrained = True
# {cell}: batch {batch}, max length {length}, {epochs} epochs, learning rate {lr}.
RunConfig.batch_size = {batch}
RunConfig.max_length = {length}
RunConfig.num_epochs = {float(epochs)}
RunConfig.learning_rate = {lr}
{script_settings}"""


def generated_files() -> dict[pathlib.Path, str]:
    files = {}
    for dataset, rows in TABLE_7.items():
        covered = [m for models, *_ in rows for m in models]
        assert sorted(covered) == sorted(MODELS), f"{dataset}: Table 7 rows cover {covered}"
        run_file = MRC_RUN if dataset in MRC_SCRIPT_SETTINGS else CLASSIFICATION_RUN
        settings = MRC_SCRIPT_SETTINGS.get(dataset, "")
        for models, batch, length, epochs, lr, cell in rows:
            for model in models:
                for task in TASKS[dataset]:
                    text = gin_text(
                        task, model, batch, length, epochs, lr, cell, run_file, settings
                    )
                    text += SELECTION.get(dataset, CLASSIFIER_SELECTION)
                    files[GIN_DIR / f"{task}_{model}.gin"] = text
    return files


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    stale = []
    for path, text in generated_files().items():
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"out of date (run tools/make_clue_gin.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
