"""Per-GPU memory of a training plan, on its most loaded pipeline stage.

Bytes per parameter follow Megatron-LM's mixed-precision accounting (docs "Distributed
Optimizer"): 2 (bf16 weights) + 4 (fp32 main gradients) + 12 (fp32 master weights, Adam m and
v). ZeRO shards them over the data-parallel (times context-parallel) ranks: stage 1 the 12,
stage 2 also the 4, stage 3 also the 2. Activations follow Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models" (arXiv:2205.05198, Sec. 4), adapted to
today's recipe: FlashAttention (no s x s softmax kept, only fp32 log-sum-exp per head and
token), no dropout, GQA and gated MLPs; context parallelism splits the sequence.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

from simulators._errors import PlanError
from simulators.hardware import LOW_PRECISION_BYTES
from simulators.models import ModelSpec
from simulators.workload._plan import ParallelPlan, virtual_stage_sizes

GIB = 2**30  # memory is counted in GiB, as GPUs address it (an "80 GB" H100 holds 80 GiB)
WEIGHT_BYTES = 2
OPTIMIZER_BYTES = 12
ACTIVATION_BYTES = 2
LOGIT_BYTES = 2 + 4  # bf16 logits kept for backward + fp32 copy for the cross-entropy
# ZeRO-3 keeps at most this many gathered parameters live (DeepSpeed's stage3_max_live_parameters
# default, deepspeed.ai/docs/config-json): it gathers and frees per sub-module, not per layer.
ZERO3_MAX_LIVE_PARAMS = 1_000_000_000
ADAM_BYTES_PER_PARAM = 30  # the Adam step reads grad, master, m, v (4 each), writes master, m, v, bf16 weight


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes one GPU holds at its peak; `total_gib` is what must fit in HBM. The `host_*` parts
    are what the plan offloads to its host memory tier (simulators/workload/_offload.py): they
    count against the GPU's share of host memory, never against HBM."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    reserve_bytes: float
    host_optimizer_bytes: float = 0.0
    host_activations_bytes: float = 0.0
    host_weights_bytes: float = 0.0
    host_nvme_optimizer_bytes: float = 0.0  # on the host's NVMe drives, not in its memory

    @property
    def total_bytes(self) -> float:
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.reserve_bytes
        )

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB

    @property
    def nvme_bytes(self) -> float:
        """Bytes this GPU keeps on the host's NVMe drives."""
        return self.host_nvme_optimizer_bytes

    @property
    def host_bytes(self) -> float:
        """Bytes this GPU keeps in host memory (DRAM; the NVMe drives apart)."""
        return self.host_optimizer_bytes + self.host_activations_bytes + self.host_weights_bytes


def virtual_stage_bounds(model: ModelSpec, plan: ParallelPlan) -> tuple[int, ...]:
    """First layer of each of the pp*vpp virtual stages, and the layer count at the end, as the
    plan's split gives them (simulators.workload._plan.virtual_stage_sizes)."""
    return _bounds(model.layers, plan.pp, plan.vpp, plan.split)


@cache
def _bounds(layers: int, pp: int, vpp: int, split: tuple) -> tuple[int, ...]:
    sizes = virtual_stage_sizes(layers, pp, vpp, *split)
    if isinstance(sizes, str):
        raise PlanError(sizes)
    bounds = [0]
    for size in sizes:
        bounds.append(bounds[-1] + size)
    return tuple(bounds)


def stage_layers(model: ModelSpec, plan: ParallelPlan, stage: int) -> list[int]:
    """Layer indices on pipeline stage `stage`: chunk c holds virtual stage c*pp + stage."""
    bounds = virtual_stage_bounds(model, plan)
    return [
        i
        for chunk in range(plan.vpp)
        for i in range(bounds[chunk * plan.pp + stage], bounds[chunk * plan.pp + stage + 1])
    ]


def stage_layer_kinds(model: ModelSpec, plan: ParallelPlan, stage: int) -> dict[bool, int]:
    """How many dense (False) and MoE (True) layers pipeline stage `stage` holds."""
    return dict(_layer_kinds(model.layers, model.moe_layers, plan.pp, plan.vpp, plan.split, stage))


