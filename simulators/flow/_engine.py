"""The flow-level event engine (Numba): integer picoseconds, flows as rows of arrays.

Model. Every active flow is a fluid that moves its bytes at a rate; the rates are the max-min
fair share of the links' capacities (progressive filling: raise every flow's rate together until
a link is full, freeze the flows crossing it at that link's share, repeat with the capacity that
is left). Rates change only when a flow starts or drains, so the run jumps from event time to
event time, and all the flows whose events fall on one picosecond are handled before one rate
recomputation (a symmetric collective's step is one recomputation, however many flows it has).
A flow drains when its fluid has moved its bytes; it finishes (its last byte is at the
receiver) a fixed tail later: each hop's propagation delay plus a packet's serialisation there:
on a path of one hop the last packet's, on longer paths a full packet's (the last, shorter
packet waits behind the full one before it at the second hop and so trails it to the end). A
lone flow on links of one rate then finishes at the packet engine's time to the picosecond; at
mixed rates the tail differs from it by about a packet's serialisation. Flows may
wait for other flows (a DAG), starting `gap` after the last of them finishes, or at their own
start time if that is later, as in the packet engine.

What is left out: queues (a flow's rate applies on every link of its path at once, with no
pipeline fill beyond the tail), and how a real transport reaches its share: FIFO queues behind
senders at line rate share a link in proportion to arrival rates, not max-min, so flows crossing
two bottlenecks can differ from the packet engine (see benchmarks/flow_vs_packet.py).

Numba's on-disk cache keys a kernel on its own file, so the heap and the water-filling it calls
stay in this file.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

PS_PER_S = 1e12
_START, _FINISH = 0, 1  # heap events: a flow starts (joins the fluid), a flow's last byte arrives
_TIE = 1e-9  # links whose shares differ by less than this fraction fill in one round


class Links(NamedTuple):
    """One entry per directed link."""

    rate_bps: np.ndarray  # float64
    delay_ps: np.ndarray  # int64


@numba.njit(cache=True, error_model="numpy")
def _push(times, payloads, size, t, payload):
    """Insert (t, payload) into the binary heap on `times`; returns the new size. Equal times
    need no order: the engine handles a picosecond's events as one batch."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if times[p] <= t:
            break
        times[i] = times[p]
        payloads[i] = payloads[p]
        i = p
    times[i] = t
    payloads[i] = payload
    return size + 1


