"""Per-GPU memory of a training plan, by part: what each pipeline stage holds (the peak over
the stages: `_peak_memory`).

Bytes per parameter follow Megatron-LM's mixed-precision accounting (docs "Distributed
Optimizer"): 2 (bf16 weights) + 4 (fp32 main gradients) + 12 (fp32 master weights, Adam m and
v). ZeRO shards them over the data-parallel (times context-parallel) ranks: stage 1 the 12,
stage 2 also the 4, stage 3 also the 2. Activations follow Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models" (arXiv:2205.05198, Sec. 4), adapted to
today's recipe: FlashAttention (no s x s softmax kept, only fp32 log-sum-exp per head and
token), no dropout, GQA and gated MLPs; context parallelism splits the sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

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
    return dict(layer_kinds_by_shape(model.layers, model.moe_layers, plan.pp, plan.vpp, plan.split, stage))


@cache
def layer_kinds_by_shape(
    layers: int, moe_layers: int, pp: int, vpp: int, split: tuple, stage: int
) -> tuple[tuple[bool, int], ...]:
    """`stage_layer_kinds` keyed by the pipeline shape alone, so plans of one shape share it."""
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
    return stage_params_by_shape(model, plan.tp, plan.ep, plan.etp, plan.pp, plan.vpp, plan.split, stage)


@cache
def stage_params_by_shape(
    model: ModelSpec, tp: int, ep: int, etp: int, pp: int, vpp: int, split: tuple, stage: int
) -> tuple[float, float]:
    """`stage_params` keyed by the parallel shape alone, so plans of one shape share it."""
    h = model.hidden
    kinds = dict(layer_kinds_by_shape(model.layers, model.moe_layers, pp, vpp, split, stage))
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
    return int(in_flight_rows(plan.schedule == "gpipe", plan.microbatches, plan.pp, plan.vpp, stage))


def in_flight_rows(gpipe, m, pp, v, stage) -> np.ndarray:
    """`in_flight_chunks` over arrays of stages (schedule is GPipe, micro-batches, pp, vpp, stage)."""
    interleaved = np.minimum((pp - stage - 1) * 2 + (v - 1) * pp + 1, m * v)
    return np.where(gpipe, m, np.where(v > 1, interleaved, np.minimum(pp - stage, m)))
