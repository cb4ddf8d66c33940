"""Span extraction (CMRC 2018) against transformers' BertForQuestionAnswering, which
computes the CLUE PyTorch baseline's head and loss: same logits and loss from the same
weights; out-of-window positions dropped as the baseline drops them; the head trains."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax.linen import meta

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cmrcx.model_api.span import SpanExtractionModel  # noqa: E402
from cmrcx.models import registry  # noqa: E402
from cmrcx.weights import bert as bert_weights  # noqa: E402
from tests.models.test_model import TINY  # noqa: E402
from tests.weights.hf_references import save_hf, token_batch  # noqa: E402
from tests.weights.test_bert_conversion import SMALL, reference_model  # noqa: E402

LENGTH = 24


def converted_params(reference, head: str, directory):
    """(config, params) of a transformers task model: the encoder through cmrcx's
    converter (which drops the task head), the head's Linear `head` copied by hand."""
    save_hf(reference, directory, safetensors=True)
    release = bert_weights.read_dir(str(directory))
    assert release.dropped == [f"{head}.bias", f"{head}.weight"]
    layer = getattr(reference, head)
    params = {
        "bert": release.params,
        head: {"kernel": layer.weight.detach().numpy().T, "bias": layer.bias.detach().numpy()},
    }
    return release.config, params


@pytest.fixture(scope="module")
def reference_and_params(tmp_path_factory):
    reference = reference_model(SMALL, kind="BertForQuestionAnswering")
    with torch.no_grad():
        reference.qa_outputs.weight.normal_(0.0, 2.0)  # logits of order 1
    config, params = converted_params(reference, "qa_outputs", tmp_path_factory.mktemp("hf"))
    model = SpanExtractionModel(registry.network(config, "span"), max_length=LENGTH)
    return reference, jitted(model), params


def jitted(model):
    """The model with score_batch and loss_fn jitted: each compiles once for the module."""
    model.score_batch = jax.jit(model.score_batch)
    model.loss_fn = jax.jit(model.loss_fn)
    return model


def span_batch(start, end, example_mask=(1, 1, 1)):
    ids, types, mask = token_batch(SMALL["vocab_size"], length=LENGTH)
    return {
        "input_ids": ids, "token_type_ids": types, "input_mask": mask,
        "start_position": np.array(start), "end_position": np.array(end),
        "example_mask": np.array(example_mask, np.int32),
    }  # fmt: skip


def reference_outputs(reference, batch):
    with torch.no_grad():
        return reference(
            input_ids=torch.tensor(batch["input_ids"]),
            token_type_ids=torch.tensor(batch["token_type_ids"]),
            attention_mask=torch.tensor(batch["input_mask"]),
            start_positions=torch.tensor(batch["start_position"]),
            end_positions=torch.tensor(batch["end_position"]),
        )


def test_logits_and_loss_match_bert_for_question_answering(reference_and_params):
    reference, model, params = reference_and_params
    batch = span_batch(start=[3, 12, 0], end=[5, 16, 0])  # row 2: no answer, [CLS]
    want = reference_outputs(reference, batch)
    want_logits = np.stack([want.start_logits.numpy(), want.end_logits.numpy()], axis=1)
    logits = np.asarray(model.score_batch(params, batch))
    assert logits.shape == (3, 2, LENGTH) and logits.dtype == np.float32
    assert np.abs(want_logits).max() > 0.1  # not a vacuous comparison
    np.testing.assert_allclose(logits, want_logits, atol=1e-5, rtol=0)
    loss_sum, metrics = model.loss_fn(params, batch, None)
    assert float(metrics["examples"]) == 3
    np.testing.assert_allclose(float(loss_sum) / 3, float(want.loss), atol=1e-5, rtol=0)
    # A padding row (example_mask 0) adds nothing.
    loss_two, metrics = model.loss_fn(params, {**batch, "example_mask": np.array([1, 1, 0])}, None)
    assert float(metrics["examples"]) == 2 and float(loss_two) < float(loss_sum)


def test_out_of_window_positions_are_clamped_and_dropped_as_the_baseline(reference_and_params):
    """Past the window: the term is dropped (ignore_index=length); negative: [CLS]."""
    reference, model, params = reference_and_params
    batch = span_batch(start=[LENGTH + 5, -3, 2], end=[4, 7, LENGTH])
    logits = torch.tensor(np.asarray(model.score_batch(params, batch)))
    terms = [
        torch.nn.functional.cross_entropy(
            logits[:, i], torch.tensor(batch[key]).clamp(0, LENGTH),
            ignore_index=LENGTH, reduction="none",
        )
        for i, key in enumerate(("start_position", "end_position"))
    ]  # fmt: skip
    want = float(((terms[0] + terms[1]) / 2).sum())
    assert float(terms[0][0]) == 0 and float(terms[1][2]) == 0  # the dropped terms
    loss_sum, _ = model.loss_fn(params, batch, None)
    np.testing.assert_allclose(float(loss_sum), want, rtol=1e-6)


def test_correct_counts_rows_with_both_ends_right(reference_and_params):
    _, model, params = reference_and_params
    logits = np.asarray(model.score_batch(params, span_batch([0, 0, 0], [0, 0, 0])))
    best = logits.argmax(-1)  # [3, 2]
    wrong_end = (best[1, 1] + 1) % LENGTH
    batch = span_batch(start=best[:, 0], end=[best[0, 1], wrong_end, best[2, 1]])
    _, metrics = model.loss_fn(params, {**batch, "example_mask": np.array([1, 1, 0])}, None)
    assert float(metrics["correct"]) == 1  # row 0; row 1 has the end wrong; row 2 is padding


def test_init_from_example_batch_shapes():
    """State from shapes, as the trainer builds it: boxed head, float32 [b, 2, length]."""
    model = SpanExtractionModel(registry.network(TINY, "span"), max_length=16)
    batch = model.example_batch(2)
    boxed = jax.eval_shape(model.init, jax.random.key(0), batch)["params"]
    assert boxed["qa_outputs"]["kernel"].names == ("embed", "classes")
    params = meta.unbox(boxed)
    assert params["qa_outputs"]["kernel"].shape == (TINY.hidden_size, 2)
    assert params["qa_outputs"]["bias"].shape == (2,)
    scores = jax.eval_shape(model.score_batch, params, batch)
    assert scores.shape == (2, 2, 16) and scores.dtype == np.float32


def test_a_gradient_step_moves_the_head(reference_and_params):
    _, model, params = reference_and_params
    batch = span_batch(start=[3, 12, 0], end=[5, 16, 0])
    loss_and_grads = jax.jit(jax.value_and_grad(lambda p: model.loss_fn(p, batch, None)[0]))
    loss, grads = loss_and_grads(params)
    assert np.abs(grads["qa_outputs"]["kernel"]).max() > 0
    assert not np.any(grads["bert"]["pooler"]["kernel"])  # the head reads no pooled output
    stepped = jax.tree.map(lambda p, g: p - 1e-2 * g, params, grads)
    assert float(loss_and_grads(stepped)[0]) < float(loss) - 1e-3
