"""cmrcx.training.released_optimizer against a torch port of the released script's optimizer.

The port below is `BertAdam.step` of pytorch_pretrained_bert 0.4.0
(`pytorch_pretrained_bert/optimization.py`) line by line (only the deprecated
`add_(scalar, tensor)` call forms are spelled in today's torch), and the param
groups and per-step lr assignment of `main()` in ymcui/cmrc2019
`baseline/run_cmrc2019_baseline.py`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch
from torch.nn.utils import clip_grad_norm_

from cmrcx.training.released_optimizer import (
    released_bert_adam,
    script_learning_rate,
    script_schedule_steps,
    script_train_steps,
)

# ---------------------------------------------------------------------------
# The reference: pytorch_pretrained_bert 0.4.0 and the script's main(), ported.
# ---------------------------------------------------------------------------


def warmup_linear(x, warmup=0.002):
    if x < warmup:
        return x / warmup
    return 1.0 - x


class BertAdam(torch.optim.Optimizer):
    def __init__(
        self, params, lr, warmup=-1, t_total=-1, b1=0.9, b2=0.999, e=1e-6, weight_decay=0.01,
        max_grad_norm=1.0,
    ):  # fmt: skip
        defaults = dict(
            lr=lr, warmup=warmup, t_total=t_total, b1=b1, b2=b2, e=e,
            weight_decay=weight_decay, max_grad_norm=max_grad_norm,
        )  # fmt: skip
        super().__init__(params, defaults)

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["next_m"] = torch.zeros_like(p.data)
                    state["next_v"] = torch.zeros_like(p.data)
                next_m, next_v = state["next_m"], state["next_v"]
                beta1, beta2 = group["b1"], group["b2"]
                if group["max_grad_norm"] > 0:
                    clip_grad_norm_(p, group["max_grad_norm"])  # in place: `grad` sees it
                next_m.mul_(beta1).add_(grad, alpha=1 - beta1)
                next_v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                update = next_m / (next_v.sqrt() + group["e"])
                if group["weight_decay"] > 0.0:
                    update += group["weight_decay"] * p.data
                if group["t_total"] != -1:
                    x = state["step"] / group["t_total"]
                    lr_scheduled = group["lr"] * warmup_linear(x, group["warmup"])
                else:
                    lr_scheduled = group["lr"]
                update_with_lr = lr_scheduled * update
                p.data.add_(-update_with_lr)
                state["step"] += 1


def script_optimizer(named_parameters, learning_rate, t_total, warmup_proportion):
    param_optimizer = [n for n in named_parameters if "pooler" not in n[0]]
    no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
    optimizer_grouped_parameters = [
        {
            "params": [p for n, p in param_optimizer if not any(nd in n for nd in no_decay)],
            "weight_decay": 0.01,
        },
        {
            "params": [p for n, p in param_optimizer if any(nd in n for nd in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    return BertAdam(
        optimizer_grouped_parameters, lr=learning_rate, warmup=warmup_proportion, t_total=t_total
    )


def script_step(optimizer, global_step, learning_rate, t_total, warmup_proportion):
    lr_this_step = learning_rate * warmup_linear(global_step / t_total, warmup_proportion)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr_this_step
    optimizer.step()


# ---------------------------------------------------------------------------
# A small flax-shaped parameter tree and its torch twin.
# ---------------------------------------------------------------------------

LAYERS = 2
# Flax leaf path -> (shape, gradient scale per step). `layers` leaves are scanned
# ([LAYERS, ...]); the script holds one torch tensor per layer.
SHAPES = {
    ("bert", "embeddings", "word_embeddings", "embedding"): ((12, 8), 3.0),
    ("bert", "embeddings", "LayerNorm", "scale"): ((8,), 1e-5),  # eps dominates sqrt(v)
    ("bert", "embeddings", "LayerNorm", "bias"): ((8,), 0.05),
    ("bert", "layers", "attention", "query", "kernel"): ((LAYERS, 8, 2, 4), 0.1),
    ("bert", "layers", "attention", "query", "bias"): ((LAYERS, 2, 4), 0.1),
    ("bert", "layers", "output_LayerNorm", "scale"): ((LAYERS, 8), 0.1),
    ("bert", "pooler", "kernel"): ((8, 8), 1.0),
    ("bert", "pooler", "bias"): ((8,), 1.0),
    ("cloze_head", "kernel"): ((8, 1), 0.5),
    ("cloze_head", "bias"): ((1,), 0.5),
}
TORCH_LEAF = {"kernel": "weight", "scale": "weight", "embedding": "weight"}


def nest(flat):
    tree = {}
    for path, value in flat.items():
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return tree


def torch_slices(path, array):
    """(torch name, numpy tensor) per torch parameter of one flax leaf."""
    names = [*path[:-1], TORCH_LEAF.get(path[-1], path[-1])]
    if "layers" not in path:
        return [(".".join(names), array)]
    at = names.index("layers")
    return [
        (".".join([*names[:at], "encoder", "layer", str(i), *names[at + 1 :]]), array[i])
        for i in range(array.shape[0])
    ]


def random_tree(rng, scale_of):
    return nest(
        {
            path: (rng.standard_normal(shape) * scale_of(path, scale)).astype(np.float32)
            for path, (shape, scale) in SHAPES.items()
        }
    )


def as_flat(tree):
    return {
        tuple(k.key for k in path): np.asarray(leaf)
        for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
    }


def gradient_scale(step):
    """Layer 0 of the query kernel and the embeddings exceed norm 1 (clipped), the
    rest stay under it; scales vary by step so the moments see changing gradients."""

    def scale_of(path, scale):
        boost = 1.0 + (step % 5)
        if path[-2:] == ("query", "kernel"):
            return np.array([30.0, 0.02]).reshape(-1, 1, 1, 1) * boost
        return scale * boost

    return scale_of


# ---------------------------------------------------------------------------
# Tests.
# ---------------------------------------------------------------------------

LR, T, WARMUP, STEPS = 0.05, 20, 0.1, 32  # x = k / T reaches 1.55: past the zero at 1
EPS32 = np.finfo(np.float32).eps


def run_both(tx, steps=STEPS):
    """Yields (step, flax params, numpy torch params by name) after each step."""
    rng = np.random.default_rng(0)
    params = jax.tree.map(jnp.asarray, random_tree(rng, lambda path, scale: 1.0))
    named = {
        name: torch.nn.Parameter(torch.tensor(np.array(value)))
        for path, leaf in as_flat(params).items()
        for name, value in torch_slices(path, leaf)
    }
    optimizer = script_optimizer(list(named.items()), LR, T, WARMUP)
    state, update = tx.init(params), jax.jit(tx.update)
    for step in range(steps):
        grads = random_tree(rng, gradient_scale(step))
        for path, leaf in as_flat(grads).items():
            for name, value in torch_slices(path, leaf):
                named[name].grad = torch.tensor(np.array(value))
        script_step(optimizer, step, LR, T, WARMUP)
        updates, state = update(jax.tree.map(jnp.asarray, grads), state, params)
        params = optax.apply_updates(params, updates)
        yield step, params, {n: p.detach().numpy().copy() for n, p in named.items()}


def test_matches_the_script_every_step():
    """Every parameter after every step, to 1e-5 of the tensor's scale.

    The floor, a few float32 eps of the summed update sizes, only matters for a
    tensor whose entries are all small next to the updates it has taken.
    """
    moved = {}
    previous = None
    for step, params, reference in run_both(released_bert_adam(LR, T, WARMUP)):
        for path, leaf in as_flat(params).items():
            for name, ours in torch_slices(path, leaf):
                ref = reference[name]
                if previous is not None:
                    moved[name] = moved.get(name, 0.0) + np.max(np.abs(ref - previous[name]))
                atol = 1e-5 * np.max(np.abs(ref)) + 8 * EPS32 * moved.get(name, 0.0)
                np.testing.assert_allclose(ours, ref, rtol=0, atol=atol, err_msg=f"{step} {name}")
        previous = reference
    assert step == STEPS - 1


def test_rate_is_lr_times_warmup_linear_squared():
    def rate(count):
        return float(script_learning_rate(count, 2.0, 100, 0.1))

    assert rate(0) == 0.0  # the first step moves nothing
    np.testing.assert_allclose(rate(5), 2.0 * 0.5**2, rtol=1e-6)  # warm-up, squared
    np.testing.assert_allclose(rate(10), 2.0 * 0.9**2, rtol=1e-6)
    np.testing.assert_allclose(rate(55), 2.0 * 0.45**2, rtol=1e-6)
    assert rate(100) == 0.0  # x = 1
    np.testing.assert_allclose(rate(160), 2.0 * 0.6**2, rtol=1e-6)  # rises again, x = 1.6
    # Through the optimizer: same-sign gradients keep stepping downhill past x = 1.
    tx = released_bert_adam(1e-2, 10, 0.1, weight_decay=0.0)
    params, grads = {"bias": jnp.zeros([3])}, {"bias": jnp.full([3], 0.5)}
    state, steps = tx.init(params), []
    for _ in range(16):
        updates, state = tx.update(grads, state, params)
        steps.append(float(updates["bias"][0]))
    assert steps[0] == 0.0 and steps[10] == 0.0
    assert all(s < 0 for i, s in enumerate(steps) if i not in (0, 10))
    assert steps[11] > steps[12] > steps[15]  # ever larger steps after the zero


def test_pooler_is_never_updated():
    start = random_tree(np.random.default_rng(0), lambda path, scale: 1.0)
    for _, params, _ in run_both(released_bert_adam(LR, T, WARMUP), steps=6):
        for name in ("kernel", "bias"):
            pooler = params["bert"]["pooler"][name]
            np.testing.assert_array_equal(pooler, start["bert"]["pooler"][name])


def test_clipping_is_per_tensor_and_per_layer():
    """A huge gradient on one tensor (or one layer's slice) leaves the others' alone."""
    tx = released_bert_adam(LR, T, WARMUP)
    params = {"a": {"kernel": jnp.ones([4, 4])}, "layers": {"kernel": jnp.ones([2, 4, 4])}}
    small = jnp.full([4, 4], 0.01)  # norm 0.04
    grads = {"a": {"kernel": small}, "layers": {"kernel": jnp.stack([small * 1e4, small])}}
    _, state = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(state.mu["a"]["kernel"], 0.1 * small, rtol=1e-6)
    np.testing.assert_allclose(state.mu["layers"]["kernel"][1], 0.1 * small, rtol=1e-6)
    clipped = np.linalg.norm(state.mu["layers"]["kernel"][0]) / 0.1
    np.testing.assert_allclose(clipped, 1.0 / (1.0 + 1e-6 / 400), rtol=1e-6)
    # torch's clip_grad_norm_ divides by (norm + 1e-6): seen with a tiny max norm.
    tiny = released_bert_adam(LR, T, WARMUP, max_grad_norm=1e-5)
    only_a = {"a": params["a"]}
    _, state = tiny.update({"a": {"kernel": small / 2000}}, tiny.init(only_a), only_a)
    clipped = np.linalg.norm(state.mu["a"]["kernel"]) / 0.1  # from norm 2e-5
    np.testing.assert_allclose(clipped, 1e-5 * 2e-5 / (2e-5 + 1e-6), rtol=1e-5)


def test_script_step_counts():
    # run.sh: batch 24, 3 epochs; t_total counts blanks, the loop counts windows.
    assert script_schedule_steps(1000, 24, 3.0) == int(1000 / 24 * 3.0) == 125
    assert script_train_steps(1601, 24, 3.0) == 3 * 66  # drop_last: 1601 // 24 = 66
    assert script_train_steps(1601, 24, 2.5) == 2 * 66  # trange(int(epochs))
    assert script_schedule_steps(1000, 24, 2.5) == 104  # the schedule keeps 2.5
