"""The memory-bound kernels of one transformer layer on one tensor-parallel rank, with their bytes.

Why: norms, activations, residual adds, RoPE, fp8 casts and the cross-entropy move every
activation through HBM at least once and do almost no arithmetic; at the micro-batch sizes of
large-model training they cost a few to ~10% of a step, which a GEMM-only model leaves out. Time
each entry with `elementwise_time_s(gpu, kernel.nbytes)`.

Byte counts, per micro-batch, with T = tokens through the rank's attention and MLP, T_n = tokens
of the residual stream the rank holds (T / tp with sequence parallelism), h = hidden, q =
heads * head_dim and g = kv_heads * head_dim of this rank, f = this rank's FFN width (each of the
gate and up projections when gated), V = this rank's vocabulary shard, a = 2 bytes (bf16
activations). Each kernel reads its inputs once and writes its outputs once; O(h) weights and
O(T) statistics (RMSNorm's 1/rms, LayerNorm's mean) are below 0.1% and left out.

    forward                                     backward
    input / MLP norm      read x, write y: 2 T_n h a     read x, dy, write dx: 3 T_n h a
    RoPE on q and k       read, write: 2 T (q + g) a     same on the gradients: 2 T (q + g) a
    residual add (x2)     read x, branch, write: 3 T_n h a   gradient join: 3 T_n h a
    SwiGLU                read gate, up, write: 3 T f a  read gate, up, dy, write both: 5 T f a
    GeLU (not gated)      read, write: 2 T f a           read x, dy, write dx: 3 T f a
    dropout (if any)      + 1-byte mask per residual element, written forward, read backward
    fp8 (fp4) casts       Transformer Engine's fused cast-transpose of each fp8 GEMM input:
                          read 16-bit, write fp8 and its transpose (for the weight gradient),
                          4 bytes per element (fp4: 3), amax fused in; forward on the inputs of the
                          QKV (T h), output (T q), up/gate (T h) and down (T f) projections;
                          backward on the gradients of their outputs (T (q + 2g), T h,
                          T f or 2 T f, T h). Weights are cast once per optimizer step (TE's
                          weight caching over micro-batches), so not here.
    last layer            final norm as above; a fused vocabulary-parallel cross entropy reads
                          the logits twice forward (max, then exp-sum: 2 T V a) and reads them
                          and writes their gradient backward (2 T V a).

Not here: attention itself (inside the fused attention kernel), GEMM epilogues (bias, fused
into the GEMM), recomputation (the caller repeats the forward list), optimizer and gradient
reduction (per step, not per layer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from simulators._errors import SpecError

ACTIVATION_BYTES = 2.0
LOW_PRECISION_BYTES = {"fp8": 1.0, "fp4": 0.5}  # fp4's per-block scale factors (1/16 byte per element) left out
MASK_BYTES = 1.0


@dataclass(frozen=True)
class MemoryKernel:
    """One memory-bound kernel launch: what it is, in which pass, and the bytes it moves."""

    name: str
    phase: Literal["fwd", "bwd"]
    nbytes: float | np.ndarray


def layer_memory_kernels(
    tokens,
    hidden,
    ffn,
    heads,
    kv_heads,
    head_dim,
    vocab,
    precision: str = "bf16",
    *,
    gated: bool = True,
    norm_tokens=None,
    dropout: bool = False,
    last_layer: bool = False,
) -> tuple[MemoryKernel, ...]:
    """The memory-bound kernels of one layer's forward and backward on one rank (module
    docstring for the byte counts). Arguments are per rank (`ffn`, `heads`, `kv_heads`,
    `vocab` already divided by the tensor-parallel degree) and may be numpy arrays."""
    fn = "layer_memory_kernels"
    dims = {"tokens": tokens, "hidden": hidden, "ffn": ffn, "heads": heads, "kv_heads": kv_heads}
    dims |= {"head_dim": head_dim, "vocab": vocab, "norm_tokens": tokens if norm_tokens is None else norm_tokens}
    arrays = {}
    for name, value in dims.items():
        arr = np.asarray(value, dtype=float)
        if not np.all(np.isfinite(arr) & (arr >= 1)):
            raise SpecError(f"{fn}.{name}: {value!r} is not allowed; allowed: numbers >= 1")
        arrays[name] = arr
    if precision not in ("fp16", "bf16", "fp8", "fp4"):
        raise SpecError(f"{fn}.precision: {precision!r} is not allowed; allowed: fp16, bf16, fp8, fp4")
    t, tn, h, f = arrays["tokens"], arrays["norm_tokens"], arrays["hidden"], arrays["ffn"]
    q, g, v = arrays["heads"] * arrays["head_dim"], arrays["kv_heads"] * arrays["head_dim"], arrays["vocab"]
    a = ACTIVATION_BYTES
    stream = tn * h
    mask = MASK_BYTES * stream if dropout else 0.0

    kernels = [
        ("input_norm", 2 * a * stream, 3 * a * stream),
        ("rope_qk", 2 * a * t * (q + g), 2 * a * t * (q + g)),
        ("attention_residual_add", 3 * a * stream + mask, 3 * a * stream + mask),
        ("mlp_norm", 2 * a * stream, 3 * a * stream),
        ("swiglu" if gated else "gelu", (3 if gated else 2) * a * t * f, (5 if gated else 3) * a * t * f),
        ("mlp_residual_add", 3 * a * stream + mask, 3 * a * stream + mask),
    ]
    if precision in LOW_PRECISION_BYTES:
        cast = a + 2 * LOW_PRECISION_BYTES[precision]  # read 16-bit, write the copy and its transpose
        up_out = (2 if gated else 1) * f
        kernels += [
            (f"{precision}_cast_qkv", cast * t * h, cast * t * (q + 2 * g)),
            (f"{precision}_cast_attention_out", cast * t * q, cast * t * h),
            (f"{precision}_cast_mlp_up", cast * t * h, cast * t * up_out),
            (f"{precision}_cast_mlp_down", cast * t * f, cast * t * h),
        ]
    if last_layer:
        kernels += [
            ("final_norm", 2 * a * stream, 3 * a * stream),
            ("cross_entropy", 2 * a * t * v, 2 * a * t * v),
        ]
    shape = np.broadcast_shapes(*(np.shape(x) for x in arrays.values()))
    scalar = shape == ()

    def out(x):
        return float(x) if scalar else np.broadcast_to(x, shape).copy()

    forward = [MemoryKernel(name, "fwd", out(fwd)) for name, fwd, _ in kernels]
    backward = [MemoryKernel(name, "bwd", out(bwd)) for name, _, bwd in reversed(kernels)]
    return tuple(forward + backward)
