"""Fabric graphs a packet-level simulator runs on, and deterministic per-flow ECMP routes over them.

`fabric_graph(fabric, gpu, num_gpus)` wires the cluster a `Fabric` describes, switch for switch and
link for link as `bill_of_materials` counts them. Choices:
- Graph type: an undirected `networkx.Graph`. Every link is full duplex at the same rate both ways,
  so a simulator makes two directed queues of each edge; a DiGraph would only double the edges.
- Parallel links (a leaf's 16 uplinks to one spine) are one edge with `count` links of `gbps` each
  (not a MultiGraph): a route is then a list of nodes, and `ecmp_hops` names the member link of
  each bundle a flow hashes onto, as a switch hashes over its egress ports.
- NICs are folded into the GPU node, as SimAI does: the GPU's edge to its leaf is its NIC port (a
  simulator's egress queue on that edge is the NIC). NIC n of a server sits on GPU n * g / m of
  its g GPUs and m NICs (its PCIe neighbour): with fewer NICs than GPUs the others reach one over
  NVLink, with more a GPU holds several NIC edges. A dual-plane NIC is two half-speed edges.
- Node ids: GPUs 0..num_gpus-1 in rank order (GPU g of server s is s * gpus_per_server + g), then
  NVSwitches, leaves (rail families: plane, group, rail order), spines or aggregation (pod order),
  core. Attribute `kind` is one of KINDS, with `server`, `local` (index in the server), `rail`,
  `group`, `plane`, `pod` where they mean something.
- Scale-up: a domain is gcd(gpu.scaleup_domain_gpus, gpus_per_server) GPUs (one per server for
  every switch or mesh GPU of the catalogue), or the catalogue's whole domain for a torus, which is
  cabled between hosts. Wired as `gpu.scaleup_topology` says (simulators/network/_scaleup.py):
  `switch`: one `nvswitch` node per domain, each GPU linked to it at scaleup_gbytes_per_s * 8
  Gb/s; `full_mesh` and tori: GPU-to-GPU links, the per-GPU rate split evenly over each GPU's
  links (a mesh of n: n - 1 links; a torus: its neighbours in every dimension, wrapping
  around), so a pair of GPUs gets one link's rate as it does on the hardware. A domain of one
  GPU (gpus_per_server=1) has no scale-up links: the scale-up domain is degenerate.
- Latencies (parameters): NVSwitch 25 ns; NIC link and switch-to-switch the fabric's
  `port_latency_s` (500 ns unless set), from SimAI's Spectrum-X template
  (../shared/reference/netsim.md lines 77-78, "NIC latency 500 ns, NVSwitch 25 ns"; its
  topology file gives leaf-spine links the same 0.0005 ms).
- Wiring, as `_fabric.py` describes: leaf-spine and fat-tree put NIC ports on leaves in rank
  order, `leaf_down_ports` per leaf (dual-ToR: each NIC's ports on the two leaves of a pair, pair
  p taking NICs p * leaf_down_ports onwards; a star's one leaf takes them all); rail families put
  NIC i of every server in a group of `leaf_down_ports` servers on rail leaf i of that group (and
  plane). A leaf with n ports in use has ceil(n / oversubscription) uplinks, dealt round-robin
  over the spines (the spine pointer carries on from leaf to leaf, so no spine takes more than
  `switch_radix`); dual-plane planes have their own spines. A fat-tree of more than one pod deals
  each pod's leaf uplinks over its aggregation switches the same way (full bipartite when
  non-blocking), and aggregation switch j of every pod reaches core group j: uplinks ordered by
  (j, uplink i, pod) fill the core switches `switch_radix` at a time (Al-Fares wiring when the
  pods are full). One leaf, or one rail group, joining everything has no tier above it.
  `graph.graph["adaptive_routing"]` carries the family's trait to whoever routes on the graph
  (`fabric_links`, the packet simulator).

Routes (`ecmp_path`, `Router`): GPUs of one NVLink domain talk over their NVSwitch; GPUs of one
mesh or torus over its GPU-to-GPU links on a shortest path (ECMP over equal-cost next hops, the
dimension a torus route takes first included). Otherwise a
flow leaves through a NIC, crosses leaves and spines on a shortest path, and enters the
destination's NIC; at each hop with several equal-cost next hops it takes the egress port chosen
by zlib.crc32 of (src, dst, flow_id, hop), mixed by MurmurHash3's finaliser (stable across runs,
unlike the salted `hash()`), with ports weighted by the parallel links they stand for.
Rail-optimized and dual-plane graphs (`pxn`) route cross-rail traffic as NCCL's PXN does: over
NVLink first to the GPU of the source server on the destination's rail, then out of that GPU's
NIC, so it stays on one rail (and, inside a rail group, one switch hop; a single group has no
spine and no other way across rails).
"""

