"""The operations of one training step on one GPU, as a workload generator lists them (AICB's
role): per layer and phase (fwd, bwd_input, bwd_weight) the GEMMs with their shapes, the
attention kernels, the memory-bound kernels and the collectives with their group and bytes, then
the step-level data-parallel collectives, pipeline sends and the optimizer. FLOPs and bytes only:
`dse simulate` prices them; this is the inventory a user can check or feed elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulators.hardware import MemoryKernel, gemm_bytes, layer_memory_kernels
from simulators.models import ModelSpec
from simulators.workload._memory import ADAM_BYTES_PER_PARAM, stage_layers, stage_params
from simulators.workload._messages import Collective, layer_collectives, optimizer_local_params, step_collectives
from simulators.workload._ops import layer_forward_gemms, logits_gemm
from simulators.workload._plan import ParallelPlan, TrainingCandidate


@dataclass(frozen=True)
class Operation:
    """One operation of one micro-batch (or of the whole step where `scope` is "step")."""

    scope: str  # "layer 0" ... "output", "boundary" (pipeline sends), or "step"
    phase: str  # fwd, bwd_input, bwd_weight, optimizer
    kind: str  # gemm, attention, memory, collective
    name: str
    shape: str  # "m x n x k" (times batch) for GEMMs; "b x heads x s_q x s_kv x d" for attention
    flops: float
    nbytes: float
    group: str = ""  # tp, cp, ep, etp, dp, dp_ep, pp for collectives
    ranks: int = 1


def step_operations(candidate: TrainingCandidate) -> list[Operation]:
    """Every operation of one micro-batch through the first pipeline stage, then the step's own."""
    model, plan = candidate.model, candidate.plan
    b, s, tp, cp = plan.micro_batch, plan.seq_len // plan.cp, plan.tp, plan.cp
    ops: list[Operation] = []
    for index in stage_layers(model, plan, 0):
        scope = f"layer {index}"
        for g in layer_forward_gemms(model, b, s, tp, layer_index=index, ep=plan.ep, etp=plan.etp):
            if g.causal:  # attention core: FlashAttention's fused kernels, backward ~ 2x forward
                shape = f"{b} x {model.heads // tp} x {s} x {s * cp} x {model.d_head}"
                ops.append(Operation(scope, "fwd", "attention", g.name, shape, g.executed_flops * cp, 0.0))
                ops.append(Operation(scope, "bwd_input", "attention", g.name, shape, 2 * g.executed_flops * cp, 0.0))
                continue
            for phase, (m, n, k) in (
                ("fwd", (g.m, g.n, g.k)),
                ("bwd_input", (g.m, g.k, g.n)),
                ("bwd_weight", (g.k, g.n, g.m)),
            ):
                nbytes = gemm_bytes(m, n, k, g.batch, plan.precision)
                shape = f"{m} x {n} x {k}" + (f" (x{g.batch})" if g.batch > 1 else "")
                ops.append(Operation(scope, phase, "gemm", g.name, shape, g.flops, nbytes))
        kernels = layer_kernels(model, plan, index)
        for kernel in kernels:
            phase = "fwd" if kernel.phase == "fwd" else "bwd_input"
            ops.append(Operation(scope, phase, "memory", kernel.name, "", 0.0, float(kernel.nbytes)))
        ops += _as_operations(scope, layer_collectives(model, plan, index))
    if plan.pp == 1:  # the first stage is also the last: it holds the output layer
        g = logits_gemm(model, b, s, tp)
        ops.append(Operation("output", "fwd", "gemm", "logits", f"{g.m} x {g.n} x {g.k}", g.flops, 0.0))
        ops.append(Operation("output", "bwd_input", "gemm", "logits", f"{g.m} x {g.k} x {g.n}", g.flops, 0.0))
        ops.append(Operation("output", "bwd_weight", "gemm", "logits", f"{g.k} x {g.n} x {g.m}", g.flops, 0.0))
    return ops + _step_level(candidate)


def layer_kernels(model: ModelSpec, plan: ParallelPlan, layer_index: int) -> tuple[MemoryKernel, ...]:
    """The memory-bound kernels of layer `layer_index` for one micro-batch on one GPU of `plan`
    (an MoE layer's MLP width is its top_k experts plus shared experts, per routed token)."""
    b, s, tp = plan.micro_batch, plan.seq_len // plan.cp, plan.tp
    moe = model.is_moe_layer(layer_index)
    width = model.moe_top_k * model.moe_ffn_hidden + model.shared_experts_ffn_hidden if moe else model.ffn_hidden
    return layer_memory_kernels(
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


def _as_operations(scope: str, collectives: list[Collective]) -> list[Operation]:
    return [Operation(scope, c.phase, "collective", c.name, "", 0.0, c.nbytes, c.group, c.ranks) for c in collectives]


def _step_level(candidate: TrainingCandidate) -> list[Operation]:
    model, plan = candidate.model, candidate.plan
    dense, expert = stage_params(model, plan, 0)
    collectives = step_collectives(model, plan)
    ops = _as_operations("step", [c for c in collectives if c.per == "step"])
    ops += _as_operations("boundary", [c for c in collectives if c.per != "step"])
    ops.append(
        Operation(
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
