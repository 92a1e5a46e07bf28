"""What one inference iteration costs on a replica, from the same component models training uses.

A replica is `tp * pp` GPUs serving one copy of the model. An iteration runs a batch of T tokens
through every layer: prefill chunks (c tokens of a prompt whose first p tokens are already
cached) and decodes (one new token each against a cache of L tokens). Per layer, on one rank:
- the linear GEMMs at m = T and the memory-bound kernels (norms, rotary, activation, residuals),
  priced by `gemm_time_s` / `elementwise_time_s` (simulators.hardware) and tabulated for every T;
- two tensor-parallel all-reduces of T x hidden activations (`collective_time_s`);
- prefill attention: FlashAttention of c queries over p + c keys; its work grows with the key
  length at fixed c, so the time is the c-query self-attention time x (1 + 2p / c);
- decode attention: one kernel for all decodes, memory-bound on the KV cache it reads: a fixed
  launch cost plus a cost per cached token, both from `attention_time_s`.
The last stage adds the logit GEMM for the sequences that produce a token; a stage boundary adds
one activation send. A request's batch passes the pp stages one after another; a new batch can
enter the first stage as soon as it is free, so pp batches can be in flight.

Dense models only (mixture-of-experts routing is not priced here yet).

Memory: weights split over tp * pp; what `memory_fraction` of HBM leaves after weights and the
activations of the largest batch holds the paged KV cache, in blocks of `block_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulators._errors import PlanError, SpecError
from simulators.hardware import GpuSpec, attention_time_s, elementwise_time_s, gemm_time_s, layer_memory_kernels
from simulators.models import ModelSpec
from simulators.network import Network, collective_time_s
from simulators.workload import layer_forward_gemms, logits_gemm, pp_problem, precision_problem, tp_problem

WEIGHT_BYTES = {"fp16": 2, "bf16": 2, "fp8": 1, "fp4": 0.5}
# Bytes per cached K or V element: bf16 by default (vLLM's "auto"); fp8 where the checkpoint
# quantises the cache (e.g. NVIDIA ModelOpt FP8 checkpoints, kv_cache_quant_algo FP8).
KV_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}
ACTIVATION_BYTES = 2


@dataclass(frozen=True)
class ReplicaCost:
    """Iteration-time tables of one replica (seconds; index = tokens) and its KV capacity.

    `stage_s(T, chunks, decodes)` in `_engine` combines them; they are plain arrays so the
    compiled engine reads them directly."""

    tp: int
    pp: int
    layers_per_stage: float
    linear_s: np.ndarray  # [T] one layer's GEMMs and memory-bound kernels at T tokens
    allreduce_s: np.ndarray  # [T] one layer's two tensor-parallel all-reduces
    prefill_attention_s: np.ndarray  # [c] one layer's causal self-attention of a c-token chunk
    decode_attention_fixed_s: float  # one layer's decode attention kernel, no cache
    decode_attention_per_token_s: float  # ... and per cached token it reads
    logits_s: np.ndarray  # [n] the logit GEMM for n sequences
    send_s: np.ndarray  # [T] one activation send between stages
    kv_blocks: int
    block_tokens: int
    kv_bytes_per_token: float  # whole replica: every layer, K and V
    weight_bytes_per_gpu: float
    flops_per_token: float  # linear GEMMs of the whole model (2 x weights), logits excluded
    attention_flops_per_pair: float  # per (query, key) pair over the whole model (QK^T and PV)
    peak_flops_per_gpu: float
    hbm_bytes_per_s: float

    @property
    def max_tokens(self) -> int:
        return len(self.linear_s) - 1

    @property
    def kv_capacity_tokens(self) -> int:
        return self.kv_blocks * self.block_tokens


def replica_cost(
    model: ModelSpec,
    gpu: GpuSpec,
    tp: int,
    pp: int,
    network: Network,
    *,
    precision: str = "bf16",
    max_batch_tokens: int = 8192,
    max_batch_requests: int = 512,
    block_tokens: int = 16,
    memory_fraction: float = 0.9,
    compute_fraction: float = 1.0,
    kv_precision: str = "bf16",
) -> ReplicaCost:
    """Tabulate the replica's costs for batches of up to `max_batch_tokens` tokens."""
    if model.moe_experts:
        raise PlanError(f"{model.name} is a mixture-of-experts model; the serving model prices dense models only")
    if problem := tp_problem(model, tp):
        raise PlanError(f"tp={tp}: {problem}")
    if problem := pp_problem(model, pp):
        raise PlanError(f"pp={pp}: {problem}")
    for name, value, allowed in (("precision", precision, WEIGHT_BYTES), ("kv_precision", kv_precision, KV_BYTES)):
        if value not in allowed:
            raise SpecError(f"{name}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
    if problem := precision_problem(gpu, precision):
        raise PlanError(f"precision: {problem}")
    kv_bytes = KV_BYTES[kv_precision]
    # A rank holds heads / tp query heads and its share of KV heads (one whole head when there are
    # fewer KV heads than ranks).
    heads, kv_heads = model.heads // tp, max(model.kv_heads // tp, 1)
    t = np.maximum(np.arange(max_batch_tokens + 1), 1)
    linear = sum(gemm_time_s(gpu, t, g.n, g.k, g.batch, precision) for g in _linear_gemms(model, tp))
    kernels = layer_memory_kernels(
        t, model.hidden, model.ffn_hidden // tp, heads, kv_heads, model.head_dim, 1, gated=model.gated_mlp
    )
    linear = linear + sum(elementwise_time_s(gpu, k.nbytes) for k in kernels if k.phase == "fwd")
    activation_bytes = t * model.hidden * ACTIVATION_BYTES
    allreduce = 2 * collective_time_s("all_reduce", activation_bytes, tp, 1, network) if tp > 1 else 0 * t
    prefill = attention_time_s(gpu, 1, heads, t, t, model.head_dim, True, kv_heads=kv_heads)
    fixed = float(attention_time_s(gpu, 1, heads, 1, 1, model.head_dim, False, kv_heads=kv_heads))
    long = 1 << 16
    long_s = float(attention_time_s(gpu, 1, heads, 1, long, model.head_dim, False, kv_heads=kv_heads))
    per_token = (long_s - fixed) / (long - 1) * kv_bytes / KV_BYTES["bf16"]  # reading the cache bounds it
    n = np.maximum(np.arange(max_batch_requests + 1), 1)
    logits = gemm_time_s(gpu, n, logits_gemm(model, 1, 1, tp).n, model.hidden, 1, precision)
    stride = tp  # stages sit tp ranks apart
    send = collective_time_s("send_recv", activation_bytes, 2, stride, network) if pp > 1 else 0 * t
    scale = 1.0 / compute_fraction
    kv_per_token = 2 * model.layers * model.kv_heads * model.head_dim * kv_bytes
    weights_per_gpu = model.total_params * WEIGHT_BYTES[precision] / (tp * pp)
    workspace = max_batch_tokens * (4 * model.hidden + 2 * model.ffn_hidden // tp) * ACTIVATION_BYTES
    free = gpu.hbm_bytes * memory_fraction - weights_per_gpu - workspace
    kv_per_token_per_gpu = 2 * model.layers / pp * kv_heads * model.head_dim * kv_bytes
    blocks = int(free // (kv_per_token_per_gpu * block_tokens)) if free > 0 else 0
    if blocks < 1:
        raise PlanError(
            f"{model.name} on {tp * pp} x {gpu.name} (tp={tp}, pp={pp}) leaves no memory for the KV cache: "
            f"weights {weights_per_gpu / 2**30:.1f} GiB per GPU of "
            f"{gpu.hbm_bytes * memory_fraction / 2**30:.1f} GiB usable"
        )
    return ReplicaCost(
        tp=tp,
        pp=pp,
        layers_per_stage=model.layers / pp,
        linear_s=np.asarray(linear * scale, dtype=np.float64),
        allreduce_s=np.asarray(allreduce, dtype=np.float64),
        prefill_attention_s=np.asarray(prefill * scale, dtype=np.float64),
        decode_attention_fixed_s=fixed * scale,
        decode_attention_per_token_s=per_token * scale,
        logits_s=np.asarray(logits * scale, dtype=np.float64),
        send_s=np.asarray(send, dtype=np.float64),
        kv_blocks=blocks,
        block_tokens=block_tokens,
        kv_bytes_per_token=float(kv_per_token),
        weight_bytes_per_gpu=float(weights_per_gpu),
        flops_per_token=2.0 * model.layers * sum(g.m * g.n * g.k * g.batch for g in _linear_gemms(model, 1)),
        attention_flops_per_pair=4.0 * model.layers * model.heads * model.head_dim,
        peak_flops_per_gpu=gpu.peak_tflops(precision) * 1e12,
        hbm_bytes_per_s=gpu.hbm_gbytes_per_s * 1e9,
    )


def _linear_gemms(model: ModelSpec, tp: int) -> list:
    """The layer's GEMMs at one token (m = 1), attention scores and values left out."""
    return [g for g in layer_forward_gemms(model, 1, 1, tp) if not g.causal]
