"""Fabric graphs as links and routes for the contention-aware simulators."""

from simulators.hardware import get_gpu
from simulators.network import Fabric, collective_flows, fabric_graph, fabric_links, groups_of

FABRIC = Fabric(family="leaf-spine", nic_gbps=400, gpus_per_server=2, nics_per_server=2, switch_radix=8)


def test_a_connection_keeps_its_ecmp_path_and_connections_spread_over_the_uplinks():
    """A RoCE queue pair hashes onto one path for its life: every transfer between two GPUs
    takes the same links, while different connections between two leaves use both uplinks."""
    links, _, route = fabric_links(fabric_graph(FABRIC, get_gpu("H100-SXM"), 16))
    assert route(0, 8) == route(0, 8) and route(8, 0) == route(8, 0)
    ring = collective_flows("all_reduce", [[0, 2, 8, 10]], 1 << 20, route)
    by_pair: dict[tuple[int, int], set] = {}
    for path in map(ring.path, range(ring.count)):
        by_pair.setdefault((links[path[0]].src, links[path[-1]].dst), set()).add(path)
    assert len(by_pair) == 4 and all(len(paths) == 1 for paths in by_pair.values())
    uplinks = {route(s, d)[1] for s in (0, 1, 2, 3) for d in (8, 9, 10, 11)}  # the hop out of the leaf
    assert len(uplinks) > 1


def test_groups_follow_the_placement_of_the_plan():
    assert groups_of(16, 4, 2) == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]


def _cross_group_makespan_s(family: str, spread: bool, nbytes: int) -> tuple[float, list]:
    """Rail 0 of every server of one rail group sends `nbytes` to rail 0 of the same server
    of the other group: 32 flows from one rail leaf to another over its 32 uplinks."""
    from simulators.flow import Flow, simulate

    graph = fabric_graph(Fabric(family), get_gpu("H100-SXM"), 512)
    links, _, route = fabric_links(graph, spread=spread)
    flows = [Flow(route(s * 8, 256 + s * 8), nbytes) for s in range(32)]
    return float(simulate(links, flows, model="max_min").finish_s.max()), links


def test_adaptive_routing_spreads_flows_where_ecmp_hashing_collides():
    """Spectrum-X (rail-optimized wiring, adaptive routing) spreads the 32 flows over the 32
    uplinks as one pooled link: each moves at the NIC's 400 Gb/s. ECMP hashes each onto one
    uplink of 32, and 32 flows on 32 links collide somewhere (the chance of none is 32!/32^32),
    so the slowest shares a link at least in two. The packet level, which does not spread, and
    a family without the trait keep ECMP."""
    nbytes = 64 << 20
    ideal_s = nbytes * 8 / 400e9
    spread_s, links = _cross_group_makespan_s("spectrum-x", True, nbytes)
    assert ideal_s < spread_s < ideal_s + 4 * (0.5e-6 + 4096 * 8 / 400e9)  # a tail: 4 hops' latency and packet
    pooled = [link for link in links if link.src >= 512 + 64 and link.dst >= 512 + 64]  # switch to switch
    assert len(pooled) == 2 * 16 and {link.gbps for link in pooled} == {32 * 400.0}  # up and down, 16 leaves
    hashed_s, _ = _cross_group_makespan_s("spectrum-x", False, nbytes)
    assert hashed_s >= 2 * ideal_s * (1 - 1e-3)
    assert _cross_group_makespan_s("rail-optimized", True, nbytes)[0] == hashed_s