from __future__ import annotations

import itertools
import math
import struct
import weakref
import zlib
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING

import networkx as nx

from simulators._errors import SpecError
from simulators.hardware import GpuSpec
from simulators.hardware._topology import is_torus
from simulators.network._network import NVSWITCH_LATENCY_S
from simulators.network._scaleup import links_per_gpu, neighbours

if TYPE_CHECKING:  # for annotations only: a Fabric's failure shares are read off these graphs
    from simulators.network._fabric import Fabric

KINDS = ("gpu", "nvswitch", "leaf", "spine", "aggregation", "core")
FABRIC_KINDS = frozenset({"leaf", "spine", "aggregation", "core"})


def fabric_graph(
    fabric: Fabric,
    gpu: GpuSpec,
    num_gpus: int,
    *,
    scaleup_latency_s: float = NVSWITCH_LATENCY_S,
    nic_latency_s: float | None = None,
    switch_latency_s: float | None = None,
) -> nx.Graph:
    """The cluster of `num_gpus` GPUs of type `gpu` on `fabric` (see the module docstring); NIC
    and switch latencies default to the fabric's `port_latency_s`.

    Edges carry `gbps` (per link, one direction), `latency_s` and `count` (parallel links);
    `graph.graph` holds family, gpu, num_gpus, gpus_per_server, domain_gpus, port_gbps, pxn and
    adaptive_routing. Failed switches and links are not removed here (`surviving_graph`)."""
    fabric.check(num_gpus)
    nic_latency_s = fabric.port_latency_s if nic_latency_s is None else nic_latency_s
    switch_latency_s = fabric.port_latency_s if switch_latency_s is None else switch_latency_s
    for name, value in (
        ("scaleup_latency_s", scaleup_latency_s),
        ("nic_latency_s", nic_latency_s),
        ("switch_latency_s", switch_latency_s),
    ):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise SpecError(f"fabric_graph.{name}: {value!r} is not allowed; allowed: a finite number >= 0")
    gps, nps = fabric.gpus_per_server, fabric.nics_per_server
    servers = num_gpus // gps
    topology, dims = gpu.scaleup_topology, gpu.scaleup_torus_dims or ()
    domain = gpu.scaleup_domain_gpus if is_torus(topology) else math.gcd(gpu.scaleup_domain_gpus, gps)
    rails = fabric.traits.rails
    g = nx.Graph(
        family=fabric.family,
        gpu=gpu.name,
        num_gpus=num_gpus,
        gpus_per_server=gps,
        domain_gpus=domain,
        port_gbps=fabric.port_gbps,
        pxn=rails,
        adaptive_routing=fabric.traits.adaptive_routing,
    )
    for r in range(num_gpus):
        g.add_node(r, kind="gpu", server=r // gps, local=r % gps)
        if rails and nps == gps:
            g.nodes[r]["rail"] = r % gps
    ids = itertools.count(num_gpus)  # switch node ids, after the GPUs
    if domain > 1 and topology == "switch":
        for d in range(num_gpus // domain):
            nvswitch = next(ids)
            g.add_node(nvswitch, kind="nvswitch", server=d * domain // gps)
            for r in range(d * domain, (d + 1) * domain):
                _link(g, r, nvswitch, gpu.scaleup_gbytes_per_s * 8.0, scaleup_latency_s)
    elif domain > 1:  # a job smaller than a torus takes ranks 0..n-1 of it
        link_gbps = gpu.scaleup_gbytes_per_s * 8.0 / links_per_gpu(topology, dims, domain)
        for r in range(num_gpus):
            first = r - r % domain
            for peer in neighbours(topology, dims, domain, r % domain):
                if r < first + peer < num_gpus:
                    _link(g, r, first + peer, link_gbps, scaleup_latency_s)

    def nic_gpu(server: int, nic: int) -> int:
        return server * gps + nic * gps // nps

    down, port = fabric.leaf_down_ports, fabric.port_gbps
    used: dict[int, int] = {}  # leaf -> NIC ports in use
    if rails:
        groups = -(-servers // down)
        leaf = {}
        for p in range(fabric.planes):
            for grp in range(groups):
                for rail in range(nps):
                    leaf[p, grp, rail] = next(ids)
                    g.add_node(leaf[p, grp, rail], kind="leaf", plane=p, group=grp, rail=rail)
        for s in range(servers):
            for rail in range(nps):
                for p in range(fabric.planes):
                    _link(g, nic_gpu(s, rail), leaf[p, s // down, rail], port, nic_latency_s)
                    used[leaf[p, s // down, rail]] = used.get(leaf[p, s // down, rail], 0) + 1
        if groups > 1:
            for p in range(fabric.planes):
                plane_leaves = [leaf[p, grp, rail] for grp in range(groups) for rail in range(nps)]
                _spread_up(g, ids, plane_leaves, used, fabric, "spine", {"plane": p}, switch_latency_s)
        return g
    nics, homing = servers * nps, fabric.traits.homing
    leaves = [next(ids) for _ in range(homing * -(-nics // down))]
    half = fabric.switch_radix // 2
    for i, node in enumerate(leaves):
        g.add_node(node, kind="leaf", plane=0, **({"pod": i // half} if fabric.traits.pods else {}))
    for i in range(nics):
        s, nic = divmod(i, nps)
        for j in range(homing):
            leaf_node = leaves[i // down * homing + j]
            _link(g, nic_gpu(s, nic), leaf_node, port, nic_latency_s)
            used[leaf_node] = used.get(leaf_node, 0) + 1
    if len(leaves) == homing:  # one leaf (or leaf pair) reaches every NIC
        return g
    if not fabric.traits.pods or len(leaves) <= half:  # two tiers (a fat-tree of one pod too)
        _spread_up(g, ids, leaves, used, fabric, "spine", {"plane": 0}, switch_latency_s)
        return g
    pods = [leaves[i : i + half] for i in range(0, len(leaves), half)]
    aggregation = [
        _spread_up(g, ids, pod, used, fabric, "aggregation", {"pod": p}, switch_latency_s, ports=half)
        for p, pod in enumerate(pods)
    ]
    entries = sorted(  # (aggregation index j, uplink i, pod): Al-Fares core groups
        (j, i, p) for p, aggs in enumerate(aggregation) for j, agg in enumerate(aggs) for i in range(used[agg])
    )
    cores = [next(ids) for _ in range(-(-len(entries) // fabric.switch_radix))]
    for node in cores:
        g.add_node(node, kind="core")
    for t, (j, _, p) in enumerate(entries):
        _link(g, aggregation[p][j], cores[t // fabric.switch_radix], port, switch_latency_s)
    return g


def _link(g: nx.Graph, u: int, v: int, gbps: float, latency_s: float) -> None:
    if g.has_edge(u, v):
        g.edges[u, v]["count"] += 1
    else:
        g.add_edge(u, v, gbps=gbps, latency_s=latency_s, count=1)


def _spread_up(g, ids, lower, used, fabric, kind, attrs, latency_s, ports=None) -> list[int]:
    """Switches of `kind` above `lower`, as many as the lower switches' uplinks fill at `ports`
    (default the radix) each; uplinks dealt round-robin. Records each new switch's links in `used`
    (its ports facing down, which a switch above matches one for one)."""
    ups = [math.ceil(used[node] / fabric.oversubscription) for node in lower]
    upper = [next(ids) for _ in range(-(-sum(ups) // (ports or fabric.switch_radix)))]
    for node in upper:
        g.add_node(node, kind=kind, **attrs)
        used[node] = 0
    t = 0
    for node, n in zip(lower, ups):
        for _ in range(n):
            _link(g, node, upper[t % len(upper)], fabric.port_gbps, latency_s)
            used[upper[t % len(upper)]] += 1
            t += 1
    return upper


class Router:
    """Per-flow ECMP routes over one graph (built by `fabric_graph` or `graph_of`), with the
    distances towards each destination's leaves cached: one BFS over the switches per set of
    destination leaves, never all pairs. The graph must not change while a Router uses it."""

    def __init__(self, graph: nx.Graph) -> None:
        self.graph = graph
        self.pxn = bool(graph.graph.get("pxn", False))
        kind = dict(graph.nodes(data="kind"))
        gpus = [n for n, k in kind.items() if k == "gpu"]
        self._gpus = frozenset(gpus)
        self._fabric = frozenset(n for n, k in kind.items() if k in FABRIC_KINDS)
        # per node, sorted (neighbour, parallel links): fabric switches, and a GPU's NVSwitches
        self._ports = {
            n: tuple(sorted((v, e["count"]) for v, e in graph.adj[n].items() if v in self._fabric))
            for n in (*gpus, *self._fabric)
        }
        self._scaleup_ports = {
            n: tuple(sorted((v, e["count"]) for v, e in graph.adj[n].items() if kind[v] == "nvswitch")) for n in gpus
        }
        # GPU-to-GPU scale-up links (a mesh or torus) and the domain each such GPU belongs to
        self._peers = {n: tuple(sorted(v for v in graph.adj[n] if kind[v] == "gpu")) for n in gpus}
        self._peer_graph = nx.Graph((a, b) for a, peers in self._peers.items() for b in peers)
        self._mesh_domain = {n: min(c) for c in nx.connected_components(self._peer_graph) for n in c}
        self._peer_distances: dict[int, dict[int, int]] = {}
        self._position = {(graph.nodes[n].get("server"), graph.nodes[n].get("local")): n for n in gpus}
        self._distances: dict[tuple, dict[Hashable, int]] = {}
        self.shape = (graph.number_of_nodes(), graph.number_of_edges())

    def path(self, src: int, dst: int, flow_id: int) -> list[int]:
        """Nodes from GPU `src` to GPU `dst` for flow `flow_id` (see the module docstring)."""
        return [src] + [v for _, v, _ in self.hops(src, dst, flow_id)]

    def hops(self, src: int, dst: int, flow_id: int) -> list[tuple[int, int, int]]:
        """The route as (node, next node, member link of that edge's `count`) per hop."""
        for name, node in (("src", src), ("dst", dst)):
            if node not in self._gpus:
                allowed = f"a GPU node, 0..{len(self._gpus) - 1}"
                raise SpecError(f"ecmp_path.{name}: {node!r} is not allowed; allowed: {allowed}")
        if isinstance(flow_id, bool) or not isinstance(flow_id, int):
            raise SpecError(f"ecmp_path.flow_id: {flow_id!r} is not allowed; allowed: an integer")
        out: list[tuple[int, int, int]] = []
        key = (src, dst, flow_id)
        if src == dst:
            return out
        if self._same_domain(src, dst):
            self._scaleup(out, src, dst, key)
            return out
        ingress = dst if self._ports[dst] else self._home(dst)
        egress = src if self._ports[src] else self._home(src)
        if self.pxn:  # the GPU of the source's server on the destination's rail, if NVLink reaches it
            relay = self._position.get((self.graph.nodes[src].get("server"), self.graph.nodes[ingress].get("local")))
            if relay is not None and self._ports[relay] and (relay == src or self._same_domain(src, relay)):
                egress = relay
        if egress != src:
            self._scaleup(out, src, egress, key)
        self._scaleout(out, egress, ingress, key)
        if ingress != dst:
            self._scaleup(out, ingress, dst, key)
        return out

    def _shared_nvswitches(self, a: int, b: int) -> list[tuple[int, int]]:
        theirs = {v for v, _ in self._scaleup_ports[b]}
        return [(v, c) for v, c in self._scaleup_ports[a] if v in theirs]

    def _same_domain(self, a: int, b: int) -> bool:
        mesh = self._mesh_domain.get(a)
        return bool(self._shared_nvswitches(a, b)) or (mesh is not None and mesh == self._mesh_domain.get(b))

    def _home(self, node: int) -> int:
        """The NIC a GPU without one uses: the nearest GPU at or below it in its scale-up domain
        that has one (NIC n sits on GPU n * g / m), else the lowest such GPU."""
        peers = {p for s, _ in self._scaleup_ports[node] for p in self.graph.adj[s] if p in self._gpus}
        peers |= {p for p, d in self._mesh_domain.items() if d == self._mesh_domain.get(node)}
        peers = sorted(p for p in peers if self._ports[p])
        if not peers:
            raise nx.NetworkXNoPath(f"GPU {node} has no NIC and no NVLink peer with one")
        below = [p for p in peers if p <= node]
        return below[-1] if below else peers[0]

    def _scaleup(self, out, a: int, b: int, key) -> None:
        if not self._shared_nvswitches(a, b):  # a mesh or torus: GPU to GPU on a shortest path
            dist = self._peer_distances.get(b)
            if dist is None:
                dist = self._peer_distances[b] = nx.single_source_shortest_path_length(self._peer_graph, b)
            node = a
            while node != b:
                nxt, member = _pick(key, len(out), [(v, 1) for v in self._peers[node] if dist.get(v) == dist[node] - 1])
                out.append((node, nxt, member))
                node = nxt
            return
        nvswitch, member = _pick(key, len(out), self._shared_nvswitches(a, b))
        out.append((a, nvswitch, member))
        out.append((nvswitch, b, _pick(key, len(out), [(b, self.graph.adj[nvswitch][b]["count"])])[1]))

    def _scaleout(self, out, egress: int, ingress: int, key) -> None:
        if egress == ingress:
            return
        dist = self._distances_to(ingress)
        best = min((dist.get(v, math.inf) for v, _ in self._ports[egress]), default=math.inf)
        if best == math.inf:
            raise nx.NetworkXNoPath(f"no switch path from GPU {egress}'s NIC to GPU {ingress}'s NIC")
        node, d = egress, best + 1
        while d >= 0:
            if d == 0:
                ports = [(ingress, self.graph.adj[node][ingress]["count"])]
            else:
                ports = [(v, c) for v, c in self._ports[node] if dist.get(v) == d - 1]
            nxt, member = _pick(key, len(out), ports)
            out.append((node, nxt, member))
            node, d = nxt, d - 1

    def _distances_to(self, ingress: int) -> dict[Hashable, int]:
        """Switch hops from every switch to one of `ingress`'s leaves (0 at those leaves)."""
        leaves = tuple(v for v, _ in self._ports[ingress])
        dist = self._distances.get(leaves)
        if dist is None:
            dist = dict.fromkeys(leaves, 0)
            queue = deque(leaves)
            while queue:
                node = queue.popleft()
                for v, _ in self._ports[node]:
                    if v not in dist:
                        dist[v] = dist[node] + 1
                        queue.append(v)
            self._distances[leaves] = dist
        return dist


def _pick(key: tuple[int, int, int], hop: int, ports: list[tuple[int, int]]) -> tuple[int, int]:
    """(next node, member link) among `ports` [(node, parallel links)]: the egress port of index
    crc32(src, dst, flow_id, hop) mod the number of ports."""
    if len(ports) == 1 and ports[0][1] == 1:
        return ports[0][0], 0
    h = zlib.crc32(struct.pack("<4q", *key, hop))
    # CRC is linear over GF(2): alone, every hop of a flow would take the same branch (hash
    # polarization, as switches sharing one hash function show). MurmurHash3's finaliser mixes it.
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & 0xFFFFFFFF
    index = (h ^ (h >> 16)) % sum(count for _, count in ports)
    for node, count in ports:
        if index < count:
            return node, index
        index -= count
    raise AssertionError("unreachable")


_ROUTERS: weakref.WeakKeyDictionary[nx.Graph, Router] = weakref.WeakKeyDictionary()


def router_of(graph: nx.Graph) -> Router:
    """The cached Router of `graph` (a fresh one if the graph's node or edge count changed)."""
    router = _ROUTERS.get(graph)
    if router is None or router.shape != (graph.number_of_nodes(), graph.number_of_edges()):
        router = _ROUTERS[graph] = Router(graph)
    return router


def ecmp_path(graph: nx.Graph, src: int, dst: int, flow_id: int) -> list[int]:
    """Nodes from GPU `src` to GPU `dst` for flow `flow_id`: deterministic, shortest, ECMP per flow."""
    return router_of(graph).path(src, dst, flow_id)


def ecmp_hops(graph: nx.Graph, src: int, dst: int, flow_id: int) -> list[tuple[int, int, int]]:
    """`ecmp_path` as (node, next node, member of the edge's parallel links) per hop."""
    return router_of(graph).hops(src, dst, flow_id)
