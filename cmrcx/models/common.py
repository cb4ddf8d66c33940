"""What the networks of every family share: compute options, initialisers, masks.

No family is imported here: `bert.py`, `t5.py` and the task heads (`heads.py`) import
this module, never each other.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

# What a transformer layer keeps for the backward pass (jax.checkpoint policies).
# "none": everything (fastest, most memory); "full": only the layer's input, all
# else recomputed; "dots": the outputs of the dense projections (matmuls with no
# batch dimension) are kept, attention scores, softmax, GeLU and LayerNorm recomputed;
# the dense projections of bf16 operands (`low_precision_dot_general`, a custom VJP that
# the dots policy does not see into) by their name.
LOW_PRECISION_DENSE = "low_precision_dense"
REMAT_POLICIES = {
    "none": None,
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.save_from_both_policies(
        jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
        jax.checkpoint_policies.save_only_these_names(LOW_PRECISION_DENSE),
    ),
}


def scanned_layers(
    block, remat_policy: str, length: int, in_axes=nn.broadcast, unrolled: bool = False
):
    """`block` (a layer module class returning (carry, per-layer output)) repeated
    `length` times as one scanned module: parameters [layers, ...] (logical axis
    "layers"), one dropout and init key per layer, the extra call arguments (`in_axes`)
    shared by every layer unless told otherwise. A scan compiles the block once (not
    once per layer), and with a remat policy (`REMAT_POLICIES` name, "none" for none)
    the backward pass keeps only what the policy saves per layer, which XLA honours on
    every backend (unrolled remat is free to be undone on CPU). Call the result as the
    block: `scanned_layers(...)(cfg, ..., name=...)`.

    `unrolled` (without a remat policy) unrolls the scan into `length` copies of the
    block, the same parameters, keys and sums: no loop, so the backward pass's per-layer
    residuals are no longer stacked into [layers, ...] buffers, each zero-filled and then
    written layer by layer. BERT-base's train step at 8 x 512 on 2 cores of Zen 5: bf16
    6.46 s instead of 9.83 (temporaries 5.45 GiB instead of 7.68); float32 as fast (10.19
    against 10.05 s) with 6.93 GiB instead of 7.53; compiled in 11 s instead of 3.2.
    GPT-2's float32 step 5.65 s instead of 6.49. T5's got slower (2.41 to 2.50 s against
    2.22 to 2.25 for LongLM-small) and stays a loop, as do XLNet's and the remat
    policies (docs/scaling.md)."""
    if remat_policy != "none":
        block = nn.remat(block, policy=REMAT_POLICIES[remat_policy], prevent_cse=False)
    return nn.scan(
        block,
        variable_axes={"params": 0},
        split_rngs={"params": True, "dropout": True},
        in_axes=in_axes,
        length=length,
        unroll=length if unrolled and remat_policy == "none" else 1,
        metadata_params={nn.PARTITION_NAME: "layers"},
    )


def check_compute_options(dtype: str, remat_policy: str) -> None:
    """ValueError unless dtype is float32/bfloat16 and remat_policy one of REMAT_POLICIES."""
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"dtype {dtype!r}: use 'float32' or 'bfloat16'")
    if remat_policy not in REMAT_POLICIES:
        raise ValueError(f"remat_policy {remat_policy!r}: use one of {', '.join(REMAT_POLICIES)}")


# Kernel initialisers by name, both with a given stddev: Google's TF BERT draws
# truncated normals; the CLUE PyTorch baselines' `init_bert_weights`
# (mrc_pytorch/pytorch_modeling.py), which build the span and multiple-choice heads,
# draw plain normals.
KERNEL_INITS = {
    "truncated_normal": nn.initializers.truncated_normal,
    "normal": nn.initializers.normal,
}


def kernel_init(std: float, axes: tuple[str, ...], kind: str = "truncated_normal"):
    """A KERNEL_INITS[kind](std) initialiser with logical axis names."""
    return nn.with_logical_partitioning(KERNEL_INITS[kind](std), axes)


def zeros_init(axes: tuple[str, ...]):
    return nn.with_logical_partitioning(nn.initializers.zeros_init(), axes)


def padding_mask(mask) -> jax.Array:
    """int [batch, k] (1 = real token) -> bool [batch, 1, 1, k] (True = may be attended)."""
    return (mask > 0)[:, None, None, :]


def causal_mask(decoder_mask) -> jax.Array:
    """int [batch, length] -> bool [batch, 1, length, length]: earlier real tokens only."""
    length = decoder_mask.shape[1]
    causal = jnp.arange(length)[None, :] <= jnp.arange(length)[:, None]
    return causal[None, None] & padding_mask(decoder_mask)


def shift_right(labels, start_token_id: int, pad_token_id: int) -> jax.Array:
    """Teacher forcing inputs: int [batch, length] -> start, labels[:-1]; -100 -> pad."""
    shifted = jnp.concatenate(
        [jnp.full_like(labels[:, :1], start_token_id), labels[:, :-1]], axis=1
    )
    return jnp.where(shifted == -100, pad_token_id, shifted)


# --- Matmuls of bfloat16 / float16 operands --------------------------------------------------
# XLA:CPU runs a dot whose operands and result are bfloat16 by converting both operands to
# float32 and the result back: slower than float32 alone (12.2 against 10.8 ms for a
# [1024, 768] x [768, 3072] forward, AMD Zen 5, 2 cores). Asked for a float32 result of the
# same bfloat16 operands, it calls a native bfloat16 kernel (AVX512_BF16, AMX): 6.2 ms.
# `low_precision_dot_general` asks for that in the forward and in both backward matmuls.
# The products are the same: each is exact in float32 and summed in float32, then rounded
# to the operands' dtype, as before; only the summation order inside the kernel differs.
_LOW_PRECISION = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


def low_precision_dot_general(lhs, rhs, dimension_numbers, precision=None, **kwargs):
    """`lax.dot_general`, as `nn.DenseGeneral(dot_general=...)` calls it; when both
    operands are bfloat16 (or both float16) and the dense layer's contraction is lhs's
    trailing axes with rhs's leading ones, summed in float32 by the backend's native kernel
    in the forward and the backward (`_dense_contract`), the result in the operands' dtype."""
    (lhs_axes, rhs_axes), batch_axes = dimension_numbers
    n = len(lhs_axes)
    dense = (
        tuple(lhs_axes) == tuple(range(lhs.ndim - n, lhs.ndim))
        and tuple(rhs_axes) == tuple(range(n))
        and batch_axes == ((), ())
    )
    if dense and not kwargs and lhs.dtype == rhs.dtype and lhs.dtype in _LOW_PRECISION:
        # Named for the "dots" remat policy, which keeps it as it keeps lax's dense dots.
        return checkpoint_name(_dense_contract(lhs, rhs, n, precision), LOW_PRECISION_DENSE)
    return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=precision, **kwargs)


