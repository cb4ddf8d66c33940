"""`python -m cmrcx.convert --from DIR --to OUT [--verify]`: a pretrained release -> cmrcx export.

BERT family. DIR is a HuggingFace directory (config.json, model.safetensors or
pytorch_model.bin, vocab.txt) or a Google TF release (bert_config.json,
bert_model.ckpt.*, vocab.txt): BERT, BERT-wwm(-ext), RoBERTa-wwm-ext(-large)
(BERT architecture), BERT-multilingual, ERNIE 1.0 (nghuyong/ernie-1.0-base-zh:
model_type "ernie", ReLU) and CLUE's RoBERTa-large (clue/roberta_chinese_large:
model_type "roberta" but BERT architecture; or brightmart's TF release with
bert_config_large.json). The paper's Table 2 BERT-shaped models are all of these
(tests/weights/test_table2_models.py). OUT gets params/ (the encoder),
model_config.json and vocab.txt; fine-tune from it with --gin.PRETRAINED="'OUT'"
(task heads start fresh). Tensors that do not fit are an error listing them; the
one exception is a release without a pooler (saved from BertForMaskedLM), whose
pooler starts fresh and is reported.

T5 family (config.json model_type "t5" or "mt5"): LongLM, T5 v1.0/v1.1, mT5.
OUT gets params/ (the whole encoder-decoder, under "t5"), model_config.json
(the T5Config, "family": "t5") and the tokenizer files DIR has (spiece.model,
tokenizer JSONs). Every tensor must fit; copies of the shared embedding are
dropped and reported.

--verify then runs the source model in PyTorch (transformers, built from DIR)
and the converted Flax model on random inputs with padding, prints the largest
absolute differences (BERT: final hidden states; T5: encoder states and
teacher-forced logits) and exits 1 when one exceeds --verify_atol.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

import numpy as np

from cmrcx.weights import exports
from cmrcx.weights import hf_io as pretrained
from cmrcx.weights.hf_io import PretrainedFormatError, describe, read_pretrained_dir

VERIFY_SEED = 0  # the random verification inputs are the same on every run


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
    from cmrcx.weights import bert as bert_weights

    family = "t5" if pretrained.hf_model_type(args.source) in pretrained.T5_MODEL_TYPES else "bert"
    if args.verify:
        try:
            _import_reference()
        except ImportError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    try:
        if family == "t5":
            _convert_t5(args.source, args.out)
        else:
            _convert_bert(args.source, args.out)
    except (PretrainedFormatError, bert_weights.WeightError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.verify:
        verify = _verify_t5 if family == "t5" else _verify_bert
        return 0 if _report(verify(args.source, args.out), args.verify_atol) else 1
    return 0


def _convert_bert(source: str, out: str) -> None:

    release = read_pretrained_dir(source)
    vocab = os.path.join(source, "vocab.txt")
    if not os.path.isfile(vocab):
        raise PretrainedFormatError(f"{source}: no vocab.txt")
    extra = {"converted_from": os.path.abspath(source), "source_format": release.source}
    if release.model_type:
        extra["source_model_type"] = release.model_type
    if release.fresh:
        extra["initialised_fresh"] = release.fresh
    exports.export_params(out, {"bert": release.params}, release.config, extra=extra)
    shutil.copyfile(vocab, os.path.join(out, "vocab.txt"))
    print(f"read {release.source} from {source}: {describe(release.config)}")
    if release.model_type == "roberta":
        print("config.json model_type 'roberta' with bert.* tensors: converted as BERT")
    dropped, fresh = release.dropped, release.fresh
    if dropped:
        shown = ", ".join(dropped[:6]) + (" ..." if len(dropped) > 6 else "")
        print(f"dropped {len(dropped)} tensors outside the encoder (heads, optimizer): {shown}")
    if fresh:
        print(
            f"initialised fresh ({len(fresh)}): {', '.join(fresh)} "
            "(not in the checkpoint; BertForMaskedLM saves none)"
        )
    print(f"wrote {out} (params/, model_config.json, vocab.txt)")


def _convert_t5(source: str, out: str) -> None:

    release = pretrained.read_t5_dir(source)
    extra = {
        "family": "t5",
        "converted_from": os.path.abspath(source),
        "source_format": release.source,
        "source_model_type": release.model_type,
    }
    exports.export_params(out, {"t5": release.params}, release.config, extra=extra)
    copied = pretrained.copy_t5_tokenizer_files(source, out)
    print(f"read {release.source} from {source}: {pretrained.describe_t5(release.config)}")
    if release.dropped:
        print(
            f"dropped {len(release.dropped)} copies of shared.weight and unused tensors: "
            + ", ".join(release.dropped)
        )
    if not copied:
        print(f"note: {source} has no tokenizer files ({', '.join(pretrained.T5_TOKENIZER_FILES)})")
    print(f"wrote {out} (params/, model_config.json{''.join(', ' + name for name in copied)})")


# ---------------------------------------------------------------------------
# --verify: the source model in PyTorch against the converted Flax model


def _import_reference():
    """(torch, transformers), or ImportError saying what to install."""
    try:
        import torch
        import transformers
    except ImportError as error:
        raise ImportError(
            "--verify runs the source model in PyTorch: install torch and transformers "
            "(pip install 'cmrcx[convert]')"
        ) from error
    return torch, transformers


def _padded_batch(rng: np.random.Generator, vocab_size: int, length: int):
    """ids int [3, length] and a mask with padding: none, the last 7, the last 1."""
    ids = rng.integers(0, vocab_size, [3, length])
    mask = np.ones_like(ids)
    mask[1, length - 7 :] = 0
    mask[2, length - 1 :] = 0
    return ids, mask


def _verify_bert(source: str, export_dir: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """[("hidden states", reference, converted)] on 3 random padded inputs of 32 tokens."""
    from cmrcx.models.bert import BertEncoder

    torch, _ = _import_reference()
    config = exports.read_model_config(export_dir)
    params = exports.load_params(export_dir, None)["bert"]
    length = min(32, config.max_position_embeddings)
    ids, mask = _padded_batch(np.random.default_rng(VERIFY_SEED), config.vocab_size, length)
    types = np.zeros_like(ids)
    types[:, length // 2 :] = min(1, config.type_vocab_size - 1)
    with torch.no_grad():
        want = _torch_bert(source)(
            input_ids=torch.tensor(ids),
            token_type_ids=torch.tensor(types),
            attention_mask=torch.tensor(mask),
        ).last_hidden_state.numpy()
    got, _ = BertEncoder(config).apply({"params": params}, ids, types, mask)
    return [("hidden states", want, np.asarray(got))]


def _torch_bert(source: str):
    """transformers' BertModel (ErnieModel) from a HuggingFace directory or a Google TF release.

    model_type "roberta" is read by BertModel too: `convert` takes only BERT-architecture
    checkpoints of that type (see `pretrained._check_roberta`). transformers 5 reads no
    TF checkpoints: the TF tensors are loaded into a BertModel built from the TF config
    under the names `bert_weights` maps them to (so --verify then checks the model,
    not the TF name mapping).
    """
    torch, transformers = _import_reference()
    if os.path.isfile(os.path.join(source, "config.json")):
        if pretrained.hf_model_type(source) == "ernie":
            model_class = transformers.ErnieModel
        else:
            model_class = transformers.BertModel
        return model_class.from_pretrained(source, dtype=torch.float32).eval()
    from cmrcx.weights import bert as bert_weights

    config = transformers.BertConfig.from_json_file(pretrained.tf_config_path(source))
    model = transformers.BertModel(config).eval()
    tensors, _ = bert_weights.hf_tensors_from_tf(pretrained._read_tf_checkpoint(source))
    state = {name: torch.tensor(np.asarray(value)) for name, value in tensors.items()}
    model.load_state_dict(state, strict=False)
    return model


def _verify_t5(source: str, export_dir: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Encoder states and teacher-forced logits on 3 random padded (source, target) pairs."""
    import jax

    from cmrcx.models.t5 import T5ForConditionalGeneration

    torch, transformers = _import_reference()
    config, params = pretrained.read_t5_export(export_dir)
    rng = np.random.default_rng(VERIFY_SEED)
    ids, mask = _padded_batch(rng, config.vocab_size, 24)
    decoder_ids, decoder_mask = _padded_batch(rng, config.vocab_size, 16)
    if pretrained.hf_model_type(source) == "mt5":
        reference_class = transformers.MT5ForConditionalGeneration
    else:
        reference_class = transformers.T5ForConditionalGeneration
    reference = reference_class.from_pretrained(source, dtype=torch.float32).eval()
    with torch.no_grad():
        out = reference(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            decoder_input_ids=torch.tensor(decoder_ids),
            decoder_attention_mask=torch.tensor(decoder_mask),
        )
    model = T5ForConditionalGeneration(config)

    def encode_and_decode(module):
        encoded = module.encode(ids, mask)
        return encoded, module.decode(decoder_ids, encoded, mask, decoder_mask)

    encoded, logits = jax.jit(lambda p: model.apply({"params": p}, method=encode_and_decode))(
        params
    )
    return [
        ("encoder states", out.encoder_last_hidden_state.numpy(), np.asarray(encoded)),
        ("logits", out.logits.numpy(), np.asarray(logits)),
    ]


def _report(comparisons, atol: float) -> bool:
    """Prints one line per compared output; True when every difference is within atol."""
    print("verify: transformers (PyTorch) vs cmrcx (Flax), 3 random inputs with padding")
    ok = True
    for name, want, got in comparisons:
        diff = float(np.max(np.abs(np.asarray(got, np.float64) - want)))
        scale = float(np.max(np.abs(want)))
        within = diff <= atol
        ok &= within
        print(
            f"  {name}: max |diff| {diff:.3g} (reference max |value| {scale:.3g})"
            f"{'' if within else f'  > {atol:g}'}"
        )
    print(f"verify: {'OK' if ok else 'FAILED'} (--verify_atol {atol:g})")
    return ok


if __name__ == "__main__":
    sys.exit(main())
