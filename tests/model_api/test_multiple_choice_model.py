"""Multiple choice (C3, ChID) against transformers' BertForMultipleChoice, which computes
the CLUE PyTorch baseline's head and loss: same logits and loss from the same weights;
padded choices are masked out of the softmax (the baseline scores them); the head trains."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax.linen import meta

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cmrcx.model_api.multiple_choice import MASKED_LOGIT, MultipleChoiceModel  # noqa: E402
from cmrcx.models import registry  # noqa: E402
from tests.model_api.test_span_model import converted_params, jitted  # noqa: E402
from tests.models.test_model import TINY  # noqa: E402
from tests.weights.test_bert_conversion import SMALL, reference_model  # noqa: E402

CHOICES, LENGTH = 4, 20


@pytest.fixture(scope="module")
def reference_and_params(tmp_path_factory):
    reference = reference_model(SMALL, kind="BertForMultipleChoice")
    with torch.no_grad():
        reference.classifier.weight.normal_(0.0, 2.0)  # logits of order 1
    config, params = converted_params(reference, "classifier", tmp_path_factory.mktemp("hf"))
    network = registry.network(config, "multiple_choice")
    model = MultipleChoiceModel(network, num_choices=CHOICES, max_length=LENGTH)
    return reference, jitted(model), params


def choice_batch(label=(2, 0), seed=0):
    """Two questions of 4 choices, each `[CLS] context [SEP] choice [SEP]` with padding."""
    rng = np.random.default_rng(seed)
    shape = [2, CHOICES, LENGTH]
    types = np.zeros(shape, np.int32)
    types[..., 12:] = 1
    mask = np.ones(shape, np.int32)
    for row, choice, real in ((0, 1, 15), (1, 0, 18), (1, 3, 13)):
        mask[row, choice, real:] = 0
    return {
        "input_ids": rng.integers(1, SMALL["vocab_size"], shape).astype(np.int32),
        "token_type_ids": types, "input_mask": mask,
        "choice_mask": np.ones([2, CHOICES], np.int32),
        "label": np.array(label, np.int32), "example_mask": np.ones([2], np.int32),
    }  # fmt: skip


def reference_logits(reference, batch):
    with torch.no_grad():
        out = reference(
            input_ids=torch.tensor(batch["input_ids"]),
            token_type_ids=torch.tensor(batch["token_type_ids"]),
            attention_mask=torch.tensor(batch["input_mask"]),
            labels=torch.tensor(batch["label"]).long(),
        )
    return out.logits, out.loss


def test_logits_and_loss_match_bert_for_multiple_choice(reference_and_params):
    reference, model, params = reference_and_params
    batch = choice_batch()
    want_logits, want_loss = reference_logits(reference, batch)
    logits = np.asarray(model.score_batch(params, batch))
    assert logits.shape == (2, CHOICES) and logits.dtype == np.float32
    assert np.abs(want_logits.numpy()).max() > 0.1  # not a vacuous comparison
    np.testing.assert_allclose(logits, want_logits.numpy(), atol=1e-5, rtol=0)
    loss_sum, metrics = model.loss_fn(params, batch, None)
    assert float(metrics["examples"]) == 2
    np.testing.assert_allclose(float(loss_sum) / 2, float(want_loss), atol=1e-5, rtol=0)
    # A padding row (example_mask 0) adds nothing.
    loss_one, metrics = model.loss_fn(params, {**batch, "example_mask": np.array([1, 0])}, None)
    assert float(metrics["examples"]) == 1 and float(loss_one) < float(loss_sum)


def test_softmax_runs_over_real_choices_only(reference_and_params):
    """Masking each row's best choice: it never wins; the loss is CE over the rest."""
    reference, model, params = reference_and_params
    batch = choice_batch()
    raw, _ = reference_logits(reference, batch)
    best = raw.argmax(-1).numpy()
    choice_mask = np.ones([2, CHOICES], np.int32)
    choice_mask[[0, 1], best] = 0
    choice_mask[1, (best[1] + 1) % CHOICES] = 0  # row 1 holds two real choices only
    label = [int(np.flatnonzero(row)[0]) for row in choice_mask]
    masked = {**batch, "choice_mask": choice_mask, "label": np.array(label, np.int32)}

    logits = np.asarray(model.score_batch(params, masked))
    assert np.all(logits[choice_mask == 0] == MASKED_LOGIT)
    np.testing.assert_allclose(logits[choice_mask > 0], raw.numpy()[choice_mask > 0], atol=1e-5)
    assert np.all(choice_mask[[0, 1], logits.argmax(-1)] == 1)  # a padded choice never wins
    want = sum(
        float(torch.nn.functional.cross_entropy(raw[row, real][None], torch.tensor([0])))
        for row, real in enumerate(torch.tensor(choice_mask) > 0)
    )  # label is each row's first real choice
    loss_sum, metrics = model.loss_fn(params, masked, None)
    np.testing.assert_allclose(float(loss_sum), want, atol=1e-5, rtol=0)
    assert float(metrics["correct"]) == float(np.sum(logits.argmax(-1) == label))


def test_padded_choices_without_filler_text_stay_finite(reference_and_params):
    """A padded choice may be all padding (input_mask 0): masked, and nothing is NaN."""
    _, model, params = reference_and_params
    batch = choice_batch()
    batch["input_mask"][0, 3] = 0
    batch["choice_mask"][0, 3] = 0
    logits = np.asarray(model.score_batch(params, batch))
    loss_sum, _ = model.loss_fn(params, batch, None)
    assert logits[0, 3] == MASKED_LOGIT and np.all(np.isfinite(logits))
    assert np.isfinite(float(loss_sum))


def test_init_from_example_batch_shapes():
    """State from shapes, as the trainer builds it: boxed head, float32 [b, choices]."""
    network = registry.network(TINY, "multiple_choice")
    model = MultipleChoiceModel(network, num_choices=3, max_length=16)
    batch = model.example_batch(2)
    assert batch["input_ids"].shape == (2, 3, 16) and batch["choice_mask"].shape == (2, 3)
    boxed = jax.eval_shape(model.init, jax.random.key(0), batch)["params"]
    assert boxed["classifier"]["kernel"].names == ("embed", "classes")
    params = meta.unbox(boxed)
    assert params["classifier"]["kernel"].shape == (TINY.hidden_size, 1)
    assert params["classifier"]["bias"].shape == (1,)
    scores = jax.eval_shape(model.score_batch, params, batch)
    assert scores.shape == (2, 3) and scores.dtype == np.float32


def test_a_gradient_step_moves_the_head(reference_and_params):
    _, model, params = reference_and_params
    batch = choice_batch()
    batch["choice_mask"][1, 3] = 0
    loss_and_grads = jax.jit(jax.value_and_grad(lambda p: model.loss_fn(p, batch, None)[0]))
    loss, grads = loss_and_grads(params)
    assert np.abs(grads["classifier"]["kernel"]).max() > 0
    assert np.abs(grads["bert"]["pooler"]["kernel"]).max() > 0  # the head reads [CLS] pooled
    stepped = jax.tree.map(lambda p, g: p - 1e-2 * g, params, grads)
    assert float(loss_and_grads(stepped)[0]) < float(loss) - 1e-3
