"""Each algorithm against its closed form (Simple protocol, a toy network with round numbers)."""

import numpy as np
import pytest

from simulators import CatalogError, SpecError
from simulators.hardware import get_gpu
from simulators.network import (
    ALGORITHMS,
    Network,
    Tier,
    algorithm_bandwidth_gbytes_per_s,
    bus_bandwidth_gbytes_per_s,
    choose_algorithm,
    collective_time_s,
)

US = 1e-6
# NCCL tuning.cc, Simple protocol: base 8.4 us; per step ring NVLink 3.4 / NET 14, tree 4.0 / 14.
BASE, RING_NVL, RING_NET, TREE_NVL, TREE_NET = 8.4 * US, 3.4 * US, 14 * US, 4.0 * US, 14 * US
NVL, NIC = 100e9, 10e9  # toy effective rates, bytes/s
TOY = Network(
    name="toy",
    domain_gpus=8,
    scaleup_gbytes_per_s=100,
    nic_gbytes_per_s=10,
    nvls=True,
    scaleup_latency_s=0.0,
    nic_latency_s=0.0,
    scaleup_efficiency=1.0,
    nic_efficiency=1.0,
    nvls_efficiency=0.5,
)
S = 64e6


def simple(op, algorithm, ranks, stride=1, nbytes=S, network=TOY):
    return collective_time_s(op, nbytes, ranks, stride, network, algorithm, protocol="Simple")


@pytest.mark.parametrize(
    ("op", "algorithm", "ranks", "expected"),
    [
        ("all_reduce", "ring", 8, BASE + 14 * RING_NVL + 2 * 7 / 8 * S / NVL),
        # 16 = 2 domains of 8: NCCL counts 2 * nNodes = 4 network steps; 8 NICs per domain.
        ("all_reduce", "ring", 16, BASE + 26 * RING_NVL + 4 * RING_NET + 2 * 15 / 16 * S / (8 * NIC)),
        ("reduce_scatter", "ring", 16, BASE + 14 * RING_NVL + 1 * RING_NET + 15 / 16 * S / (8 * NIC)),
        ("all_gather", "ring", 8, BASE + 7 * RING_NVL + 7 / 8 * S / NVL),
        ("broadcast", "ring", 16, BASE + 14 * RING_NVL + RING_NET + S / (8 * NIC)),
        ("all_reduce", "tree", 8, BASE + 14 * TREE_NVL + 2 * S / NVL / 0.92),
        ("all_reduce", "tree", 16, BASE + 14 * TREE_NVL + 2 * TREE_NET + 2 * S / NVL / 0.92),
        ("all_reduce", "tree", 64, BASE + 14 * TREE_NVL + 6 * TREE_NET + 2 * S / (8 * NIC) / 0.92),
        ("all_reduce", "halving_doubling", 8, BASE + 6 * RING_NVL + 2 * 7 / 8 * S / NVL),
        # 6 ranks: a 4-rank core plus the extra-step pair moving S each way.
        ("all_reduce", "halving_doubling", 6, BASE + 6 * RING_NVL + (2 * 3 / 4 * S + 2 * S) / NVL),
        (
            "all_reduce",
            "halving_doubling",
            16,
            BASE + 6 * RING_NVL + 2 * RING_NET + 2 * (7 / 8 * S / NVL + S / 16 / NIC),
        ),
        ("reduce_scatter", "halving_doubling", 8, BASE + 3 * RING_NVL + 7 / 8 * S / NVL),
        ("all_reduce", "nvls", 8, 25 * US + 9 / 8 * S / (0.5 * NVL)),
        ("all_reduce", "nvls", 16, 25 * US + 2 * 20.9 * US + max(9 / 8 * S / (0.5 * NVL), S / 8 / NIC)),
        ("all_gather", "nvls", 8, 25 * US + S / (0.5 * NVL)),
        ("all_reduce", "hierarchical", 16, 3 * BASE + 14 * RING_NVL + 2 * RING_NET + 2 * 7 / 8 * S / NVL + S / 8 / NIC),
        ("reduce_scatter", "hierarchical", 16, 2 * BASE + 7 * RING_NVL + RING_NET + 7 / 8 * S / NVL + S / 16 / NIC),
        ("all_to_all", "direct", 16, BASE + 7 * RING_NVL + 8 * RING_NET + max(7 * S / 16 / NVL, 8 * S / 16 / NIC)),
        ("all_to_all", "pairwise", 16, BASE + 7 * RING_NVL + 8 * RING_NET + 7 * S / 16 / NVL + 8 * S / 16 / NIC),
        ("send_recv", "direct", 2, BASE + RING_NVL + S / NVL),
    ],
)
def test_closed_forms(op, algorithm, ranks, expected):
    assert simple(op, algorithm, ranks) == pytest.approx(expected, rel=1e-12)


