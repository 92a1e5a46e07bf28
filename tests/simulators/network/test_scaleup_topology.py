"""Scale-up topologies (simulators/network/_scaleup.py): graph shapes and analytical collective
times against closed forms, and NVIDIA's switch domains left as they were."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simulators.fidelity._one_collective import collective_level_time_s
from simulators.hardware import get_gpu, gpu_catalog
from simulators.network import ALGORITHMS, Fabric, Group, Network, collective_time_s, ecmp_path, fabric_graph

S = 1 << 30  # bytes: large enough that bandwidth terms dominate


def torus_gpu(dims):
    """H100 figures with its domain rewired as a torus of `dims` (the test needs no catalogue torus)."""
    kind = "torus_2d" if len(dims) == 2 else "torus_3d"
    return get_gpu("H100-SXM").model_copy(
        update={"scaleup_topology": kind, "scaleup_torus_dims": tuple(dims), "scaleup_domain_gpus": int(np.prod(dims))}
    )


def scaleup_edges(graph):
    return [
        (u, v, d) for u, v, d in graph.edges(data=True) if graph.nodes[u]["kind"] == graph.nodes[v]["kind"] == "gpu"
    ]


@pytest.mark.parametrize(
    "dims,degree,links",
    [  # links: per dimension of size s, (s if s > 2 else 1) links per ring, times the other dims
        ((4, 4), 4, 2 * 16),
        ((4, 4, 4), 6, 3 * 64),
        ((2, 4), 3, 4 + 8),
        ((16, 16), 4, 2 * 256),
    ],
)
def test_a_torus_graph_has_the_closed_form_degree_and_link_count(dims, degree, links):
    gpu = torus_gpu(dims)
    n = int(np.prod(dims))
    graph = fabric_graph(Fabric(gpus_per_server=min(n, 8)), gpu, n)
    edges = scaleup_edges(graph)
    assert len(edges) == links
    assert {sum(1 for u, v, _ in edges if r in (u, v)) for r in range(n)} == {degree}
    assert [d["gbps"] for *_, d in edges] == pytest.approx([gpu.scaleup_gbytes_per_s * 8 / degree] * links)
    assert not [v for v, k in graph.nodes(data="kind") if k == "nvswitch"]


def test_a_full_mesh_graph_has_one_link_per_pair_at_a_share_of_the_rate():
    gpu = get_gpu("MI300X")
    graph = fabric_graph(Fabric(), gpu, 16)
    edges = scaleup_edges(graph)
    assert len(edges) == 2 * 8 * 7 // 2
    assert [d["gbps"] for *_, d in edges] == pytest.approx([448 * 8 / 7] * len(edges))


def test_a_torus_route_takes_a_shortest_path_over_gpu_links():
    graph = fabric_graph(Fabric(gpus_per_server=8), torus_gpu((4, 4)), 16)

    path = ecmp_path(graph, 0, 10, 0)  # (0,0) -> (2,2): two hops in each dimension
    assert len(path) == 5 and all(graph.nodes[v]["kind"] == "gpu" for v in path)


def link_rate(gpu, links):
    return gpu.scaleup_gbytes_per_s * 1e9 * gpu.scaleup_efficiency / links


def ring_transfer_s(network, ranks, stride=1):
    group = Group.place(ranks, stride, network)
    return float(ALGORITHMS["ring"].recipe("all_reduce", np.asarray(float(S)), group, network).transfer_s)


def test_a_ring_all_reduce_of_a_mesh_pair_runs_at_one_link():
    """tp=2 on MI300X: 2(n-1)/n * S over one xGMI link of 448/7 GB/s."""
    gpu = get_gpu("MI300X")
    network = Network.from_gpu(gpu)
    assert ring_transfer_s(network, 2) == pytest.approx(2 * 1 / 2 * S / link_rate(gpu, 7))
    # all eight: RCCL's rings over every link (the module's stated assumption): the whole rate
    assert ring_transfer_s(network, 8) == pytest.approx(2 * 7 / 8 * S / link_rate(gpu, 1))


def test_a_point_to_point_send_gets_one_link_even_among_eight():
    gpu = get_gpu("MI300X")
    network = Network.from_gpu(gpu)
    fast = dataclasses.replace(network, scaleup_topology="switch")
    pipe = float(collective_time_s("send_recv", S, 8, 1, network, "direct"))
    on_switch = float(collective_time_s("send_recv", S, 8, 1, fast, "direct"))
    latency = on_switch - S / link_rate(gpu, 1)
    assert pipe - latency == pytest.approx(S / link_rate(gpu, 7), rel=1e-6)


@pytest.mark.parametrize(
    "ranks,stride,links",
    [(16, 1, 4), (4, 1, 2), (4, 4, 2), (2, 1, 1), (2, 2, 1)],  # whole 4x4, an x ring, a y ring, a pair, two apart
)
def test_a_torus_group_uses_its_links_to_other_members(ranks, stride, links):
    gpu = torus_gpu((4, 4))
    network = Network.from_gpu(gpu)
    expected = 2 * (ranks - 1) / ranks * S / (link_rate(gpu, 4) * links)
    assert ring_transfer_s(network, ranks, stride) == pytest.approx(expected)


@pytest.mark.parametrize("op,algorithm", [("all_to_all", "direct"), ("send_recv", "direct")])
def test_the_flow_level_agrees_with_the_analytical_model_on_a_full_mesh(op, algorithm):
    """Ops whose schedule uses the links the analytical share assumes (all-to-all: every peer at
    once; send/recv: one peer) take the same time on the mesh graph's links, once the flow
    level's line rate is scaled by the efficiency the analytical model applies (and within the
    latency terms the flow level leaves out). A ring all-reduce does not agree: the flow level
    runs one ring, one link per hop, where the analytical model assumes RCCL's rings over every
    link (simulators/network/_scaleup.py)."""
    gpu, fabric = get_gpu("MI300X"), Fabric()
    analytical = collective_level_time_s("analytical", op, S, 8, algorithm, fabric, gpu)
    flow = collective_level_time_s("flow", op, S, 8, algorithm, fabric, gpu)
    assert flow == pytest.approx(analytical * gpu.scaleup_efficiency, rel=0.03)


@pytest.mark.parametrize("gpu", [g for g in gpu_catalog().values() if g.vendor == "NVIDIA"], ids=lambda g: g.name)
def test_nvidia_domains_are_switches_and_their_times_do_not_move(gpu):
    """Every NVIDIA row is a switch: a group's rate is the network's, bit for bit, so no NVIDIA
    number changes with the topology field."""
    assert gpu.scaleup_topology == "switch"
    network = Network.from_gpu(gpu)
    ranks, strides = np.array([2, 4, 8, 16, 64]), np.array([1, 2, 1, 8, 1])
    group = Group.place(ranks, strides, network)
    assert np.array_equal(
        group.bytes_per_s, np.broadcast_to(network.levels.bytes_per_s[:, None], group.per_block.shape)
    )
    for op in ("all_reduce", "all_gather", "all_to_all", "send_recv"):
        as_mesh = dataclasses.replace(network, scaleup_topology="full_mesh")
        times = collective_time_s(op, S, ranks, strides, network)
        assert np.all(times <= collective_time_s(op, S, ranks, strides, as_mesh))
