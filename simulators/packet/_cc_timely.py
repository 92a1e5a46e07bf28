"""TIMELY (Mittal et al., SIGCOMM'15): rate control from the gradient of the round-trip time.

Each update reads one RTT sample (the engine's RTT_PS: the ACK echoes when its data packet left
the NIC, as TIMELY's NIC timestamps do): new_rtt_diff = rtt - prev_rtt, rtt_diff = (1 - alpha)
rtt_diff + alpha new_rtt_diff, gradient = rtt_diff / min_rtt. Below T_low the rate grows by
delta; above T_high it is cut by beta (1 - T_high / rtt); in between it grows by N delta where
the gradient is <= 0 (N = 5, hyper-active increase, once the gradient has been <= 0 for 5
updates in a row, else 1) and is cut by beta gradient where it is positive (the paper's
Algorithm 1). The paper samples once per completed 16-64 KB segment; with an ACK per packet
this model updates once per round trip, as the HPCC authors' ns-3 TIMELY does
(`after_update`). Per 64 KB segment instead, at 100 Gb/s a flow cut to a few Gb/s waits
milliseconds for each 100 Mb/s step back up: a 16-sender incast took 4 times longer than once
per round trip (this model, both tried). ECN is ignored (TIMELY is delay-based).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from simulators.packet._congestion import (
    LINE,
    OWN,
    RATE,
    RTT_PS,
    CongestionControl,
    RateFloor,
    after_update,
    no_cnp,
    nothing,
    register,
)

# own columns of the flow's row
_PREV_RTT, _RTT_DIFF, _NEGATIVE, _LAST_UPDATE = range(OWN, OWN + 4)
# the parameter vector
_T_LOW, _T_HIGH, _DELTA, _BETA, _ALPHA, _MIN_RTT, _HAI_AFTER, _HAI_FACTOR, _MIN = range(9)


@dataclass(frozen=True)
class Timely(RateFloor):
    """The paper's values (section 5, as the TIMELY authors' co-author's fluid model
    jitupadhye-zz/rdma fluidmodel/timely and the HPCC authors' ns-3 RdmaHw attributes repeat
    them): T_low 50 us, T_high 500 us, beta 0.8, EWMA alpha 0.875, min RTT 20 us, HAI N = 5
    after 5 updates. Its additive step is 10 Mb/s at 10 Gb/s; 100 Mb/s here, scaled with the
    line rate to 100 Gb/s as the HPCC repository's run.py does (10 bw / 10 Mb/s). The 100 Mb/s
    floor is RdmaHw's MinRate default."""

    t_low_s: float = 50e-6
    t_high_s: float = 500e-6
    delta_gbps: float = 0.1
    beta: float = 0.8
    alpha: float = 0.875
    min_rtt_s: float = 20e-6
    hai_after_updates: int = 5
    hai_factor: int = 5
    min_rate_gbps: float = 0.1

    def __post_init__(self) -> None:
        whole = isinstance(self.hai_after_updates, int) and self.hai_after_updates >= 1
        self.check(
            {
                "t_low_s": (self.t_low_s > 0, "> 0"),
                "t_high_s": (self.t_high_s > self.t_low_s, f"> t_low_s ({self.t_low_s!r})"),
                "delta_gbps": (self.delta_gbps >= 0, ">= 0"),
                "beta": (0 < self.beta <= 1, "0 < beta <= 1"),
                "alpha": (0 < self.alpha <= 1, "0 < alpha <= 1"),
                "min_rtt_s": (self.min_rtt_s >= 1e-12, ">= 1e-12 (one picosecond)"),
                "hai_after_updates": (whole, "a whole number >= 1"),
                "hai_factor": (isinstance(self.hai_factor, int) and self.hai_factor >= 1, "a whole number >= 1"),
                "min_rate_gbps": (self.min_rate_gbps > 0, "> 0"),
            }
        )

    def vector(self) -> np.ndarray:
        ps = 1e12
        return np.array(
            [
                round(self.t_low_s * ps),
                round(self.t_high_s * ps),
                self.delta_gbps * 1e9,
                self.beta,
                self.alpha,
                round(self.min_rtt_s * ps),
                self.hai_after_updates,
                self.hai_factor,
                self.min_rate_gbps * 1e9,
            ],
            np.float64,
        )


@numba.njit(cache=True)
def on_start(state, params, flow, now_ps):  # pragma: no cover - compiled
    row = state[flow]
    row[_PREV_RTT] = -1.0  # no sample yet
    row[_RTT_DIFF] = 0.0
    row[_NEGATIVE] = 0.0
    row[_LAST_UPDATE] = -np.inf


@numba.njit(cache=True)
def on_ack(state, params, flow, now_ps):  # pragma: no cover - compiled
    if not after_update(state, flow, _LAST_UPDATE, now_ps):
        return
    row = state[flow]
    rtt = row[RTT_PS]
    if row[_PREV_RTT] < 0:  # the first sample only sets the reference
        row[_PREV_RTT] = rtt
        return
    alpha, beta = params[_ALPHA], params[_BETA]
    row[_RTT_DIFF] = (1.0 - alpha) * row[_RTT_DIFF] + alpha * (rtt - row[_PREV_RTT])
    row[_PREV_RTT] = rtt
    gradient = row[_RTT_DIFF] / params[_MIN_RTT]
    row[_NEGATIVE] = row[_NEGATIVE] + 1.0 if gradient <= 0 else 0.0
    rate = row[RATE]
    if rtt < params[_T_LOW]:
        rate += params[_DELTA]
    elif rtt > params[_T_HIGH]:
        rate *= 1.0 - beta * (1.0 - params[_T_HIGH] / rtt)
    elif gradient <= 0:
        rate += (params[_HAI_FACTOR] if row[_NEGATIVE] >= params[_HAI_AFTER] else 1.0) * params[_DELTA]
    else:
        rate *= 1.0 - beta * gradient
    row[RATE] = min(max(rate, params[_MIN]), row[LINE])


TIMELY = register(
    CongestionControl(
        name="timely",
        params=Timely,
        columns=4,
        on_start=on_start,
        on_timer=nothing,
        on_marked=no_cnp,
        on_cnp=nothing,
        on_ack=on_ack,
        acks=True,
    )
)
