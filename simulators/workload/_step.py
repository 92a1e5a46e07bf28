"""The operations of one training step on one GPU, as a workload generator lists them (AICB's
role): for every pipeline stage, per layer and phase (fwd, bwd_input, bwd_weight) the GEMMs with
their shapes, the attention kernels, the memory-bound kernels and the collectives with their group
and bytes, then the stage's step-level data-parallel collectives, pipeline sends and optimizer.
Stages differ (the first holds the embedding, the last the output layer, a model's dense and MoE
layers fall on different stages), so each is listed, not the first for all. FLOPs and bytes only:
`dse simulate` prices them; this is the inventory a user can check or feed elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulators._errors import PlanError
from simulators.hardware import MemoryKernel, gemm_bytes, layer_memory_kernels
from simulators.models import ModelSpec
from simulators.workload._memory import ACTIVATION_BYTES, ADAM_BYTES_PER_PARAM, stage_layers, stage_params
from simulators.workload._messages import Collective, layer_collectives, optimizer_local_params, step_collectives
from simulators.workload._ops import layer_forward_gemms, logits_gemm
from simulators.workload._plan import ParallelPlan, TrainingCandidate


@dataclass(frozen=True)
class Operation:
    """One operation of one micro-batch on one GPU of pipeline stage `stage` (or of the whole
    step where `scope` is "step")."""

    stage: int
    scope: str  # "layer 0" ... "output", "boundary" (pipeline sends), or "step"
    phase: str  # fwd, bwd_input, bwd_weight, optimizer
    kind: str  # gemm, attention, memory, collective
    name: str
    shape: str  # "m x n x k" (times batch) for GEMMs; "b x heads x s_q x s_kv x d" for attention
    flops: float
    nbytes: float
    group: str = ""  # tp, cp, ep, etp, dp, dp_ep, pp for collectives
    ranks: int = 1


def step_operations(candidate: TrainingCandidate, stage: int | None = None) -> list[Operation]:
    """Every operation of one micro-batch through pipeline stage `stage` (default: every stage
    in turn), each stage followed by its step-level operations."""
    plan = candidate.plan
    if stage is not None and not 0 <= stage < plan.pp:
        raise PlanError(f"stage={stage}: the plan has pp={plan.pp} stages; allowed: 0 to {plan.pp - 1}")
    stages = range(plan.pp) if stage is None else (stage,)
    return [op for index in stages for op in _stage_operations(candidate, index)]


def _stage_operations(candidate: TrainingCandidate, stage: int) -> list[Operation]:
    model, plan = candidate.model, candidate.plan
    b, s, tp, cp = plan.micro_batch, plan.seq_len // plan.cp, plan.tp, plan.cp
    ops: list[Operation] = []
    for index in stage_layers(model, plan, stage):
        scope = f"layer {index}"
        for g in layer_forward_gemms(model, b, s, tp, layer_index=index, ep=plan.ep, etp=plan.etp):
            if g.causal:  # attention core: FlashAttention's fused kernels, backward ~ 2x forward
                shape = f"{b} x {model.heads // tp} x {s} x {s * cp} x {model.d_head}"
                ops.append(Operation(stage, scope, "fwd", "attention", g.name, shape, g.executed_flops * cp, 0.0))
                backward = 2 * g.executed_flops * cp
                ops.append(Operation(stage, scope, "bwd_input", "attention", g.name, shape, backward, 0.0))
                continue
            for phase, (m, n, k) in (
                ("fwd", (g.m, g.n, g.k)),
                ("bwd_input", (g.m, g.k, g.n)),
                ("bwd_weight", (g.k, g.n, g.m)),
            ):
                nbytes = gemm_bytes(m, n, k, g.batch, plan.precision)
                shape = f"{m} x {n} x {k}" + (f" (x{g.batch})" if g.batch > 1 else "")
                ops.append(Operation(stage, scope, phase, "gemm", g.name, shape, g.flops, nbytes))
        kernels = layer_kernels(model, plan, index)
        for kernel in kernels:
            phase = "fwd" if kernel.phase == "fwd" else "bwd_input"
            ops.append(Operation(stage, scope, phase, "memory", kernel.name, "", 0.0, float(kernel.nbytes)))
        ops += _as_operations(stage, scope, layer_collectives(model, plan, index))
    if stage == plan.pp - 1:  # the last stage holds the output layer
        g = logits_gemm(model, b, s, tp)
        for phase, shape in (
            ("fwd", f"{g.m} x {g.n} x {g.k}"),
            ("bwd_input", f"{g.m} x {g.k} x {g.n}"),
            ("bwd_weight", f"{g.k} x {g.n} x {g.m}"),
        ):
            ops.append(Operation(stage, "output", phase, "gemm", "logits", shape, g.flops, 0.0))
    return ops + _step_level(candidate, stage)


def layer_kernels(model: ModelSpec, plan: ParallelPlan, layer_index: int) -> tuple[MemoryKernel, ...]:
    """The memory-bound kernels of layer `layer_index` for one micro-batch on one GPU of `plan`
    (an MoE layer's MLP width is its top_k experts plus shared experts, per routed token)."""
    b, s, tp = plan.micro_batch, plan.seq_len // plan.cp, plan.tp
    moe = model.is_moe_layer(layer_index)
    width = model.moe_top_k * model.moe_ffn_hidden + model.shared_experts_ffn_hidden if moe else model.ffn_hidden
    kernels = layer_memory_kernels(
        b * s,
        model.hidden,
        width / tp,
        model.heads // tp,
        max(1, model.kv_heads // tp),
        model.d_head,
        -(-model.vocab // tp),
        plan.precision,
        gated=model.gated_mlp,
        norm_tokens=b * s // tp if plan.sequence_parallel else None,
    )
    return kernels + moe_permutation_kernels(model, plan) + moe_expert_bias_kernels(model, plan) if moe else kernels


def moe_permutation_kernels(model: ModelSpec, plan: ParallelPlan) -> tuple[MemoryKernel, ...]:
    """An MoE layer's token permutation: Megatron-Core's dispatcher copies each of the rank's
    tokens once per chosen expert into expert order before the experts (permute) and sums them
    back weighted by the router's probabilities after (unpermute), and the backward pass runs
    both on the gradients. Each reads one side and writes the other: (tokens + slots) x hidden x
    2 bytes, with slots = etp x tokens x top_k as the routed experts' GEMMs count them
    (simulators.workload._ops._moe). The all-to-all's own regrouping by local expert, where ep > 1
    and Transformer Engine's fused permutation is off, would add one more pass each way; not counted."""
    tokens = plan.micro_batch * (plan.seq_len // plan.cp) // plan.tp
    moved = (tokens + plan.etp * tokens * model.moe_top_k) * model.hidden * ACTIVATION_BYTES
    names = ("moe_permute", "moe_unpermute")
    return (*(MemoryKernel(n, "fwd", moved) for n in names), *(MemoryKernel(n, "bwd", moved) for n in reversed(names)))


# Bytes per element of the routed experts' output (rows x hidden) that Megatron-Core's per-expert
# output bias moves, forward and backward (see moe_expert_bias_kernels).
EXPERT_BIAS_BYTES = {"mul": 4.0, "add": 10.0, "cat": 8.0, "cast": 6.0}
EXPERT_BIAS_GRAD_BYTES = {"cast": 6.0, "add": 6.0, "mul": 8.0, "sum": 4.0, "cat": 4.0}


def moe_expert_bias_kernels(model: ModelSpec, plan: ParallelPlan) -> tuple[MemoryKernel, ...]:
    """The routed experts' output bias where Transformer Engine's GroupedLinear runs the experts
    (not the fused grouped MLP, which applies it inside its kernel). Megatron-Core's
    TEGroupedMLP._apply_bias (megatron/core/transformer/moe/experts.py, 2026-03 to 2026-08) splits
    the output projection's rows by expert and computes `t + b * p` for each local expert in eager
    PyTorch, then concatenates and casts back: per expert a multiply and an add forward; backward,
    autograd casts the add's gradient for `t` and runs a multiply and a reduction for each of the
    bias's and the probability's gradients, after one cast of the incoming gradient and before
    one concatenation of the split's gradients. The probabilities are fp32 (HybridEP requires
    fp32 probs; assumed for the other dispatchers too), so `b * p` and the sum are fp32 rows:
    bytes per element of the rows x hidden output in EXPERT_BIAS_BYTES (forward: write 4; read
    2 + 4, write 4; read and write 4; read 4, write 2) and EXPERT_BIAS_GRAD_BYTES; each entry
    is one launch, the per-expert ones once per local expert."""
    if not model.moe_expert_bias or plan.moe_grouped_gemm != "multi_stream":
        return ()
    local_experts = model.moe_experts // plan.ep
    tokens = plan.micro_batch * (plan.seq_len // plan.cp) // plan.tp
    elements = plan.etp * tokens * model.moe_top_k * model.hidden  # routed rows x hidden on this rank
    per_expert = elements / local_experts
    fwd = [MemoryKernel(f"moe_expert_bias_{op}", "fwd", per_expert * EXPERT_BIAS_BYTES[op]) for op in ("mul", "add")]
    fwd = fwd * local_experts + [
        MemoryKernel(f"moe_expert_bias_{op}", "fwd", elements * EXPERT_BIAS_BYTES[op]) for op in ("cat", "cast")
    ]
    per = [("add", 1), ("mul", 2), ("sum", 2)]
    bwd = [
        MemoryKernel(f"moe_expert_bias_grad_{op}", "bwd", per_expert * EXPERT_BIAS_GRAD_BYTES[op])
        for op, n in per
        for _ in range(n)
    ]
    bwd = bwd * local_experts + [
        MemoryKernel(f"moe_expert_bias_grad_{op}", "bwd", elements * EXPERT_BIAS_GRAD_BYTES[op])
        for op in ("cast", "cat")
    ]
    return (*fwd, *bwd)


def _as_operations(stage: int, scope: str, collectives: list[Collective]) -> list[Operation]:
    return [
        Operation(stage, scope, c.phase, "collective", c.name, "", 0.0, c.nbytes, c.group, c.ranks) for c in collectives
    ]


def _step_level(candidate: TrainingCandidate, stage: int) -> list[Operation]:
    model, plan = candidate.model, candidate.plan
    dense, expert = stage_params(model, plan, stage)
    collectives = step_collectives(model, plan, stage)
    ops = _as_operations(stage, "step", [c for c in collectives if c.per == "step"])
    ops += _as_operations(stage, "boundary", [c for c in collectives if c.per != "step"])
    ops.append(
        Operation(
            stage,
            "step",
            "optimizer",
            "memory",
            "adam",
            "",
            0.0,
            optimizer_local_params(plan, dense, expert) * ADAM_BYTES_PER_PARAM,
        )
    )
    return ops
