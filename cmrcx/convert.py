"""`python -m cmrcx.convert --from DIR --to OUT`: a pretrained BERT release -> cmrcx export.

DIR is a HuggingFace directory (config.json, model.safetensors or
pytorch_model.bin, vocab.txt) or a Google TF release (bert_config.json,
bert_model.ckpt.*, vocab.txt): BERT, BERT-wwm(-ext), RoBERTa-wwm-ext(-large)
(BERT architecture) and BERT-multilingual. OUT gets params/ (the encoder),
model_config.json and vocab.txt; fine-tune from it with --gin.PRETRAINED="'OUT'"
(task heads start fresh). Tensors that do not fit are an error listing them; the
one exception is a release without a pooler (saved from BertForMaskedLM), whose
pooler starts fresh and is reported.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from cmrcx.pretrained import PretrainedFormatError, describe, read_pretrained_dir


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--from", dest="source", required=True, help="pretrained directory")
    parser.add_argument("--to", dest="out", required=True, help="cmrcx export directory")
    args = parser.parse_args(argv)
    from cmrcx import bert_weights, checkpoints

    try:
        release = read_pretrained_dir(args.source)
        vocab = os.path.join(args.source, "vocab.txt")
        if not os.path.isfile(vocab):
            raise PretrainedFormatError(f"{args.source}: no vocab.txt")
    except (PretrainedFormatError, bert_weights.WeightError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    extra = {"converted_from": os.path.abspath(args.source), "source_format": release.source}
    if release.fresh:
        extra["initialised_fresh"] = release.fresh
    checkpoints.export_params(args.out, {"bert": release.params}, release.config, extra=extra)
    shutil.copyfile(vocab, os.path.join(args.out, "vocab.txt"))
    print(f"read {release.source} from {args.source}: {describe(release.config)}")
    dropped, fresh = release.dropped, release.fresh
    if dropped:
        shown = ", ".join(dropped[:6]) + (" ..." if len(dropped) > 6 else "")
        print(f"dropped {len(dropped)} pretraining-only tensors (heads, optimizer): {shown}")
    if fresh:
        print(
            f"initialised fresh ({len(fresh)}): {', '.join(fresh)} "
            "(not in the checkpoint; BertForMaskedLM saves none)"
        )
    print(f"wrote {args.out} (params/, model_config.json, vocab.txt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
