"""`python -m cmrcx.export --model_dir=MODEL_DIR --out DIR [--format F]`

The run's saved configuration (MODEL_DIR/run_config.json) says what to export; gin files
and `--gin.KEY=VALUE` override it, and `--gin_file=NAME.gin --gin.MODEL_DIR=...` works too.

--format orbax (default): an inference checkpoint, DIR/params (orbax, parameters
only, no optimizer state), DIR/model_config.json and the vocabulary under the name of
the model family's (`cmrcx.models.registry`: DIR/vocab.txt, or DIR/spiece.model for
T5/LongLM). It loads with `--gin.PRETRAINED="'DIR'"` (its
encoder), `cmrcx.weights.exports.load_params`, or (T5) `cmrcx.generate`.
--format hf: a HuggingFace directory that `transformers` loads, to take results to
other tools (the family's `cmrcx.weights.<family>.write_hf_dir`): BERT runs as a
BertModel (config.json, model.safetensors, vocab.txt; the task head is not part of
BertModel and is left out), T5 runs as a T5ForConditionalGeneration (with the
tokenizer files next to the vocabulary), ALBERT as an AlbertModel (brightmart's albert_zh
layout, which transformers has no class for, as the BertModel computing the same).
--step best|latest|N picks a checkpoint (default: the selected one, the best validation
score, of a run with RunConfig.select_best; else the latest).
"""

from __future__ import annotations

import os
import shutil

from cmrcx.cli import launch, saved_run
from cmrcx.common import paths
from cmrcx.models import registry
from cmrcx.weights import exports

FLAGS = (
    ("--out", {"required": True, "help": "export directory"}),
    (
        "--step",
        {
            "default": None,
            "help": "checkpoint: best, latest or a step number (default: best for a run "
            "with RunConfig.select_best, else latest)",
        },
    ),
    ("--format", {"choices": ["orbax", "hf"], "default": "orbax", "help": "export format"}),
)


def main(argv) -> None:
    args, run = saved_run.start(argv, __doc__, FLAGS)
    import jax

    from cmrcx.training.runner import Runner, require_trained

    require_trained(run.model_dir)
    runner = Runner(run, for_training=False)
    step, state = runner.restore(args.step)
    out = paths.resolve_path(args.out)
    family = registry.family_of(run.model)
    if args.format == "hf":
        params = jax.device_get(state.params[runner.model.encoder_name])
        registry.weights(family).write_hf_dir(out, params, run.model, run.vocab_file)
    else:
        extra = {"step": step, "task": runner.train_task, **exports.family_key(run.model)}
        exports.export_params(out, state.params, run.model, extra=extra)
        # vocab.txt (WordPiece) or spiece.model (SentencePiece), under the name readers expect.
        shutil.copyfile(run.vocab_file, os.path.join(out, family.vocab_file))
    print(f"exported step {step} to {out} ({args.format})")


if __name__ == "__main__":
    launch.main_guard(main)
