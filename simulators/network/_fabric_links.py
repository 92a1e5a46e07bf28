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


def fabric_links(graph: nx.Graph) -> tuple[list[Link], set[int], Route]:
    """Two directed links per physical link (each member of a bundle of parallel links), the
    switch nodes, and a route function for collectives that hashes each connection (a pair of
    endpoints) onto its ECMP path once: every transfer between the same two GPUs then takes that
    path, as a RoCE queue pair's packets do (ECMP hashes the UDP source port of the QP), so
    colliding connections stay collided for the whole collective."""
    links: list[Link] = []
    index: dict[tuple[int, int, int], int] = {}
    for u, v, data in graph.edges(data=True):
        for member in range(data.get("count", 1)):
            for a, b in ((u, v), (v, u)):
                index[a, b, member] = len(links)
                links.append(Link(a, b, data["gbps"], data["latency_s"]))
    switches = {node for node, kind in graph.nodes(data="kind") if kind != "gpu"}
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


def nvswitch_of(graph: nx.Graph, gpu: int) -> int | None:
    """The NVSwitch node of `gpu`'s NVLink domain (None for a domain of one GPU, which has none)."""
    return next((v for v in sorted(graph.adj[gpu]) if graph.nodes[v]["kind"] == "nvswitch"), None)
