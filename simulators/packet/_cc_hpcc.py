"""HPCC (Li et al., SIGCOMM'19): window control from in-band network telemetry.

Every switch egress on the path writes into the data packet, as it dequeues it to send it, the
bytes left queued behind it, the link's cumulative bytes sent, the time and the link's rate (at
dequeue as in the authors' ns-3 switch: measured at the end of its serialisation instead, each
packet would also count what others sent meanwhile, which biases U against small flows enough
to starve them, as this model showed); the ACK brings them
back (the engine's INT columns). Per hop, against the previous ACK's values: txRate = bytes
sent / time between, u = min(qlen, previous qlen) / (B T) + txRate / B; U, the largest u over
the hops, enters an EWMA over the base RTT T weighted by the time the sample covers (at most T).
The window: W = W_c / (U / eta) + W_AI where U >= eta or after maxStage additive steps, else W
= W_c + W_AI; the reference W_c takes the new W once per round trip (`after_update`), every
other ACK reacting from it without moving it; the flow is paced at W / T (the paper's Algorithm
1, its single-U form; the HPCC authors' ns-3 code follows it, also in keeping the first ACK's
telemetry as the reference only). T is the flow's base RTT (the engine's BASE_RTT_PS), W_init
= line rate x T, and W within [floor x T, W_init].

A lone flow settles at eta of its bottleneck: HPCC leaves 1 - eta of every link free so that
queues drain (`utilisation_target`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from simulators.packet._congestion import (
    BASE_RTT_PS,
    INT,
    INT_HOPS,
    INT_QLEN,
    INT_RATE_BPS,
    INT_TS_PS,
    INT_TX_BYTES,
    LINE,
    MAX_INT_HOPS,
    OWN,
    RATE,
    WINDOW,
    CongestionControl,
    RateFloor,
    after_update,
    no_cnp,
    nothing,
    register,
)

# own columns of the flow's row: then the previous ACK's (qlen, tx bytes, time) of each hop
_WC, _U, _STAGE, _LAST_UPDATE, _HAVE_REFERENCE, _PREVIOUS = range(OWN, OWN + 6)
# the parameter vector
_ETA, _MAX_STAGE, _AI, _MIN = range(4)
PS_PER_S = 1e12


@dataclass(frozen=True)
class Hpcc(RateFloor):
    """The paper's eta 0.95 and maxStage 5; W_AI as a rate step (W_AI = R_AI T): 40 Mb/s, the
    HPCC repository's run.py value at 100 Gb/s (10 bw / 25 Mb/s), and a 100 Mb/s floor
    (RdmaHw's MinRate default). The paper sets W_AI = W_init (1 - eta) / N for N expected
    flows: R_AI = 40 Mb/s is N = 125 at 100 Gb/s."""

    eta: float = 0.95
    max_stage: int = 5
    rate_ai_gbps: float = 0.04
    min_rate_gbps: float = 0.1

    def __post_init__(self) -> None:
        self.check(
            {
                "eta": (0 < self.eta <= 1, "0 < eta <= 1"),
                "max_stage": (isinstance(self.max_stage, int) and self.max_stage >= 0, "a whole number >= 0"),
                "rate_ai_gbps": (self.rate_ai_gbps >= 0, ">= 0"),
                "min_rate_gbps": (self.min_rate_gbps > 0, "> 0"),
            }
        )

    def vector(self) -> np.ndarray:
        return np.array([self.eta, self.max_stage, self.rate_ai_gbps * 1e9, self.min_rate_gbps * 1e9], np.float64)

    def utilisation_target(self) -> float:
        return self.eta


@numba.njit(cache=True)
def on_start(state, params, flow, now_ps):  # pragma: no cover - compiled
    row = state[flow]
    row[WINDOW] = row[_WC] = row[LINE] * row[BASE_RTT_PS] / (8 * PS_PER_S)
    row[_U] = 1.0
    row[_STAGE] = 0.0
    row[_LAST_UPDATE] = -np.inf
    row[_HAVE_REFERENCE] = 0.0


@numba.njit(cache=True)
def _measure(row):
    """Take the ACK's telemetry as the reference for the next; returns (U, tau) of the hop of
    highest utilisation since the previous ACK (tau 0: no hop has a new sample)."""
    t = row[BASE_RTT_PS]
    highest, tau = 0.0, 0.0
    for i in range(min(int(row[INT_HOPS]), MAX_INT_HOPS)):
        hop, previous = INT + 4 * i, _PREVIOUS + 3 * i
        rate = row[hop + INT_RATE_BPS]
        dt = row[hop + INT_TS_PS] - row[previous + 2]
        if dt > 0:
            tx_bps = (row[hop + INT_TX_BYTES] - row[previous + 1]) * 8 * PS_PER_S / dt
            queue = min(row[hop + INT_QLEN], row[previous]) * 8 * PS_PER_S / (rate * t)
            u = queue + tx_bps / rate
            if u > highest:
                highest, tau = u, dt
        row[previous] = row[hop + INT_QLEN]
        row[previous + 1] = row[hop + INT_TX_BYTES]
        row[previous + 2] = row[hop + INT_TS_PS]
    return highest, tau


@numba.njit(cache=True)
def on_ack(state, params, flow, now_ps):  # pragma: no cover - compiled
    update = after_update(state, flow, _LAST_UPDATE, now_ps)
    row = state[flow]
    highest, tau = _measure(row)
    if row[_HAVE_REFERENCE] == 0:  # the first ACK's telemetry is the reference only
        row[_HAVE_REFERENCE] = 1.0
        return
    if tau == 0:
        return
    t = row[BASE_RTT_PS]
    tau = min(tau, t)
    row[_U] = (row[_U] * (t - tau) + highest * tau) / t
    eta, step = params[_ETA], params[_AI] * t / (8 * PS_PER_S)
    if row[_U] >= eta or row[_STAGE] >= params[_MAX_STAGE]:
        window = row[_WC] / (row[_U] / eta) + step
        stage = 0.0
    else:
        window = row[_WC] + step
        stage = row[_STAGE] + 1.0
    bytes_per_bps = t / (8 * PS_PER_S)
    window = min(max(window, params[_MIN] * bytes_per_bps), row[LINE] * bytes_per_bps)
    if update:
        row[_WC] = window
        row[_STAGE] = stage
    row[WINDOW] = window
    row[RATE] = window / bytes_per_bps


HPCC = register(
    CongestionControl(
        name="hpcc",
        params=Hpcc,
        columns=6 + 3 * MAX_INT_HOPS,
        on_start=on_start,
        on_timer=nothing,
        on_marked=no_cnp,
        on_cnp=nothing,
        on_ack=on_ack,
        acks=True,
        telemetry=True,
    )
)
