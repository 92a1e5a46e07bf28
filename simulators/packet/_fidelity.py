"""Packet-level fidelity for a training candidate: how much its collectives slow each other down
on the real fabric, as factors the analytical model applies.

For each distinct collective of the step that leaves a server (simulators.analytical
.plan_collectives), every group of the plan runs it at once on the candidate's fabric graph (all
data-parallel rings of the iteration together, say), with ECMP routes; the same collective of one
group alone on the same fabric is the baseline. The factor is their ratio of completion times: 1
where groups never meet, above 1 where their flows share links (ECMP collisions,
oversubscription). Each collective runs the algorithm the analytical model chose for it (its
`CollectiveUse.algorithm`), as that algorithm's schedule on the group's placement. Messages are
capped (the factor is a property of the routes, not of the size, once transfers are
bandwidth-bound) so the packet runs stay short; line-rate senders, as in the ns-3 reference runs.
"""

from __future__ import annotations

import networkx as nx

from simulators.analytical import plan_collectives
from simulators.network import CongestionFactor, Fabric, Group, Router, fabric_graph
from simulators.packet._collectives import collective_flows
from simulators.packet._run import Flow, Link, RoceSettings, simulate
from simulators.workload import TrainingCandidate

MTU_BYTES = 4096


def groups_of(num_gpus: int, ranks: int, stride: int) -> list[list[int]]:
    """Every group of `ranks` members `stride` apart (the placement `Group` describes): GPU
    (outer * ranks + j) * stride + inner for each (outer, inner)."""
    span = ranks * stride
    return [
        [(outer * ranks + j) * stride + inner for j in range(ranks)]
        for outer in range(num_gpus // span)
        for inner in range(stride)
    ]


def fabric_links(graph: nx.Graph):
    """The packet simulator's view of a fabric graph (simulators.network.fabric_graph): two
    directed links per physical link (each member of a bundle of parallel links), the switch
    nodes, and a route function for collectives that hashes each flow onto its ECMP path."""
    links: list[Link] = []
    index: dict[tuple[int, int, int], int] = {}
    for u, v, data in graph.edges(data=True):
        for member in range(data.get("count", 1)):
            for a, b in ((u, v), (v, u)):
                index[a, b, member] = len(links)
                links.append(Link(a, b, data["gbps"], data["latency_s"]))
    switches = {node for node, kind in graph.nodes(data="kind") if kind != "gpu"}
    router = Router(graph)
    flow_ids = iter(range(1 << 62))

    def route(src: int, dst: int) -> tuple[int, ...]:
        if src in switches or dst in switches:  # a GPU and its NVSwitch (in-switch reduction): one link
            return (index[src, dst, 0],)
        return tuple(index[hop] for hop in router.hops(src, dst, next(flow_ids)))

    return links, switches, route


def congestion_factors(
    candidate: TrainingCandidate, fabric: Fabric, message_cap_bytes: int = 16 << 20
) -> list[CongestionFactor]:
    """The factor of each collective of `candidate` that crosses servers."""
    system = candidate.system
    graph = fabric_graph(fabric, system.gpu, system.num_gpus)
    links, switches, route = fabric_links(graph)
    out = []
    for use in plan_collectives(candidate):
        if use.ranks < 2 or use.ranks * use.stride <= fabric.gpus_per_server:
            continue  # inside one server: the fabric plays no part
        nbytes = int(min(use.nbytes, message_cap_bytes))
        per_domain = int(Group.place(use.ranks, use.stride, system.fabric_network).per_domain)
        groups = groups_of(system.num_gpus, use.ranks, use.stride)
        together: list[Flow] = []
        alone: list[Flow] = []
        for group in groups:
            together += collective_flows(
                use.op,
                group,
                nbytes,
                route,
                algorithm=use.algorithm,
                per_domain=per_domain,
                switches=[_nvswitch(graph, gpu) for gpu in group[::per_domain]],
                mtu_bytes=MTU_BYTES,
                offset=len(together),
            )
            alone = alone or list(together)  # the first group alone, on the very paths it takes with the others
        line = RoceSettings.line_rate()
        alone_s = float(simulate(links, alone, line, switches).finish_s.max())
        together_s = float(simulate(links, together, line, switches).finish_s.max())
        out.append(CongestionFactor(use.op, use.ranks, use.stride, len(groups), alone_s, together_s, use.algorithm))
    return out


def _nvswitch(graph: nx.Graph, gpu: int) -> int | None:
    """The NVSwitch node of `gpu`'s NVLink domain (None for a domain of one GPU, which has none)."""
    return next((v for v in sorted(graph.adj[gpu]) if graph.nodes[v]["kind"] == "nvswitch"), None)
