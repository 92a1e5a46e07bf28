"""SimAI topology files: read, write, and convert to and from fabric graphs.

The format (../shared/reference/simai/FORMAT.md; SimAI's gen_Topo_Template.py writes it, its ns-3
front end reads it):
- line 1: `total_nodes gpus_per_server nvswitch_count switch_count link_count gpu_type`
  (some SimAI versions add an `ngpus_per_node` field, kept if present);
- line 2: the switch ids, NVSwitches first, each followed by one space;
- one line per link: `src dst rate latency error_rate`, e.g. `0 16 2880Gbps 0.000025ms 0`.
GPUs are nodes 0..N-1 and a link line stands for one full-duplex link, so parallel links are
repeated lines. Rates are written in Gbps and latencies in ms, as SimAI's generator writes them, so
its files read and write back byte for byte; other units (bps, Kbps, Mbps, Tbps; s, us, ns, ps)
are read too. Numbers go through `Decimal`, so 0.000025ms is 25 ns exactly both ways.

`simai_topology_of(graph)` exports a `fabric_graph` (one line per parallel link, links sorted by
their end points, which for SimAI's own files is the order they are written in); `graph_of`
imports a file as such a graph: switches adjacent to GPUs are leaves, the tier above is spines
(aggregation then core when there are three tiers), and `pxn` is set when the file is rail-laid
(no two GPUs of a server share a leaf).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import networkx as nx

from simulators._errors import SpecError
from simulators.network._fabric import BillOfMaterials
from simulators.network._graphs import FABRIC_KINDS, KINDS

_RATE_UNITS = {"bps": Decimal("1e-9"), "Kbps": Decimal("1e-6"), "Mbps": Decimal("1e-3"), "Gbps": Decimal(1)}
_RATE_UNITS["Tbps"] = Decimal(1000)
_TIME_UNITS = {"s": Decimal(1), "ms": Decimal("1e-3"), "us": Decimal("1e-6"), "ns": Decimal("1e-9")}
_TIME_UNITS["ps"] = Decimal("1e-12")
_QUANTITY = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)([A-Za-z]+)$")
_HEADER_FORMAT = "'nodes gpus_per_server nvswitches switches links gpu_type'"
_LINK_FORMAT = "'src dst rate latency error_rate', e.g. '0 16 400Gbps 0.0005ms 0'"


@dataclass(frozen=True)
class SimaiLink:
    """One full-duplex link: `gbps` per direction, `latency_s` propagation delay."""

    src: int
    dst: int
    gbps: float
    latency_s: float
    error_rate: float = 0.0


@dataclass(frozen=True)
class SimaiTopology:
    """A SimAI topology file's content; GPUs are nodes 0..num_gpus-1, the switches the rest."""

    num_nodes: int
    gpus_per_server: int
    nvswitch_ids: tuple[int, ...]
    switch_ids: tuple[int, ...]
    links: tuple[SimaiLink, ...]
    gpu_type: str
    ngpus_per_node: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "nvswitch_ids", tuple(self.nvswitch_ids))
        object.__setattr__(self, "switch_ids", tuple(self.switch_ids))
        object.__setattr__(self, "links", tuple(self.links))
        ids = self.nvswitch_ids + self.switch_ids
        if self.gpus_per_server < 1 or self.num_gpus < 1:
            raise SpecError(
                f"simai.gpus_per_server: {self.gpus_per_server} with {self.num_gpus} GPUs is not allowed; "
                "allowed: at least one GPU and gpus_per_server >= 1"
            )
        if len(set(ids)) != len(ids) or any(not self.num_gpus <= i < self.num_nodes for i in ids):
            raise SpecError(
                f"simai.switch_ids: {ids} is not allowed; "
                f"allowed: distinct ids in {self.num_gpus}..{self.num_nodes - 1}"
            )
        if not self.gpu_type or any(c.isspace() for c in self.gpu_type):
            raise SpecError(f"simai.gpu_type: {self.gpu_type!r} is not allowed; allowed: one word such as H100")
        for link in self.links:
            if not (0 <= link.src < self.num_nodes and 0 <= link.dst < self.num_nodes) or link.src == link.dst:
                allowed = f"two distinct nodes in 0..{self.num_nodes - 1}"
                raise SpecError(f"simai.links: {link} is not allowed; allowed: {allowed}")

    @property
    def num_gpus(self) -> int:
        return self.num_nodes - len(self.nvswitch_ids) - len(self.switch_ids)


