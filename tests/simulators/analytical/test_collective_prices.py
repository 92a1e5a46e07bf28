"""The batch pricing of collectives (simulators/analytical/_collective_prices.py): one vectorised
call per network and op, memoised, and never a price for a collective that cannot run."""

import dataclasses

import pytest

from simulators import PlanError
from simulators.analytical._collective_prices import _PRICES, collective_s, price_collectives
from simulators.hardware import get_gpu
from simulators.network import Network, collective_time_s


def test_a_batch_is_priced_as_each_collective_alone():
    network = Network.from_gpu(get_gpu("H100-SXM"))
    rows = [("all_gather", 2.0**20 * k, ranks, 1) for k in (1, 3) for ranks in (2, 8)] + [("all_gather", 0.0, 8, 1)]
    price_collectives(network, rows)
    for op, nbytes, ranks, stride in rows:
        alone = float(collective_time_s(op, nbytes, ranks, stride, network)) if nbytes else 0.0
        assert collective_s(network, op, nbytes, ranks, stride) == pytest.approx(alone, rel=1e-12)


def test_a_forced_algorithm_that_cannot_run_is_refused_every_time_not_priced_at_zero():
    """NVLS runs inside one NVLink domain: a reduce-scatter over 16 GPUs of 8-GPU servers cannot
    run. The batch raises; pricing the same collective again must raise again (a zero left in the
    memo made such plans feasible with free gradient reductions)."""
    network = dataclasses.replace(Network.from_gpu(get_gpu("H100-SXM")), algorithms=(("reduce_scatter", "nvls"),))
    inside, across = ("reduce_scatter", 2.0**24, 8, 1), ("reduce_scatter", 2.0**24, 16, 1)
    with pytest.raises(PlanError, match="'nvls' cannot run on 16 ranks"):
        price_collectives(network, [inside, across])
    assert (network, *across) not in _PRICES
    with pytest.raises(PlanError, match="'nvls' cannot run on 16 ranks"):
        collective_s(network, *across)
    assert collective_s(network, *inside) > 0
