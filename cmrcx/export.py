"""`python -m cmrcx.export --gin_file=NAME.gin --gin.MODEL_DIR=... --out DIR [--format F]`

--format orbax (default): an inference checkpoint, DIR/params (orbax, parameters
only, no optimizer state), DIR/model_config.json and DIR/vocab.txt. It loads
with `--gin.PRETRAINED="'DIR'"` (its encoder) or `cmrcx.training.checkpoints.load_params`.
--format hf: the fine-tuned encoder as a HuggingFace BertModel directory
(config.json, model.safetensors, vocab.txt) that `transformers` loads, to take
results to other tools (the task head is not part of BertModel and is left out).
--step N picks a checkpoint (default: the latest).
"""

from __future__ import annotations

import shutil

from cmrcx import launch

FLAGS = (
    ("--out", {"required": True, "help": "export directory"}),
    ("--step", {"type": int, "default": None, "help": "checkpoint step (default: latest)"}),
    ("--format", {"choices": ["orbax", "hf"], "default": "orbax", "help": "export format"}),
)


def main(argv) -> None:
    args, run = launch.start(argv, __doc__, FLAGS)
    import jax

    from cmrcx.training import checkpoints
    from cmrcx.training.runner import Runner

    runner = Runner(run, for_training=False)
    step, state = runner.restore(args.step)
    out = launch.resolve_path(args.out)
    if args.format == "hf":
        from cmrcx.pretrained import write_hf_dir

        write_hf_dir(
            out, jax.device_get(state.params[runner.model.encoder_name]), run.model, run.vocab_file
        )
    else:
        extra = {"step": step, "task": runner.train_task}
        checkpoints.export_params(out, state.params, run.model, extra=extra)
        shutil.copyfile(run.vocab_file, f"{out}/vocab.txt")
    print(f"exported step {step} to {out} ({args.format})")


if __name__ == "__main__":
    launch.main_guard(main)
