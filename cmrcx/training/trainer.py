"""The trainer: state from shapes, one jitted train step, one jitted scoring step.

It owns jit, sharding and the optimizer; it knows nothing of gin or files. The
Model API object gives `init`, `loss_fn(params, batch, dropout_rng)` and
`score_batch(params, batch)`.
"""

from __future__ import annotations

import functools
from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from cmrcx.cpu.inference import one_cpu_inference
from cmrcx.models import attention
from cmrcx.training import partitioning


@flax.struct.dataclass
class TrainState:
    step: jax.Array  # int32 [], optimizer steps taken
    params: Any
    opt_state: Any


def path_names(path) -> list[str]:
    """A pytree key path as names: (DictKey('bert'), DictKey('pooler'), ...) -> ['bert', ...]."""
    return [str(getattr(key, "key", getattr(key, "name", ""))) for key in path]


def is_decayed(path) -> bool:
    """Weight decay off biases and layer norms: BertAdam's `no_decay` list (bias,
    LayerNorm), and T5's `layer_norm` scales (as HF's Trainer leaves them). A name ending
    in "_bias" is a bias too: XLNet's r_w_bias / r_r_bias / r_s_bias, which XLNet's
    exclude_from_weight_decay ["LayerNorm", "layer_norm", "bias"] (a regex search, the TF
    scripts CLUE trained XLNet with) and the PyTorch scripts' substring lists leave alone;
    T5's relative_attention_bias, as HF's Trainer."""
    return not any(
        name == "bias" or name.endswith("_bias") or "LayerNorm" in name or "layer_norm" in name
        for name in path_names(path)
    )


def with_padding_row_frozen(
    optimizer: optax.GradientTransformation, table: str = "word_embeddings", row: int = 0
) -> optax.GradientTransformation:
    """`optimizer` fed a zero gradient for row `row` of every embedding table under a
    module named `table`: torch's nn.Embedding(padding_idx=row), whose padding row gets
    no gradient (weight decay still applies). Same state as `optimizer` (checkpoints of
    either restore into the other).

    CLUE's PyTorch reading-comprehension model (baselines/models_pytorch/mrc_pytorch/
    pytorch_modeling.py @0964517, BertEmbeddings and ALBertEmbeddings:
    `nn.Embedding(vocab_size, hidden_size, padding_idx=0)`), as transformers' BERT: the
    [PAD] row (id 0) never learns. It matters for span extraction only, where the padding
    slots' logits are in the start/end softmax; elsewhere padding gets no gradient anyway.
    """

    def zero_row(path, grad):
        if table in path_names(path):
            return grad.at[row].set(0)
        return grad

    def update_fn(updates, state, params=None):
        updates = jax.tree_util.tree_map_with_path(zero_row, updates)
        return optimizer.update(updates, state, params)

    return optax.GradientTransformation(optimizer.init, update_fn)


def adamw_with_warmup(
    learning_rate: float,
    num_train_steps: int,
    warmup_fraction: float = 0.1,
    weight_decay: float = 0.01,
    max_grad_norm: float = 1.0,
    adam_epsilon: float = 1e-6,
) -> optax.GradientTransformation:
    """AdamW with linear warm-up then linear decay to 0, and gradient clipping.

    adam_epsilon: 1e-6 as BERT's optimizer (CMRC 2019's script); CLUE's PyTorch
    classifier passes 1e-8 (its run_classifier.py default).

    The paper setting: 10% linear warm-up, linear decay to 0, weight decay 0.01
    except bias/LayerNorm, the global gradient norm clipped at 1.0. The authors'
    released script differs (pytorch_pretrained_bert 0.4.0 BertAdam): it clips
    each tensor's norm at 1.0 on its own, has no bias correction, applies the
    warm-up/decay factor twice (rate lr * w^2) over a length counted in blanks
    while stepping over windows (so the rate hits 0 ~62% in and rises again), and
    never updates the pooler. That optimizer is `cmrcx.training.released_optimizer`.
    """
    schedule = warmup_linear_decay(learning_rate, num_train_steps, warmup_fraction)
    return optax.chain(
        optax.clip_by_global_norm(max_grad_norm),
        optax.adamw(
            schedule,
            b1=0.9,
            b2=0.999,
            eps=adam_epsilon,
            weight_decay=weight_decay,
            mask=lambda params: jax.tree_util.tree_map_with_path(
                lambda path, _: is_decayed(path), params
            ),
        ),
    )


