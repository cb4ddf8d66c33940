"""The PyTorch side's model pieces the recipes share: the cmrcx encoder written as the
family's transformers checkpoint, a cmrcx dense head copied into a torch Linear, dropout off."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Sequence

import numpy as np

from cmrcx.common.errors import ConfigError
from cmrcx.reproduction.reference_imports import torch_and_transformers


def write_encoder(config, encoder_params: dict, out: str, families: Sequence[str], recipe: str):
    """Writes the encoder to `out` with the family's HF writer; returns (family name, the
    writer module). ConfigError when the recipe (named `recipe`) does not run the family."""
    from cmrcx.models import registry

    family = registry.family_of(config).name
    if family not in families:
        raise ConfigError(f"the {recipe} recipe runs {', '.join(families)}; not {family}")
    writer = importlib.import_module(f"cmrcx.weights.{family}")
    writer.write_hf_dir(out, encoder_params, config, None)
    return family, writer


# A cmrcx head's name in transformers' model where it differs: XLNet's classifiers
# (XLNetForSequenceClassification, XLNetForMultipleChoice) call it logits_proj.
HF_HEADS = {("xlnet", "classifier"): "logits_proj"}


def family_model(config, params: dict, encoder_name: str, out: str, families, recipe: str,
                 classes: dict, head: str = "classifier", **kwargs):  # fmt: skip
    """transformers' model (`classes`: its class name by the written config's model_type)
    holding `params` (the cmrcx tree: encoder + `head`, a Dense loaded into the model's
    attribute of that name), written to `out` by the family's HF writer; every dropout 0.
    An albert_zh ALBERT (written as a BertModel) is made to train as ALBERT
    (`share_as_albert_zh`). kwargs: from_pretrained's (num_labels)."""
    torch, transformers = torch_and_transformers()
    family, writer = write_encoder(config, params[encoder_name], out, families, recipe)
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        model_type = json.load(f)["model_type"]
    transformers.logging.set_verbosity_error()  # no load report (it lists the new head)
    model_class = getattr(transformers, classes[model_type])
    model = model_class.from_pretrained(out, dtype=torch.float32, **kwargs)
    if family == "albert" and model_type == "bert":
        share_as_albert_zh(torch, model.bert, writer, params[encoder_name], config)
    load_dense(torch, getattr(model, HF_HEADS.get((model_type, head), head)), params[head])
    without_dropout(torch, model)
    return model


def share_as_albert_zh(torch, bert, writer, params: dict, config) -> None:
    """The BertModel written for an albert_zh ALBERT made to *train* as ALBERT (as CLUE's
    ALBERT runs, its own transformers/modeling_albert.py): one encoder layer shared by
    every depth, the word embedding factorised into the [vocab, embedding] table and a
    bias-free projection to the hidden size (`cmrcx.weights.albert.bert_tensors` writes
    their product, which computes the same forward but would train otherwise); the
    table's padding row keeps the BertModel's (no gradient, as ALBERT's nn.Embedding)."""
    tensors = dict(writer.hf_tensors(params, config))
    table = torch.nn.Embedding.from_pretrained(
        torch.tensor(tensors["embeddings.word_embeddings.weight"]),
        freeze=False,
        padding_idx=bert.embeddings.word_embeddings.padding_idx,
    )
    projection = torch.nn.Linear(config.embedding_size, config.hidden_size, bias=False)
    with torch.no_grad():
        projection.weight.copy_(torch.tensor(tensors["embeddings.word_embeddings_2.weight"]))
    bert.embeddings.word_embeddings = torch.nn.Sequential(table, projection)
    for depth in range(1, len(bert.encoder.layer)):
        bert.encoder.layer[depth] = bert.encoder.layer[0]


def load_dense(torch, linear, head: dict) -> None:
    """A cmrcx Dense's {"kernel" [in, out], "bias" [out]} into a torch Linear."""
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(np.asarray(head["kernel"]).T))
        linear.bias.copy_(torch.tensor(np.asarray(head["bias"])))


def without_dropout(torch, model) -> None:
    """Every torch Dropout of the model at rate 0."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
