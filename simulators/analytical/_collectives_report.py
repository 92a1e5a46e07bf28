"""The collectives one training step of a candidate issues, as nccl-tests would report them.

For each distinct collective (per layer: tensor-parallel, context-parallel ring step, expert
all-to-all and expert tensor-parallel, ZeRO-3 gathers; per step: data-parallel gradient
reduction and parameter gather; pipeline sends) the message size,
the group, the algorithm NCCL's tuner would pick, its time and the nccl-tests bus bandwidth, so
a user can check the network side of a prediction against their own nccl-tests runs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from simulators.network import bus_bandwidth_gbytes_per_s, choose_algorithm
from simulators.workload import (
    Collective,
    TrainingCandidate,
    layer_collectives,
    stage_layers,
    step_collectives,
)


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
    """The distinct collectives of the candidate's step on the first stage, each priced once,
    from the same inventory `dse workload ops` lists (simulators.workload.layer_collectives)."""
    model, plan = candidate.model, candidate.plan
    network = candidate.system.fabric_network
    counts: Counter = Counter()
    for index in stage_layers(model, plan, 0):
        for c in layer_collectives(model, plan, index):
            counts[_key(c)] += plan.microbatches
    for c in step_collectives(model, plan):
        counts[_key(c)] += 1 if c.per == "step" else plan.microbatches
    out = []
    for (group, op, nbytes, ranks, stride), count in counts.items():
        choice = choose_algorithm(op, nbytes, ranks, stride, network)
        time_s = float(choice.time_s)
        busbw = float(bus_bandwidth_gbytes_per_s(op, nbytes, ranks, time_s))
        out.append(
            CollectiveUse(
                f"{group} {op}", op, float(nbytes), ranks, stride, count, str(choice.algorithm), time_s, busbw
            )
        )
    return out


def _key(c: Collective) -> tuple:
    return (c.group, c.op, c.nbytes, c.ranks, c.stride)