def warmup_linear_decay(
    learning_rate: float, num_train_steps: int, warmup_fraction: float = 0.1
) -> optax.Schedule:
    """The learning rate of update `count` (0-based): linear warm-up from 0 over
    int(steps * fraction) updates, then linear decay to 0 at `num_train_steps`.

    transformers' get_linear_schedule_with_warmup (and 2.x's WarmupLinearSchedule):
    lr * count / warmup before `warmup`, then lr * (steps - count) / (steps - warmup). With
    no warm-up step (fraction 0, as the LOT authors' lightning_base.py and Trainer
    defaults) the first update takes the whole rate, not 0.
    """
    warmup_steps = int(num_train_steps * warmup_fraction)
    if warmup_steps == 0:
        return optax.linear_schedule(learning_rate, 0.0, max(1, num_train_steps))
    return optax.join_schedules(
        [
            optax.linear_schedule(0.0, learning_rate, warmup_steps),
            optax.linear_schedule(learning_rate, 0.0, max(1, num_train_steps - warmup_steps)),
        ],
        [warmup_steps],
    )


class Trainer:
    """Jitted, sharded training and scoring for one model, optimizer and mesh."""

    def __init__(
        self,
        model,
        optimizer: optax.GradientTransformation,
        mesh,
        example_batch: dict,
        rules=partitioning.DEFAULT_RULES,
        seed: int = 0,
        grad_accum_steps: int = 1,
        attention_implementation: str = "auto",
    ):
        """example_batch: numpy arrays of the training batch shape (values unused).

        attention_implementation: what the steps' attention traces as
        (`cmrcx.models.attention.IMPLEMENTATIONS`; "auto": by platform).

        grad_accum_steps: the batch is split into this many micro-batches whose
        gradients are summed before the one optimizer update (same update as
        the whole batch at once, at a fraction of the activation memory).
        """
        self.model, self.optimizer, self.mesh, self.rules = model, optimizer, mesh, rules
        self.seed, self.grad_accum_steps = seed, grad_accum_steps
        attention.check_implementation(attention_implementation)
        self.attention_implementation = attention_implementation
        batch_size = len(next(iter(example_batch.values())))
        data_size = mesh.shape["data"]
        if batch_size % (grad_accum_steps * data_size):
            raise ValueError(
                f"batch {batch_size} does not split into {grad_accum_steps} micro-batches "
                f"over {data_size} data-parallel devices"
            )
        self._example = {
            k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in example_batch.items()
        }
        boxed = jax.eval_shape(self._init_boxed, jax.random.key(seed))
        self.state_shardings = partitioning.state_shardings(boxed, mesh, rules)
        self.abstract_state = jax.tree.map(
            lambda leaf, sharding: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding),
            nn.meta.unbox(boxed),
            self.state_shardings,
        )
        self.batch_sharding = partitioning.batch_sharding(mesh)
        self._micro_batch_sharding = partitioning.batch_sharding(mesh, leading_axes=1)
        replicated = partitioning.replicated(mesh)
        self._train_step = jax.jit(
            self._train_step_fn,
            in_shardings=(self.state_shardings, self.batch_sharding),
            out_shardings=(self.state_shardings, replicated),
            donate_argnums=(0,),
        )
        # On one CPU device, BERT-shaped encoders score with the forms XLA:CPU runs fastest
        # (`cmrcx.cpu.inference`). Not on a mesh, where the attention loop over the split
        # batch would gather it, nor on GPU/TPU, where neither was measured.
        one_cpu = mesh.devices.size == 1 and mesh.devices.flat[0].platform == "cpu"

        @functools.wraps(model.score_batch)  # compile logs name it score_batch
        def score_step(params, batch):
            with one_cpu_inference(one_cpu), attention.implementation(attention_implementation):
                return model.score_batch(params, batch)

        self._score_step = jax.jit(
            score_step,
            in_shardings=(self.state_shardings.params, self.batch_sharding),
            # Replicated, so every host can read all scores ([batch, blanks]: small).
            out_shardings=replicated,
        )

    def _init_boxed(self, rng: jax.Array) -> TrainState:
        batch = {k: jnp.zeros(v.shape, v.dtype) for k, v in self._example.items()}
        params = self.model.init(rng, batch)["params"]
        return TrainState(
            step=jnp.zeros([], jnp.int32), params=params, opt_state=self.optimizer.init(params)
        )

    def init_state(self) -> TrainState:
        """Fresh state, created directly in its shardings (never whole on one device)."""
        init = jax.jit(
            lambda rng: nn.meta.unbox(self._init_boxed(rng)), out_shardings=self.state_shardings
        )
        return init(jax.random.key(self.seed))

    def _train_step_fn(self, state: TrainState, batch: dict):
        dropout_rng = jax.random.fold_in(jax.random.key(self.seed + 1), state.step)
        grad_sums, metrics = self._summed_grads(state.params, batch, dropout_rng)
        # Mean over the step's real examples, however they were split.
        grads = jax.tree.map(lambda g: g / jnp.maximum(metrics["examples"], 1.0), grad_sums)
        # Divergence flags, summed with the other metrics and read by the runner when it
        # fetches them anyway (at log and checkpoint steps): no extra host sync per step.
        metrics = {
            **metrics,
            "nonfinite_loss": (~jnp.isfinite(metrics["loss_sum"])).astype(jnp.float32),
            "nonfinite_grad_norm": (~jnp.isfinite(optax.global_norm(grads))).astype(jnp.float32),
        }
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return TrainState(step=state.step + 1, params=params, opt_state=opt_state), metrics

    def _summed_grads(self, params, batch: dict, dropout_rng: jax.Array):
        """Gradients of the summed loss, and metric sums, over the whole batch."""

        def loss_fn(*args):  # traced with the run's attention implementation
            with attention.implementation(self.attention_implementation):
                return self.model.loss_fn(*args)

        sum_grads = jax.grad(loss_fn, has_aux=True)
        if self.grad_accum_steps == 1:
            return sum_grads(params, batch, dropout_rng)
        micro_batches = jax.tree.map(self._split_micro_batches, batch)

        def accumulate(carry, micro):
            index, micro_batch = micro
            grads, metrics = sum_grads(params, micro_batch, jax.random.fold_in(dropout_rng, index))
            return jax.tree.map(jnp.add, carry, (grads, metrics)), None

        first = jax.tree.map(lambda x: x[0], micro_batches)
        shapes = jax.eval_shape(sum_grads, params, first, dropout_rng)
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        indices = jnp.arange(self.grad_accum_steps)
        (grads, metrics), _ = jax.lax.scan(accumulate, zeros, (indices, micro_batches))
        return grads, metrics

    def _split_micro_batches(self, value: jax.Array) -> jax.Array:
        """[batch, ...] -> [k, batch / k, ...]; micro-batch j holds rows j, j + k, ...

        Strided rather than contiguous rows, so each micro-batch stays split over
        every data-parallel device instead of living on a few of them.
        """
        k = self.grad_accum_steps
        split = value.reshape(value.shape[0] // k, k, *value.shape[1:]).swapaxes(0, 1)
        return jax.lax.with_sharding_constraint(split, self._micro_batch_sharding)

    def device_batch(self, batch: dict[str, np.ndarray]) -> dict[str, jax.Array]:
        """Host numpy batch -> global arrays split over the `data` mesh axis."""
        return {
            key: jax.make_array_from_process_local_data(self.batch_sharding, value)
            for key, value in batch.items()
        }

    def example_shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        """The training batch's arrays (shapes and dtypes)."""
        return dict(self._example)

    def with_grad_accum_steps(self, k: int) -> Trainer:
        """This trainer with the batch in `k` micro-batches (to size its compiled step)."""
        example = {key: np.zeros(v.shape, v.dtype) for key, v in self._example.items()}
        return Trainer(
            self.model, self.optimizer, self.mesh, example, self.rules, self.seed, k,
            self.attention_implementation,
        )  # fmt: skip

    def compile_train_step(self):
        """The train step compiled from shapes alone (nothing allocated), for its memory
        analysis; the step's first call reuses this compilation."""
        batch = {
            key: jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=self.batch_sharding)
            for key, value in self._example.items()
        }
        return self._train_step.lower(self.abstract_state, batch).compile()

    def train_step(self, state: TrainState, batch: dict[str, np.ndarray]):
        """One optimizer step. Returns (new state, metric sums on device)."""
        return self._train_step(state, self.device_batch(batch))

    def score(self, params, batch: dict[str, np.ndarray]) -> np.ndarray:
        """Model scores for a host batch, gathered back to numpy."""
        return np.asarray(jax.device_get(self._score_step(params, self.device_batch(batch))))
