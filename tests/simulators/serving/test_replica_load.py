"""Several replicas share an open-loop load: every request completes once, on one replica, and a
balancing router spreads a Poisson stream evenly; a Poisson stream's count over a long window is
its rate times the window."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.serving import Deployment, Pool, make_requests, simulate_deployment, uniform


@pytest.mark.parametrize("router", ["least_outstanding", "round_robin"])
def test_replicas_split_the_load_and_complete_every_request(router):
    replicas, n = 4, 2000
    requests = make_requests(n, 11, rate_qps=60.0, prompt=uniform(16, 1023), output=uniform(1, 300))
    deployment = Deployment(
        get_model("llama3-8b"),
        get_gpu("H100-SXM"),
        Pool("sarathi", count=replicas, max_batch_tokens=2048),
        router=router,
    )
    result = simulate_deployment(deployment, requests)
    served = np.bincount(result.replica, minlength=replicas)
    assert served.sum() == n  # conservation: each request completed once, on one replica
    assert np.all(result.done_ns >= result.first_token_ns)
    if router == "round_robin":
        assert served.max() - served.min() <= 1  # strict turns
    else:  # an even split within 5 binomial SEs of n/replicas
        assert np.all(np.abs(served - n / replicas) < 5 * math.sqrt(n * (1 / replicas) * (1 - 1 / replicas)))


def test_poisson_count_over_a_long_window_is_rate_times_window():
    qps, window_s = 75.0, 600.0
    requests = make_requests(60_000, 5, rate_qps=qps, prompt=uniform(1, 10), output=uniform(1, 10))
    assert requests.arrival_s[-1] > window_s  # the stream covers the window
    count = int(np.sum(requests.arrival_s <= window_s))
    # A Poisson count has variance equal to its mean qps*T: within 5 standard deviations.
    assert abs(count - qps * window_s) < 5 * math.sqrt(qps * window_s)
