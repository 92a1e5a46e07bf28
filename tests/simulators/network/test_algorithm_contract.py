"""The contract every registered collective algorithm keeps, for every op it implements (STYLE 12)."""

import numpy as np
import pytest

from simulators.hardware import get_gpu
from simulators.network import ALGORITHMS, OPS, Network, Tier, choose_algorithm, collective_time_s

NETWORK = Network.from_gpu(get_gpu("H100-SXM"), tiers=(Tier(256), Tier(8192, 2.0)))
PAIRS = [(name, op) for name, algorithm in ALGORITHMS.items() for op in algorithm.costs]
SIZES = 2.0 ** np.arange(0, 35, 2)


@pytest.fixture(params=PAIRS, ids=[f"{name}-{op}" for name, op in PAIRS])
def pair(request):
    return request.param


def test_every_op_has_an_algorithm_nccl_runs():
    for op in OPS:
        assert any(a.in_nccl and op in a.costs for a in ALGORITHMS.values()), op


def test_a_single_rank_costs_nothing(pair):
    name, op = pair
    assert collective_time_s(op, 1e9, 1, 1, NETWORK, name) == 0.0


def test_time_grows_with_message_size(pair):
    name, op = pair
    for ranks, stride in [(8, 1), (16, 1), (64, 8)]:
        times = collective_time_s(op, SIZES, ranks, stride, NETWORK, name)
        finite = times[np.isfinite(times)]
        assert np.all(np.diff(finite) > 0), (ranks, stride)


def test_small_messages_pay_latency_that_grows_with_the_group(pair):
    """No free small messages. Step-based algorithms add steps with every member; NVLS is one
    switch operation inside a domain (flat there) and adds tree steps across domains. A
    send/recv is one transfer whatever the pipeline's length, so it only has to cost something."""
    name, op = pair
    ranks = np.array([2, 4, 8, 16, 32, 64, 128])
    times = collective_time_s(op, 8.0, ranks, 1, NETWORK, name)
    finite = times[np.isfinite(times)]
    assert np.all(finite > 5e-6)
    if op == "send_recv":
        return
    if name == "nvls":
        assert np.all(np.diff(finite) > -1e-6 * finite[:-1])  # flat up to 8 bytes of bandwidth
        assert times[3] > times[2] or np.isinf(times[3])  # crossing domains costs more
    else:
        assert np.all(np.diff(finite) > 0)


def test_arrays_give_the_scalar_values(pair):
    name, op = pair
    sizes, ranks, strides = np.array([8.0, 1e6, 3e8]), np.array([[6], [16], [96]]), np.array([1, 2, 8])
    grid = collective_time_s(op, sizes, ranks, strides, NETWORK, name)
    assert grid.shape == (3, 3)
    for i in range(3):
        for j in range(3):
            scalar = collective_time_s(op, sizes[j], int(ranks[i, 0]), int(strides[j]), NETWORK, name)
            assert np.ndim(scalar) == 0
            assert scalar == grid[i, j] or (np.isinf(scalar) and np.isinf(grid[i, j]))


@pytest.mark.parametrize("op", OPS)
def test_auto_is_the_fastest_algorithm_and_one_of_them(op):
    sizes, ranks, strides = np.array([8.0, 1e5, 1e7, 1e9]), np.array([[2], [8], [12], [64]]), 1
    everything = tuple(ALGORITHMS)
    choice = choose_algorithm(op, sizes, ranks, strides, NETWORK, among=everything)
    nccl = choose_algorithm(op, sizes, ranks, strides, NETWORK)
    times = {
        name: collective_time_s(op, sizes, ranks, strides, NETWORK, name)
        for name, algorithm in ALGORITHMS.items()
        if op in algorithm.costs
    }
    for name, t in times.items():
        assert np.all(choice.time_s <= t)
        if ALGORITHMS[name].in_nccl:
            assert np.all(nccl.time_s <= t)
    for chosen in (choice, nccl):
        picked = np.array([[times[chosen.algorithm[i, j]][i, j] for j in range(4)] for i in range(4)])
        assert np.array_equal(picked, chosen.time_s)
    assert np.array_equal(collective_time_s(op, sizes, ranks, strides, NETWORK), nccl.time_s)
