"""`python -m cmrcx.convert --from DIR --to OUT [--verify]`: a pretrained release -> cmrcx export.

BERT family. DIR is a HuggingFace directory (config.json, model.safetensors or
pytorch_model.bin, vocab.txt), a Google TF release (bert_config.json, bert_model.ckpt.*,
vocab.txt) or a pytorch_pretrained_bert one (bert_config.json, pytorch_model.bin,
vocab.txt: what the CMRC 2019 authors' script reads and writes): BERT, BERT-wwm(-ext),
RoBERTa-wwm-ext(-large) (BERT architecture), BERT-multilingual, ERNIE 1.0
(nghuyong/ernie-1.0-base-zh: model_type "ernie", ReLU) and CLUE's RoBERTa-large
(clue/roberta_chinese_large: model_type "roberta" but BERT architecture; or brightmart's
TF release with bert_config_large.json). The paper's Table 2 BERT-shaped models are all
of these (tests/weights/test_table2_models.py). OUT gets params/ (the encoder),
model_config.json and vocab.txt; fine-tune from it with --gin.PRETRAINED="'OUT'" (task
heads start fresh). Tensors that do not fit are an error listing them; the one exception
is a release without a pooler (saved from BertForMaskedLM), whose pooler starts fresh
and is reported.

T5 family (config.json model_type "t5" or "mt5"): LongLM, T5 v1.0/v1.1, mT5.
OUT gets params/ (the whole encoder-decoder, under "t5"), model_config.json
(the T5Config, "family": "t5") and the tokenizer files DIR has (spiece.model,
tokenizer JSONs). Every tensor must fit; copies of the shared embedding are
dropped and reported.

XLNet family (config.json model_type "xlnet"): Chinese XLNet (hfl/chinese-xlnet-mid) and
any XLNetModel / XLNetLMHeadModel / XLNetFor* directory. OUT gets params/ (the encoder and
its sequence summary, under "xlnet"; a summary starts fresh when the source has none),
model_config.json and spiece.model; mask_emb, the LM head and task layers are dropped and
reported.

ALBERT family (config.json model_type "albert", or a TF release with an
albert_config*.json): transformers' AlbertModel / AlbertForMaskedLM directories, Google's
Chinese ALBERT TF releases (albert_config.json, model.ckpt-best.*, vocab_chinese.txt, which
OUT holds as vocab.txt) and brightmart's albert_zh (albert_config_tiny.json,
albert_model.ckpt.*, vocab.txt; its own variable names and embedding layout). OUT gets
params/ (the encoder, one shared layer, under "albert"), model_config.json and vocab.txt.

GPT-2 family (config.json model_type "gpt2"): uer/gpt2-chinese-cluecorpussmall and any
GPT2LMHeadModel / GPT2Model directory. OUT gets params/ (the LM, head tied to wte, under
"gpt2"), model_config.json and vocab.txt (UER's: BERT's Chinese vocabulary) with the
tokenizer JSON files; a saved copy of the tied head and old causal-mask buffers are
dropped and reported, an untied head is an error.

Which family reads DIR is config.json's `model_type` (`cmrcx.models.registry`: each
family lists its types); without a config.json, the family whose TF release config DIR
holds (`Family.tf_release_configs`), else BERT's (a Google TF release). The family's
weights module (`cmrcx.weights.<family>`) reads it.

--verify then runs the source model in PyTorch (transformers, built from DIR)
and the converted Flax model on random inputs with padding, prints the largest
absolute differences (BERT, ALBERT: final hidden states; T5: encoder states and
teacher-forced logits; XLNet: hidden states on left-padded inputs; GPT-2: logits on
left-padded inputs with position ids from the mask; a TF release runs as
the transformers model its tensors load into) and exits 1 when one exceeds --verify_atol.
"""

from __future__ import annotations

import argparse
import sys

from cmrcx.models import registry
from cmrcx.weights import conversion
from cmrcx.weights.hf_io import PretrainedFormatError
from cmrcx.weights.table import WeightError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--from", dest="source", required=True, help="pretrained directory")
    parser.add_argument("--to", dest="out", required=True, help="cmrcx export directory")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="compare the converted model with the source run by transformers (needs torch)",
    )
    parser.add_argument(
        "--verify_atol",
        type=float,
        default=1e-4,
        help="largest absolute difference --verify accepts (default 1e-4)",
    )
    args = parser.parse_args(argv)
    family = conversion.source_family(args.source)
    weights = registry.weights(family)
    if args.verify:
        try:
            conversion.import_reference()
        except ImportError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if not hasattr(weights, "verify"):  # optional in a family's weights module
            print(f"error: --verify: no reference model for {family.name}", file=sys.stderr)
            return 2
    try:
        conversion.convert(family, args.source, args.out)
    except (PretrainedFormatError, WeightError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.verify:
        comparisons = weights.verify(args.source, args.out)
        return 0 if conversion.report(comparisons, args.verify_atol) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