@cache
def _layer_kinds(
    layers: int, moe_layers: int, pp: int, vpp: int, split: tuple, stage: int
) -> tuple[tuple[bool, int], ...]:
    bounds = _bounds(layers, pp, vpp, split)
    dense_end = layers - moe_layers
    dense = total = 0
    for chunk in range(vpp):
        start, end = bounds[chunk * pp + stage], bounds[chunk * pp + stage + 1]
        total += end - start
        dense += max(0, min(end, dense_end) - start)
    return tuple((kind, count) for kind, count in ((False, dense), (True, total - dense)) if count)


def stage_params(model: ModelSpec, plan: ParallelPlan, stage: int) -> tuple[float, float]:
    """(dense, expert) parameters one GPU of pipeline stage `stage` holds.

    Attention, dense and shared-expert MLPs, embeddings are split over tp (norms and the router
    are replicated); routed experts are split over ep, and each expert's MLP over etp.
    """
    return _stage_params(model, plan.tp, plan.ep, plan.etp, plan.pp, plan.vpp, plan.split, stage)


@cache
def _stage_params(
    model: ModelSpec, tp: int, ep: int, etp: int, pp: int, vpp: int, split: tuple, stage: int
) -> tuple[float, float]:
    h = model.hidden
    kinds = dict(_layer_kinds(model.layers, model.moe_layers, pp, vpp, split, stage))
    attention = model.attention_params / tp + 2 * h
    dense = kinds.get(False, 0) * (attention + model.mlp_matrices * h * model.ffn_hidden / tp)
    expert = 0.0
    if True in kinds:
        shared = model.mlp_matrices * h * model.shared_experts_ffn_hidden / tp
        dense += kinds[True] * (attention + model.router_params + shared)
        expert = kinds[True] * model.moe_experts // ep * model.expert_params / etp
    return dense + _edge_params(model, tp, pp, stage), expert


def stage_edge_params(model: ModelSpec, plan: ParallelPlan, stage: int) -> float:
    """Parameters one GPU of `stage` holds outside the transformer layers: the embedding on
    the first stage, the final norm and output layer on the last (split over tp)."""
    return _edge_params(model, plan.tp, plan.pp, stage)


def _edge_params(model: ModelSpec, tp: int, pp: int, stage: int) -> float:
    first, last = stage == 0, stage == pp - 1
    edge = model.embedding_params / tp if first else 0.0
    if last:
        edge += model.hidden  # final norm
        if not model.tied_embeddings:
            edge += model.output_params / tp
        elif not first:
            edge += model.embedding_params / tp  # tied copy kept on the last stage
    return edge


def layer_activation_bytes(model: ModelSpec, plan: ParallelPlan, moe: bool = False) -> float:
    """Activations one layer keeps for backward, for one micro-batch, per GPU.

    Korthikanti et al. 2022 (arXiv:2205.05198, Sec. 4.1-4.2, eq. 1-2): with dropout a GPT layer
    keeps sbh(34 + 5as/h) bytes; tensor parallelism splits 24 sbh + 5as^2b of it, sequence
    parallelism the remaining 10 sbh too. Here generalised, tensor by tensor: the inputs and
    outputs of the two norms; Q, K, V (GQA or MLA widths; MLA also its latents) and the attention
    output; the MLP intermediates (gate, up and their product for gated MLPs, fc1 and its
    activation otherwise; for MoE the permuted tokens, the top_k experts' intermediates, their
    outputs and the shared expert's); with `plan.dropout` the one-byte masks of the two residual
    dropouts. The attention core keeps FlashAttention's fp32 log-sum-exp, or unfused the softmax
    output (plus, with dropout, its mask and the dropped-out probabilities: 5as^2b).

    Under fp8 (fp4) training Transformer Engine keeps each GEMM input in the low precision its
    weight-gradient GEMM reads (transformer_engine/pytorch/module/linear.py saves the quantized
    input), so those tensors take LOW_PRECISION_BYTES; an MoE layer's pre-MLP norm output stays
    16-bit (the router reads it). Selective recomputation keeps nothing of the modules it reruns
    (`plan.recompute_modules`, Megatron-Core's --recompute-modules): core_attn the core's
    statistics, layernorm the norm outputs, mla_up_proj Q, K and V, mlp / moe the (dense / MoE)
    MLP's intermediates, moe_act the experts' activation output, shared_experts the shared
    expert's intermediates.
    """
    s, b, h, tp, rerun = plan.seq_len // plan.cp, plan.micro_batch, model.hidden, plan.tp, plan.recomputes
    sb, a = s * b, ACTIVATION_BYTES
    low = LOW_PRECISION_BYTES.get(plan.precision, a)
    v_width = model.heads * model.v_head_dim if model.is_mla else model.kv_width
    qkv = 0.0 if rerun("mla_up_proj") else a * (model.q_width + model.kv_width + v_width)
    attention_out = low * model.heads * (model.v_head_dim if model.is_mla else model.d_head)
    if rerun("core_attn"):
        core = 0.0
    elif plan.flash_attention:
        core = 4 * sb * model.heads
    else:
        core = (5 if plan.dropout else 2) * model.heads * s * s * b
    sharded = sb * (qkv + attention_out + _mlp_bytes(model, plan, moe, low)) + core
    # Replicated over tp unless sequence-parallel: norm inputs and outputs, MLA's latents,
    # dropout masks (1 B each).
    norm_outputs = 0.0 if rerun("layernorm") else low + (a if moe else low)
    latents = low * ((model.q_lora_rank or 0) + model.kv_lora_rank) if model.is_mla else 0.0
    replicated = sb * (h * (2 * a + norm_outputs) + latents + (2 * h if plan.dropout else 0))
    return sharded / tp + (replicated / tp if plan.sequence_parallel else replicated)


