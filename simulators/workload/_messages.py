"""The collectives a plan issues, their message sizes, and the parameters a rank's optimizer
updates: one definition each, shared by the cost model, the operation inventory, the collectives
report and the SimAI exporter (all per GPU, per micro-batch unless said otherwise)."""

from __future__ import annotations

from dataclasses import dataclass

from simulators.models import ModelSpec
from simulators.workload._memory import (
    ACTIVATION_BYTES,
    WEIGHT_BYTES,
    stage_edge_params,
    stage_params,
)
from simulators.workload._plan import ParallelPlan


def tp_activation_bytes(model: ModelSpec, plan: ParallelPlan) -> int:
    """A tensor-parallel collective of one block moves the b * s/cp * h activation in bf16."""
    return plan.micro_batch * (plan.seq_len // plan.cp) * model.hidden * ACTIVATION_BYTES


def ep_dispatch_bytes(model: ModelSpec, plan: ParallelPlan) -> int:
    """Tokens one rank sends to the experts (and gets back): its 1/tp share of b * s/cp, top_k times."""
    return plan.micro_batch * (plan.seq_len // plan.cp) // plan.tp * model.moe_top_k * model.hidden * ACTIVATION_BYTES


def cp_kv_bytes(model: ModelSpec, plan: ParallelPlan) -> int:
    """One ring-attention step passes the rank's K and V chunk on."""
    return 2 * plan.micro_batch * (plan.seq_len // plan.cp) * model.kv_width // plan.tp * ACTIVATION_BYTES


def pipeline_send_bytes(model: ModelSpec, plan: ParallelPlan) -> int:
    """An activation (or its gradient) crossing a stage boundary; sequence-parallel ranks each
    send their 1/tp of it."""
    nbytes = tp_activation_bytes(model, plan)
    return nbytes // plan.tp if plan.sequence_parallel else nbytes


def optimizer_local_params(plan: ParallelPlan, dense: float, expert: float) -> float:
    """Parameters a rank's optimizer updates: ZeRO >= 1 leaves it its shard (dense over dp*cp
    ranks, experts over expert_dp)."""
    if plan.zero_stage >= 1:
        return dense / (plan.dp * plan.cp) + expert / plan.expert_dp
    return dense + expert


@dataclass(frozen=True)
class Collective:
    """One collective a GPU issues: `per` is "micro-batch" (counted once per micro-batch through
    the layer or stage boundary) or "step"; ranks sit `stride` apart in the global rank order
    (Megatron's: tp innermost, then cp, dp, pp; experts etp, then ep)."""

    name: str
    phase: str  # fwd, bwd_input, bwd_weight, optimizer
    group: str  # tp, cp, ep, etp, dp, dp_ep, pp
    op: str  # all_gather, reduce_scatter, all_reduce, all_to_all, send_recv
    nbytes: float
    ranks: int
    stride: int
    per: str = "micro-batch"


def layer_collectives(model: ModelSpec, plan: ParallelPlan, layer_index: int) -> list[Collective]:
    """The collectives of one layer for one micro-batch (groups of one rank left out)."""
    out = []
    blocks = ("all_gather", "reduce_scatter") if plan.sequence_parallel else ("all_reduce",)
    moe = model.is_moe_layer(layer_index)
    for phase in ("fwd", "bwd_input"):
        if plan.tp > 1:
            for block in ("attention", "mlp"):
                for op in blocks:
                    out.append(
                        Collective(f"{block} {op}", phase, "tp", op, tp_activation_bytes(model, plan), plan.tp, 1)
                    )
        if plan.cp > 1:
            steps = (plan.cp - 1) * (2 if phase == "bwd_input" else 1)  # K, V forward; their gradients back
            out += [Collective("kv ring step", phase, "cp", "send_recv", cp_kv_bytes(model, plan), 2, plan.tp)] * steps
        if moe and plan.ep > 1:
            routed = ep_dispatch_bytes(model, plan)
            for name in ("dispatch", "combine"):
                out.append(Collective(f"expert {name}", phase, "ep", "all_to_all", routed, plan.ep, plan.etp))
        if moe and plan.etp > 1:
            routed = ep_dispatch_bytes(model, plan) * plan.etp
            for op in ("all_gather", "reduce_scatter"):
                out.append(Collective(f"expert {op}", phase, "etp", op, routed, plan.etp, 1))
        if plan.zero_stage == 3 and plan.dp * plan.cp > 1:  # gather the layer's weights before use
            weights = model.layer_params(layer_index) / plan.tp * WEIGHT_BYTES
            out.append(Collective("weight all_gather", phase, "dp", "all_gather", weights, plan.dp * plan.cp, plan.tp))
    if plan.zero_stage == 3 and plan.dp * plan.cp > 1:
        grads = model.layer_params(layer_index) / plan.tp * plan.gradient_bytes
        out.append(
            Collective(
                "gradient reduce_scatter", "bwd_weight", "dp", "reduce_scatter", grads, plan.dp * plan.cp, plan.tp
            )
        )
    return out


def step_collectives(model: ModelSpec, plan: ParallelPlan, stage: int = 0) -> list[Collective]:
    """The step's data-parallel collectives over the parameters of pipeline stage `stage`, and
    the pipeline sends per micro-batch. ZeRO-3 moves the layers' parameters layer by layer
    (`layer_collectives`); the embedding and output layer still move once per step."""
    if plan.zero_stage == 3:
        dense, expert = stage_edge_params(model, plan, stage), 0.0
    else:
        dense, expert = stage_params(model, plan, stage)
    out = []
    groups = (("dp", dense, plan.dp * plan.cp, plan.tp), ("dp_ep", expert, plan.expert_dp, plan.ep * plan.etp))
    for group, params, ranks, stride in groups:
        if not params or ranks == 1:
            continue
        if plan.zero_stage >= 1:
            out.append(
                Collective(
                    "gradient reduce_scatter",
                    "bwd_weight",
                    group,
                    "reduce_scatter",
                    params * plan.gradient_bytes,
                    ranks,
                    stride,
                    "step",
                )
            )
            out.append(
                Collective(
                    "parameter all_gather",
                    "optimizer",
                    group,
                    "all_gather",
                    params * WEIGHT_BYTES,
                    ranks,
                    stride,
                    "step",
                )
            )
        else:
            out.append(
                Collective(
                    "gradient all_reduce",
                    "bwd_weight",
                    group,
                    "all_reduce",
                    params * plan.gradient_bytes,
                    ranks,
                    stride,
                    "step",
                )
            )
    if plan.pp > 1:  # each chunk boundary is crossed forward and back by every micro-batch
        stride = plan.tp * plan.cp * plan.dp
        for phase in ("fwd", "bwd_input"):
            out += [Collective("stage send", phase, "pp", "send_recv", pipeline_send_bytes(model, plan), 2, stride)] * (
                plan.vpp
            )
    return out
