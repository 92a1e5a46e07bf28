"""A fabric graph (simulators.network.fabric_graph) as the directed links and ECMP routes the
contention-aware simulators take, and the GPU groups of a collective placed on it."""

from __future__ import annotations

import networkx as nx

from simulators.network._graphs import Router
from simulators.network._transfers import Link, Route


def groups_of(num_gpus: int, ranks: int, stride: int) -> list[list[int]]:
    """Every group of `ranks` members `stride` apart (the placement `Group` describes): GPU
    (outer * ranks + j) * stride + inner for each (outer, inner)."""
    span = ranks * stride
    return [
        [(outer * ranks + j) * stride + inner for j in range(ranks)]
        for outer in range(num_gpus // span)
        for inner in range(stride)
    ]


def fabric_links(graph: nx.Graph, *, spread: bool = False) -> tuple[list[Link], set[int], Route]:
    """Two directed links per physical link (each member of a bundle of parallel links), the
    switch nodes, and a route function for collectives that hashes each connection (a pair of
    endpoints) onto its ECMP path once: every transfer between the same two GPUs then takes that
    path, as a RoCE queue pair's packets do (ECMP hashes the UDP source port of the QP), so
    colliding connections stay collided for the whole collective.

    `spread` on a graph of an adaptive-routing family (Spectrum-X) models per-packet adaptive
    routing as a fluid: every flow spread over all equal-cost paths in proportion to their
    links, so no two flows collide on one path. Spread evenly, the links from one leaf up to
    the tier above carry equal shares, as one pooled link of their summed rate would; so each
    leaf's uplinks are one pooled link, the links down into a leaf another, and likewise a
    pod's links to and from the core (exact for uniformly wired tiers, failures included; an
    uneven one, a single failed link, is pooled as if adaptive routing balanced around it)."""
    pooled = spread and bool(graph.graph.get("adaptive_routing", False))
    kinds = dict(graph.nodes(data="kind"))
    links: list[Link] = []
    index: dict[tuple, int] = {}
    for u, v, data in graph.edges(data=True):
        for a, b in ((u, v), (v, u)):
            pool = _pool(graph, kinds, a, b) if pooled else None
            if pool is None:
                for member in range(data.get("count", 1)):
                    index[a, b, member] = len(links)
                    links.append(Link(a, b, data["gbps"], data["latency_s"]))
            elif pool not in index:  # the pool's first member names it
                index[pool] = len(links)
                links.append(Link(a, b, 0.0, data["latency_s"]))
            if pool is not None:
                first = links[index[pool]]
                rate = first.gbps + data["gbps"] * data.get("count", 1)
                links[index[pool]] = Link(first.src, first.dst, rate, first.delay_s)
                for member in range(data.get("count", 1)):
                    index[a, b, member] = index[pool]
    switches = {node for node, kind in kinds.items() if kind != "gpu"}
    router = Router(graph)
    paths: dict[tuple[int, int], tuple[int, ...]] = {}

    def route(src: int, dst: int) -> tuple[int, ...]:
        if (src, dst) not in paths:
            if src in switches or dst in switches:  # a GPU and its NVSwitch (in-switch reduction): one link
                paths[src, dst] = (index[src, dst, 0],)
            else:  # the connection's number is its hash input
                paths[src, dst] = tuple(index[hop] for hop in router.hops(src, dst, len(paths)))
        return paths[src, dst]

    return links, switches, route


_RANK = {"leaf": 0, "spine": 1, "aggregation": 1, "core": 2}


def _pool(graph: nx.Graph, kinds: dict, a: int, b: int) -> tuple | None:
    """The pooled link of directed switch-to-switch link a -> b: up from a's group (a leaf, or
    an aggregation switch's pod) or down into b's group; None for a NIC or NVLink link."""
    if kinds[a] not in _RANK or kinds[b] not in _RANK:
        return None
    up = _RANK[kinds[b]] > _RANK[kinds[a]]
    lower = a if up else b
    group = ("pod", graph.nodes[lower]["pod"]) if kinds[lower] == "aggregation" else lower
    return ("up" if up else "down", group)


def nvswitch_of(graph: nx.Graph, gpu: int) -> int | None:
    """The NVSwitch node of `gpu`'s NVLink domain (None for a domain of one GPU, which has none)."""
    return next((v for v in sorted(graph.adj[gpu]) if graph.nodes[v]["kind"] == "nvswitch"), None)
