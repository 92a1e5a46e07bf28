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
