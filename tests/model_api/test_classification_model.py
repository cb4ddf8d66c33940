"""The CLUE classifier against transformers' BertForSequenceClassification (what CLUE's
PyTorch baseline fine-tunes): same logits and loss from the same weights."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cmrcx.model_api.classification import ClassificationModel  # noqa: E402
from cmrcx.models import registry  # noqa: E402
from cmrcx.weights import exports  # noqa: E402
from tests.weights.hf_references import run_convert, save_hf, token_batch  # noqa: E402
from tests.weights.test_bert_conversion import SMALL, reference_model  # noqa: E402


def test_logits_and_loss_match_bert_for_sequence_classification(tmp_path):
    geometry = {**SMALL, "num_labels": 3}
    reference = reference_model(geometry, kind="BertForSequenceClassification")
    with torch.no_grad():
        reference.classifier.weight.normal_(0.0, 2.0)  # logits of order 1
    save_hf(reference, tmp_path / "hf", safetensors=True)
    run_convert(tmp_path / "hf", tmp_path / "export")  # the encoder and its pooler
    config = exports.read_model_config(str(tmp_path / "export"))
    classifier = reference.classifier
    params = {
        "bert": exports.load_params(str(tmp_path / "export"), None)["bert"],
        "classifier": {
            "kernel": classifier.weight.detach().numpy().T,
            "bias": classifier.bias.detach().numpy(),
        },
    }
    ids, types, mask = token_batch(geometry["vocab_size"], length=24)
    labels = np.array([0, 2, 1])
    network = registry.network(config, "classification", num_classes=3)
    model = ClassificationModel(network, max_length=24)
    batch = {
        "input_ids": ids, "token_type_ids": types, "input_mask": mask, "label": labels,
        "example_mask": np.ones(3, np.int32),
    }  # fmt: skip
    with torch.no_grad():
        want = reference(
            input_ids=torch.tensor(ids),
            token_type_ids=torch.tensor(types),
            attention_mask=torch.tensor(mask),
            labels=torch.tensor(labels),
        )
    logits = np.asarray(model.score_batch(params, batch))
    assert np.abs(want.logits.numpy()).max() > 0.1  # not a vacuous comparison
    np.testing.assert_allclose(logits, want.logits.numpy(), atol=1e-5, rtol=0)
    loss_sum, metrics = model.loss_fn(params, batch, None)
    assert float(metrics["examples"]) == 3
    np.testing.assert_allclose(float(loss_sum) / 3, float(want.loss), atol=1e-5, rtol=0)
    # A padding row (example_mask 0) adds nothing.
    padded = {**batch, "example_mask": np.array([1, 1, 0], np.int32)}
    loss_two, metrics = model.loss_fn(params, padded, None)
    assert float(metrics["examples"]) == 2 and float(loss_two) < float(loss_sum)
