import pytest

from simulators.hardware import get_gpu
from simulators.network import Link, group_link, ring_all_gather_s, ring_all_reduce_s, send_recv_s
from simulators.network._collectives import BASE_LATENCY_S


def test_a_single_rank_communicates_nothing():
    link = Link(100.0, 1e-6)
    assert ring_all_reduce_s(1e9, 1, link) == 0.0
    assert ring_all_gather_s(1e9, 1, link) == 0.0


def test_ring_all_reduce_closed_form():
    link = Link(gbytes_per_s=50.0, step_latency_s=2e-6)
    n, size = 8, 256e6
    expected = BASE_LATENCY_S + 2 * (n - 1) * 2e-6 + 2 * (n - 1) / n * size / 50e9
    assert ring_all_reduce_s(size, n, link) == pytest.approx(expected)


def test_large_message_bus_bandwidth_approaches_the_link():
    # nccl-tests: busbw = size / time * 2(n-1)/n, which a ring drives to the link bandwidth.
    link = Link(gbytes_per_s=40.0, step_latency_s=5e-6)
    n, size = 16, 8e9
    busbw = size / ring_all_reduce_s(size, n, link) * 2 * (n - 1) / n / 1e9
    assert busbw == pytest.approx(40.0, rel=1e-3)


def test_small_messages_pay_latency_for_every_step():
    link = Link(gbytes_per_s=40.0, step_latency_s=5e-6)
    assert ring_all_reduce_s(8, 64, link) > 2 * 63 * 5e-6
    assert send_recv_s(8, link) > 5e-6


def test_groups_beyond_the_scaleup_domain_use_the_nic():
    h100 = get_gpu("H100-SXM")
    inside, outside = group_link(h100, 8), group_link(h100, 16)
    assert inside.gbytes_per_s > h100.nic_gbytes_per_s
    assert outside.gbytes_per_s <= h100.nic_gbytes_per_s
    assert group_link(get_gpu("GB200"), 64).gbytes_per_s == inside.gbytes_per_s * 2  # NVLink 5 vs 4
