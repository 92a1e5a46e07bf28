"""The collectives one training step of a candidate issues, as nccl-tests would report them.

For each kind (per layer: tensor-parallel, context-parallel ring step, expert all-to-all; per
step: data-parallel gradient reduction and parameter gather, pipeline send) the message size,
the group, the algorithm NCCL's tuner would pick, its time and the nccl-tests bus bandwidth, so
a user can check the network side of a prediction against their own nccl-tests runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulators.hardware import get_gpu
from simulators.network import Network, bus_bandwidth_gbytes_per_s, choose_algorithm
from simulators.workload import (
    TrainingCandidate,
    cp_kv_bytes,
    ep_dispatch_bytes,
    pipeline_send_bytes,
    stage_layer_kinds,
    stage_params,
    tp_activation_bytes,
)
from simulators.workload._memory import GRADIENT_BYTES, WEIGHT_BYTES


@dataclass(frozen=True)
class CollectiveUse:
    """One collective as issued: `count_per_step` times per training step on the first stage."""

    name: str
    op: str
    nbytes: float
    ranks: int
    stride: int
    count_per_step: int
    algorithm: str
    time_s: float
    busbw_gbytes_per_s: float


def plan_collectives(candidate: TrainingCandidate) -> list[CollectiveUse]:
    """The distinct collectives of the candidate's step (groups of one rank are left out)."""
    model, plan = candidate.model, candidate.plan
    network = Network.from_gpu(get_gpu(candidate.system.gpu.name))
    kinds = stage_layer_kinds(model, plan, 0)
    passes = plan.microbatches * sum(kinds.values())
    dense, expert = stage_params(model, plan, 0)
    uses = []
    tp_ops = ("all_gather", "reduce_scatter") if plan.sequence_parallel else ("all_reduce",)
    for op in tp_ops:
        uses.append((f"tp {op}", op, tp_activation_bytes(model, plan), plan.tp, 1, 4 * passes))
    kv = cp_kv_bytes(model, plan)
    uses.append(("cp ring step", "send_recv", kv, 2 if plan.cp > 1 else 1, plan.tp, 3 * (plan.cp - 1) * passes))
    if model.is_moe:
        moe_passes = plan.microbatches * kinds.get(True, 0)
        uses.append(
            ("ep dispatch/combine", "all_to_all", ep_dispatch_bytes(model, plan), plan.ep, plan.etp, 4 * moe_passes)
        )
    if plan.zero_stage >= 1:
        uses.append(
            ("dp gradient reduce-scatter", "reduce_scatter", dense * GRADIENT_BYTES, plan.dp * plan.cp, plan.tp, 1)
        )
        uses.append(("dp parameter all-gather", "all_gather", dense * WEIGHT_BYTES, plan.dp * plan.cp, plan.tp, 1))
    else:
        uses.append(("dp gradient all-reduce", "all_reduce", dense * GRADIENT_BYTES, plan.dp * plan.cp, plan.tp, 1))
    if expert:
        uses.append(
            (
                "expert gradient reduce-scatter",
                "reduce_scatter",
                expert * GRADIENT_BYTES,
                plan.expert_dp,
                plan.ep * plan.etp,
                1,
            )
        )
    boundary = pipeline_send_bytes(model, plan)
    uses.append(
        (
            "pp send",
            "send_recv",
            boundary,
            2 if plan.pp > 1 else 1,
            plan.tp * plan.cp * plan.dp,
            2 * plan.microbatches * plan.vpp,
        )
    )
    out = []
    for name, op, nbytes, ranks, stride, count in uses:
        if ranks == 1 or not nbytes or not count:
            continue
        choice = choose_algorithm(op, nbytes, ranks, stride, network)
        time_s = float(choice.time_s)
        out.append(
            CollectiveUse(
                name,
                op,
                float(nbytes),
                int(ranks),
                int(stride),
                int(count),
                str(choice.algorithm),
                time_s,
                float(bus_bandwidth_gbytes_per_s(op, nbytes, ranks, time_s)),
            )
        )
    return out
