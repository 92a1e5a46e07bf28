"""The packet-level discrete-event engine (Numba): integer picoseconds, packets as rows of arrays.

Model. Directed links carry packets store-and-forward: a packet is serialised at the link's rate
(its bytes x 8 / rate, rounded to a picosecond) and arrives at the far end after the link's
propagation delay; each link has an output queue (FIFO) at its near end. A switch holds queued
packets in one shared buffer; a packet whose bytes do not fit is dropped. Hosts queue without
limit. Senders emit a flow's packets at a pace (the rate congestion control gives them),
the first one pace after the flow starts, into their NIC's queue. A flow completes when its last
byte reaches the receiver; flows may wait for other flows (a DAG), starting `gap` after the last
of them completes.

RoCE behaviour (each part can be switched off):
- PFC, per ingress port (one priority): when the bytes a switch holds that arrived through a
  link exceed XOFF, a pause reaches that link's sender one propagation delay later and it stops
  after the packet in flight; XON (bytes at or below XON) resumes it the same way. Enough buffer
  above XOFF makes the fabric lossless.
- ECN at egress: a packet is marked when it is queued behind q bytes with probability 0 below
  Kmin, Pmax (q - Kmin) / (Kmax - Kmin) up to Kmax, 1 above (a seeded generator).
- ACKs: the receiver acknowledges every packet with a 64-byte frame that travels the reverse
  path through the links' queues, ahead of data (strict priority) and never paused; without
  ACKs a CNP alone takes the reverse path's latency (propagation and serialisation). The ACK
  is the data packet's own slot sent back, so it echoes the packet's send time (an RTT
  sample) and, with `telemetry`, the INT each switch egress wrote into it as it dequeued the
  packet to send it (queue bytes left behind it, the link's bytes sent with it, the time).
- Congestion control at the sender (_congestion.py): the engine paces each flow at the rate in
  its state row, holds it while its bytes in flight reach the row's window, and calls the
  algorithm's hooks when the flow starts, at a send once its timer is due, when a marked packet
  reaches the receiver (which may answer with a CNP), and when a CNP or an ACK reaches the
  sender (after writing the ACK's RTT and telemetry into the row).
Events at equal times run in the order they were scheduled (ns-3's rule), so runs are exact and
deterministic. Every event queues a frame on, or frees, at most one link (`kick`), whose next
transmission one block at the end of the loop starts, before a sender's next packet is scheduled
(`resend`), and a data packet reaching its receiver is counted in one block before both
(`deliver`): the order of scheduling, and so the run, is that of handling each case in place.
Not a function, nor a function per event: a compiled call with array arguments costs more than
the event (the engine ran 25 % slower with it factored into one; with only the switch case
factored out, 1.7 times slower, and 1.5 times with numba's inline="always").

Numba's on-disk cache keys a kernel on its own file, so the heap, the packet pool and the named
tuples the kernel reads stay in this file (a helper edited elsewhere would leave the cached
kernel running the old code); the hooks are called through their addresses and cached on their
own. Only the shared columns (RATE ... OWN, MAX_INT_HOPS of _congestion.py) come from
elsewhere: after changing them, delete simulators/packet/__pycache__.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numba
import numpy as np

from simulators.packet._congestion import (
    BASE_RTT_PS,
    HOOK,
    INT,
    INT_HOPS,
    INT_QLEN,
    INT_RATE_BPS,
    INT_TS_PS,
    INT_TX_BYTES,
    LINE,
    MARK,
    MAX_INT_HOPS,
    OWN,
    RATE,
    RTT_PS,
    TIMER,
    WINDOW,
)

# event types
_SEND, _TX_DONE, _ARRIVE, _PAUSE, _RESUME, _CNP, _START, _ACK = 0, 1, 2, 3, 4, 5, 6, 7
_DATA, _PLAIN_ACK, _CNP_ACK = 0, 1, 2  # what a packet is: data, or a control frame going back
PS_PER_S = 1e12
CNP_BYTES = 64
INT_WIDTH = 3 * MAX_INT_HOPS  # a data packet's telemetry: queue bytes, link bytes sent, time per hop


@numba.njit(cache=True, error_model="numpy")
def _push(heap, size, seq, t, kind, a):
    """Insert event (kind, a) at time t, after every event already at t; returns the new size.
    Entries are (time, sequence, payload) triples side by side: one cache line per entry."""
    i = size
    payload = a * 8 + kind
    while i > 0:
        p = (i - 1) >> 1
        pt = heap[3 * p]
        if pt < t or (pt == t and heap[3 * p + 1] < seq):
            break
        heap[3 * i] = pt
        heap[3 * i + 1] = heap[3 * p + 1]
        heap[3 * i + 2] = heap[3 * p + 2]
        i = p
    heap[3 * i] = t
    heap[3 * i + 1] = seq
    heap[3 * i + 2] = payload
    return size + 1


@numba.njit(cache=True, error_model="numpy")
def _pop(heap, size):
    """Remove the earliest event; returns (t, kind, a, new size)."""
    t, payload = heap[0], heap[2]
    size -= 1
    last_t, last_s, last_p = heap[3 * size], heap[3 * size + 1], heap[3 * size + 2]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        r = c + 1
        if r < size and (
            heap[3 * r] < heap[3 * c] or (heap[3 * r] == heap[3 * c] and heap[3 * r + 1] < heap[3 * c + 1])
        ):
            c = r
        ct = heap[3 * c]
        if last_t < ct or (last_t == ct and last_s < heap[3 * c + 1]):
            break
        heap[3 * i] = ct
        heap[3 * i + 1] = heap[3 * c + 1]
        heap[3 * i + 2] = heap[3 * c + 2]
        i = c
    heap[3 * i] = last_t
    heap[3 * i + 1] = last_s
    heap[3 * i + 2] = last_p
    return t, payload & 7, payload >> 3, size


@numba.njit(cache=True, error_model="numpy")
def _grow_pool(pkt_flow, pkt_bytes, pkt_hop, pkt_ecn, pkt_last, pkt_kind, pkt_next, pkt_sent_ps, pkt_int):
    """The packet pool's arrays at twice their length, the new slots chained free; returns them
    and the first new slot (the new free-list head)."""
    old = len(pkt_flow)
    pkt_next = np.concatenate((pkt_next, np.full(old, -1, np.int64)))
    for i in range(old, 2 * old - 1):
        pkt_next[i] = i + 1
    grown_int = np.zeros((2 * old, pkt_int.shape[1]), np.int64)
    grown_int[:old] = pkt_int
    return (
        np.concatenate((pkt_flow, np.empty(old, np.int64))),
        np.concatenate((pkt_bytes, np.empty(old, np.int64))),
        np.concatenate((pkt_hop, np.empty(old, np.int64))),
        np.concatenate((pkt_ecn, np.zeros(old, np.bool_))),
        np.concatenate((pkt_last, np.zeros(old, np.bool_))),
        np.concatenate((pkt_kind, np.zeros(old, np.int64))),
        pkt_next,
        np.concatenate((pkt_sent_ps, np.zeros(old, np.int64))),
        grown_int,
        old,
    )


@numba.njit(cache=True, error_model="numpy")
def _ser_ps(nbytes, rate_bps):
    return np.int64(round(nbytes * 8.0 * PS_PER_S / rate_bps))


class Links(NamedTuple):
    """One entry per directed link."""

    rate_bps: np.ndarray  # float64
    delay_ps: np.ndarray  # int64
    to: np.ndarray  # int64: the node it feeds
    xoff_bytes: np.ndarray  # int64: PFC thresholds of the switch port it feeds
    xon_bytes: np.ndarray


class Flows(NamedTuple):
    """One entry per flow (int64); paths, dependants and reverse paths as CSR lists."""

    nbytes: np.ndarray
    mtu: np.ndarray
    start_ps: np.ndarray
    gap_ps: np.ndarray
    path_start: np.ndarray  # flow f's links: path_links[path_start[f]:path_start[f + 1]]
    path_links: np.ndarray
    dep_count: np.ndarray  # flows each waits for
    dependents_start: np.ndarray  # flows waiting for f: dependents[dependents_start[f]:...]
    dependents: np.ndarray
    reverse_start: np.ndarray  # its ACKs' links, receiver to sender (empty without ACKs)
    reverse_links: np.ndarray


class Fabric(NamedTuple):
    """Switch buffers, PFC, ECN, ACKs, telemetry, the seed and the rate-counting window (scalars)."""

    n_nodes: int
    buffer_bytes: int
    pfc: bool
    ecn: bool
    kmin_bytes: int
    kmax_bytes: int
    pmax: float
    acks: bool
    telemetry: bool  # data packets record INT at each switch's egress, their ACKs bring it back
    seed: int
    window_start_ps: int
    window_end_ps: int


@numba.njit(cache=True, error_model="numpy")
def _simulate(
    links, flows, fabric, cc_params, cc_columns, on_start, on_timer, on_marked, on_cnp, on_ack
):  # pragma: no cover - compiled
    link_rate_bps, link_delay_ps, link_to = links.rate_bps, links.delay_ps, links.to
    flow_bytes, flow_mtu, path_start, path_links = flows.nbytes, flows.mtu, flows.path_start, flows.path_links
    reverse_start, reverse_links = flows.reverse_start, flows.reverse_links
    pfc_on, ecn_on, acks_on, int_on = fabric.pfc, fabric.ecn, fabric.acks, fabric.telemetry
    kmin_bytes, kmax_bytes = fabric.kmin_bytes, fabric.kmax_bytes
    n_links = len(link_rate_bps)
    ps_per_byte = 8.0 * PS_PER_S / link_rate_bps  # serialisation: one multiply per packet
    n_flows = len(flow_bytes)
    # ---- heap
    cap = 1024 + 4 * n_flows + 4 * n_links
    heap = np.empty(3 * cap, np.int64)
    size = 0
    seq = 0
    # ---- packets (a pool; free slots chained)
    pcap = 1024
    pkt_flow = np.empty(pcap, np.int64)
    pkt_bytes = np.empty(pcap, np.int64)
    pkt_hop = np.empty(pcap, np.int64)
    pkt_ecn = np.zeros(pcap, np.bool_)
    pkt_last = np.zeros(pcap, np.bool_)
    pkt_kind = np.zeros(pcap, np.int64)
    pkt_next = np.full(pcap, -1, np.int64)
    pkt_sent_ps = np.zeros(pcap, np.int64)  # when its sender's NIC began sending it (its ACK echoes it)
    pkt_int = np.zeros((pcap, INT_WIDTH if int_on else 0), np.int64)
    free_head = 0
    for i in range(pcap - 1):
        pkt_next[i] = i + 1
    pkt_next[pcap - 1] = -1
    # ---- links
    q_head = np.full(n_links, -1, np.int64)
    q_tail = np.full(n_links, -1, np.int64)
    q_bytes = np.zeros(n_links, np.int64)
    busy = np.zeros(n_links, np.bool_)
    c_head = np.full(n_links, -1, np.int64)  # control frames (ACK, CNP): strict priority, never paused
    c_tail = np.full(n_links, -1, np.int64)
    tx_control = np.zeros(n_links, np.bool_)  # the frame on the wire is a control frame
    paused = np.zeros(n_links, np.bool_)
    pause_sent = np.zeros(n_links, np.bool_)  # the receiver of this link asked it to pause
    in_switch = np.zeros(n_links, np.int64)  # bytes held by the switch this link feeds, that came through it
    link_bytes = np.zeros(n_links, np.int64)
    q_max = np.zeros(n_links, np.int64)
    pauses = np.zeros(n_links, np.int64)
    shared_used = np.zeros(fabric.n_nodes, np.int64)
    drops = np.zeros(n_links, np.int64)
    # ---- flows
    n_packets = np.zeros(n_flows, np.int64)
    sent = np.zeros(n_flows, np.int64)
    in_flight = np.zeros(n_flows, np.int64)  # bytes sent and not yet acknowledged
    blocked = np.zeros(n_flows, np.bool_)  # at its window: the next ACK below it resumes the sender
    received_bytes = np.zeros(n_flows, np.int64)
    window_bytes = np.zeros(n_flows, np.int64)  # delivered within [window_start_ps, window_end_ps)
    finish_ps = np.full(n_flows, -1, np.int64)
    begin_ps = np.full(n_flows, -1, np.int64)
    deps_left = flows.dep_count.copy()
    state = np.zeros((n_flows, OWN + cc_columns))  # congestion control: a row per flow
    cnps = np.zeros(n_flows, np.int64)
    marked = np.zeros(n_flows, np.int64)
    reverse_ps = np.zeros(n_flows, np.int64)
    for f in range(n_flows):
        n_packets[f] = max(1, (flow_bytes[f] + flow_mtu[f] - 1) // flow_mtu[f])
        state[f, LINE] = link_rate_bps[path_links[path_start[f]]]
        state[f, RATE] = state[f, LINE]
        state[f, TIMER] = np.inf
        state[f, WINDOW] = np.inf
        back, there = 0, 0
        for h in range(path_start[f], path_start[f + 1]):
            link = path_links[h]
            back += link_delay_ps[link] + _ser_ps(CNP_BYTES, link_rate_bps[link])
            there += link_delay_ps[link] + _ser_ps(flow_mtu[f], link_rate_bps[link])
        reverse_ps[f] = back
        state[f, BASE_RTT_PS] = there + back
        if deps_left[f] == 0:
            size = _push(heap, size, seq, flows.start_ps[f], _START, f)
            seq += 1
    rng_state = np.uint64(fabric.seed) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)
    done = 0
    now = np.int64(0)
    events = 0
    while size > 0:
        if size + 8 >= cap:  # grow the heap
            cap *= 2
            heap = np.concatenate((heap, np.empty(3 * cap - len(heap), np.int64)))
        now, kind, a, size = _pop(heap, size)
        events += 1
        kick = -1  # the link that may start its next transmission once the event is handled
        resend = False  # a sender's next packet, scheduled after that transmission
        deliver = -1  # a data packet that reached its receiver at `arrival`
        arrival = now
        if kind == _START:
            f = a
            begin_ps[f] = now
            on_start(state, cc_params, f, now)
            pace = _ser_ps(min(flow_mtu[f], flow_bytes[f]), state[f, RATE])
            size = _push(heap, size, seq, now + pace, _SEND, f)
            seq += 1
        elif kind == _SEND:
            f = a
            if now >= state[f, TIMER]:
                on_timer(state, cc_params, f, now)
            if in_flight[f] >= state[f, WINDOW]:  # at its window: an ACK resumes it
                blocked[f] = True
                continue
            # the packet
            if free_head < 0:  # grow the pool
                pool = _grow_pool(
                    pkt_flow, pkt_bytes, pkt_hop, pkt_ecn, pkt_last, pkt_kind, pkt_next, pkt_sent_ps, pkt_int
                )
                pkt_flow, pkt_bytes, pkt_hop, pkt_ecn, pkt_last, pkt_kind, pkt_next, pkt_sent_ps, pkt_int, free_head = (
                    pool
                )
            p = free_head
            free_head = pkt_next[p]
            nbytes = flow_mtu[f] if sent[f] < n_packets[f] - 1 else flow_bytes[f] - (n_packets[f] - 1) * flow_mtu[f]
            pkt_flow[p] = f
            pkt_bytes[p] = nbytes
            pkt_hop[p] = path_start[f]
            pkt_ecn[p] = False
            pkt_last[p] = sent[f] == n_packets[f] - 1
            pkt_kind[p] = _DATA
            pkt_next[p] = -1
            sent[f] += 1
            in_flight[f] += nbytes
            link = path_links[path_start[f]]
            # enqueue at the host's NIC (hosts do not drop or pause their senders)
            if q_tail[link] < 0:
                q_head[link] = p
            else:
                pkt_next[q_tail[link]] = p
            q_tail[link] = p
            q_bytes[link] += nbytes
            q_max[link] = max(q_max[link], q_bytes[link])
            kick = link
            resend = sent[f] < n_packets[f]
        elif kind == _TX_DONE and tx_control[a]:  # a control frame left: on to the next hop
            link = a
            tx_control[link] = False
            p = c_head[link]
            c_head[link] = pkt_next[p]
            if c_head[link] < 0:
                c_tail[link] = -1
            link_bytes[link] += pkt_bytes[p]
            size = _push(heap, size, seq, now + link_delay_ps[link], _ARRIVE, p)
            seq += 1
            busy[link] = False
            kick = link
        elif kind == _TX_DONE:
            link = a
            p = q_head[link]
            q_head[link] = pkt_next[p]
            if q_head[link] < 0:
                q_tail[link] = -1
            q_bytes[link] -= pkt_bytes[p]
            link_bytes[link] += pkt_bytes[p]
            if pkt_hop[p] > path_start[pkt_flow[p]]:  # it left a switch: free its buffer
                inbound = path_links[pkt_hop[p] - 1]
                shared_used[link_to[inbound]] -= pkt_bytes[p]
                in_switch[inbound] -= pkt_bytes[p]
                if pfc_on and pause_sent[inbound] and in_switch[inbound] <= links.xon_bytes[inbound]:
                    pause_sent[inbound] = False
                    size = _push(heap, size, seq, now + link_delay_ps[inbound], _RESUME, inbound)
                    seq += 1
            else:  # it left its sender's NIC, which stamps when it began sending it
                pkt_sent_ps[p] = now - np.int64(round(pkt_bytes[p] * ps_per_byte[link]))
            f = pkt_flow[p]
            if pkt_hop[p] == path_start[f + 1] - 1 and not pkt_last[p]:
                # Reaching the receiver changes nothing but its count until the flow's last
                # packet (which does get an event: completion starts dependants).
                deliver = p
                arrival = now + link_delay_ps[link]
            else:
                size = _push(heap, size, seq, now + link_delay_ps[link], _ARRIVE, p)
                seq += 1
            busy[link] = False
            kick = link
        elif kind == _ARRIVE and pkt_kind[a] != _DATA:  # a control frame on its way back
            p = a
            f = pkt_flow[p]
            if pkt_hop[p] == reverse_start[f + 1] - 1:  # at the sender: the data packet's echo
                in_flight[f] -= flow_mtu[f] if not pkt_last[p] else flow_bytes[f] - (n_packets[f] - 1) * flow_mtu[f]
                state[f, RTT_PS] = now - pkt_sent_ps[p]
                if int_on:
                    hops = path_start[f + 1] - path_start[f] - 1
                    state[f, INT_HOPS] = hops
                    for i in range(hops):
                        state[f, INT + 4 * i + INT_QLEN] = pkt_int[p, 3 * i]
                        state[f, INT + 4 * i + INT_TX_BYTES] = pkt_int[p, 3 * i + 1]
                        state[f, INT + 4 * i + INT_TS_PS] = pkt_int[p, 3 * i + 2]
                        state[f, INT + 4 * i + INT_RATE_BPS] = link_rate_bps[path_links[path_start[f] + 1 + i]]
                if pkt_kind[p] == _CNP_ACK:
                    size = _push(heap, size, seq, now, _CNP, f)
                    seq += 1
                else:
                    on_ack(state, cc_params, f, now)
                pkt_next[p] = free_head
                free_head = p
                if blocked[f] and in_flight[f] < state[f, WINDOW]:  # the window opened: send now
                    blocked[f] = False
                    size = _push(heap, size, seq, now, _SEND, f)
                    seq += 1
                continue
            pkt_hop[p] += 1
            link = reverse_links[pkt_hop[p]]
            pkt_next[p] = -1
            if c_tail[link] < 0:
                c_head[link] = p
            else:
                pkt_next[c_tail[link]] = p
            c_tail[link] = p
            kick = link
        elif kind == _ARRIVE and pkt_hop[a] == path_start[pkt_flow[a] + 1] - 1:  # at the receiver
            deliver = a
        elif kind == _ARRIVE:  # at a switch
            p = a
            inbound = path_links[pkt_hop[p]]
            node = link_to[inbound]
            out = path_links[pkt_hop[p] + 1]
            nbytes = pkt_bytes[p]
            if shared_used[node] + nbytes > fabric.buffer_bytes:
                drops[out] += 1
                pkt_next[p] = free_head
                free_head = p
                continue
            if ecn_on and not pkt_ecn[p] and q_bytes[out] > kmin_bytes:
                if q_bytes[out] >= kmax_bytes:
                    pkt_ecn[p] = True
                else:
                    rng_state ^= rng_state >> np.uint64(12)
                    rng_state ^= rng_state << np.uint64(25)
                    rng_state ^= rng_state >> np.uint64(27)
                    u = ((rng_state * np.uint64(2685821657736338717)) >> np.uint64(11)) / 9007199254740992.0
                    if u < fabric.pmax * (q_bytes[out] - kmin_bytes) / (kmax_bytes - kmin_bytes):
                        pkt_ecn[p] = True
            shared_used[node] += nbytes
            in_switch[inbound] += nbytes
            if pfc_on and not pause_sent[inbound] and in_switch[inbound] > links.xoff_bytes[inbound]:
                pause_sent[inbound] = True
                pauses[inbound] += 1
                size = _push(heap, size, seq, now + link_delay_ps[inbound], _PAUSE, inbound)
                seq += 1
            pkt_hop[p] += 1
            pkt_next[p] = -1
            if q_tail[out] < 0:
                q_head[out] = p
            else:
                pkt_next[q_tail[out]] = p
            q_tail[out] = p
            q_bytes[out] += nbytes
            q_max[out] = max(q_max[out], q_bytes[out])
            kick = out
        elif kind == _PAUSE:
            paused[a] = True
        elif kind == _RESUME:
            link = a
            paused[link] = False
            kick = link
        elif kind == _ACK:  # the data packet's slot goes back as its 64-byte ACK, along the reverse path
            p = a
            f = pkt_flow[p]
            pkt_bytes[p] = CNP_BYTES
            pkt_hop[p] = reverse_start[f]
            pkt_next[p] = -1
            link = reverse_links[reverse_start[f]]
            if c_tail[link] < 0:
                c_head[link] = p
            else:
                pkt_next[c_tail[link]] = p
            c_tail[link] = p
            kick = link
        elif kind == _CNP:
            cnps[a] += 1
            on_cnp(state, cc_params, a, now)
        # A data packet at its receiver: counted, perhaps answered with a CNP, acknowledged; the
        # flow's last byte completes it and starts the flows waiting for it.
        if deliver >= 0:
            p = deliver
            f = pkt_flow[p]
            received_bytes[f] += pkt_bytes[p]
            if fabric.window_start_ps <= arrival < fabric.window_end_ps:
                window_bytes[f] += pkt_bytes[p]
            cnp = False
            if pkt_ecn[p]:
                marked[f] += 1
                if on_marked(state, cc_params, f, arrival):
                    cnp = True
                    if not acks_on:  # the CNP alone, in the reverse path's latency
                        size = _push(heap, size, seq, arrival + reverse_ps[f], _CNP, f)
                        seq += 1
            if acks_on:  # the receiver acknowledges every packet (the CNP rides on it)
                pkt_kind[p] = _CNP_ACK if cnp else _PLAIN_ACK
                size = _push(heap, size, seq, arrival, _ACK, p)
                seq += 1
            else:
                pkt_next[p] = free_head
                free_head = p
            if received_bytes[f] == flow_bytes[f]:
                finish_ps[f] = arrival
                done += 1
                for k in range(flows.dependents_start[f], flows.dependents_start[f + 1]):
                    d = flows.dependents[k]
                    deps_left[d] -= 1
                    if deps_left[d] == 0:
                        at = max(flows.start_ps[d], arrival + flows.gap_ps[d])
                        size = _push(heap, size, seq, at, _START, d)
                        seq += 1
        # One place for every event that queued a frame or freed a link: start the link's next
        # transmission, control frames first (strict priority, never paused), then data.
        if kick >= 0 and not busy[kick]:
            nxt = c_head[kick] if c_head[kick] >= 0 else (q_head[kick] if not paused[kick] else -1)
            if nxt >= 0:
                busy[kick] = True
                tx_control[kick] = c_head[kick] >= 0
                if int_on and not tx_control[kick] and pkt_hop[nxt] > path_start[pkt_flow[nxt]]:
                    # a switch's egress dequeues it: the bytes left behind it, the link's bytes
                    # sent with it, the time (as ns-3 HPCC's switch stamps INT at dequeue)
                    i = 3 * (pkt_hop[nxt] - path_start[pkt_flow[nxt]] - 1)
                    pkt_int[nxt, i] = q_bytes[kick] - pkt_bytes[nxt]
                    pkt_int[nxt, i + 1] = link_bytes[kick] + pkt_bytes[nxt]
                    pkt_int[nxt, i + 2] = now
                done_ps = now + np.int64(round(pkt_bytes[nxt] * ps_per_byte[kick]))
                size = _push(heap, size, seq, done_ps, _TX_DONE, kick)
                seq += 1
        if resend:
            nxt = flow_mtu[f] if sent[f] < n_packets[f] - 1 else flow_bytes[f] - (n_packets[f] - 1) * flow_mtu[f]
            size = _push(heap, size, seq, now + _ser_ps(nxt, state[f, RATE]), _SEND, f)
            seq += 1
    return begin_ps, finish_ps, link_bytes, q_max, pauses, drops, cnps, marked, window_bytes, events, now, state


def _signature():
    """Argument types of the one compiled engine: the hooks are first-class function values."""
    ints, floats = numba.int64[::1], numba.float64[::1]
    links = numba.types.NamedTuple([floats] + [ints] * 4, Links)
    flows = numba.types.NamedUniTuple(ints, 11, Flows)
    i, b = numba.int64, numba.boolean
    fabric = numba.types.NamedTuple([i, i, b, b, i, i, numba.float64, b, b, i, i, i], Fabric)
    return (links, flows, fabric, floats, i, HOOK, HOOK, MARK, HOOK, HOOK)


@functools.cache
def _engine():
    """The engine, compiled (or loaded from the on-disk cache) for the one signature."""
    _simulate.compile(_signature())
    _simulate.disable_compile()
    return _simulate


def simulate_packets(links: Links, flows: Flows, fabric: Fabric, cc_params: np.ndarray, cc_columns: int, hooks):
    """Run the engine; `hooks` (on_start, on_timer, on_marked, on_cnp, on_ack) and the state
    row of `cc_columns` own columns as _congestion.py describes."""
    return _engine()(links, flows, fabric, cc_params, np.int64(cc_columns), *hooks)
