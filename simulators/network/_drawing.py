"""A fabric graph drawn as text, tier above tier, for `dse topologies --draw`.

Why: a bill of materials says how many switches a fabric has, not how they are wired; the
drawing shows each tier's switches (the first few, then a count), and between two tiers how
many links each lower switch has up, to how many upper switches, at what speed, read off the
graph the flow and packet levels run on (so it shows the dual-ToR leaf pairs, the rails and the
planes as they are built, failures removed).
"""

from __future__ import annotations

from collections import Counter

import networkx as nx

TIERS = ("core", "aggregation", "spine", "leaf")
SHOWN = 6  # switches drawn per tier before "... and N more"
_LABELS = {"plane": "plane", "pod": "pod", "group": "g", "rail": "r"}  # node attributes in a label


def draw_fabric(graph: nx.Graph) -> list[str]:
    """Lines of text: a header, each switch tier from the top with its wiring to the tier
    below, then the servers and how their NIC ports reach the leaves."""
    kinds = dict(graph.nodes(data="kind"))
    info = graph.graph
    routing = "adaptive routing (spread over equal-cost paths)" if info.get("adaptive_routing") else "ECMP per flow"
    servers = {graph.nodes[n]["server"] for n, k in kinds.items() if k == "gpu"}
    lines = [f"{info['family']}: {info['num_gpus']} x {info['gpu']} in {len(servers)} servers; {routing}"]
    present = [t for t in TIERS if any(k == t for k in kinds.values())]
    for i, tier in enumerate(present):
        nodes = sorted(n for n, k in kinds.items() if k == tier)
        boxes = " ".join(f"[{_label(graph, n)}]" for n in nodes[:SHOWN])
        more = f" ... and {len(nodes) - SHOWN} more" if len(nodes) > SHOWN else ""
        lines.append(f"{tier:<12}{len(nodes):>5} x  {boxes}{more}")
        below = present[i + 1] if i + 1 < len(present) else "gpu"
        lines.append(f"{'':<12}        |  {_wiring(graph, kinds, below, tier)}")
    per_server = Counter(graph.nodes[n]["server"] for n, k in kinds.items() if k == "gpu")
    lines.append(f"{'servers':<12}{len(servers):>5} x  [{max(per_server.values())} GPUs]")
    return lines


def _label(graph: nx.Graph, node: int) -> str:
    data = graph.nodes[node]
    parts = [f"{short}{data[key]}" for key, short in _LABELS.items() if key in data]
    return f"{node}" + (" " + " ".join(parts) if parts else "")


def _wiring(graph: nx.Graph, kinds: dict, lower: str, upper: str) -> str:
    """How the `lower` tier (or the GPUs' NIC ports) reaches the `upper` tier."""
    links, fanout, speeds = Counter(), Counter(), set()
    for node, kind in kinds.items():
        if kind != lower:
            continue
        ups = [(v, e) for v, e in graph.adj[node].items() if kinds[v] == upper]
        if not ups and lower == "gpu":
            continue  # a GPU without a NIC uses a neighbour's over NVLink
        links[sum(e["count"] for _, e in ups)] += 1
        fanout[len(ups)] += 1
        speeds |= {e["gbps"] for _, e in ups}
    who = "each NIC-holding GPU" if lower == "gpu" else f"each {lower}"
    counts = "/".join(str(n) for n in sorted(links))
    spread = "/".join(str(n) for n in sorted(fanout))
    rate = "/".join(f"{s:g}" for s in sorted(speeds)) or "-"
    return f"{who}: {counts} links at {rate} Gb/s up to {spread} {upper} switches"
