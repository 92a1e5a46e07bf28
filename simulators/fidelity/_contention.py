"""Congestion factors of a training candidate's collectives from a contention-aware simulator.

For each distinct collective of the step that leaves a server (simulators.analytical
.plan_collectives), every group of the plan runs it at once on the candidate's fabric graph (all
data-parallel rings of the iteration together, say), with ECMP routes; the same collective of one
group alone, on the very paths it takes beside the others, is the baseline. The factor is their
ratio of completion times: 1 where groups never meet, above 1 where their flows share links
(ECMP collisions, oversubscription). Each collective runs the algorithm the analytical model
chose for it (its `CollectiveUse.algorithm`), as that algorithm's schedule on the group's
placement. Messages are capped (the factor is a property of the routes, not of the size, once
transfers are bandwidth-bound) so the runs stay short; collectives that differ only in a size
above the cap share one run. Each collective of the step keeps its own factor (keyed by op,
group and size), so two sizes of one op on one group are priced apart.

The graph is the fabric less its failed switches and links (`Fabric.failures`), so ECMP routes
over what survives; the analytical network has already lost their capacity, so a factor here is
the contention that the failure's surviving paths add. A level that `spreads` models adaptive
routing (a family with that trait) as load spread over every equal-cost path (`fabric_links`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import networkx as nx

from simulators.analytical import plan_collectives
from simulators.network import (
    CongestionFactor,
    Fabric,
    FlowArrays,
    Group,
    Link,
    Network,
    Route,
    collective_flows,
    fabric_graph,
    fabric_links,
    groups_of,
    nvswitch_of,
    surviving_graph,
)
from simulators.workload import TrainingCandidate

MTU_BYTES = 4096

# (links, flows, switch nodes) -> seconds until the last flow completes
Makespan = Callable[[Sequence[Link], FlowArrays, set[int]], float]


def congestion_factors(
    candidate: TrainingCandidate, fabric: Fabric, message_cap_bytes: int, makespan_s: Makespan, *, spread: bool
) -> list[CongestionFactor]:
    """The factor of each collective of `candidate` that crosses servers, each run timed by
    `makespan_s` (a level's simulator); `spread`: adaptive routing spreads flows (module docstring)."""
    system = candidate.system
    graph = fabric_graph(fabric, system.gpu, system.num_gpus)
    if fabric.failures:
        graph = surviving_graph(graph, fabric.failures)
    links, switches, route = fabric_links(graph, spread=spread)
    runs: dict[tuple, tuple[float, float, int]] = {}
    out = []
    for use in plan_collectives(candidate):
        if use.ranks < 2 or use.ranks * use.stride <= fabric.gpus_per_server:
            continue  # inside one server: the fabric plays no part
        nbytes = int(min(use.nbytes, message_cap_bytes))
        key = (use.op, use.ranks, use.stride, use.algorithm, nbytes)
        if key not in runs:
            alone, together, count = group_flows(
                graph, route, system.fabric_network, use.op, use.ranks, use.stride, nbytes, use.algorithm
            )
            runs[key] = (makespan_s(links, alone, switches), makespan_s(links, together, switches), count)
        alone_s, together_s, count = runs[key]
        out.append(
            CongestionFactor(use.op, use.ranks, use.stride, int(use.nbytes), count, alone_s, together_s, use.algorithm)
        )
    return out


def group_flows(
    graph: nx.Graph, route: Route, network: Network, op: str, ranks: int, stride: int, nbytes: int, algorithm: str
) -> tuple[FlowArrays, FlowArrays, int]:
    """`op` by `algorithm` for every group of `ranks` members `stride` apart on the GPUs of
    `graph` (placed as on `network`): the first group's flows alone, on the very paths it takes
    with the others; every group's flows together; the number of groups."""
    per_domain = int(Group.place(ranks, stride, network).per_domain)
    groups = groups_of(graph.graph["num_gpus"], ranks, stride)
    switches = [[nvswitch_of(graph, gpu) for gpu in group[::per_domain]] for group in groups]
    kw = {"algorithm": algorithm, "per_domain": per_domain, "mtu_bytes": MTU_BYTES}
    together = collective_flows(op, groups, nbytes, route, switches=switches, **kw)
    alone = collective_flows(op, groups[:1], nbytes, route, switches=switches[:1], **kw)  # routes already chosen
    return alone, together, len(groups)
