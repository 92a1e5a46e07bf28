"""Fabric descriptions: bills of materials against hand counts, and the networks they imply."""

import pytest

from simulators import SpecError
from simulators.hardware import get_gpu
from simulators.network import Fabric, bill_of_materials, collective_time_s


def test_four_ary_fat_tree_matches_al_fares():
    """k = 4, one NIC per host: 16 hosts, 8 edge, 8 aggregation, (k/2)^2 = 4 core switches,
    k^3/4 = 16 links on each of the three layers (Al-Fares et al., SIGCOMM 2008)."""
    bom = bill_of_materials(Fabric("fat-tree", switch_radix=4, gpus_per_server=1, nics_per_server=1), 16)
    assert (bom.servers, bom.nics, bom.switches, bom.links) == (16, 16, (8, 8, 4), (16, 16, 16))


def test_fat_tree_of_two_pods_of_radix_64():
    """2048 GPUs, 8 per server and NIC per GPU: 2048 NICs / 32 per leaf = 64 leaves = 2 pods of
    32; each pod's 32 aggregation switches take its 1024 uplinks; 2048 / 64 = 32 core switches."""
    bom = bill_of_materials(Fabric("fat-tree"), 2048)
    assert bom.switches == (64, 64, 32) and bom.links == (2048, 2048, 2048) and bom.servers == 256


def test_rail_optimized_counts_one_leaf_per_rail_per_group():
    """512 GPUs = 64 servers; 32 servers per rail leaf make 2 groups x 8 rails = 16 leaves, each
    with 32 uplinks: 512 uplinks / 64 ports = 8 spines. One group (64 GPUs) needs no spine."""
    bom = bill_of_materials(Fabric("rail-optimized"), 512)
    assert bom.switches == (16, 8) and bom.links == (512, 512)
    small = bill_of_materials(Fabric("rail-optimized"), 64)
    assert small.switches == (8,) and small.links == (64,)


def test_dual_plane_doubles_leaves_and_links_at_half_speed():
    bom = bill_of_materials(Fabric("dual-plane"), 512)
    assert bom.switches == (32, 16) and bom.links == (1024, 1024) and bom.port_gbps == 200


def test_oversubscribed_leaves_take_more_nics_and_fewer_uplinks():
    """3:1 on radix 64: 48 ports down, 16 up; 512 NICs fill 10 leaves and 32 ports of an 11th,
    which needs ceil(32 / 3) = 11 uplinks: 171 uplinks on ceil(171 / 64) = 3 spines."""
    bom = bill_of_materials(Fabric("leaf-spine", oversubscription=3.0), 512)
    assert bom.switches == (11, 3) and bom.links == (512, 171)


def test_fabric_refuses_what_it_cannot_hold_with_the_field_named():
    with pytest.raises(SpecError, match="fat-tree"):
        bill_of_materials(Fabric("leaf-spine"), 4096)
    with pytest.raises(SpecError, match="gpus_per_server"):
        bill_of_materials(Fabric(), 12)
    with pytest.raises(SpecError, match="fabric.family"):
        Fabric("torus")


def test_network_of_a_fabric_slows_traffic_that_leaves_an_oversubscribed_leaf():
    """Inside one rail group the all-reduce sees the full NIC rate; across groups, the leaf's
    3:1 oversubscription divides it, and a 200G NIC halves the 400G one."""
    h100 = get_gpu("H100-SXM")
    blocking = Fabric("rail-optimized", oversubscription=3.0).network(h100, 1024)
    full = Fabric("rail-optimized").network(h100, 1024)
    slow_nic = Fabric("rail-optimized", nic_gbps=200).network(h100, 1024)
    nbytes = 1 << 30

    def t(network, ranks, stride):
        return float(collective_time_s("all_reduce", nbytes, ranks, stride, network))

    inside = t(blocking, 8, 8)  # 8 ranks, one per server, within one group of 48 servers
    assert inside == pytest.approx(t(full, 8, 8), rel=1e-9)
    assert t(blocking, 128, 8) > 2 * t(full, 128, 8)  # crosses groups of 48 servers
    assert t(slow_nic, 128, 8) > 1.8 * t(full, 128, 8)


