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
Decode's constants: its weight and KV reads stream at the GPU's `hbm_efficiency` (the STREAM-copy
fraction, 0.87 of peak on H100, 0.79 on A100), which Vidur's profiled decode GEMMs reproduce within
6% (tests/simulators/hardware/test_decode_gemm_bandwidth.py); the best published decode-attention
kernels read a few per cent faster (gpus.yaml, hbm_efficiency); each kernel adds a fixed launch
cost; GEMMs that are not memory-bound run at the stack's compute fraction.
The last stage adds the logit GEMM for the sequences that produce a token; a stage boundary adds
one activation send. A request's batch passes the pp stages one after another; a new batch can
enter the first stage as soon as it is free, so pp batches can be in flight.

Mixture-of-experts layers (`MOE_PARALLEL`, how a stage's tp GPUs share them): the router and
shared experts run like the dense MLP; the routed experts see T * top_k token slots, spread
evenly over the experts a rank holds (each expert with tokens is one pair of GEMMs, so a small
decode batch reads only the experts it uses), the busiest rank carrying `expert_imbalance` times
the mean share where experts are spread whole over the ranks (an assumption the study states;
1 = balanced routing). With data-parallel attention (`dp_ep`) each GPU runs its own requests:
attention, KV cache and dense weights are per GPU, the batch's tokens are shared by the GPUs,
and every MoE layer dispatches and combines its token slots with two all-to-alls over the GPUs
(NVLink or the NIC fabric, wherever the stage's GPUs sit). Models whose dense and MoE layers
differ (DeepSeek-V3's first three) use the mean layer. Multi-head latent attention caches one
latent of kv_lora_rank + qk_rope_head_dim per token and layer (replicated on the attention's
tensor-parallel ranks), and a decode reads it once for keys and values.

Memory: weights split as the layout places them; what `memory_fraction` of HBM leaves after
weights and the activations of the largest batch holds the paged KV cache, in blocks of
`block_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulators._errors import PlanError, SpecError
from simulators.hardware import GpuSpec, attention_time_s, elementwise_time_s, gemm_time_s, layer_memory_kernels
from simulators.models import ModelSpec
from simulators.network import Network, collective_time_s
from simulators.workload import layer_forward_gemms, logits_gemm, pp_problem, precision_problem, tp_problem

# How the tp GPUs of a pipeline stage share an MoE layer.
MOE_PARALLEL = {
    "tp": "attention and every expert split by tensor parallelism (vLLM's default for MoE models)",
    "tp_ep": "attention tensor-parallel, whole experts spread over the GPUs (vLLM --enable-expert-parallel)",
    "dp_ep": "attention data-parallel (each GPU its own requests), whole experts spread over the GPUs, "
    "tokens dispatched and combined by all-to-all (SGLang --enable-dp-attention, vLLM data parallel with "
    "expert parallelism, as DeepSeek-V3 is served)",
}

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
    request_blocks: int  # the most one request can hold: one GPU's under data-parallel attention
    kv_bytes_per_token: float  # whole replica: every layer, K and V
    kv_bytes_per_token_per_gpu: float  # what one GPU caches of a token (its layers, its heads)
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


@dataclass(frozen=True)
class Layout:
    """How the GPUs of one pipeline stage share a layer: a token's attention and dense MLP
    split over `attention_tp` ranks, the batch's tokens over `token_share` ranks (data-parallel
    attention), routed experts spread whole over `ep` ranks, each split into `etp` shards."""

    attention_tp: int
    token_share: int
    ep: int
    etp: int

    @classmethod
    def of(cls, model: ModelSpec, gpus: int, moe_parallel: str) -> Layout:
        layout = {"tp": cls(gpus, 1, 1, gpus), "tp_ep": cls(gpus, 1, gpus, 1), "dp_ep": cls(1, gpus, gpus, 1)}
        chosen = layout[moe_parallel]
        if model.is_moe and model.moe_experts % chosen.ep:
            raise PlanError(f"moe_parallel={moe_parallel}: {gpus} GPUs do not share the {model.moe_experts} experts")
        if model.is_moe and model.moe_ffn_hidden % chosen.etp:
            raise PlanError(f"tp={gpus}: does not divide moe_ffn_hidden={model.moe_ffn_hidden} of {model.name}")
        return chosen

    def weight_bytes_per_gpu(self, model: ModelSpec, bytes_per_weight: float) -> float:
        """Per GPU of the stage: routed experts over ep * etp ranks, the rest over attention_tp."""
        experts = model.moe_layers * (model.moe_experts or 0) * model.expert_params
        return ((model.total_params - experts) / self.attention_tp + experts / (self.ep * self.etp)) * bytes_per_weight


def _routed_width(model: ModelSpec) -> int:
    """The MLP width one token of an MoE layer passes through: its top_k experts and the shared ones."""
    return model.moe_top_k * model.moe_ffn_hidden + model.shared_experts_ffn_hidden if model.is_moe else 0


def _routed_s(model: ModelSpec, gpu: GpuSpec, layout: Layout, t: np.ndarray, precision: str, imbalance: float):
    """Seconds of the busiest rank's routed experts for batches of t tokens (module docstring)."""
    local, width = model.moe_experts // layout.ep, model.moe_ffn_hidden // layout.etp
    inputs = 2 if model.gated_mlp else 1
    slots = t * model.moe_top_k
    if layout.ep > 1:
        slots = np.minimum(np.ceil(slots / layout.ep * imbalance), slots)
    per_expert, busier = np.divmod(slots.astype(np.int64), local)

    def experts_s(m: np.ndarray) -> np.ndarray:  # one expert's two GEMMs at m tokens; none at 0
        at = np.maximum(m, 1)
        s = gemm_time_s(gpu, at, inputs * width, model.hidden, 1, precision)
        s = s + gemm_time_s(gpu, at, model.hidden, width, 1, precision)
        return np.where(m > 0, s, 0.0)

    return busier * experts_s(per_expert + 1) + (local - busier) * experts_s(per_expert)


def _layer_s(model, gpu, layout: Layout, index: int, t, t_rank, precision: str, network: Network, imbalance: float):
    """One layer's (compute, communication) seconds for batches of t tokens, on the busiest rank
    (which holds t_rank of them)."""
    tp = layout.attention_tp
    heads, kv_heads = model.heads // tp, max(model.kv_heads // tp, 1)
    gemms = layer_forward_gemms(model, tp, 1, tp, layer_index=index)  # one token per rank; m is set below
    dense = [g for g in gemms if not g.causal and not g.name.startswith("expert_")]
    compute = sum(gemm_time_s(gpu, t_rank, g.n, g.k, g.batch, precision) for g in dense)
    moe = model.is_moe_layer(index)
    ffn = (_routed_width(model) if moe else model.ffn_hidden) // tp
    kernels = layer_memory_kernels(t_rank, model.hidden, ffn, heads, kv_heads, model.d_head, 1, gated=model.gated_mlp)
    compute = compute + sum(elementwise_time_s(gpu, k.nbytes) for k in kernels if k.phase == "fwd")
    if moe:
        compute = compute + _routed_s(model, gpu, layout, t, precision, imbalance)
    if layout.token_share > 1:  # data-parallel attention: the MoE layer's dispatch and combine
        slots_bytes = t_rank * model.moe_top_k * model.hidden * ACTIVATION_BYTES
        gpus = layout.token_share
        comm = 2 * collective_time_s("all_to_all", slots_bytes, gpus, 1, network) if moe else 0 * t
    elif tp > 1:
        comm = 2 * collective_time_s("all_reduce", t * model.hidden * ACTIVATION_BYTES, tp, 1, network)
    else:
        comm = 0 * t
    return compute, comm


def _flops_per_token(model: ModelSpec) -> float:
    """Linear-GEMM FLOPs of one token through the whole model (its top_k experts), logits excluded."""
    layers = (
        (first, count, layer_forward_gemms(model, 1, 1, 1, layer_index=first)) for first, count in model.layer_runs
    )
    return float(sum(count * sum(g.flops for g in gemms if not g.causal) for _, count, gemms in layers))


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
    moe_parallel: str = "tp",
    expert_imbalance: float = 1.0,
) -> ReplicaCost:
    """Tabulate the replica's costs for batches of up to `max_batch_tokens` tokens; an MoE
    model's experts run as `moe_parallel` says (MOE_PARALLEL), the busiest expert-parallel rank
    `expert_imbalance` (>= 1, checked by Deployment) times the mean load."""
    for name, value, allowed in (
        ("precision", precision, WEIGHT_BYTES),
        ("kv_precision", kv_precision, KV_BYTES),
        ("moe_parallel", moe_parallel, MOE_PARALLEL),
    ):
        if value not in allowed:
            raise SpecError(f"{name}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
    if problem := precision_problem(gpu, precision):
        raise PlanError(f"precision: {problem}")
    layout = Layout.of(model, tp, moe_parallel if model.is_moe else "tp")
    sustained = gpu.sustaining(compute_fraction)  # kernels: compute at the stack's share, HBM as it is
    if layout.attention_tp > 1 and (problem := tp_problem(model, tp)):
        raise PlanError(f"tp={tp}: {problem}")
    if problem := pp_problem(model, pp):
        raise PlanError(f"pp={pp}: {problem}")
    kv_bytes = KV_BYTES[kv_precision]
    heads, kv_heads = model.heads // layout.attention_tp, max(model.kv_heads // layout.attention_tp, 1)
    t = np.maximum(np.arange(max_batch_tokens + 1), 1)
    t_rank = -(-t // layout.token_share)  # the tokens of the busiest rank when attention is data-parallel
    linear = np.zeros(len(t))
    collectives = np.zeros(len(t))
    for first, count in model.layer_runs:  # tables per layer: the mean over the model's layers
        linear_s, collective_s = _layer_s(
            model, sustained, layout, first, t, t_rank, precision, network, expert_imbalance
        )
        linear += linear_s * count / model.layers
        collectives += collective_s * count / model.layers
    prefill_kv = heads if model.is_mla else kv_heads  # MLA prefills with keys and values up-projected per head
    prefill = attention_time_s(sustained, 1, heads, t, t, model.d_head, True, kv_heads=prefill_kv) / layout.token_share
    cached_dim, cached_heads, reads = (
        (model.kv_lora_rank + model.qk_rope_head_dim, 1, 0.5) if model.is_mla else (model.d_head, kv_heads, 1.0)
    )  # MLA decodes against its latent (keys and values are one cache, read once)
    fixed = float(attention_time_s(sustained, 1, heads, 1, 1, cached_dim, False, kv_heads=cached_heads))
    long = 1 << 16
    long_s = float(attention_time_s(sustained, 1, heads, 1, long, cached_dim, False, kv_heads=cached_heads))
    per_token = (long_s - fixed) / (long - 1) * kv_bytes / KV_BYTES["bf16"] * reads / layout.token_share
    n = np.maximum(np.arange(max_batch_requests + 1), 1)
    logits = gemm_time_s(sustained, n, logits_gemm(model, 1, 1, tp).n, model.hidden, 1, precision)
    activation_bytes = t * model.hidden * ACTIVATION_BYTES
    stride = tp  # stages sit tp ranks apart
    send = collective_time_s("send_recv", activation_bytes, 2, stride, network) if pp > 1 else 0 * t
    entries = 1 if model.is_mla else 2  # MLA's latent is keys and values at once
    kv_per_token = model.layers * cached_dim * entries * (1 if model.is_mla else model.kv_heads) * kv_bytes
    weights_per_gpu = layout.weight_bytes_per_gpu(model, WEIGHT_BYTES[precision]) / pp
    ffn = max(model.ffn_hidden, _routed_width(model)) // layout.attention_tp
    workspace = max_batch_tokens / layout.token_share * (4 * model.hidden + 2 * ffn) * ACTIVATION_BYTES
    free = gpu.hbm_bytes * memory_fraction - weights_per_gpu - workspace
    kv_per_token_per_gpu = model.layers / pp * cached_dim * entries * cached_heads * kv_bytes
    per_gpu = int(free // (kv_per_token_per_gpu * block_tokens)) if free > 0 else 0
    blocks = per_gpu * layout.token_share  # with data-parallel attention each GPU caches its own requests
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
        linear_s=np.asarray(linear, dtype=np.float64),
        allreduce_s=np.asarray(collectives, dtype=np.float64),
        prefill_attention_s=np.asarray(prefill, dtype=np.float64),
        decode_attention_fixed_s=fixed,
        decode_attention_per_token_s=per_token,
        logits_s=np.asarray(logits, dtype=np.float64),
        send_s=np.asarray(send, dtype=np.float64),
        kv_blocks=blocks,
        block_tokens=block_tokens,
        request_blocks=per_gpu if layout.token_share > 1 else blocks,
        kv_bytes_per_token=float(kv_per_token),
        kv_bytes_per_token_per_gpu=float(kv_per_token_per_gpu),
        weight_bytes_per_gpu=float(weights_per_gpu),
        flops_per_token=_flops_per_token(model),
        attention_flops_per_pair=2.0 * model.layers * model.heads * (model.d_head + (model.v_head_dim or model.d_head)),
        peak_flops_per_gpu=gpu.peak_tflops(precision) * 1e12,
        hbm_bytes_per_s=gpu.hbm_gbytes_per_s * 1e9,
    )