def _mlp_bytes(model: ModelSpec, plan: ParallelPlan, moe: bool, low: float) -> float:
    """Bytes per token the (dense or MoE) MLP of a layer keeps, before the tp split."""
    a, rerun = ACTIVATION_BYTES, plan.recomputes

    def dense(width: int) -> float:  # gate and up (or fc1) at 16 bits, the down projection's input
        return width * ((2 if model.gated_mlp else 1) * a + low)

    if not moe:
        return 0.0 if rerun("mlp") else dense(model.ffn_hidden)
    if rerun("moe"):
        return 0.0
    k, width = model.moe_top_k, model.moe_ffn_hidden
    routed = k * model.hidden * plan.etp * (low + a)  # permuted tokens in, expert outputs back
    routed += k * width * (2 if model.gated_mlp else 1) * a + (0.0 if rerun("moe_act") else k * width * low)
    shared = 0.0 if rerun("shared_experts") else dense(model.shared_experts_ffn_hidden)
    return routed + shared


def in_flight_chunks(plan: ParallelPlan, stage: int) -> int:
    """Model chunks of activations pipeline stage `stage` holds at its peak.

    GPipe runs every forward first (m micro-batches); 1F1B and ZB-H1 keep their warm-up plus the
    micro-batch in progress, pp - stage; interleaved 1F1B keeps (pp-stage-1)*2 + (v-1)*pp + 1
    chunks (Megatron's schedule, as simulators/analytical/_timeline.py runs it).
    """
    m, pp, v = plan.microbatches, plan.pp, plan.vpp
    if plan.schedule == "gpipe":
        return m
    if v > 1:
        return min((pp - stage - 1) * 2 + (v - 1) * pp + 1, m * v)
    return min(pp - stage, m)


