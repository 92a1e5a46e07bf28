import numpy as np
import pytest

from simulators import PlanError, SpecError
from simulators.hardware import get_gpu
from simulators.network import Group, Network, Tier

H100 = Network.from_gpu(get_gpu("H100-SXM"))


def test_a_tensor_parallel_group_of_eight_stays_on_nvlink():
    group = Group.place(8, 1, H100)
    assert (group.per_domain, group.domains, group.top) == (8, 1, 0)


def test_a_data_parallel_group_of_stride_eight_crosses_nics():
    group = Group.place(4, 8, H100)
    assert (group.per_domain, group.domains, group.top) == (1, 4, 1)
    assert group.level_of(1) == 1  # even neighbours are a NIC apart


def test_sixteen_consecutive_ranks_are_a_two_level_group():
    group = Group.place(16, 1, H100)
    assert (group.per_domain, group.domains, group.top) == (8, 2, 1)
    assert group.level_of(7) == 0 and group.level_of(8) == 1
    assert group.peers_per_level.tolist() == [7, 8]


def test_a_stride_inside_the_domain_shares_it():
    group = Group.place(8, 2, H100)  # e.g. the dp group of tp=2 on 16 GPUs
    assert (group.per_domain, group.domains) == (4, 2)


def test_a_large_domain_holds_strided_groups():
    group = Group.place(9, 8, Network.from_gpu(get_gpu("GB200")))  # 72 GPUs = one NVL72
    assert (group.domains, group.top) == (1, 0)


def test_leaves_and_spines():
    net = Network.from_gpu(get_gpu("H100-SXM"), tiers=(Tier(256), Tier(8192, 2.0)))
    inside_leaf, across_leaves = Group.place(32, 8, net), Group.place(64, 8, net)
    assert inside_leaf.top == 1 and across_leaves.top == 2
    assert across_leaves.blocks.tolist() == [64, 2, 1]  # 64 domains, 2 leaves, 1 spine block


def test_arrays_place_element_by_element():
    group = Group.place(np.array([8, 16, 4]), np.array([1, 1, 8]), H100)
    assert group.per_domain.tolist() == [8, 8, 1]
    assert group.domains.tolist() == [1, 2, 4]
    assert group.top.tolist() == [0, 1, 1]


def test_a_group_larger_than_the_network_is_a_plan_error():
    net = Network.from_gpu(get_gpu("H100-SXM"), tiers=(Tier(256),))
    with pytest.raises(PlanError, match="512 GPUs.*allowed: at most 256"):
        Group.place([8, 64], [1, 8], net)


@pytest.mark.parametrize(("ranks", "stride"), [(0, 1), (2.5, 1), (8, -1)])
def test_ranks_and_strides_are_positive_integers(ranks, stride):
    with pytest.raises(SpecError, match="allowed: integers >= 1"):
        Group.place(ranks, stride, H100)
