"""The candidate pointer (LOT ClozeT, SenPos): logits are the dot products of the network's
states at the candidates and at the context (BERT: the encoder's last layer; T5: the
decoder's states of the input fed to both stacks), padded candidates never win, the loss
is the cross-entropy, and a tiny BERT and a tiny T5 train. The LongLM authors' ClozeT step
(`lot_clozet_longlm_authors`) gives the logits and loss of a torch port of their
finetune.py on a random-init transformers T5 converted with cmrcx's converter."""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.linen import meta

from cmrcx.benchmarks.lot import understanding
from cmrcx.benchmarks.lot.formats import ClozeTRecord, SenPosRecord
from cmrcx.benchmarks.windows import SpecialIds
from cmrcx.model_api.candidate_pointer import (
    AUTHORS_LM_WEIGHT,
    CandidatePointerModel,
    LongLMAuthorsClozeModel,
)
from cmrcx.model_api.multiple_choice import MASKED_LOGIT
from cmrcx.models import bert, gpt2, registry, t5
from cmrcx.vocab import layouts

BERT = bert.BertConfig(
    vocab_size=300, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
    max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0,
)  # fmt: skip
T5 = dict(vocab_size=320, d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2, dropout_rate=0.0)
GPT2 = gpt2.GPT2Config(
    vocab_size=300, n_positions=64, n_embd=32, n_layer=2, n_head=4, n_inner=64,
    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
)  # fmt: skip
LENGTH, CANDIDATES = 40, 4
WORDPIECE = SpecialIds(cls_id=101, sep_id=102, blank_id=1, end_id=2)
SENTENCEPIECE = SpecialIds(
    cls_id=None, sep_id=4, mask_id=6, eos_id=1, sentinels=tuple(319 - k for k in range(20))
)


def tokenize(text: str) -> list[int]:
    """One id in [110, 300) per character (never a special id)."""
    return [110 + ord(char) % 190 for char in text]


RECORDS = [
    ClozeTRecord(1, "甲乙丙丁。<mask>戊己。", ("庚辛。", "壬癸子丑。"), 1, {}),
    SenPosRecord(2, "甲乙。<mask>丙丁。<mask>戊己庚。<mask>辛。", "壬癸。", 2, {}),
    SenPosRecord(3, "甲乙丙。<mask>丁戊。", "己庚辛壬。", 0, {}),
]


def pointer_batch(kind: layouts.Layout, example_mask=(1, 1, 1)) -> dict[str, np.ndarray]:
    """The three records laid out for the input layout `kind`, padded to LENGTH and
    CANDIDATES."""
    ids = SENTENCEPIECE if kind is layouts.T5 else WORDPIECE
    rows = []
    for record in RECORDS:
        task = "clozet" if isinstance(record, ClozeTRecord) else "senpos"
        example = kind.pointer(task)(record, tokenize, ids, LENGTH)
        rows.append(understanding.pad_example(example, LENGTH, CANDIDATES))
    batch = {key: np.stack([row[key] for row in rows]) for key in rows[0]}
    return {**batch, "example_mask": np.array(example_mask, np.int32)}


@functools.cache
def pointer_model(family: str):
    """(config, model with score_batch and value_and_grad(loss_fn) jitted, params, kind)."""
    config = {"bert": BERT, "gpt2": GPT2}.get(family) or t5.T5Config(**T5)
    network = registry.network(config, "candidate_pointer")
    model = CandidatePointerModel(network, max_length=LENGTH, num_candidates=CANDIDATES)
    row = registry.family_of(config)
    kind = row.layout
    init = jax.jit(lambda rng: meta.unbox(model.init(rng, model.example_batch(2))["params"]))
    params = init(jax.random.key(0))
    model.score_batch = jax.jit(model.score_batch)
    model.loss_and_grad = jax.jit(jax.value_and_grad(model.loss_fn, has_aux=True))
    return config, model, params, kind


@pytest.fixture(scope="module", params=["bert", "t5", "gpt2"])
def family(request):
    return request.param, *pointer_model(request.param)


