import dataclasses

import pytest

from simulators import SpecError
from simulators.hardware import get_gpu
from simulators.network import Network, Tier


def test_from_gpu_reads_the_catalogue_and_converts_gigabits():
    h100 = get_gpu("H100-SXM")
    net = Network.from_gpu(h100)
    assert net.domain_gpus == h100.scaleup_domain_gpus == 8
    assert net.scaleup_gbytes_per_s == h100.scaleup_gbytes_per_s
    assert net.nic_gbytes_per_s == pytest.approx(h100.nic_gbps / 8)  # 400 Gb/s -> 50 GB/s
    assert net.levels.bytes_per_s[0] == pytest.approx(450e9 * 20.6 / 25)  # SimAI's 370.8 GB/s
    assert net.levels.bytes_per_s[1] == pytest.approx(50e9 * 0.97)  # ConnectX-7 48.5 GB/s


@pytest.mark.parametrize(
    ("gpu", "nvls"),
    [("H100-SXM", True), ("H800", True), ("H200", True), ("B200", True), ("GB200", True)]
    + [("V100-32GB", False), ("A100-80GB", False), ("A100-40GB", False), ("MI300X", False)],
)
def test_nvls_only_on_nvswitch_generation_three_and_later(gpu, nvls):
    assert Network.from_gpu(get_gpu(gpu)).nvls is nvls


def test_blackwell_nvls_is_less_efficient_than_hopper():
    assert Network.from_gpu(get_gpu("B200")).nvls_efficiency < Network.from_gpu(get_gpu("H100")).nvls_efficiency


def test_oversubscription_compounds_outwards_and_latency_adds_up():
    net = Network.from_gpu(get_gpu("H100-SXM"), tiers=(Tier(256, 1.0, 1e-6), Tier(8192, 2.0, 2e-6)))
    nic = 50e9 * 0.97
    assert net.levels.bytes_per_s[1:].tolist() == pytest.approx([nic, nic / 2])
    assert net.levels.latency_s[1:].tolist() == pytest.approx([0.5e-6 + 1e-6, 0.5e-6 + 3e-6])
    assert net.levels.reach_gpus.tolist() == [8, 256, 8192]
    assert net.max_gpus == 8192


def test_without_tiers_the_nic_fabric_is_unbounded():
    net = Network.from_gpu(get_gpu("H100-SXM"))
    assert net.levels.names == ("scale-up", "nic")
    assert net.max_gpus == float("inf")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scaleup_gbytes_per_s": 0.0}, "network.scaleup_gbytes_per_s"),
        ({"nic_gbytes_per_s": -1.0}, "network.nic_gbytes_per_s"),
        ({"domain_gpus": 0}, "network.domain_gpus"),
        ({"nic_latency_s": -1e-6}, "network.nic_latency_s"),
        ({"nvls_efficiency": 1.5}, "network.nvls_efficiency"),
        ({"tiers": (Tier(4),)}, "network.tiers[0].group_gpus"),
        ({"tiers": (Tier(256), Tier(128))}, "network.tiers[1].group_gpus"),
        ({"tiers": (Tier(256), Tier(300))}, "network.tiers[1].group_gpus"),
        ({"slowdown": ((("all_reduce", 8, 1, 1024), 0.0),)}, "network.slowdown[0].factor"),
        (
            {"slowdown": ((("all_reduce", 8, 1, 1024), 1.5), (("all_gather", 0, 1, 1024), 2.0))},
            "network.slowdown[1].ranks",
        ),
        ({"slowdown": ((("all_reduce", 8, 1, 0), 1.5),)}, "network.slowdown[0].nbytes"),
        ({"slowdown": ((("all_reduce", 8, 1), 1.5),)}, "network.slowdown[0]"),
        ({"slowdown": (("all_reduce", 1.5),)}, "network.slowdown[0]"),
    ],
)
def test_invalid_networks_name_the_field_the_value_and_what_is_allowed(change, field):
    with pytest.raises(SpecError) as err:
        dataclasses.replace(Network.from_gpu(get_gpu("H100-SXM")), **change)
    message = str(err.value)
    assert message.startswith(f"{field}: ")
    assert "allowed:" in message


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"group_gpus": 256, "oversubscription": 0.5}, "tier.oversubscription"),
        ({"group_gpus": 1}, "tier.group_gpus"),
        ({"group_gpus": 256, "latency_s": float("nan")}, "tier.latency_s"),
    ],
)
def test_invalid_tiers(kwargs, field):
    with pytest.raises(SpecError, match=rf"^{field}: .*allowed"):
        Tier(**kwargs)


def test_each_size_of_a_collective_keeps_its_own_slowdown():
    """Two sizes of one op on one group are measured apart; a size between them takes the
    factor of the nearer on a log scale; another collective is not slowed."""
    from simulators.hardware import get_gpu

    slowdown = ((("all_reduce", 8, 1, 1 << 20), 1.5), (("all_reduce", 8, 1, 1 << 30), 3.0))
    network = Network.from_gpu(get_gpu("H100-SXM"))
    network = dataclasses.replace(network, slowdown=slowdown)
    assert network.slowdown_factor("all_reduce", 8, 1, 1 << 20) == 1.5
    assert network.slowdown_factor("all_reduce", 8, 1, 1 << 30) == 3.0
    assert network.slowdown_factor("all_reduce", 8, 1, 1 << 24) == 1.5  # 2^24 is nearer 2^20 than 2^30
    assert network.slowdown_factor("all_reduce", 8, 1, 1 << 26) == 3.0
    assert network.slowdown_factor("all_gather", 8, 1, 1 << 20) == 1.0
