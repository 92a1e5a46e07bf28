"""Failed switches and links: what the graph loses, what the tiered network loses, and the
one-line errors for failures a fabric cannot take."""

import pytest

from simulators import SpecError
from simulators.hardware import get_gpu
from simulators.network import Fabric, bus_bandwidth_gbytes_per_s, collective_time_s, fabric_graph
from simulators.network._failures import Failures, surviving_graph

H100 = get_gpu("H100-SXM")


def failed(**switches) -> Failures:
    links = switches.pop("links", 0)
    return Failures(switches, links, ecmp_convergence_s=0.5)


def busbw(network, ranks: int, stride: int, nbytes: int = 1 << 34) -> float:
    time_s = collective_time_s("all_reduce", nbytes, ranks, stride, network, "ring")
    return float(bus_bandwidth_gbytes_per_s("all_reduce", nbytes, ranks, time_s))


def test_one_failed_spine_of_s_leaves_cross_leaf_all_reduce_s_minus_1_over_s():
    """Non-blocking leaf-spine, 1024 H100s: 32 leaves x 32 uplinks on S = 16 spines, two links
    from every leaf to every spine. One spine down: every leaf keeps 30 of 32 uplinks, so a
    ring of one GPU per leaf block (32 GPUs 32 apart: the spine tier is its bottleneck) keeps
    15/16 of its bus bandwidth; a ring of 4 servers under one leaf loses nothing."""
    intact = Fabric("leaf-spine").network(H100, 1024)
    broken = Fabric("leaf-spine", failures=failed(spine=1)).network(H100, 1024)
    assert busbw(broken, 32, 32) == pytest.approx(busbw(intact, 32, 32) * 15 / 16, rel=1e-4)
    assert busbw(broken, 4, 8) == busbw(intact, 4, 8)
    assert broken.levels.bytes_per_s[-1] == pytest.approx(intact.levels.bytes_per_s[-1] * 15 / 16)


def test_the_graph_loses_exactly_the_failed_spine_and_links():
    graph = fabric_graph(Fabric("leaf-spine"), H100, 1024)
    spines = sorted(n for n, k in graph.nodes(data="kind") if k == "spine")
    left = surviving_graph(graph, failed(spine=1, links=3))
    assert spines[0] not in left and all(s in left for s in spines[1:])
    leaves = sorted(n for n, k in graph.nodes(data="kind") if k == "leaf")
    uplinks = [sum(e["count"] for v, e in left.adj[leaf].items() if v in spines) for leaf in leaves]
    assert uplinks == [29, 29, 29] + [30] * 29  # two links to the failed spine, then one each for 3 leaves
    assert graph.number_of_nodes() == left.number_of_nodes() + 1  # the input is not changed
    assert sum(e["count"] for v, e in graph.adj[leaves[0]].items() if v in spines) == 32


def test_a_failed_leaf_cuts_single_homed_servers_off_and_halves_dual_homed_ones():
    with pytest.raises(SpecError, match=r"hardware.fabric.failures: leaf=1 cuts GPU 0 \(server 0\) off"):
        Fabric("fat-tree", failures=failed(leaf=1)).network(H100, 1024)
    intact = Fabric("fat-tree-dual-tor").network(H100, 1024)
    broken = Fabric("fat-tree-dual-tor", failures=failed(leaf=1)).network(H100, 1024)
    assert broken.nic_gbytes_per_s == intact.nic_gbytes_per_s / 2
    assert busbw(broken, 8, 1) == busbw(intact, 8, 1)  # inside one server: NVLink only
    graph = surviving_graph(fabric_graph(Fabric("fat-tree-dual-tor"), H100, 1024), failed(leaf=1))
    nic = {
        u: sum(e["gbps"] * e["count"] for v, e in graph.adj[u].items() if graph.nodes[v]["kind"] == "leaf")
        for u in (0, 31, 32)
    }
    assert nic == {0: 200.0, 31: 200.0, 32: 400.0}  # the first leaf pair's 4 servers keep one port