@jax.jit
def bert_states(params, ids, types, mask):
    return bert.BertEncoder(BERT).apply({"params": params}, ids, types, mask)[0]


@jax.jit
def gpt2_states(params, ids, mask):
    return gpt2.GPT2LMHeadModel(GPT2).apply({"params": params}, ids, mask, method="states")


@jax.jit
def t5_states(params, ids, mask):
    """T5's decoder over [start] + input_ids with the encoder over input_ids."""

    def run(module):
        encoded = module.encode(ids, mask)
        start = jnp.full([ids.shape[0], 1], module.config.decoder_start_token_id, jnp.int32)
        decoder_ids = jnp.concatenate([start, ids], 1)
        decoder_mask = jnp.concatenate([jnp.ones_like(start), mask], 1)
        return module.decoder_states(decoder_ids, encoded, mask, decoder_mask)[:, 1:]

    return t5.T5ForConditionalGeneration(t5.T5Config(**T5)).apply({"params": params}, method=run)


def network_states(name: str, params, batch) -> np.ndarray:
    """The states the pointer must read, from the family's own network: BERT's encoder
    output; T5's decoder over [start] + input_ids with the encoder over input_ids."""
    ids, mask = batch["input_ids"], batch["input_mask"]
    if name == "bert":
        return np.asarray(bert_states(params["bert"], ids, batch["token_type_ids"], mask))
    if name == "gpt2":  # the last layer's states, after ln_f
        return np.asarray(gpt2_states(params["gpt2"], ids, mask))
    return np.asarray(t5_states(params["t5"], ids, mask))


def test_logits_are_dot_products_of_the_states(family):
    name, _, model, params, kind = family
    assert model.encoder_name == name and set(params) == {name}  # no layer of its own
    batch = pointer_batch(kind)
    logits = np.asarray(model.score_batch(params, batch))
    states = network_states(name, params, batch)
    want = np.full([3, CANDIDATES], MASKED_LOGIT, np.float32)
    for row in range(3):
        context = states[row, batch["context_position"][row]]
        for k in np.flatnonzero(batch["candidate_mask"][row]):
            want[row, k] = states[row, batch["candidate_positions"][row, k]] @ context
    assert logits.dtype == np.float32 and np.abs(want[want > MASKED_LOGIT]).max() > 0.1
    np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-5)


def test_loss_is_cross_entropy_over_real_candidates_and_trains(family):
    name, _, model, params, kind = family
    batch = pointer_batch(kind, example_mask=(1, 1, 0))
    logits = np.asarray(model.score_batch(params, batch), np.float64)
    real = batch["candidate_mask"] > 0
    assert (np.argmax(logits, -1) < real.sum(-1)).all()  # padded slots never win
    top = logits.max(-1, keepdims=True)
    log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
    want = -sum(log_probs[row, batch["label"][row]] for row in range(2))
    # With a dropout key, as in training (the tiny networks' dropout rates are 0).
    (loss_sum, metrics), grads = model.loss_and_grad(params, batch, jax.random.key(3))
    np.testing.assert_allclose(float(loss_sum), want, rtol=1e-5)
    assert float(metrics["examples"]) == 2 and float(metrics["loss_sum"]) == float(loss_sum)
    norms = jax.tree.map(lambda g: float(jnp.linalg.norm(g)), grads)
    assert all(np.isfinite(jax.tree.leaves(norms)))
    words = {
        "bert": lambda: norms["bert"]["embeddings"]["word_embeddings"],
        "t5": lambda: norms["t5"]["shared"],
        "gpt2": lambda: norms["gpt2"]["wte"],
    }[name]()
    assert words["embedding"] > 0
    # A padded candidate made to win by hand would change nothing: its logit is masked.
    moved = {**batch, "candidate_positions": batch["candidate_positions"].copy()}
    moved["candidate_positions"][:, -1] = batch["context_position"]  # dot(c, c): large
    np.testing.assert_array_equal(np.asarray(model.score_batch(params, moved)), logits)


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_t5_pointer_tree_is_a_t5_checkpoints(tied):
    """A T5 export (`params[encoder_name]`) loads into the pointer whole, an untied
    lm_head included (created at init, though the states never reach it)."""
    config = t5.T5Config(**T5, tie_word_embeddings=tied)
    pointer = CandidatePointerModel(registry.network(config, "candidate_pointer"), LENGTH, 2)
    batch = pointer.example_batch(1)
    tree = jax.eval_shape(lambda: pointer.init(jax.random.key(0), batch))["params"]
    ids = jnp.zeros([1, 4], jnp.int32)
    network = t5.T5ForConditionalGeneration(config)
    t5_tree = jax.eval_shape(lambda: network.init(jax.random.key(0), ids, ids, ids))["params"]
    assert ("lm_head" in tree["t5"]) is not tied
    shapes = jax.tree.map(lambda leaf: leaf.shape, meta.unbox(t5_tree))
    assert jax.tree.map(lambda leaf: leaf.shape, meta.unbox(tree["t5"])) == shapes