@cache
def training_memory(model: ModelSpec, plan: ParallelPlan, memory_reserve_gib: float) -> MemoryBreakdown:
    """Peak memory of the most loaded pipeline stage (every stage is checked: with uneven
    splits a middle stage can hold the most).

    The last stage keeps its in-flight chunks plus the logits. Full recomputation keeps only each
    layer's input, plus one layer's activations while it is recomputed. ZeRO shards dense
    parameters' state over dp*cp ranks and experts' over the expert_dp ranks holding a replica;
    ZeRO-3 also holds the gathered weights of the layer in use and of the next, at most
    ZERO3_MAX_LIVE_PARAMS of them.
    """
    layer_input = plan.seq_len // plan.cp * plan.micro_batch * model.hidden * ACTIVATION_BYTES
    if plan.sequence_parallel:
        layer_input /= plan.tp
    logits = LOGIT_BYTES * plan.seq_len // plan.cp * plan.micro_batch * -(-model.vocab // plan.tp)
    dense_shards, expert_shards = plan.dp * plan.cp, plan.expert_dp

    def sharded(dense: float, expert: float, bytes_per_param: int, stage_from: int) -> float:
        if plan.zero_stage < stage_from:
            return (dense + expert) * bytes_per_param
        return (dense / dense_shards + expert / expert_shards) * bytes_per_param

    full = {moe: layer_activation_bytes(model, plan, moe) for moe in {False, model.is_moe}}

    # ZeRO-3 holds the layer in use and the one prefetched behind it (bf16), up to the live limit.
    largest_layer = max(model.layer_params(first) for first, _ in model.layer_runs) / plan.tp
    gathered = min(2 * largest_layer, ZERO3_MAX_LIVE_PARAMS) * WEIGHT_BYTES if plan.zero_stage == 3 else 0.0

    def stage(index: int) -> MemoryBreakdown:
        kinds = stage_layer_kinds(model, plan, index)
        if plan.recompute == "full":
            chunk, working = sum(kinds.values()) / plan.vpp * layer_input, max(full[k] for k in kinds)
        else:
            chunk, working = sum(n * full[k] for k, n in kinds.items()) / plan.vpp, 0.0
        dense, expert = stage_params(model, plan, index)
        return MemoryBreakdown(
            weights_bytes=sharded(dense, expert, WEIGHT_BYTES, 3) + gathered,
            gradients_bytes=sharded(dense, expert, plan.gradient_bytes, 2),
            optimizer_bytes=sharded(dense, expert, OPTIMIZER_BYTES, 1),
            activations_bytes=in_flight_chunks(plan, index) * chunk
            + working
            + (logits if index == plan.pp - 1 else 0.0),
            reserve_bytes=memory_reserve_gib * GIB,
        )

    peak = max((stage(index) for index in range(plan.pp)), key=lambda m: m.total_bytes)
    return _offloaded(peak, model, plan, full, gathered) if plan.offload != "none" else peak


def _offloaded(
    memory: MemoryBreakdown, model: ModelSpec, plan: ParallelPlan, full: dict, gathered: float
) -> MemoryBreakdown:
    """`memory` with what the plan offloads moved to host memory.

    Optimizer offload (Megatron-Core's HybridDeviceOptimizer, --optimizer-offload-fraction;
    DeepSpeed ZeRO-Offload alike) keeps the fp32 master weights and Adam moments, the 12 bytes per
    parameter of the shard, on the host (`optimizer_offload_fraction` of them; the rest in HBM);
    gradients and bf16 weights stay in HBM. Activation offload (one pipeline stage, no
    recomputation: offload_problem) copies each layer's saved activations out after its forward
    and back before its backward, for all layers but the last (Megatron's cpu_offloading_num_layers
    is at most layers - 1); HBM keeps the last layer's and one layer in transit (the next to reload
    while a layer's backward runs), plus the logits.
    Weight offload (ZeRO-Infinity's offload_param, ZeRO-3) keeps the bf16 parameter shard on the
    host; HBM holds only the gathered layers in use (ZeRO-3's live parameters). NVMe optimizer
    offload (ZeRO-Infinity) keeps the optimizer's bytes on the host's NVMe drives instead (the host
    memory's staging buffers are not counted). Gradients stay in
    HBM in every mode (Megatron's way; DeepSpeed also moves ZeRO's gradient partitions to the host,
    so for it these HBM figures are upper bounds).
    """
    share = plan.optimizer_offload_fraction if plan.offloads_optimizer else 0.0
    host_optimizer = memory.optimizer_bytes * share
    nvme_optimizer = host_optimizer if plan.optimizer_on_nvme else 0.0
    host_activations, kept = 0.0, memory.activations_bytes
    if plan.offloads_activations and model.layers > 1:
        kinds = stage_layer_kinds(model, plan, 0)
        last = full[model.is_moe]  # MoE layers come last
        layers_bytes = sum(n * full[k] for k, n in kinds.items())
        host_activations = in_flight_chunks(plan, 0) * (layers_bytes - last)
        kept = memory.activations_bytes - host_activations + max(full[k] for k in kinds)
    host_weights = memory.weights_bytes - gathered if plan.offloads_weights else 0.0
    return dataclasses.replace(
        memory,
        weights_bytes=memory.weights_bytes - host_weights,
        host_weights_bytes=host_weights,
        optimizer_bytes=memory.optimizer_bytes - host_optimizer,
        activations_bytes=kept,
        host_optimizer_bytes=host_optimizer - nvme_optimizer,
        host_nvme_optimizer_bytes=nvme_optimizer,
        host_activations_bytes=host_activations,
    )
