"""The packet-level discrete-event engine (Numba): integer picoseconds, packets as rows of arrays.

Model. Directed links carry packets store-and-forward: a packet is serialised at the link's rate
(its bytes x 8 / rate, rounded to a picosecond) and arrives at the far end after the link's
propagation delay; each link has an output queue (FIFO) at its near end. A switch holds queued
packets in one shared buffer; a packet whose bytes do not fit is dropped. Hosts queue without
limit. Senders emit a flow's packets at a pace (line rate of the first link, or the DCQCN rate),
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
  ACKs a CNP alone takes the reverse path's latency (propagation and serialisation).
- DCQCN at the sender: the receiver marks the ACK of a marked packet as a CNP (at most one per
  flow per CNP interval); on a CNP the sender sets Rt = Rc, Rc = Rc (1 - alpha / 2), alpha = (1 - g) alpha + g;
  every alpha period without CNP alpha = (1 - g) alpha; every increase period the rate recovers:
  F fast-recovery steps Rc = (Rt + Rc) / 2, then additive (Rt += R_AI) and after F more hyper
  (Rt += R_HAI) increases. Timers are applied when the sender next acts (their effect is the
  same as firing them on time, since nothing else reads the rate in between).
Events at equal times run in the order they were scheduled (ns-3's rule), so runs are exact and
deterministic. Every event queues a frame on, or frees, at most one link (`kick`), whose next
transmission one block at the end of the loop starts, before a sender's next packet is scheduled
(`resend`): the order of scheduling, and so the run, is that of handling each case in place. Not
a function: a compiled call with array arguments costs more than the event (the engine ran 25 %
slower with it factored into one).
"""

from __future__ import annotations

import numba
import numpy as np

# event types
_SEND, _TX_DONE, _ARRIVE, _PAUSE, _RESUME, _CNP, _START, _ACK = 0, 1, 2, 3, 4, 5, 6, 7
_DATA, _PLAIN_ACK, _CNP_ACK = 0, 1, 2  # what a packet is: data, or a control frame going back
PS_PER_S = 1e12
CNP_BYTES = 64


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
def _grow_pool(pkt_flow, pkt_bytes, pkt_hop, pkt_ecn, pkt_last, pkt_kind, pkt_next):
    """The packet pool's arrays at twice their length, the new slots chained free; returns them
    and the first new slot (the new free-list head)."""
    old = len(pkt_flow)
    pkt_next = np.concatenate((pkt_next, np.full(old, -1, np.int64)))
    for i in range(old, 2 * old - 1):
        pkt_next[i] = i + 1
    return (
        np.concatenate((pkt_flow, np.empty(old, np.int64))),
        np.concatenate((pkt_bytes, np.empty(old, np.int64))),
        np.concatenate((pkt_hop, np.empty(old, np.int64))),
        np.concatenate((pkt_ecn, np.zeros(old, np.bool_))),
        np.concatenate((pkt_last, np.zeros(old, np.bool_))),
        np.concatenate((pkt_kind, np.zeros(old, np.int64))),
        pkt_next,
        old,
    )


@numba.njit(cache=True, error_model="numpy")
def _ser_ps(nbytes, rate_bps):
    return np.int64(round(nbytes * 8.0 * PS_PER_S / rate_bps))