def test_t5_clozet_pointer_equals_the_authors_logits():
    """The paper's method on the T5 ClozeT layout scores as the authors' step: the same
    source, and the gold sentinel in their decoder input comes after every scored state."""
    config, model, params, _ = pointer_model("t5")
    authors = LongLMAuthorsClozeModel(registry.network(config, "seq2seq"), LENGTH, LENGTH + 1)
    record = RECORDS[0]
    pointer = understanding.clozet_sentencepiece(record, tokenize, SENTENCEPIECE, LENGTH)
    theirs = understanding.clozet_longlm_authors(record, tokenize, SENTENCEPIECE, LENGTH + 1)
    pointer_logits = model.score_batch(params, {k: v[None] for k, v in pointer.items()})
    authors_logits = jax.jit(authors.score_batch)(params, {k: v[None] for k, v in theirs.items()})
    np.testing.assert_allclose(np.asarray(pointer_logits), np.asarray(authors_logits), rtol=1e-5)


@dataclasses.dataclass(frozen=True)
class CausalToyConfig:
    vocab_size: int = 320
    width: int = 8


class CausalToyStates(nn.Module):
    """A decoder-only stand-in: each token's state is the running mean of the embeddings
    up to it (token types unused)."""

    config: CausalToyConfig

    @nn.compact
    def __call__(self, input_ids, token_type_ids, input_mask, deterministic=True):
        embedded = nn.Embed(self.config.vocab_size, self.config.width)(input_ids)
        return jnp.cumsum(embedded, 1) / jnp.arange(1, input_ids.shape[1] + 1)[None, :, None]


def test_a_family_gives_its_token_states_through_its_row():
    """The registry's seam for a future family (GPT-2): a row with `token_states` and no
    encoder gets the same pointer, its parameters under its name; a row with neither
    gets a clear error."""
    row = registry.Family(
        name="causal_toy", config_class=CausalToyConfig, layout=layouts.T5,
        hf_model_types=("causal_toy",),
        token_states=lambda config, name: CausalToyStates(config, name=name),
    )  # fmt: skip
    registry.register(row)
    try:
        network = registry.network(CausalToyConfig(), "candidate_pointer")
        model = CandidatePointerModel(network, max_length=LENGTH, num_candidates=CANDIDATES)
        params = model.init(jax.random.key(0), model.example_batch(1))["params"]
        assert model.encoder_name == "causal_toy" and set(params) == {"causal_toy"}
        batch = pointer_batch(layouts.T5)
        states = CausalToyStates(CausalToyConfig()).apply(
            {"params": params["causal_toy"]}, batch["input_ids"], None, None
        )
        context = np.take_along_axis(states, batch["context_position"][:, None, None], 1)
        candidates = np.take_along_axis(states, batch["candidate_positions"][..., None], 1)
        want = np.where(batch["candidate_mask"], (candidates * context).sum(-1), MASKED_LOGIT)
        logits = model.score_batch(params, batch)
        np.testing.assert_allclose(np.asarray(logits), want, rtol=1e-5, atol=1e-6)
        registry.unregister("causal_toy")
        registry.register(dataclasses.replace(row, token_states=None))
        with pytest.raises(ValueError, match="'causal_toy' gives no token states"):
            registry.network(CausalToyConfig(), "candidate_pointer")
    finally:
        registry.unregister("causal_toy")


