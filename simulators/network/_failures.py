"""Failed switches and links of a fabric, and what survives them.

Why: the question "what does one failed spine cost this plan" needs the fabric to lose exactly
that capacity, the same way in the flow level (the failed switch or links leave the graph and
ECMP routes over what is left) and the analytical level (each tier keeps the share that
survives). Both read one surviving graph, so they cannot disagree on what failed.

Which ones fail, deterministically: the first n switches of a tier in node order (leaf 0 is the
first leaf of the first group, spine 0 the first spine of plane 0), and failed links are leaf
uplinks dealt one per leaf in node order, each leaf losing one member of the bundle to its next
upper neighbour in turn. A GPU left with no NIC port is cut off: the plan cannot run (a NIC whose
link is down stops an NCCL job), unless its NIC is homed to a second leaf (dual-ToR, dual-plane),
which then carries all its traffic at half the bandwidth.

The analytical shares (`surviving_shares`): the worst GPU's surviving NIC capacity, the worst
surviving leaf's uplink capacity, the worst pod's aggregation-to-core capacity, each as a
fraction of the intact one. The graph loads networkx, so only a fabric with failures pays it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulators._errors import SpecError

if TYPE_CHECKING:
    import networkx as nx

    from simulators.hardware import GpuSpec
    from simulators.network._fabric import Fabric

SWITCH_TIERS = ("leaf", "spine", "aggregation", "core")
FIELD = "hardware.fabric.failures"


@dataclass(frozen=True)
class Failures:
    """Failed switches per tier ((tier, count) pairs), failed leaf uplinks, and the seconds
    ECMP takes to route around them (needed with any failure: it prices the step that meets it)."""

    switches: tuple[tuple[str, int], ...] = ()
    links: int = 0
    ecmp_convergence_s: float | None = None

    def __post_init__(self) -> None:
        switches = dict(self.switches)
        for tier, count in switches.items():
            if tier not in SWITCH_TIERS:
                raise SpecError(f"{FIELD}.switches: {tier!r} is not allowed; allowed: {', '.join(SWITCH_TIERS)}")
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise SpecError(f"{FIELD}.switches.{tier}: {count!r} is not allowed; allowed: an integer >= 1")
        ordered = tuple(sorted(switches.items(), key=lambda kv: SWITCH_TIERS.index(kv[0])))
        object.__setattr__(self, "switches", ordered)
        if isinstance(self.links, bool) or not isinstance(self.links, int) or self.links < 0:
            raise SpecError(f"{FIELD}.links: {self.links!r} is not allowed; allowed: an integer >= 0")
        s = self.ecmp_convergence_s
        if s is not None and not (isinstance(s, (int, float)) and math.isfinite(s) and 0 <= s <= 3600):
            raise SpecError(f"{FIELD}.ecmp_convergence_s: {s!r} is not allowed; allowed: 0 <= seconds <= 3600")
        if self and s is None:
            raise SpecError(
                f"{FIELD}.ecmp_convergence_s: needed with failed switches or links; allowed: 0 <= seconds <= 3600"
            )

    def __bool__(self) -> bool:
        return bool(self.switches) or self.links > 0

    def __str__(self) -> str:
        parts = [f"{tier}={count}" for tier, count in self.switches]
        return ", ".join(parts + ([f"links={self.links}"] if self.links else [])) or "none"


def surviving_graph(graph: nx.Graph, failures: Failures) -> nx.Graph:
    """A copy of `graph` (from `fabric_graph`) without the failed switches and links; a
    SpecError naming the field if the fabric has fewer of them, or if what is left cuts a GPU
    off or splits the fabric."""
    import networkx as nx

    kinds = dict(graph.nodes(data="kind"))
    out = graph.copy()
    for tier, count in failures.switches:
        nodes = sorted(n for n, k in kinds.items() if k == tier)
        if count > len(nodes):
            raise SpecError(
                f"{FIELD}.switches.{tier}: {count} is not allowed; allowed: at most {len(nodes)} "
                f"(the {tier} switches of this {graph.graph['num_gpus']}-GPU fabric)"
            )
        out.remove_nodes_from(nodes[:count])
    _fail_uplinks(out, failures.links, kinds)
    gpus = [n for n, k in kinds.items() if k == "gpu"]
    for gpu in gpus:
        if _nic_gbps(graph, gpu, kinds) and not _nic_gbps(out, gpu, kinds):
            raise SpecError(
                f"{FIELD}: {failures} cuts GPU {gpu} (server {graph.nodes[gpu]['server']}) off "
                "the fabric; allowed: failures that leave every NIC a port (dual-ToR or dual-plane "
                "families keep a second one)"
            )
    if not nx.is_connected(out):
        raise SpecError(f"{FIELD}: {failures} splits the fabric; allowed: failures that leave every GPU a path")
    return out


def _fail_uplinks(g: nx.Graph, count: int, kinds: dict) -> None:
    """Remove `count` leaf uplinks, one per leaf in turn (module docstring)."""
    if not count:
        return
    leaves = sorted(n for n in g if kinds[n] == "leaf")
    ups = {leaf: sorted(v for v in g.adj[leaf] if kinds[v] in ("spine", "aggregation")) for leaf in leaves}
    total = sum(g.edges[leaf, v]["count"] for leaf in leaves for v in ups[leaf])
    if count > total:
        raise SpecError(f"{FIELD}.links: {count} is not allowed; allowed: at most {total} (the leaf uplinks left)")
    turn = dict.fromkeys(leaves, 0)
    failed, i = 0, 0
    while failed < count:
        leaf = leaves[i % len(leaves)]
        i += 1
        live = [v for v in ups[leaf] if g.has_edge(leaf, v)]
        if not live:
            continue
        v = live[turn[leaf] % len(live)]
        turn[leaf] += 1
        edge = g.edges[leaf, v]
        edge["count"] -= 1
        if edge["count"] == 0:
            g.remove_edge(leaf, v)
        failed += 1


def _nic_gbps(g: nx.Graph, gpu: int, kinds: dict) -> float:
    if gpu not in g:
        return 0.0
    return sum(e["gbps"] * e["count"] for v, e in g.adj[gpu].items() if kinds[v] == "leaf")


def _capacity(g: nx.Graph, nodes, upper: tuple[str, ...], kinds: dict) -> float:
    """Gb/s from `nodes` (those still in `g`) to switches of the `upper` kinds."""
    return sum(e["gbps"] * e["count"] for n in nodes if n in g for v, e in g.adj[n].items() if kinds[v] in upper)


def surviving_shares(fabric: Fabric, gpu: GpuSpec, num_gpus: int) -> tuple[float, float, float]:
    """(NIC, leaf uplink, pod uplink) shares of capacity that survive `fabric.failures`, each
    the worst over the GPUs, surviving leaves and pods (1 where a tier is absent or intact)."""
    from simulators.network._graphs import fabric_graph

    intact = fabric_graph(fabric, gpu, num_gpus)
    left = surviving_graph(intact, fabric.failures)
    kinds = dict(intact.nodes(data="kind"))
    nic = min(
        (
            _nic_gbps(left, n, kinds) / full
            for n, k in kinds.items()
            if k == "gpu" and (full := _nic_gbps(intact, n, kinds))
        ),
        default=1.0,
    )
    leaf = min(
        (
            _capacity(left, [n], ("spine", "aggregation"), kinds) / full
            for n, k in kinds.items()
            if k == "leaf" and n in left and (full := _capacity(intact, [n], ("spine", "aggregation"), kinds))
        ),
        default=1.0,
    )
    pods: dict[int, list[int]] = {}
    for n, k in kinds.items():
        if k == "aggregation":
            pods.setdefault(intact.nodes[n]["pod"], []).append(n)
    pod = min(
        (
            _capacity(left, aggs, ("core",), kinds) / full
            for aggs in pods.values()
            if (full := _capacity(intact, aggs, ("core",), kinds))
        ),
        default=1.0,
    )
    return nic, leaf, pod