def test_a_server_inside_an_nvl72_domain_is_all_nvlink():
    """64 GB200s per server of a 72-GPU NVLink rack: the whole server is one NVLink domain
    (gcd(72, 64) = 8 would cut it to 8), while 16 H100s per server hold two 8-GPU domains."""
    from simulators.hardware import get_gpu

    assert (
        Fabric(family="rail-optimized", nic_gbps=400, gpus_per_server=64, nics_per_server=64)
        .network(get_gpu("GB200"), 256)
        .domain_gpus
        == 64
    )
    assert (
        Fabric(family="rail-optimized", nic_gbps=400, gpus_per_server=16, nics_per_server=16)
        .network(get_gpu("H100-SXM"), 64)
        .domain_gpus
        == 8
    )


def test_a_star_puts_every_nic_on_one_switch_and_refuses_more_than_its_radix():
    """Radix 64, 8 NICs per server: 8 servers, 64 links on one switch and no tier above; the
    network is NVLink then one fabric level at the full NIC rate. A ninth server is refused."""
    star = Fabric("star")
    bom = bill_of_materials(star, 64)
    assert (bom.servers, bom.switches, bom.links) == (8, (1,), (64,))
    assert star.max_gpus() == 64 and bill_of_materials(Fabric("star", switch_radix=128), 120).switches == (1,)
    network = star.network(get_gpu("H100-SXM"), 64)
    assert len(network.tiers) == 1 and network.tiers[0].oversubscription == 1.0
    with pytest.raises(SpecError, match=r"num_gpus=72 exceeds .* star fabric of radix 64 holds \(64\); .*switch_radix"):
        star.check(72)
    with pytest.raises(SpecError, match="fabric.oversubscription: 2.0 is not allowed for family star"):
        Fabric("star", oversubscription=2.0)


def test_dual_tor_fat_tree_homes_every_nic_on_a_leaf_pair():
    """1024 GPUs = 1024 NICs with two 200G ports: 32 NICs per leaf pair -> 32 pairs = 64 leaves,
    2 pods of 32 leaves; 2048 leaf uplinks on 64 aggregation switches, 2048 / 64 = 32 cores.
    The same GPUs on a single-homed fat-tree: 32 leaves, one pod, two tiers."""
    bom = bill_of_materials(Fabric("fat-tree-dual-tor"), 1024)
    assert bom.switches == (64, 64, 32) and bom.links == (2048, 2048, 2048) and bom.port_gbps == 200
    assert bill_of_materials(Fabric("fat-tree"), 1024).switches == (32, 16)
    assert bill_of_materials(Fabric("fat-tree-dual-tor"), 4096).switches == (256, 256, 128)
    network = Fabric("fat-tree-dual-tor").network(get_gpu("H100-SXM"), 1024)
    assert [t.group_gpus for t in network.tiers] == [32, 512, 1024]  # leaf pair, pod of 16 pairs, all
    assert network.nic_gbytes_per_s == 50.0  # two 200G ports: the NIC's 400G
    with pytest.raises(SpecError, match="fabric.switch_radix: 6 is not allowed for family fat-tree-dual-tor"):
        Fabric("fat-tree-dual-tor", switch_radix=6)


def test_port_latency_reaches_every_tier_of_the_network():
    network = Fabric("leaf-spine", port_latency_s=1e-6).network(get_gpu("H100-SXM"), 1024)
    assert network.nic_latency_s == 1e-6 and {t.latency_s for t in network.tiers} == {2e-6}
    with pytest.raises(SpecError, match="fabric.port_latency_s"):
        Fabric(port_latency_s=-1.0)