# --- The authors' step against a torch port of their finetune.py ----------------------

try:
    import torch
    import transformers
except ImportError:  # the pointer tests above need neither
    torch = transformers = None

# LongLM's special ids (Chinese XLNet's spiece.model: <s> 1, </s> 2, <sep> 4, <pad> 5,
# <mask> 6) and T5Tokenizer's sentinels 32000..32099 (<extra_id_k> = 32099 - k).
LONGLM = SpecialIds(
    cls_id=None, sep_id=4, mask_id=6, eos_id=2, sentinels=tuple(32099 - k for k in range(100))
)
PAD, START, VOCAB = 5, 1, 32110


def longlm_tokenize(text: str) -> list[int]:
    return [10 + ord(char) % 31000 for char in text]


def reference_t5():
    """A random-init LongLM-shaped transformers T5 (ReLU, tied, scaled head), every
    parameter drawn so that states and logits are of order 1, no dropout. The decoder's
    final layer norm is drawn small (0.15 to 0.3) so that the pointer's logits, dot
    products of its 32-wide outputs, are of order 1 too: the 1e-5 of the parity is then
    an absolute bound."""
    config = transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2,
        feed_forward_proj="relu", pad_token_id=PAD, eos_token_id=2,
        decoder_start_token_id=START, dropout_rate=0.0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name == "decoder.final_layer_norm.weight":
                param.uniform_(0.15, 0.3)
            elif "layer_norm" in name:
                param.uniform_(0.5, 1.5)
            elif "relative_attention_bias" in name or name == "shared.weight":
                param.normal_(0.0, 1.0)
            else:
                param.normal_(0.0, {"o": 32, "wo": 64}.get(name.split(".")[-2], 32) ** -0.5)
    return model


def authors_step(model, src_ids, src_mask, tgt_ids):
    """Their `_step` (LOT-LongLM baselines/understanding/finetune.py:157-212), label
    smoothing 0, on transformers' T5: (loss, loss_cls, LM loss, pointer logits [b, t])."""
    decoder_input_ids = model._shift_right(tgt_ids)  # :162-163
    outputs = model(
        src_ids,
        attention_mask=src_mask,
        decoder_input_ids=decoder_input_ids,
        output_hidden_states=True,
        use_cache=False,
    )  # :169 (fmt: skip)
    lm_logits = outputs["logits"]
    hidden = outputs["decoder_hidden_states"][-1]  # :172
    mask1 = torch.eq(decoder_input_ids, torch.tensor(LONGLM.mask_id)).float()  # :177
    mask2 = 1 - torch.lt(decoder_input_ids, 32000).float()  # :178
    mask_tmp = torch.eq(torch.cumsum(mask1, 1).int(), 0).float()  # :179
    mask2 *= mask_tmp  # :180
    logits = torch.sum(
        torch.matmul(hidden * mask1[:, :, None], torch.transpose(hidden * mask2[:, :, None], 1, 2)),
        1,
    )  # :183
    logits -= (1 - mask2) * (1e20)  # :184
    label = torch.sum(tgt_ids * mask1, 1).int()  # :189
    mask3 = torch.eq(decoder_input_ids, label[:, None]).float()  # :191
    mask3 *= mask_tmp  # :192
    loss_cls = -torch.mean(torch.sum(torch.log_softmax(logits, dim=-1) * mask3, 1))  # :194
    ce_loss_fct = torch.nn.CrossEntropyLoss(ignore_index=PAD)  # :198
    lm_loss = ce_loss_fct(lm_logits.view(-1, lm_logits.shape[-1]), tgt_ids.view(-1))  # :201
    return 1e-20 * lm_loss + loss_cls, loss_cls, lm_loss, logits, mask2  # :211