def read_simai_topology(path: str | Path) -> SimaiTopology:
    """Read a SimAI topology file; SpecError naming the file and line on malformed input."""
    path = Path(path)
    lines = path.read_text().split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    def fail(lineno: int, what: str) -> SpecError:
        return SpecError(f"{path}:{lineno}: {what}")

    if not lines:
        raise fail(1, f"empty file; expected the header {_HEADER_FORMAT}")
    head = lines[0].split()
    if len(head) not in (6, 7) or not all(t.isdigit() for t in head[:5] + head[6:]):
        raise fail(1, f"{lines[0]!r} is not a header; expected {_HEADER_FORMAT}")
    nodes, gps, nvswitches, switches, link_count = (int(t) for t in head[:5])
    if len(lines) < 2:
        raise fail(2, f"missing; expected the {nvswitches + switches} switch ids")
    ids = lines[1].split()
    if len(ids) != nvswitches + switches or not all(t.isdigit() for t in ids):
        raise fail(2, f"{lines[1]!r} is not {nvswitches + switches} switch ids (the header's NVSwitches and switches)")
    links = []
    for lineno, line in enumerate(lines[2:], start=3):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 5 or not (fields[0].isdigit() and fields[1].isdigit()):
            raise fail(lineno, f"{line!r} is not a link; expected {_LINK_FORMAT}")
        try:
            gbps = _quantity(fields[2], _RATE_UNITS)
            latency_s = _quantity(fields[3], _TIME_UNITS)
            error_rate = Decimal(fields[4])
            ok = gbps > 0 and error_rate.is_finite() and 0 <= error_rate <= 1
        except (ValueError, InvalidOperation):
            raise fail(lineno, f"{line!r} is not a link; expected {_LINK_FORMAT}") from None
        if not ok:
            raise fail(lineno, f"{line!r}: the rate must be > 0 and the error rate in 0..1")
        src, dst = int(fields[0]), int(fields[1])
        if src == dst or max(src, dst) >= nodes:
            raise fail(lineno, f"{line!r}: link ends must be two distinct nodes in 0..{nodes - 1}")
        links.append(SimaiLink(src, dst, float(gbps), float(latency_s), float(error_rate)))
    if len(links) != link_count:
        raise fail(1, f"the header says {link_count} links but the file has {len(links)}")
    try:
        return SimaiTopology(
            nodes,
            gps,
            tuple(int(t) for t in ids[:nvswitches]),
            tuple(int(t) for t in ids[nvswitches:]),
            tuple(links),
            head[5],
            int(head[6]) if len(head) == 7 else None,
        )
    except SpecError as exc:
        raise fail(1 if "switch_ids" not in str(exc) else 2, str(exc)) from None


def write_simai_topology(topology: SimaiTopology, path: str | Path) -> None:
    """Write `topology` in SimAI's format (rates in Gbps, latencies in ms)."""
    Path(path).write_text(simai_text(topology))


def simai_text(topology: SimaiTopology) -> str:
    """The file text of `topology`."""
    t = topology
    head = [t.num_nodes, t.gpus_per_server, len(t.nvswitch_ids), len(t.switch_ids), len(t.links), t.gpu_type]
    if t.ngpus_per_node is not None:
        head.append(t.ngpus_per_node)
    out = [" ".join(map(str, head)), "".join(f"{i} " for i in t.nvswitch_ids + t.switch_ids)]
    for link in t.links:
        rate = _number(Decimal(repr(float(link.gbps))))
        latency = _number(Decimal(repr(float(link.latency_s))) * 1000)
        out.append(f"{link.src} {link.dst} {rate}Gbps {latency}ms {_number(Decimal(repr(float(link.error_rate))))}")
    return "\n".join(out) + "\n"


def simai_topology_of(graph: nx.Graph, *, gpu_type: str | None = None) -> SimaiTopology:
    """A fabric graph as a SimAI topology: nodes must be 0..N-1 with the GPUs first; `gpu_type`
    defaults to the graph's (`gpu_type`, or its catalogue `gpu` name up to the first '-')."""
    kinds = dict(graph.nodes(data="kind"))
    n = graph.number_of_nodes()
    gpus = sorted(v for v, k in kinds.items() if k == "gpu")
    if sorted(kinds) != list(range(n)) or gpus != list(range(len(gpus))):
        raise SpecError("simai_topology_of: graph nodes are not allowed; allowed: ids 0..N-1 with the GPUs first")
    unknown = set(kinds.values()) - set(KINDS)
    if unknown:
        raise SpecError(
            f"simai_topology_of: node kinds {sorted(map(str, unknown))} are not allowed; allowed: {', '.join(KINDS)}"
        )
    gpu_type = gpu_type or graph.graph.get("gpu_type") or str(graph.graph.get("gpu") or "NONE").split("-")[0]
    links = []
    for u, v, data in sorted(graph.edges(data=True), key=lambda e: (min(e[0], e[1]), max(e[0], e[1]))):
        link = SimaiLink(min(u, v), max(u, v), data["gbps"], data["latency_s"], data.get("error_rate", 0.0))
        links.extend([link] * data.get("count", 1))
    return SimaiTopology(
        num_nodes=n,
        gpus_per_server=graph.graph["gpus_per_server"],
        nvswitch_ids=tuple(v for v in range(n) if kinds[v] == "nvswitch"),
        switch_ids=tuple(v for v in range(n) if kinds[v] in FABRIC_KINDS),
        links=tuple(links),
        gpu_type=gpu_type,
        ngpus_per_node=graph.graph.get("ngpus_per_node"),
    )