def _contract(lhs, rhs, lhs_axes, rhs_axes, precision, dtype):
    dims = ((tuple(lhs_axes), tuple(rhs_axes)), ((), ()))
    out = jax.lax.dot_general(
        lhs, rhs, dims, precision=precision, preferred_element_type=jnp.float32
    )
    return out.astype(dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _dense_contract(lhs, rhs, n: int, precision):
    """lhs [*A, *C] x rhs [*C, *B] -> [*A, *B], C the n contracted axes."""
    return _contract(lhs, rhs, range(lhs.ndim - n, lhs.ndim), range(n), precision, lhs.dtype)


def _dense_contract_fwd(lhs, rhs, n, precision):
    return _dense_contract(lhs, rhs, n, precision), (lhs, rhs)


def _dense_contract_bwd(n, precision, residuals, grad):
    lhs, rhs = residuals
    a, b = lhs.ndim - n, rhs.ndim - n  # the kept axes of each operand
    # d lhs [*A, *C] = grad [*A, *B] . rhs [*C, *B] over B; d rhs [*C, *B] = lhs . grad over A.
    grad = grad.astype(lhs.dtype)
    d_lhs = _contract(grad, rhs, range(a, a + b), range(n, n + b), precision, lhs.dtype)
    d_rhs = _contract(lhs, grad, range(a), range(a), precision, rhs.dtype)
    return d_lhs, d_rhs


_dense_contract.defvjp(_dense_contract_fwd, _dense_contract_bwd)