@numba.njit(cache=True, error_model="numpy")
def simulate_packets(
    link_rate_bps,
    link_delay_ps,
    link_to,
    node_is_switch,
    flow_bytes,
    flow_mtu,
    flow_start_ps,
    flow_gap_ps,
    flow_path_start,
    path_links,
    flow_dep_count,
    dependents_start,
    dependents,
    buffer_bytes,
    pfc_on,
    xoff_bytes,
    xon_bytes,
    ecn_on,
    kmin_bytes,
    kmax_bytes,
    pmax,
    dcqcn_on,
    g,
    alpha_period_ps,
    increase_period_ps,
    cnp_interval_ps,
    fast_recovery_steps,
    rate_ai_bps,
    rate_hai_bps,
    min_rate_bps,
    seed,
    window_start_ps,
    window_end_ps,
    acks_on,
    reverse_start,
    reverse_links,
):  # pragma: no cover - compiled
    n_links = len(link_rate_bps)
    ps_per_byte = 8.0 * PS_PER_S / link_rate_bps  # serialisation: one multiply per packet
    n_nodes = len(node_is_switch)
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
    shared_used = np.zeros(n_nodes, np.int64)
    drops = np.zeros(n_links, np.int64)
    # ---- flows
    n_packets = np.zeros(n_flows, np.int64)
    sent = np.zeros(n_flows, np.int64)
    received_bytes = np.zeros(n_flows, np.int64)
    window_bytes = np.zeros(n_flows, np.int64)  # delivered within [window_start_ps, window_end_ps)
    finish_ps = np.full(n_flows, -1, np.int64)
    begin_ps = np.full(n_flows, -1, np.int64)
    deps_left = flow_dep_count.copy()
    rc = np.zeros(n_flows)
    rt = np.zeros(n_flows)
    alpha = np.ones(n_flows)
    last_alpha_ps = np.zeros(n_flows, np.int64)
    last_increase_ps = np.zeros(n_flows, np.int64)
    increases = np.zeros(n_flows, np.int64)
    last_cnp_ps = np.full(n_flows, -(1 << 62), np.int64)
    cnps = np.zeros(n_flows, np.int64)
    marked = np.zeros(n_flows, np.int64)
    reverse_ps = np.zeros(n_flows, np.int64)
    for f in range(n_flows):
        n_packets[f] = max(1, (flow_bytes[f] + flow_mtu[f] - 1) // flow_mtu[f])
        first = path_links[flow_path_start[f]]
        rc[f] = link_rate_bps[first]
        rt[f] = link_rate_bps[first]
        back = 0
        for h in range(flow_path_start[f], flow_path_start[f + 1]):
            link = path_links[h]
            back += link_delay_ps[link] + _ser_ps(CNP_BYTES, link_rate_bps[link])
        reverse_ps[f] = back
        if deps_left[f] == 0:
            size = _push(heap, size, seq, flow_start_ps[f], _START, f)
            seq += 1
    rng_state = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)
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
        if kind == _START:
            f = a
            begin_ps[f] = now
            last_alpha_ps[f] = now
            last_increase_ps[f] = now
            pace = _ser_ps(min(flow_mtu[f], flow_bytes[f]), rc[f])
            size = _push(heap, size, seq, now + pace, _SEND, f)
            seq += 1
        elif kind == _SEND:
            f = a
            if dcqcn_on:  # apply the timers that fired since the sender last acted
                while now - last_alpha_ps[f] >= alpha_period_ps:
                    last_alpha_ps[f] += alpha_period_ps
                    if last_alpha_ps[f] - last_cnp_ps[f] >= alpha_period_ps:
                        alpha[f] *= 1.0 - g
                while now - last_increase_ps[f] >= increase_period_ps:
                    last_increase_ps[f] += increase_period_ps
                    increases[f] += 1
                    if increases[f] > 2 * fast_recovery_steps:
                        rt[f] += rate_hai_bps
                    elif increases[f] > fast_recovery_steps:
                        rt[f] += rate_ai_bps
                    line = link_rate_bps[path_links[flow_path_start[f]]]
                    rt[f] = min(rt[f], line)
                    rc[f] = min((rt[f] + rc[f]) / 2.0, line)
            # the packet
            if free_head < 0:  # grow the pool
                pkt_flow, pkt_bytes, pkt_hop, pkt_ecn, pkt_last, pkt_kind, pkt_next, free_head = _grow_pool(
                    pkt_flow, pkt_bytes, pkt_hop, pkt_ecn, pkt_last, pkt_kind, pkt_next
                )
            p = free_head
            free_head = pkt_next[p]
            nbytes = flow_mtu[f] if sent[f] < n_packets[f] - 1 else flow_bytes[f] - (n_packets[f] - 1) * flow_mtu[f]
            pkt_flow[p] = f
            pkt_bytes[p] = nbytes
            pkt_hop[p] = flow_path_start[f]
            pkt_ecn[p] = False
            pkt_last[p] = sent[f] == n_packets[f] - 1
            pkt_kind[p] = _DATA
            pkt_next[p] = -1
            sent[f] += 1
            link = path_links[flow_path_start[f]]
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
            src_node = -1
            if pkt_hop[p] > flow_path_start[pkt_flow[p]]:  # it left a switch: free its buffer
                inbound = path_links[pkt_hop[p] - 1]
                src_node = link_to[inbound]
                shared_used[src_node] -= pkt_bytes[p]
                in_switch[inbound] -= pkt_bytes[p]
                if pfc_on and pause_sent[inbound] and in_switch[inbound] <= xon_bytes[inbound]:
                    pause_sent[inbound] = False
                    size = _push(heap, size, seq, now + link_delay_ps[inbound], _RESUME, inbound)
                    seq += 1
            f = pkt_flow[p]
            if pkt_hop[p] == flow_path_start[f + 1] - 1 and not pkt_last[p]:
                # Reaching the receiver changes nothing but its count until the flow's last
                # packet (which does get an event: completion starts dependants).
                arrival = now + link_delay_ps[link]
                received_bytes[f] += pkt_bytes[p]
                if window_start_ps <= arrival < window_end_ps:
                    window_bytes[f] += pkt_bytes[p]
                cnp = False
                if pkt_ecn[p]:
                    marked[f] += 1
                    if dcqcn_on and arrival - last_cnp_ps[f] >= cnp_interval_ps:
                        last_cnp_ps[f] = arrival
                        cnp = True
                        if not acks_on:  # the CNP alone, in the reverse path's latency
                            size = _push(heap, size, seq, arrival + reverse_ps[f], _CNP, f)
                            seq += 1
                if acks_on:  # the receiver acknowledges every packet (the CNP rides on it)
                    size = _push(heap, size, seq, arrival, _ACK, 2 * f + cnp)
                    seq += 1
                pkt_next[p] = free_head
                free_head = p
            else:
                size = _push(heap, size, seq, now + link_delay_ps[link], _ARRIVE, p)
                seq += 1
            busy[link] = False
            kick = link
        elif kind == _ARRIVE and pkt_kind[a] != _DATA:  # a control frame on its way back
            p = a
            f = pkt_flow[p]
            if pkt_hop[p] == reverse_start[f + 1] - 1:  # at the sender
                if pkt_kind[p] == _CNP_ACK:
                    size = _push(heap, size, seq, now, _CNP, f)
                    seq += 1
                pkt_next[p] = free_head
                free_head = p
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
        elif kind == _ARRIVE:
            p = a
            f = pkt_flow[p]
            inbound = path_links[pkt_hop[p]]
            if pkt_hop[p] == flow_path_start[f + 1] - 1:  # at the receiver
                received_bytes[f] += pkt_bytes[p]
                if window_start_ps <= now < window_end_ps:
                    window_bytes[f] += pkt_bytes[p]
                cnp = False
                if pkt_ecn[p]:
                    marked[f] += 1
                    if dcqcn_on and now - last_cnp_ps[f] >= cnp_interval_ps:
                        last_cnp_ps[f] = now
                        cnp = True
                        if not acks_on:
                            size = _push(heap, size, seq, now + reverse_ps[f], _CNP, f)
                            seq += 1
                if acks_on:
                    size = _push(heap, size, seq, now, _ACK, 2 * f + cnp)
                    seq += 1
                pkt_next[p] = free_head
                free_head = p
                if received_bytes[f] == flow_bytes[f]:
                    finish_ps[f] = now
                    done += 1
                    for k in range(dependents_start[f], dependents_start[f + 1]):
                        d = dependents[k]
                        deps_left[d] -= 1
                        if deps_left[d] == 0:
                            at = max(flow_start_ps[d], now + flow_gap_ps[d])
                            size = _push(heap, size, seq, at, _START, d)
                            seq += 1
                continue
            node = link_to[inbound]
            out = path_links[pkt_hop[p] + 1]
            nbytes = pkt_bytes[p]
            if shared_used[node] + nbytes > buffer_bytes:
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
                    if u < pmax * (q_bytes[out] - kmin_bytes) / (kmax_bytes - kmin_bytes):
                        pkt_ecn[p] = True
            shared_used[node] += nbytes
            in_switch[inbound] += nbytes
            if pfc_on and not pause_sent[inbound] and in_switch[inbound] > xoff_bytes[inbound]:
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
        elif kind == _ACK:  # the receiver sends a 64-byte acknowledgement back along the reverse path
            f = a >> 1
            if free_head < 0:  # grow the pool
                pkt_flow, pkt_bytes, pkt_hop, pkt_ecn, pkt_last, pkt_kind, pkt_next, free_head = _grow_pool(
                    pkt_flow, pkt_bytes, pkt_hop, pkt_ecn, pkt_last, pkt_kind, pkt_next
                )
            p = free_head
            free_head = pkt_next[p]
            pkt_flow[p] = f
            pkt_bytes[p] = CNP_BYTES
            pkt_hop[p] = reverse_start[f]
            pkt_kind[p] = _CNP_ACK if a & 1 else _PLAIN_ACK
            pkt_next[p] = -1
            link = reverse_links[reverse_start[f]]
            if c_tail[link] < 0:
                c_head[link] = p
            else:
                pkt_next[c_tail[link]] = p
            c_tail[link] = p
            kick = link
        elif kind == _CNP:
            f = a
            cnps[f] += 1
            rt[f] = rc[f]
            rc[f] = max(rc[f] * (1.0 - alpha[f] / 2.0), min_rate_bps)
            alpha[f] = (1.0 - g) * alpha[f] + g
            last_alpha_ps[f] = now
            last_increase_ps[f] = now
            increases[f] = 0
        # One place for every event that queued a frame or freed a link: start the link's next
        # transmission, control frames first (strict priority, never paused), then data.
        if kick >= 0 and not busy[kick]:
            nxt = c_head[kick] if c_head[kick] >= 0 else (q_head[kick] if not paused[kick] else -1)
            if nxt >= 0:
                busy[kick] = True
                tx_control[kick] = c_head[kick] >= 0
                done_ps = now + np.int64(round(pkt_bytes[nxt] * ps_per_byte[kick]))
                size = _push(heap, size, seq, done_ps, _TX_DONE, kick)
                seq += 1
        if resend:
            nxt = flow_mtu[f] if sent[f] < n_packets[f] - 1 else flow_bytes[f] - (n_packets[f] - 1) * flow_mtu[f]
            size = _push(heap, size, seq, now + _ser_ps(nxt, rc[f]), _SEND, f)
            seq += 1
    return begin_ps, finish_ps, link_bytes, q_max, pauses, drops, cnps, marked, window_bytes, events, now