def test_send_recv_between_domains_uses_the_nic():
    assert simple("send_recv", "direct", 2, stride=8) == pytest.approx(BASE + RING_NET + S / NIC)


def test_the_fastest_protocol_wins_small_messages():
    # LL: base 6.6 us and 0.6 us per NVLink step (tuning.cc), at a quarter of the bandwidth.
    ll = 6.6 * US + 14 * 0.6 * US + 4 * 2 * 7 / 8 * 8 / NVL
    assert collective_time_s("all_reduce", 8, 8, 1, TOY, "ring") == pytest.approx(ll)
    assert collective_time_s("all_reduce", 8, 8, 1, TOY, "ring", protocol="LL") == pytest.approx(ll)


def test_large_ring_all_reduce_bus_bandwidth_reaches_the_effective_link():
    h100 = Network.from_gpu(get_gpu("H100-SXM"))
    size = 2.0**33
    busbw = bus_bandwidth_gbytes_per_s("all_reduce", size, 8, collective_time_s("all_reduce", size, 8, 1, h100, "ring"))
    assert busbw == pytest.approx(450 * 0.824, rel=2e-3)  # nccl-tests issue 212: ~370 GB/s
    across = collective_time_s("all_reduce", size, 16, 8, h100, "ring")
    assert bus_bandwidth_gbytes_per_s("all_reduce", size, 16, across) == pytest.approx(50 * 0.97, rel=2e-3)


def test_oversubscribed_spine_slows_cross_leaf_groups_by_its_factor():
    net = Network.from_gpu(get_gpu("H100-SXM"), tiers=(Tier(256), Tier(8192, oversubscription=2.0)))
    size = 2.0**34
    inside_leaf = collective_time_s("all_reduce", size, 16, 16, net, "ring")  # 256 GPUs: one leaf
    across_leaves = collective_time_s("all_reduce", size, 16, 32, net, "ring")  # 512 GPUs: two leaves
    assert across_leaves / inside_leaf == pytest.approx(2.0, rel=1e-3)


def test_nvls_is_inf_where_it_cannot_run():
    a100 = Network.from_gpu(get_gpu("A100-80GB"))
    assert np.isinf(collective_time_s("all_reduce", S, 8, 1, a100, "nvls"))
    assert np.isinf(simple("all_reduce", "nvls", 4, stride=8))  # one member per domain
    assert np.isinf(simple("reduce_scatter", "nvls", 16))  # NCCL: NVLS RS/AG inside one domain only
    assert np.isinf(collective_time_s("all_reduce", S, 8, 1, TOY, "nvls", protocol="LL"))  # Simple only
    assert "nvls" not in choose_algorithm("all_reduce", [8e3, 8e9], 8, 1, a100).algorithm


def test_unknown_algorithm_lists_the_allowed_names():
    with pytest.raises(CatalogError) as err:
        collective_time_s("all_reduce", S, 8, 1, TOY, "rign")
    message = str(err.value)
    assert message.startswith("algorithm: 'rign' is not a known collective algorithm (did you mean 'ring'?)")
    assert all(name in message for name in ALGORITHMS) and message.endswith("or auto")


def test_an_op_the_algorithm_lacks_is_refused():
    with pytest.raises(SpecError, match="'nvls' does not implement op 'all_to_all'; allowed ops: all_reduce"):
        collective_time_s("all_to_all", S, 8, 1, TOY, "nvls")
    with pytest.raises(SpecError, match="op: 'allreduce' is not a collective; allowed: all_reduce"):
        collective_time_s("allreduce", S, 8, 1, TOY)


def test_tree_is_an_alias():
    assert simple("all_reduce", "tree", 16) == simple("all_reduce", "double_binary_tree", 16)


@pytest.mark.parametrize(
    ("op", "factor"),
    [("all_reduce", 2 * 7 / 8), ("reduce_scatter", 7 / 8), ("all_gather", 7 / 8), ("all_to_all", 7 / 8)]
    + [("broadcast", 1.0), ("send_recv", 1.0)],
)
def test_nccl_tests_bandwidth_conventions(op, factor):
    assert algorithm_bandwidth_gbytes_per_s(2e9, 0.5) == 4.0
    assert bus_bandwidth_gbytes_per_s(op, 2e9, 8, 0.5) == pytest.approx(4.0 * factor)


def test_bandwidth_needs_a_positive_time():
    with pytest.raises(SpecError, match="time_s: 0 is not allowed"):
        algorithm_bandwidth_gbytes_per_s(1e6, 0.0)