def graph_of(topology: SimaiTopology) -> nx.Graph:
    """A SimAI topology as a fabric graph (kinds inferred, parallel link lines merged into `count`)."""
    t, gps = topology, topology.gpus_per_server
    g = nx.Graph(
        family=None,
        gpu=None,
        gpu_type=t.gpu_type,
        num_gpus=t.num_gpus,
        gpus_per_server=gps,
        ngpus_per_node=t.ngpus_per_node,
    )
    for r in range(t.num_gpus):
        g.add_node(r, kind="gpu", server=r // gps, local=r % gps)
    for s in t.nvswitch_ids:
        g.add_node(s, kind="nvswitch")
    for s in t.switch_ids:
        g.add_node(s, kind="switch")
    for link in t.links:
        u, v = link.src, link.dst
        if g.has_edge(u, v):
            e = g.edges[u, v]
            if (e["gbps"], e["latency_s"], e.get("error_rate", 0.0)) != (link.gbps, link.latency_s, link.error_rate):
                raise SpecError(f"simai.links: parallel links {u}-{v} differ in rate, latency or error rate")
            e["count"] += 1
        else:
            g.add_edge(u, v, gbps=link.gbps, latency_s=link.latency_s, count=1)
            if link.error_rate:
                g.edges[u, v]["error_rate"] = link.error_rate
    _name_switches(g, t)
    for s in t.nvswitch_ids:
        servers = {g.nodes[v]["server"] for v in g.adj[s] if v < t.num_gpus}
        if len(servers) == 1:
            g.nodes[s]["server"] = servers.pop()
    domains = [sum(1 for v in g.adj[s] if v < t.num_gpus) for s in t.nvswitch_ids]
    g.graph["domain_gpus"] = max(domains, default=1) or 1
    switches = set(t.switch_ids)
    g.graph["pxn"] = gps > 1 and all(
        len(leaves) == len(set(leaves))
        for s in range(t.num_gpus // gps)
        for leaves in [[v for r in range(s * gps, (s + 1) * gps) for v in g.adj[r] if v in switches]]
    )
    return g


def graph_bill_of_materials(graph: nx.Graph) -> BillOfMaterials:
    """What a fabric graph is built from, counted off the graph, in `bill_of_materials`' terms:
    servers, NICs (GPUs with a port on a leaf), switches and links per tier from the leaves up
    (tier 0: GPU-to-leaf links). The price book prices one port speed, so every link between a
    GPU and a switch or two switches must run at one rate (SpecError naming the rates if not)."""
    kinds = dict(graph.nodes(data="kind"))
    order = ["leaf", *(t for t in ("spine", "aggregation", "core") if t in kinds.values())]
    tier = {node: order.index(kind) for node, kind in kinds.items() if kind in FABRIC_KINDS}
    links = [0] * len(order)
    nic_gpus, rates = set(), set()
    for u, v, data in graph.edges(data=True):
        if u not in tier and v not in tier:
            continue  # NVLink: GPU to NVSwitch
        rates.add(data["gbps"])
        if u in tier and v in tier:
            links[max(tier[u], tier[v])] += data.get("count", 1)
        else:
            links[0] += data.get("count", 1)
            nic_gpus.add(u if u not in tier else v)
    if len(rates) > 1:
        found = ", ".join(f"{r:g}" for r in sorted(rates))
        raise SpecError(f"fabric links run at several rates ({found} Gb/s); allowed: one rate for NIC and switch ports")
    switches = tuple(sum(1 for t in tier.values() if t == i) for i in range(len(order)))
    servers = -(-graph.graph["num_gpus"] // graph.graph["gpus_per_server"])
    return BillOfMaterials(servers, len(nic_gpus), switches, tuple(links), rates.pop() if rates else 0.0)


def _name_switches(g: nx.Graph, t: SimaiTopology) -> None:
    """Leaves touch GPUs; the tiers above are spines, or aggregation then core when there are three."""
    level: dict[int, int] = {}
    switches = set(t.switch_ids)
    queue = deque()
    for s in t.switch_ids:
        if any(v < t.num_gpus for v in g.adj[s]):
            level[s] = 1
            queue.append(s)
    while queue:
        s = queue.popleft()
        for v in g.adj[s]:
            if v in switches and v not in level:
                level[v] = level[s] + 1
                queue.append(v)
    top = max(level.values(), default=1)
    names = {1: "leaf", 2: "spine"} if top <= 2 else {1: "leaf", 2: "aggregation"}
    for s in t.switch_ids:
        g.nodes[s]["kind"] = names.get(level.get(s, top), "core")


def _quantity(token: str, units: dict[str, Decimal]) -> Decimal:
    match = _QUANTITY.match(token)
    if not match or match.group(2) not in units:
        raise ValueError(token)
    return Decimal(match.group(1)) * units[match.group(2)]


def _number(value: Decimal) -> str:
    """Plain decimal text without exponent or trailing zeros: 400, 0.0005, 0.000025, 0."""
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"