AUTHORS_RECORDS = [
    ClozeTRecord(1, "一只猫望着窗外。<mask>鸟儿一进来，猫就关上了门。",
                 ("可是没有鸟来。", "有些鸟儿来了。"), 1, {}),
    ClozeTRecord(2, "从前有座山。山里有庙。<mask>", ("庙里有个老和尚。", "山下有河。"), 0, {}),
    ClozeTRecord(3, "他走了。<mask>下雨了。", ("他很高兴地回家了，一路唱歌。", "雨。"), 1, {}),
]  # fmt: skip


def authors_batch(records) -> dict[str, np.ndarray]:
    """The records' authors' examples, padded as their collate pads (prepare_seq2seq_batch:
    the pad id, attention mask 0)."""
    examples = [understanding.clozet_longlm_authors(r, longlm_tokenize, LONGLM) for r in records]
    batch = {}
    for key in ("inputs", "targets"):
        width = max(e[key].size for e in examples)
        rows = [np.pad(e[key], (0, width - e[key].size), constant_values=PAD) for e in examples]
        batch[key] = np.stack(rows)
        batch[f"{key}_mask"] = np.stack([np.arange(width) < e[key].size for e in examples])
        batch[f"{key}_mask"] = batch[f"{key}_mask"].astype(np.int32)
    for key in ("candidate_positions", "candidate_mask", "context_position", "label"):
        batch[key] = np.stack([e[key] for e in examples])
    return {**batch, "example_mask": np.ones([len(records)], np.int32)}


@pytest.mark.skipif(torch is None, reason="needs torch and transformers")
def test_authors_step_matches_their_finetune_py():
    from cmrcx.weights import t5 as t5_weights

    reference = reference_t5()
    tensors = {k: v.detach().numpy() for k, v in reference.state_dict().items()}
    config = t5_weights.config_from_hf(reference.config.to_dict(), tensors=tensors)
    params = {"t5": t5_weights.params_from_hf(tensors, config, "reference")}
    batch = authors_batch(AUTHORS_RECORDS)
    assert (batch["inputs_mask"] == 0).any() and (batch["targets_mask"] == 0).any()
    inputs = (torch.tensor(batch[k]).long() for k in ("inputs", "inputs_mask", "targets"))
    with torch.no_grad():
        want = [t.numpy() for t in authors_step(reference, *inputs)]
    loss, loss_cls, lm_loss, their_logits, their_candidates = want

    model = LongLMAuthorsClozeModel(registry.network(config, "seq2seq"), 0, 0)

    @jax.jit
    def ours(params, batch):
        lm_logits = model._states_and_lm_logits(params, batch)[1]
        return model.score_batch(params, batch), model.loss_fn(params, batch, None), lm_logits

    logits, (loss_sum, metrics), lm_logits = ours(params, batch)
    # Their candidates are our positions, and their logits there are ours.
    for row in range(3):
        candidates = np.flatnonzero(their_candidates[row])
        np.testing.assert_array_equal(candidates, batch["candidate_positions"][row])
    want_logits = np.take_along_axis(their_logits, batch["candidate_positions"], 1)
    scale = np.abs(want_logits).max()
    assert 0.5 < scale < 5.0, scale  # logits of order 1: the bound below is absolute
    np.testing.assert_allclose(np.asarray(logits), want_logits, atol=1e-5, rtol=0)
    difference = np.abs(np.asarray(logits) - want_logits).max()
    print(f"authors' logits: max abs difference {difference:.2e}")
    assert float(metrics["examples"]) == 3
    np.testing.assert_allclose(float(loss_sum) / 3, float(loss), atol=1e-5, rtol=0)
    assert float(loss) == float(loss_cls)  # 1e-20 x LM loss vanishes in float32
    # So the LM term is compared on its own: their token mean over non-pad targets.
    log_probs = np.asarray(jax.nn.log_softmax(lm_logits))
    token = np.take_along_axis(log_probs, batch["targets"][..., None], -1)[..., 0]
    lm_mean = -(token * batch["targets_mask"]).sum() / batch["targets_mask"].sum()
    np.testing.assert_allclose(lm_mean, float(lm_loss), atol=1e-5 * max(1.0, float(lm_loss)))
    assert AUTHORS_LM_WEIGHT == 1e-20