def test_a_failed_aggregation_switch_costs_its_share_of_the_pod():
    """Dual-ToR fat-tree, 1024 GPUs: 32 aggregation switches a pod, each leaf with one uplink
    to each: one down leaves the pod's leaves and its core links 31/32."""
    intact = Fabric("fat-tree-dual-tor").network(H100, 1024)
    broken = Fabric("fat-tree-dual-tor", failures=failed(aggregation=1)).network(H100, 1024)
    ratio = broken.levels.bytes_per_s / intact.levels.bytes_per_s
    assert ratio[:2].tolist() == [1.0, 1.0] and ratio[2:] == pytest.approx([31 / 32, 31 / 32])


@pytest.mark.parametrize(
    ("failures", "message"),
    [
        (lambda: Failures({"spline": 1}, ecmp_convergence_s=1.0), "switches: 'spline' is not allowed; allowed: leaf"),
        (
            lambda: Failures({"spine": 0}, ecmp_convergence_s=1.0),
            r"switches.spine: 0 is not allowed; allowed: an integer >= 1",
        ),
        (lambda: Failures(links=-1, ecmp_convergence_s=1.0), r"links: -1 is not allowed; allowed: an integer >= 0"),
        (lambda: Failures({"spine": 1}), "ecmp_convergence_s: needed with failed switches or links"),
        (lambda: Failures({"spine": 1}, ecmp_convergence_s=-1.0), "ecmp_convergence_s: -1.0 is not allowed"),
    ],
)
def test_bad_failures_are_one_line_errors_naming_the_field(failures, message):
    with pytest.raises(SpecError, match="hardware.fabric.failures." + message):
        failures()


def test_failures_a_fabric_cannot_take_name_what_it_has():
    with pytest.raises(SpecError, match=r"failures.switches.spine: 17 is not allowed; allowed: at most 16"):
        Fabric("leaf-spine", failures=failed(spine=17)).network(H100, 1024)
    with pytest.raises(SpecError, match=r"failures.switches.spine: 1 is not allowed; allowed: at most 0"):
        Fabric("star", failures=failed(spine=1)).network(H100, 64)
    with pytest.raises(SpecError, match=r"failures.links: 1 is not allowed; allowed: at most 0"):
        Fabric("star", failures=failed(links=1)).network(H100, 64)
    with pytest.raises(SpecError, match="splits the fabric"):
        Fabric("leaf-spine", failures=failed(spine=16)).network(H100, 1024)
    assert str(failed(spine=1, links=2)) == "spine=1, links=2" and not Failures()


def test_ecmp_routes_over_what_survives():
    """After a failed spine no route crosses it; after a failed leaf of a dual-ToR pair the
    servers under it leave and arrive through the other leaf of the pair."""
    from simulators.network import fabric_links

    graph = surviving_graph(fabric_graph(Fabric("leaf-spine"), H100, 1024), failed(spine=1))
    links, _, route = fabric_links(graph)
    dead = min(n for n, k in fabric_graph(Fabric("leaf-spine"), H100, 1024).nodes(data="kind") if k == "spine")
    crossed = {links[i].dst for s in range(0, 1024, 37) for d in range(5, 1024, 101) if s != d for i in route(s, d)}
    assert dead not in crossed and len(crossed & {n for n, k in graph.nodes(data="kind") if k == "spine"}) == 15
    intact = fabric_graph(Fabric("fat-tree-dual-tor"), H100, 1024)
    _, second = sorted(n for n, k in intact.nodes(data="kind") if k == "leaf")[:2]
    links, _, route = fabric_links(surviving_graph(intact, failed(leaf=1)))
    assert {links[route(0, d)[0]].dst for d in range(64, 1024, 64)} == {second}
    assert {links[route(s, 0)[-1]].src for s in range(64, 1024, 64)} == {second}
