"""Message sizes of a plan's collectives and the parameters a rank's optimizer updates: one
definition each, shared by the cost model, the operation inventory, the collectives report and
the SimAI exporter (all per GPU, per micro-batch unless said otherwise)."""

from __future__ import annotations

from simulators.models import ModelSpec
from simulators.workload._memory import ACTIVATION_BYTES
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
