"""DCQCN (Zhu et al., SIGCOMM'15): rate cuts on CNPs, timer-driven recovery at the sender.

The receiver answers a marked packet with a CNP, at most one per flow per CNP interval. On a
CNP the sender sets Rt = Rc, Rc = Rc (1 - alpha / 2) (not below the floor), alpha = (1 - g)
alpha + g, and restarts its timers; every alpha period with no CNP since, alpha = (1 - g) alpha;
every increase period the rate recovers: F fast-recovery steps Rc = (Rt + Rc) / 2, then additive
(Rt += R_AI) and after F more hyper (Rt += R_HAI) increases, Rt and Rc capped at the line rate.
The alpha timer reads the time the receiver last sent a CNP (the model's shortcut for "no CNP
arrived since"), which the receiver and sender share in the flow's row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from simulators.packet._congestion import LINE, OWN, RATE, TIMER, CongestionControl, RateFloor, nothing, register

# own columns of the flow's row
_RT, _ALPHA, _LAST_ALPHA, _LAST_INCREASE, _INCREASES, _LAST_CNP = range(OWN, OWN + 6)
# the parameter vector
_G, _ALPHA_PERIOD, _INCREASE_PERIOD, _CNP_INTERVAL, _F, _AI, _HAI, _MIN = range(8)


@dataclass(frozen=True)
class Dcqcn(RateFloor):
    """The DCQCN paper's column of ../shared/reference/netsim.md section 1 (marked unverified
    there): g = 1/256, alpha period 55 us, CNP at most every 50 us per flow, increase timer 55
    us, F = 5 fast-recovery steps, R_AI 40 Mb/s; R_HAI 200 Mb/s (the DCQCN author's ns-3 code)
    and a 100 Mb/s floor (SimAI). SimAI's shipped timers (1 us alpha, 4 us CNP, 300 us
    increase) can be set field by field; with this engine's latency-only CNPs they cut rates
    several times per congestion event and recover slowly."""

    g: float = 1 / 256
    alpha_period_s: float = 55e-6
    increase_period_s: float = 55e-6
    cnp_interval_s: float = 50e-6
    fast_recovery_steps: int = 5
    rate_ai_gbps: float = 0.04
    rate_hai_gbps: float = 0.2
    min_rate_gbps: float = 0.1

    def __post_init__(self) -> None:
        checks = {
            "g": (0 < self.g <= 1, "0 < g <= 1"),
            "alpha_period_s": (self.alpha_period_s >= 1e-12, ">= 1e-12 (one picosecond)"),
            "increase_period_s": (self.increase_period_s >= 1e-12, ">= 1e-12 (one picosecond)"),
            "cnp_interval_s": (self.cnp_interval_s >= 0, ">= 0"),
            "fast_recovery_steps": (
                isinstance(self.fast_recovery_steps, int) and self.fast_recovery_steps >= 0,
                "a whole number >= 0",
            ),
            "rate_ai_gbps": (self.rate_ai_gbps >= 0, ">= 0"),
            "rate_hai_gbps": (self.rate_hai_gbps >= 0, ">= 0"),
            "min_rate_gbps": (self.min_rate_gbps > 0, "> 0"),
        }
        self.check(checks)

    def vector(self) -> np.ndarray:
        ps = 1e12
        return np.array(
            [
                self.g,
                round(self.alpha_period_s * ps),
                round(self.increase_period_s * ps),
                round(self.cnp_interval_s * ps),
                self.fast_recovery_steps,
                self.rate_ai_gbps * 1e9,
                self.rate_hai_gbps * 1e9,
                self.min_rate_gbps * 1e9,
            ],
            np.float64,
        )


@numba.njit(cache=True)
def _next_timer(row, params):
    row[TIMER] = min(row[_LAST_ALPHA] + params[_ALPHA_PERIOD], row[_LAST_INCREASE] + params[_INCREASE_PERIOD])


@numba.njit(cache=True)
def on_start(state, params, flow, now_ps):  # pragma: no cover - compiled
    row = state[flow]
    row[_RT] = row[LINE]
    row[_ALPHA] = 1.0
    row[_LAST_ALPHA] = now_ps
    row[_LAST_INCREASE] = now_ps
    row[_INCREASES] = 0.0
    row[_LAST_CNP] = -np.inf
    _next_timer(row, params)


@numba.njit(cache=True)
def on_timer(state, params, flow, now_ps):  # pragma: no cover - compiled
    row = state[flow]
    g, steps = params[_G], params[_F]
    while now_ps - row[_LAST_ALPHA] >= params[_ALPHA_PERIOD]:
        row[_LAST_ALPHA] += params[_ALPHA_PERIOD]
        if row[_LAST_ALPHA] - row[_LAST_CNP] >= params[_ALPHA_PERIOD]:
            row[_ALPHA] *= 1.0 - g
    while now_ps - row[_LAST_INCREASE] >= params[_INCREASE_PERIOD]:
        row[_LAST_INCREASE] += params[_INCREASE_PERIOD]
        row[_INCREASES] += 1
        if row[_INCREASES] > 2 * steps:
            row[_RT] += params[_HAI]
        elif row[_INCREASES] > steps:
            row[_RT] += params[_AI]
        row[_RT] = min(row[_RT], row[LINE])
        row[RATE] = min((row[_RT] + row[RATE]) / 2.0, row[LINE])
    _next_timer(row, params)


@numba.njit(cache=True)
def on_marked(state, params, flow, now_ps):  # pragma: no cover - compiled
    if now_ps - state[flow, _LAST_CNP] >= params[_CNP_INTERVAL]:
        state[flow, _LAST_CNP] = now_ps
        return True
    return False


@numba.njit(cache=True)
def on_cnp(state, params, flow, now_ps):  # pragma: no cover - compiled
    row = state[flow]
    row[_RT] = row[RATE]
    row[RATE] = max(row[RATE] * (1.0 - row[_ALPHA] / 2.0), params[_MIN])
    row[_ALPHA] = (1.0 - params[_G]) * row[_ALPHA] + params[_G]
    row[_LAST_ALPHA] = now_ps
    row[_LAST_INCREASE] = now_ps
    row[_INCREASES] = 0.0
    _next_timer(row, params)


DCQCN = register(
    CongestionControl(
        name="dcqcn",
        params=Dcqcn,
        columns=6,
        on_start=on_start,
        on_timer=on_timer,
        on_marked=on_marked,
        on_cnp=on_cnp,
        on_ack=nothing,
    )
)
