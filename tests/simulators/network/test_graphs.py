"""Fabric graphs against hand counts and the bill of materials; ECMP routes over them."""

import os
import subprocess
import sys
from collections import Counter

import networkx as nx
import pytest

from simulators import SpecError
from simulators.hardware import get_gpu
from simulators.network import Fabric, bill_of_materials
from simulators.network._graphs import Router, ecmp_hops, ecmp_path, fabric_graph

H100 = get_gpu("H100-SXM")
TIERS = ("leaf", ("spine", "aggregation"), "core")


def tier_counts(graph):
    """(switches per tier, links per tier) counted from the graph, tier 0 = leaves and NIC links."""
    kind = dict(graph.nodes(data="kind"))

    def tier(node):
        return {"gpu": -1, "leaf": 0, "spine": 1, "aggregation": 1, "core": 2}.get(kind[node])

    switches, links = Counter(), Counter()
    for node in graph:
        if tier(node) is not None and tier(node) >= 0:
            switches[tier(node)] += 1
    for u, v, count in graph.edges(data="count"):
        if tier(u) is not None and tier(v) is not None:
            links[max(tier(u), tier(v))] += count
    top = max(switches) + 1
    return tuple(switches[t] for t in range(top)), tuple(links[t] for t in range(top))


@pytest.mark.parametrize("k", [4, 8])
def test_k_ary_fat_tree_has_k_cubed_over_four_hosts_and_five_k_squared_over_four_switches(k):
    """Al-Fares et al. (SIGCOMM 2008): k pods, k^3/4 hosts, 5k^2/4 switches of k ports, every
    port used; each core switch reaches every pod once. One GPU per server has no NVLink domain."""
    fabric = Fabric("fat-tree", switch_radix=k, gpus_per_server=1, nics_per_server=1)
    graph = fabric_graph(fabric, H100, k**3 // 4)
    kinds = Counter(kind for _, kind in graph.nodes(data="kind"))
    assert kinds["gpu"] == k**3 // 4
    assert kinds["leaf"] + kinds["aggregation"] + kinds["core"] == 5 * k * k // 4
    assert (kinds["leaf"], kinds["aggregation"], kinds["core"]) == (k * k // 2, k * k // 2, k * k // 4)
    assert kinds["nvswitch"] == 0 and graph.graph["domain_gpus"] == 1  # degenerate scale-up domain
    assert fabric.network(H100, k**3 // 4).domain_gpus == 1
    for node, kind in graph.nodes(data="kind"):
        if kind != "gpu":
            assert graph.degree(node, weight="count") == k
        if kind == "core":
            assert sorted(graph.nodes[a]["pod"] for a in graph.adj[node]) == list(range(k))


CASES = [
    ("leaf-spine", {}, [8, 64, 512, 2048]),
    ("leaf-spine", {"oversubscription": 3.0}, [512, 1000]),
    ("leaf-spine", {"nics_per_server": 4}, [64, 520]),
    ("fat-tree", {}, [8, 64, 512, 2048, 4096, 2056]),
    ("fat-tree", {"switch_radix": 8, "gpus_per_server": 1, "nics_per_server": 1}, [3, 16, 40, 72, 100]),
    ("fat-tree", {"switch_radix": 16, "oversubscription": 3.0}, [256, 1024, 1536]),
    ("rail-optimized", {}, [8, 64, 512, 520, 2048]),
    ("rail-optimized", {"oversubscription": 2.0}, [1024]),
    ("rail-optimized", {"nics_per_server": 4}, [512]),
    ("rail-optimized", {"gpus_per_server": 4, "nics_per_server": 8}, [256]),
    ("dual-plane", {}, [8, 64, 512, 1024, 2048]),
]


@pytest.mark.parametrize("family, options, sizes", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_graph_tiers_match_the_bill_of_materials(family, options, sizes):
    fabric = Fabric(family, **options)
    for n in sizes:
        graph = fabric_graph(fabric, H100, n)
        bom = bill_of_materials(fabric, n)
        assert tier_counts(graph) == (bom.switches, bom.links), (family, n)
        assert sum(1 for _, k in graph.nodes(data="kind") if k == "gpu") == n


@pytest.mark.parametrize("family, options, sizes", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_no_switch_uses_more_ports_than_it_has_and_links_run_at_their_speeds(family, options, sizes):
    fabric = Fabric(family, **options)
    graph = fabric_graph(fabric, H100, sizes[-1])
    for node, kind in graph.nodes(data="kind"):
        if kind in ("leaf", "spine", "core"):
            assert graph.degree(node, weight="count") <= fabric.switch_radix
        if kind == "aggregation":
            down = sum(e["count"] for v, e in graph.adj[node].items() if graph.nodes[v]["kind"] == "leaf")
            assert down <= fabric.switch_radix // 2
    for u, v, data in graph.edges(data=True):
        ends = {graph.nodes[u]["kind"], graph.nodes[v]["kind"]}
        assert data["gbps"] == (H100.scaleup_gbytes_per_s * 8 if "nvswitch" in ends else fabric.port_gbps)
        assert data["latency_s"] == (25e-9 if "nvswitch" in ends else 500e-9)


def test_dual_plane_spines_take_one_plane_each():
    graph = fabric_graph(Fabric("dual-plane"), H100, 1024)
    for node, data in graph.nodes(data=True):
        if data["kind"] == "spine":
            assert {graph.nodes[v]["plane"] for v in graph.adj[node]} == {data["plane"]}


def test_dual_plane_spines_at_a_partial_size_match_the_bill_of_materials():
    """264 GPUs: 33 servers in groups of 32 and 1, so each plane's 16 leaves have 8 * 33 = 264
    uplinks: ceil(264 / 64) = 5 spines per isolated plane, 10 in all (a bill that pooled both
    planes' uplinks would count ceil(528 / 64) = 9)."""
    fabric = Fabric("dual-plane")
    assert tier_counts(fabric_graph(fabric, H100, 264))[0] == bill_of_materials(fabric, 264).switches


def test_latencies_are_parameters():
    graph = fabric_graph(Fabric("leaf-spine"), H100, 512, nic_latency_s=1e-6, switch_latency_s=2e-6)
    latencies = {graph.nodes[v]["kind"]: lat for u, v, lat in graph.edges(data="latency_s") if u < 512}
    assert latencies == {"nvswitch": 25e-9, "leaf": 1e-6}
    assert {lat for u, v, lat in graph.edges(data="latency_s") if u >= 512} == {2e-6}
    with pytest.raises(SpecError, match="fabric_graph.nic_latency_s"):
        fabric_graph(Fabric(), H100, 8, nic_latency_s=-1.0)


def check_path(graph, path, src, dst):
    kind = graph.nodes
    assert path[0] == src and path[-1] == dst and len(set(path)) == len(path)
    assert all(graph.has_edge(a, b) for a, b in zip(path, path[1:]))
    for i, node in enumerate(path[1:-1], start=1):  # a GPU in between only relays over NVLink (PXN)
        if kind[node]["kind"] == "gpu":
            assert kind[path[i - 1]]["kind"] == "nvswitch" or kind[path[i + 1]]["kind"] == "nvswitch"


SMALL = [
    (Fabric("leaf-spine", switch_radix=16), 64),
    (Fabric("leaf-spine", switch_radix=8, nics_per_server=2), 64),
    (Fabric("fat-tree", switch_radix=6, gpus_per_server=1, nics_per_server=1), 54),
    (Fabric("fat-tree", switch_radix=8, gpus_per_server=2, nics_per_server=2), 72),  # 5 pods, the last half full
    (Fabric("rail-optimized", switch_radix=12), 72),  # groups of 6 and 3 servers
    (Fabric("rail-optimized", switch_radix=16), 64),  # one group, no spine
    (Fabric("dual-plane", switch_radix=12), 72),
]


@pytest.mark.parametrize("fabric, n", SMALL, ids=[f"{f.family}-{n}" for f, n in SMALL])
def test_every_gpu_pair_has_a_path(fabric, n):
    graph = fabric_graph(fabric, H100, n)
    router = Router(graph)
    for src in range(n):
        for dst in range(n):
            check_path(graph, router.path(src, dst, flow_id=src * n + dst), src, dst)


def test_paths_without_pxn_are_shortest_through_switches():
    graph = fabric_graph(Fabric("fat-tree", switch_radix=8, gpus_per_server=1, nics_per_server=1), H100, 128)
    switches = [v for v, k in graph.nodes(data="kind") if k != "gpu"]
    for src, dst in [(0, 1), (0, 5), (0, 127), (17, 64), (100, 3)]:
        shortest = nx.shortest_path_length(graph.subgraph([src, dst, *switches]), src, dst)
        assert len(ecmp_path(graph, src, dst, 7)) - 1 == shortest


def test_gpus_of_one_server_talk_over_the_nvswitch_even_on_a_shared_leaf():
    graph = fabric_graph(Fabric("leaf-spine"), H100, 512)
    path = ecmp_path(graph, 0, 5, 0)
    assert len(path) == 3 and graph.nodes[path[1]]["kind"] == "nvswitch"


def test_ecmp_spreads_flows_over_all_spines_and_cores():
    graph = fabric_graph(Fabric("leaf-spine"), H100, 512)  # 16 leaves, 8 spines
    spines = Counter(ecmp_path(graph, 0, 300, f)[2] for f in range(1000))
    assert len(spines) == 8 and {graph.nodes[s]["kind"] for s in spines} == {"spine"}
    assert max(spines.values()) <= 1.25 * 125 and min(spines.values()) >= 0.75 * 125
    tree = fabric_graph(Fabric("fat-tree", switch_radix=8, gpus_per_server=1, nics_per_server=1), H100, 128)
    cores = Counter(ecmp_path(tree, 0, 100, f)[3] for f in range(1000))  # 16 cores
    assert len(cores) == 16 and max(cores.values()) <= 1.4 * 1000 / 16 and min(cores.values()) >= 0.6 * 1000 / 16


def test_ecmp_spreads_a_bundle_over_its_member_links():
    graph = fabric_graph(Fabric("leaf-spine"), H100, 128)  # 4 leaves, 2 spines: 16 links per leaf-spine pair
    members = Counter(ecmp_hops(graph, 0, 100, f)[1][2] for f in range(1000))
    assert sorted(members) == list(range(16))


_ROUTES = "import sys; sys.path.insert(0, {root!r}); " + (
    "from simulators.hardware import get_gpu; from simulators.network import Fabric; "
    "from simulators.network._graphs import fabric_graph, ecmp_path; "
    "g = fabric_graph(Fabric('fat-tree', switch_radix=8, gpus_per_server=1, nics_per_server=1), get_gpu('H100'), 128); "
    "print([ecmp_path(g, s, (s * 37 + 11) % 128, f) for s in range(0, 128, 9) for f in range(5)])"
)


def test_ecmp_is_deterministic_across_runs_and_routers():
    graph = fabric_graph(Fabric("fat-tree", switch_radix=8, gpus_per_server=1, nics_per_server=1), H100, 128)
    here = [ecmp_path(graph, s, (s * 37 + 11) % 128, f) for s in range(0, 128, 9) for f in range(5)]
    fresh = Router(graph)
    assert here == [fresh.path(s, (s * 37 + 11) % 128, f) for s in range(0, 128, 9) for f in range(5)]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", _ROUTES.format(root=root)], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == str(here)


def test_rail_optimized_cross_rail_traffic_takes_nvlink_to_the_destination_rail_first():
    graph = fabric_graph(Fabric("rail-optimized"), H100, 512)  # 2 groups of 32 servers
    far = 40 * 8 + 3  # server 40 (group 1), rail 3
    for f in range(20):
        path = ecmp_path(graph, 0, far, f)
        assert graph.nodes[path[1]]["kind"] == "nvswitch" and path[2] == 3  # GPU 3 of server 0
        assert [graph.nodes[v]["kind"] for v in path[3:-1]] == ["leaf", "spine", "leaf"]
        assert {graph.nodes[v]["rail"] for v in path[3:-1] if graph.nodes[v]["kind"] == "leaf"} == {3}
    near = ecmp_path(graph, 0, 8 + 3, 0)  # server 1, rail 3: one switch hop after NVLink
    assert near[2] == 3 and [graph.nodes[v]["kind"] for v in near] == ["gpu", "nvswitch", "gpu", "leaf", "gpu"]
    same_rail = ecmp_path(graph, 0, 40 * 8, 0)
    assert [graph.nodes[v]["kind"] for v in same_rail] == ["gpu", "leaf", "spine", "leaf", "gpu"]


def test_a_single_rail_group_needs_nvlink_to_cross_rails():
    graph = fabric_graph(Fabric("rail-optimized"), H100, 64)  # 8 servers on 8 rail leaves, no spine
    path = ecmp_path(graph, 0, 63, 0)  # server 7, rail 7
    assert path[2] == 7 and [graph.nodes[v]["kind"] for v in path] == ["gpu", "nvswitch", "gpu", "leaf", "gpu"]
    graph.graph["pxn"] = False  # without PXN the rails do not meet
    with pytest.raises(nx.NetworkXNoPath):
        Router(graph).path(0, 63, 0)


def test_dual_plane_flows_use_both_planes():
    graph = fabric_graph(Fabric("dual-plane"), H100, 512)
    planes = Counter(graph.nodes[ecmp_path(graph, 0, 300, f)[-2]]["plane"] for f in range(200))
    assert set(planes) == {0, 1} and min(planes.values()) > 60


def test_a_gpu_without_a_nic_uses_its_neighbours_over_nvlink():
    """4 NICs for 8 GPUs: NIC n sits on GPU 2n of its server; GPU 3 sends through GPU 2's NIC and
    GPU 301 (server 37, local 5) receives through GPU 300's."""
    graph = fabric_graph(Fabric("leaf-spine", nics_per_server=4), H100, 512)
    path = ecmp_path(graph, 3, 301, 0)
    kinds = [graph.nodes[v]["kind"] for v in path]
    assert path[2] == 2 and path[-3] == 300
    assert kinds[:3] == ["gpu", "nvswitch", "gpu"] and kinds[-3:] == ["gpu", "nvswitch", "gpu"]
    assert graph.nodes[path[3]]["kind"] == "leaf" and graph.nodes[path[-4]]["kind"] == "leaf"


def test_routes_name_what_is_wrong():
    graph = fabric_graph(Fabric(), H100, 64)
    with pytest.raises(SpecError, match="ecmp_path.dst: 70 is not allowed"):
        ecmp_path(graph, 0, 70, 0)
    with pytest.raises(SpecError, match="ecmp_path.flow_id"):
        ecmp_path(graph, 0, 1, 0.5)
    assert ecmp_path(graph, 3, 3, 0) == [3]
