"""The ns-3 reference scenarios (../shared/reference/ns3/nsbench.cc) as packet-simulator inputs.

Framing as in the reference: a UDP datagram carries MTU - 28 payload bytes (IP 20 + UDP 8), a
flow is rounded up to whole datagrams, and every packet is MTU + 2 bytes on the wire (the PPP
header); links are 1 us; hosts send at line rate. Topologies: two hosts on one link (p2p); n
senders and a receiver on one switch (incast); H hosts on L leaves with S spines, host h on leaf
h // (H / L), a leaf reaching remote host d through spine d mod S (leaf-spine)."""

from __future__ import annotations

from simulators.network import Flow, Link

DELAY_S = 1e-6


def wire_bytes(payload_bytes: int, mtu: int) -> tuple[int, int]:
    """(wire bytes of the flow, wire bytes per packet) for `payload_bytes` of UDP payload."""
    per_packet = mtu - 28
    packets = -(-payload_bytes // per_packet)
    return packets * (mtu + 2), mtu + 2


def p2p(payload_bytes: int, gbps: float = 100, mtu: int = 1500):
    links = [Link(0, 1, gbps, DELAY_S)]
    nbytes, packet = wire_bytes(payload_bytes, mtu)
    return links, [Flow((0,), nbytes, packet)], set()


def incast(senders: int, payload_bytes: int, gbps: float = 100, mtu: int = 1500):
    """Hosts 0..n-1 send to host n through switch n + 1 (link n: the receiver's; links n + 1...
    the way back, for acknowledgements)."""
    switch, receiver = senders + 1, senders
    links = [Link(h, switch, gbps, DELAY_S) for h in range(senders)] + [Link(switch, receiver, gbps, DELAY_S)]
    links += [Link(receiver, switch, gbps, DELAY_S)] + [Link(switch, h, gbps, DELAY_S) for h in range(senders)]
    nbytes, packet = wire_bytes(payload_bytes, mtu)
    flows = [Flow((h, senders), nbytes, packet) for h in range(senders)]
    return links, flows, {switch}


def _two_tier(hosts: int, leaves: int, spines: int, gbps: float, uplink_gbps: float):
    """Host h on leaf h // (hosts / leaves), every leaf joined to every spine, links both ways:
    (links, link id of each (from, to) pair, first leaf node, first spine node)."""
    per_leaf = hosts // leaves
    leaf0, spine0 = hosts, hosts + leaves
    links: list[Link] = []
    index: dict[tuple[int, int], int] = {}

    def link(a: int, b: int, rate: float) -> None:
        index[a, b] = len(links)
        links.append(Link(a, b, rate, DELAY_S))

    for h in range(hosts):
        link(h, leaf0 + h // per_leaf, gbps)
        link(leaf0 + h // per_leaf, h, gbps)
    for leaf in range(leaves):
        for s in range(spines):
            link(leaf0 + leaf, spine0 + s, uplink_gbps)
            link(spine0 + s, leaf0 + leaf, uplink_gbps)
    return links, index, leaf0, spine0


def leaf_spine(
    payload_bytes: int,
    stride: int = 1,
    all_to_all: bool = False,
    hosts: int = 16,
    leaves: int = 4,
    spines: int = 2,
    gbps: float = 100,
    uplink_gbps: float = 100,
    mtu: int = 1500,
):
    per_leaf = hosts // leaves
    links, index, leaf0, spine0 = _two_tier(hosts, leaves, spines, gbps, uplink_gbps)

    def path(src: int, dst: int) -> tuple[int, ...]:
        a, b = leaf0 + src // per_leaf, leaf0 + dst // per_leaf
        if a == b:
            return index[src, a], index[a, dst]
        spine = spine0 + dst % spines
        return index[src, a], index[a, spine], index[spine, b], index[b, dst]

    pairs = (
        [(s, d) for s in range(hosts) for d in range(hosts) if s != d]
        if all_to_all
        else [(i, (i + stride) % hosts) for i in range(hosts)]
    )
    nbytes, packet = wire_bytes(payload_bytes, mtu)
    flows = [Flow(path(s, d), nbytes, packet) for s, d in pairs]
    return links, flows, set(range(leaf0, spine0 + spines))


def two_tier_incast(senders: int, nbytes: int, hosts: int = 32, per_tor: int = 4, spines: int = 4, mtu: int = 1500):
    """htsim's incast (../shared/reference/htsim): hosts 1..senders send `nbytes` each to host 0
    on a two-tier fat tree of `hosts / per_tor` top-of-rack switches and `spines` spines, 100 Gb/s
    and 1 us per link, ECMP by source host; packets of `mtu` bytes on the wire."""
    links, index, tor0, spine0 = _two_tier(hosts, hosts // per_tor, spines, 100, 100)
    flows = []
    for src in range(1, senders + 1):
        a, b = tor0 + src // per_tor, tor0
        if a == b:
            path = (index[src, a], index[a, 0])
        else:
            spine = spine0 + src % spines
            path = (index[src, a], index[a, spine], index[spine, b], index[b, 0])
        flows.append(Flow(path, -(-nbytes // mtu) * mtu, mtu))
    return links, flows, set(range(tor0, spine0 + spines))


def star(hosts: int, gbps: float = 400, delay_s: float = DELAY_S):
    """`hosts` GPUs on one switch (node `hosts`): a non-blocking fabric. Returns the links, the
    switch set and a route function for collectives."""
    links = [Link(h, hosts, gbps, delay_s) for h in range(hosts)] + [
        Link(hosts, h, gbps, delay_s) for h in range(hosts)
    ]

    def route(src: int, dst: int) -> tuple[int, ...]:
        return (src, hosts + dst)

    return links, {hosts}, route