@numba.njit(cache=True, error_model="numpy")
def _pop(times, payloads, size):
    """Remove the earliest entry; returns (its payload, the new size)."""
    payload = payloads[0]
    size -= 1
    t, q = times[size], payloads[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and times[c + 1] < times[c]:
            c += 1
        if t <= times[c]:
            break
        times[i] = times[c]
        payloads[i] = payloads[c]
        i = c
    times[i] = t
    payloads[i] = q
    return payload, size


@numba.njit(cache=True, error_model="numpy")
def _waterfill(active, n_active, path_start, path_links, link_rate, flow_rate, scratch):
    """Max-min fair rates (bits/s) of the `n_active` flows in `active`, into `flow_rate`;
    returns the rounds (bottleneck levels) it took. `scratch` holds per-link work arrays."""
    cap, count, seen, full, touched, frozen = scratch
    n_touched = 0
    for i in range(n_active):
        f = active[i]
        frozen[f] = False
        for h in range(path_start[f], path_start[f + 1]):
            link = path_links[h]
            if not seen[link]:
                seen[link] = True
                touched[n_touched] = link
                n_touched += 1
                cap[link] = link_rate[link]
                count[link] = 0
            count[link] += 1
    left, rounds = n_active, 0
    while left > 0:
        rounds += 1
        share = np.inf
        for j in range(n_touched):
            link = touched[j]
            if count[link] > 0:
                share = min(share, max(cap[link], 0.0) / count[link])
        limit = share * (1.0 + _TIE)
        for j in range(n_touched):
            link = touched[j]
            full[link] = count[link] > 0 and max(cap[link], 0.0) / count[link] <= limit
        for i in range(n_active):
            f = active[i]
            if frozen[f]:
                continue
            hit = False
            for h in range(path_start[f], path_start[f + 1]):
                hit = hit or full[path_links[h]]
            if hit:
                frozen[f] = True
                flow_rate[f] = share
                left -= 1
                for h in range(path_start[f], path_start[f + 1]):
                    cap[path_links[h]] -= share
                    count[path_links[h]] -= 1
    for j in range(n_touched):
        seen[touched[j]] = False
        full[touched[j]] = False
    return rounds


@numba.njit(cache=True, error_model="numpy")
def simulate_flows(links, flows):  # pragma: no cover - compiled
    """Run `flows` (simulators.network._transfers.FlowArrays) over `links`; returns (start ps,
    finish ps (-1: never), bytes per link, heap events, rate recomputations, water-filling
    rounds, end ps)."""
    n_links, n_flows = len(links.rate_bps), len(flows.nbytes)
    path_start, path_links = flows.path_start, flows.path_links
    ps_per_bit = PS_PER_S / links.rate_bps
    tail = np.zeros(n_flows, np.int64)  # drain to last byte at the receiver
    for f in range(n_flows):
        size = min(flows.nbytes[f], flows.mtu[f])  # a full packet, which the last one trails
        if path_start[f + 1] - path_start[f] == 1:  # unless nothing is stored and forwarded
            size = flows.nbytes[f] - (flows.nbytes[f] - 1) // flows.mtu[f] * flows.mtu[f]
        for h in range(path_start[f], path_start[f + 1]):
            link = path_links[h]
            tail[f] += links.delay_ps[link] + np.int64(round(size * 8.0 * ps_per_bit[link]))
    times = np.empty(n_flows + 1, np.int64)  # each flow is in the heap at most once at a time
    payloads = np.empty(n_flows + 1, np.int64)
    size = 0
    deps_left = flows.dep_count.copy()
    for f in range(n_flows):
        if deps_left[f] == 0:
            size = _push(times, payloads, size, flows.start_ps[f], 2 * f + _START)
    active = np.empty(n_flows, np.int64)
    n_active = 0
    left_bits = np.zeros(n_flows)
    flow_rate = np.zeros(n_flows)
    drain_ps = np.zeros(n_flows, np.int64)
    begin_ps = np.full(n_flows, -1, np.int64)
    finish_ps = np.full(n_flows, -1, np.int64)
    link_bytes = np.zeros(n_links, np.int64)
    scratch = (
        np.zeros(n_links),
        np.zeros(n_links, np.int64),
        np.zeros(n_links, np.bool_),
        np.zeros(n_links, np.bool_),
        np.empty(n_links, np.int64),
        np.zeros(n_flows, np.bool_),
    )
    now = np.int64(0)
    events = recomputations = rounds = 0
    while True:
        t = times[0] if size > 0 else np.iinfo(np.int64).max
        for i in range(n_active):
            t = min(t, drain_ps[active[i]])
        if t == np.iinfo(np.int64).max:
            break
        # the fluid moves on to t; flows whose bytes are through drain and free their share
        changed = False
        elapsed = float(t - now)
        i = 0
        while i < n_active:
            f = active[i]
            left_bits[f] -= flow_rate[f] * elapsed / PS_PER_S
            if drain_ps[f] <= t or left_bits[f] * PS_PER_S / flow_rate[f] < 0.5:
                n_active -= 1
                active[i] = active[n_active]
                for h in range(path_start[f], path_start[f + 1]):
                    link_bytes[path_links[h]] += flows.nbytes[f]
                size = _push(times, payloads, size, t + tail[f], 2 * f + _FINISH)
                events += 1
                changed = True
            else:
                i += 1
        now = t
        while size > 0 and times[0] == now:
            payload, size = _pop(times, payloads, size)
            f, kind = payload >> 1, payload & 1
            events += 1
            if kind == _START:
                begin_ps[f] = now
                left_bits[f] = flows.nbytes[f] * 8.0
                active[n_active] = f
                n_active += 1
                changed = True
            else:
                finish_ps[f] = now
                for k in range(flows.dependents_start[f], flows.dependents_start[f + 1]):
                    d = flows.dependents[k]
                    deps_left[d] -= 1
                    if deps_left[d] == 0:
                        at = max(flows.start_ps[d], now + flows.gap_ps[d])
                        size = _push(times, payloads, size, at, 2 * d + _START)
        if changed and n_active > 0:
            recomputations += 1
            rounds += _waterfill(active, n_active, path_start, path_links, links.rate_bps, flow_rate, scratch)
            for i in range(n_active):
                f = active[i]
                drain_ps[f] = now + np.int64(round(left_bits[f] * PS_PER_S / flow_rate[f]))
    return begin_ps, finish_ps, link_bytes, events, recomputations, rounds, now
