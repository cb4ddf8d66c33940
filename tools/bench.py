"""Benchmarks: cmrcx's BERT cloze and classification steps against Hugging Face's
PyTorch BERT, T5 / LongLM sampling and training and LOT OutGen generation
(`cmrcx.generate`'s path) against transformers' T5, the input pipeline, and the train
step's compiled memory.

    .venv/bin/python tools/bench.py train [--attn eager] [--json]   # batch 2 x 512
    .venv/bin/python tools/bench.py eval [--json]                   # batch 8 x 512
    .venv/bin/python tools/bench.py classify [--classes 3] [--json] # batch 32 x 128
    .venv/bin/python tools/bench.py input [--passages 10000] [--json]
    .venv/bin/python tools/bench.py input --all [--json]            # every task's reads vs H100
    .venv/bin/python tools/bench.py memory [--json]                 # batch 24 x 512
    .venv/bin/python tools/bench.py generate [--batch 1,8] [--json] # LongLM-small, 512 -> 64
    .venv/bin/python tools/bench.py train_t5 [--batch 4] [--json]   # LongLM-small, 512 / 128
    .venv/bin/python tools/bench.py outgen [--batch 1,8] [--json]   # OutGen, 242 outlines, 128 new
    .venv/bin/python tools/bench.py memory --models longlm_large --batch 12 --seq 512
    .venv/bin/python tools/bench.py firststep --task clue_chid11 --scale 1.0  # time to step 1
    .venv/bin/python tools/bench.py evalpath --task clue_c311 --scale 1.0     # eval vs forward
    .venv/bin/python tools/bench.py layerops                                  # a BERT layer's ops
    .venv/bin/python tools/bench.py refault   # touching freed memory again, by the pause
    .venv/bin/python tools/bench.py plan --gin_file=cmrc2019_bert.gin --devices 8 [--json]

The code is in tools/benchkit/: harness.py (child processes, pinning, alternation,
medians, machine info), steps.py (timing inside a child), flops.py, one module per
model family (bert.py, t5.py, outgen.py; registered in families.py), input_pipeline.py
(+ input_feed.py: the training loop's reads),
firststep.py (+ synthetic.py: official-format files), layerops.py, memory.py,
plan.py (collectives and memory on simulated devices), refault.py and cli.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchkit, also under -P

from benchkit.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
