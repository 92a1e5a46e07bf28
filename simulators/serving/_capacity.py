"""Capacity: the highest arrival rate a deployment serves within its latency SLO.

The SLO is judged on the latencies themselves (TTFT p90 and TBT p99 by default), not on a
queueing-delay proxy: Vidur-Search's delay criterion can rank a deployment first whose TBT p99
fails a 200 ms bound (../shared/reference/vidur/README.md). The rate is found by bisection on a
fixed request stream (the same seed gives the same lengths at every rate), after doubling to
bracket it; a rate meets the SLO when every bounded percentile is within its bound."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulators._errors import SpecError
from simulators.serving._deployment import Deployment, ServingResult, simulate_deployment
from simulators.serving._requests import Requests


@dataclass(frozen=True)
class Capacity:
    qps: float  # the highest rate found to meet the SLO (0 when even the lowest probe fails)
    result: ServingResult  # the run at that rate; when qps is 0, the run at the lowest rate tried
    probes: tuple[tuple[float, bool], ...]  # (rate, met) in the order tried


def meets(result: ServingResult, ttft_p90_s: float, tbt_p99_s: float) -> bool:
    m = result.metrics
    return m["ttft_p90_s"] <= ttft_p90_s and (m["tbt_p99_s"] <= tbt_p99_s or m["tbt_p99_s"] != m["tbt_p99_s"])


def capacity_search(
    deployment: Deployment,
    requests_at: Callable[[float], Requests],
    *,
    ttft_p90_s: float = 2.0,
    tbt_p99_s: float = 0.2,
    start_qps: float = 1.0,
    relative_tolerance: float = 0.02,
    max_probes: int = 24,
    seed: int = 0,
) -> Capacity:
    """Bisect the arrival rate; `requests_at(qps)` gives the request stream at a rate."""
    if isinstance(max_probes, bool) or not isinstance(max_probes, int) or max_probes < 1:
        raise SpecError(f"max_probes: {max_probes!r} is not allowed; allowed: an integer >= 1")
    probes: list[tuple[float, bool]] = []
    last: list[ServingResult] = []  # the latest run, met or not

    def probe(qps: float) -> ServingResult | None:
        result = simulate_deployment(deployment, requests_at(qps), seed)
        ok = meets(result, ttft_p90_s, tbt_p99_s)
        probes.append((qps, ok))
        last[:] = [result]
        return result if ok else None

    low, low_result, high = 0.0, None, start_qps
    while len(probes) < max_probes:  # bracket: double while the SLO holds, halve while it fails
        result = probe(high)
        if result is None:
            break
        low, low_result, high = high, result, high * 2
    else:
        return Capacity(low, low_result, tuple(probes))
    if low == 0.0:
        while len(probes) < max_probes and high > 1e-3:
            high /= 2
            result = probe(high)
            if result is not None:
                low, low_result, high = high, result, high * 2
                break
    while len(probes) < max_probes and high - low > relative_tolerance * high and low > 0:
        middle = (low + high) / 2
        result = probe(middle)
        if result is None:
            high = middle
        else:
            low, low_result = middle, result
    # Nothing met: rates only fell after the first probe, so the latest run is at the lowest rate.
    return Capacity(low, low_result or last[0], tuple(probes))
