"""The flow-level event engine (Numba): integer picoseconds, flows as rows of arrays.

Model. Every active flow is a fluid that moves its bytes at a rate; the rates are the max-min
fair share of the links' capacities (progressive filling: raise every flow's rate together until
a link is full, freeze the flows crossing it at that link's share, repeat with the capacity that
is left). Rates change only when a flow starts or drains, so the run jumps from event to event,
and all the events of one picosecond are handled before one rate recomputation (a symmetric
collective's step is one recomputation, however many flows it has). A recomputation covers only
the flows linked to those that started or drained through shared links, transitively (max-min
rates of the others cannot change): on a fabric most flows meet few others, so it is small. A
flow drains when its fluid has moved its bytes; it finishes (its last byte is at the receiver)
a fixed tail later: each hop's propagation delay plus a packet's serialisation there: on a path
of one hop the last packet's, on longer paths a full packet's (the last, shorter packet waits
behind the full one before it at the second hop and so trails it to the end). A lone flow on
links of one rate then finishes at the packet engine's time to the picosecond; at mixed rates
the tail differs from it by about a packet's serialisation. Flows may wait for other flows (a
DAG), starting `gap` after the last of them finishes, or at their own start time if that is
later, exactly as in the packet engine.

What is left out: queues (a flow's rate holds on every link of its path at once, with no
pipeline fill beyond the tail), and how a transport reaches its share. Behind senders at line
rate (the packet engine without congestion control) a FIFO queue shares a link in proportion to
arrival rates, not max-min, and serves first the bytes that came first, where max-min shares at
once: flows that start together on a bottleneck agree with the packet engine, but in a
collective's DAG a step that meets a later flow of another group is slowed in one model and not
in the other, and ECMP-colliding rings then differ by up to ~20 % (benchmarks/flow_vs_packet.py).
Such DAGs are also sensitive to the last picosecond: a 1 ps change early in a 512-GPU run grows
to a ~1 % change of its makespan, in either engine.

Numba's on-disk cache keys a kernel on its own file, so the heap and the water-filling it calls
stay in this file.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

PS_PER_S = 1e12
# heap events: a flow starts (joins the fluid), drains (its bytes are through), finishes (its
# last byte is at the receiver); a flow's state
_START, _DRAIN, _FINISH = 0, 1, 2
_WAITING, _ACTIVE, _DRAINED = 0, 1, 2
_TIE = 1e-9  # links whose shares differ by less than this fraction fill in one round
# The heap's signatures, given: called with an initial size of 0, numba would otherwise compile
# a copy for that literal value.
_I, _ARRAY = numba.int64, numba.int64[::1]


class Links(NamedTuple):
    """One entry per directed link."""

    rate_bps: np.ndarray  # float64
    delay_ps: np.ndarray  # int64


@numba.njit(_I(_ARRAY, _ARRAY, _I, _I, _I), cache=True, error_model="numpy")
def _push(times, payloads, size, t, payload):
    """Insert (t, payload) into the binary heap on `times` (room for it is the caller's);
    returns the new size. Equal times need no order: the engine handles a picosecond's events
    as one batch."""
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
def _room(times, payloads, size, more):
    """The heap's arrays with room for `more` entries (twice the need, when it grows)."""
    if size + more <= len(times):
        return times, payloads
    grown = 2 * (size + more)
    return (
        np.concatenate((times, np.empty(grown - len(times), np.int64))),
        np.concatenate((payloads, np.empty(grown - len(payloads), np.int64))),
    )


@numba.njit(numba.types.UniTuple(_I, 2)(_ARRAY, _ARRAY, _I), cache=True, error_model="numpy")
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
def waterfill_scratch(n_links, n_flows, n_hops):
    """Work arrays of `waterfill` for a run (per link, per hop of all paths, per flow)."""
    return (
        np.zeros(n_links),
        np.zeros(n_links, np.int64),  # unfrozen flows per link: zero between calls
        np.zeros(n_links, np.int64),
        np.zeros(n_links, np.int64),
        np.empty(n_links, np.int64),
        np.empty(n_links, np.int64),
        np.empty(n_hops, np.int64),
        np.zeros(n_flows, np.bool_),
    )


@numba.njit(cache=True, error_model="numpy")
def waterfill(active, n_active, path_start, path_links, link_rate, flow_rate, scratch):
    """Max-min fair rates (bits/s) of the `n_active` flows in `active`, into `flow_rate`;
    returns the rounds (bottleneck levels) it took. Each round finds the least share of the
    links still carrying unfrozen flows and freezes the flows of every link at that share
    (within _TIE); the links' flows are listed once (CSR), so a round costs the links left
    plus the flows it freezes. `scratch`: waterfill_scratch's arrays."""
    cap, count, first, fill, touched, full, on_link, frozen = scratch
    n_touched = 0
    for i in range(n_active):
        f = active[i]
        frozen[f] = False
        for h in range(path_start[f], path_start[f + 1]):
            link = path_links[h]
            if count[link] == 0:
                touched[n_touched] = link
                n_touched += 1
                cap[link] = link_rate[link]
            count[link] += 1
    at = 0
    for j in range(n_touched):  # each link's slice of on_link
        link = touched[j]
        first[link] = fill[link] = at
        at += count[link]
    for i in range(n_active):
        f = active[i]
        for h in range(path_start[f], path_start[f + 1]):
            link = path_links[h]
            on_link[fill[link]] = f
            fill[link] += 1
    rounds = 0
    while n_touched > 0:
        rounds += 1
        share = np.inf
        kept = 0
        for j in range(n_touched):  # drop the links left with no unfrozen flow
            link = touched[j]
            if count[link] > 0:
                touched[kept] = link
                kept += 1
                share = min(share, max(cap[link], 0.0) / count[link])
        n_touched = kept
        limit = share * (1.0 + _TIE)
        n_full = 0
        for j in range(n_touched):
            link = touched[j]
            if max(cap[link], 0.0) / count[link] <= limit:
                full[n_full] = link
                n_full += 1
        for j in range(n_full):
            link = full[j]
            for k in range(first[link], fill[link]):
                f = on_link[k]
                if frozen[f]:
                    continue
                frozen[f] = True
                flow_rate[f] = share
                for h in range(path_start[f], path_start[f + 1]):
                    cap[path_links[h]] -= share
                    count[path_links[h]] -= 1
    return rounds


@numba.njit(cache=True, error_model="numpy")
def _join(h, link, on_links):
    """Put hop h on `link`'s member list: (first, length, members, slot), each link's slice of
    `members` starting at first[link], slot[h] where h sits in it."""
    first, length, members, slot = on_links
    slot[h] = first[link] + length[link]
    members[slot[h]] = h
    length[link] += 1


@numba.njit(cache=True, error_model="numpy")
def _leave(h, link, on_links):
    """Take hop h off `link`'s member list (the last member moves into its place)."""
    first, length, members, slot = on_links
    length[link] -= 1
    moved = members[first[link] + length[link]]
    members[slot[h]] = moved
    slot[moved] = slot[h]


@numba.njit(cache=True, error_model="numpy")
def _enlist(f, path_start, path_links, on_links):
    """Put flow f's hops on the member lists of its links (it became active)."""
    for h in range(path_start[f], path_start[f + 1]):
        _join(h, path_links[h], on_links)


@numba.njit(cache=True, error_model="numpy")
def _delist(f, path_start, path_links, on_links):
    """Take flow f's hops off its links' member lists (it drained)."""
    for h in range(path_start[f], path_start[f + 1]):
        _leave(h, path_links[h], on_links)


@numba.njit(cache=True, error_model="numpy")
def _member_lists(path_links, n_links):
    """Empty member lists (for _join, _leave) with room on each link for all its hops (counted in
    a loop: a slice assignment's shape check compiles for seconds)."""
    first = np.zeros(n_links, np.int64)
    for h in range(len(path_links)):
        first[path_links[h]] += 1
    at = 0
    for link in range(n_links):
        first[link], at = at, at + first[link]
    n_hops = len(path_links)
    return first, np.zeros(n_links, np.int64), np.empty(n_hops, np.int64), np.empty(n_hops, np.int64)


@numba.njit(cache=True, error_model="numpy")
def _component(changed, n_changed, path_start, path_links, hop_flow, on_links, seen, queue, stamp, out):
    """The active flows that share a link with a flow of `changed`, and those that share one
    with them, and so on, into `out`; returns how many. Max-min rates of flows in other
    components do not change. `seen` (per link, per flow) holds the stamp of the last visit."""
    first, length, members, _ = on_links
    link_seen, flow_seen = seen
    n_queue = n_out = 0
    for i in range(n_changed):
        f = changed[i]
        for h in range(path_start[f], path_start[f + 1]):
            if link_seen[path_links[h]] != stamp:
                link_seen[path_links[h]] = stamp
                queue[n_queue] = path_links[h]
                n_queue += 1
    j = 0
    while j < n_queue:
        link = queue[j]
        j += 1
        for k in range(first[link], first[link] + length[link]):
            g = hop_flow[members[k]]
            if flow_seen[g] == stamp:
                continue
            flow_seen[g] = stamp
            out[n_out] = g
            n_out += 1
            for h in range(path_start[g], path_start[g + 1]):
                if link_seen[path_links[h]] != stamp:
                    link_seen[path_links[h]] = stamp
                    queue[n_queue] = path_links[h]
                    n_queue += 1
    return n_out


@numba.njit(cache=True, error_model="numpy")
def _tails(links, flows):
    """Per flow, the ps from its fluid's last bit leaving its last link's rate to its last byte
    at the receiver: each hop's propagation delay plus a packet's serialisation there (the last
    packet's on a path of one hop; on longer ones the last, shorter packet waits behind the full
    one before it at the second hop and so trails a full packet to the end)."""
    path_start, path_links = flows.path_start, flows.path_links
    ps_per_bit = PS_PER_S / links.rate_bps
    tail = np.zeros(len(flows.nbytes), np.int64)
    for f in range(len(flows.nbytes)):
        size = min(flows.nbytes[f], flows.mtu[f])
        if path_start[f + 1] - path_start[f] == 1:
            size = flows.nbytes[f] - (flows.nbytes[f] - 1) // flows.mtu[f] * flows.mtu[f]
        for h in range(path_start[f], path_start[f + 1]):
            link = path_links[h]
            tail[f] += links.delay_ps[link] + np.int64(round(size * 8.0 * ps_per_bit[link]))
    return tail


@numba.njit(cache=True, error_model="numpy", nogil=True)  # threads run candidates side by side
def simulate_flows(links, flows):  # pragma: no cover - compiled
    """Run `flows` (simulators.network._transfers.FlowArrays) over `links`; returns (start ps,
    finish ps (-1: never), bytes per link, events handled, rate recomputations, water-filling
    rounds, the last event's ps)."""
    n_links, n_flows = len(links.rate_bps), len(flows.nbytes)
    path_start, path_links = flows.path_start, flows.path_links
    tail = _tails(links, flows)
    times = np.empty(2 * n_flows, np.int64)
    payloads = np.empty(2 * n_flows, np.int64)
    size = 0
    deps_left = flows.dep_count.copy()
    for f in range(n_flows):
        if deps_left[f] == 0:
            size = _push(times, payloads, size, flows.start_ps[f], 4 * f + _START)
    state = np.zeros(n_flows, np.int8)  # _WAITING, _ACTIVE, _DRAINED
    left_bits = np.zeros(n_flows)  # bits still to move at mark_ps, at flow_rate since
    mark_ps = np.zeros(n_flows, np.int64)
    flow_rate = np.zeros(n_flows)
    drain_ps = np.zeros(n_flows, np.int64)
    begin_ps = np.full(n_flows, -1, np.int64)
    finish_ps = np.full(n_flows, -1, np.int64)
    link_bytes = np.zeros(n_links, np.int64)
    scratch = waterfill_scratch(n_links, n_flows, len(path_links))
    n_hops = len(path_links)
    hop_flow = np.empty(n_hops, np.int64)
    for f in range(n_flows):
        hop_flow[path_start[f] : path_start[f + 1]] = f
    on_links = _member_lists(path_links, n_links)
    seen = (np.full(n_links, -1, np.int64), np.full(n_flows, -1, np.int64))
    queue = np.empty(n_links, np.int64)
    changed = np.empty(n_flows, np.int64)
    component = np.empty(n_flows, np.int64)
    previous = np.empty(n_flows)
    now = end = np.int64(0)
    events = recomputations = rounds = batches = 0
    while size > 0:
        now = times[0]
        n_changed = 0
        while size > 0 and times[0] == now:  # every event of this picosecond, in any order
            payload, size = _pop(times, payloads, size)
            f, kind = payload >> 2, payload & 3
            if kind == _DRAIN and (state[f] != _ACTIVE or drain_ps[f] != now):
                continue  # superseded: its rate changed since
            events += 1
            end = now
            if kind == _START:
                state[f] = _ACTIVE
                begin_ps[f] = mark_ps[f] = now
                left_bits[f] = flows.nbytes[f] * 8.0
                flow_rate[f] = 0.0
                _enlist(f, path_start, path_links, on_links)
                changed[n_changed] = f
                n_changed += 1
            elif kind == _DRAIN:  # its bytes are through: it frees its share
                state[f] = _DRAINED
                _delist(f, path_start, path_links, on_links)
                changed[n_changed] = f
                n_changed += 1
                for h in range(path_start[f], path_start[f + 1]):
                    link_bytes[path_links[h]] += flows.nbytes[f]
                size = _push(times, payloads, size, now + tail[f], 4 * f + _FINISH)
            else:  # its last byte is at the receiver
                finish_ps[f] = now
                times, payloads = _room(
                    times, payloads, size, flows.dependents_start[f + 1] - flows.dependents_start[f]
                )
                for k in range(flows.dependents_start[f], flows.dependents_start[f + 1]):
                    d = flows.dependents[k]
                    deps_left[d] -= 1
                    if deps_left[d] == 0:
                        at = max(flows.start_ps[d], now + flows.gap_ps[d])
                        size = _push(times, payloads, size, at, 4 * d + _START)
        if n_changed == 0:
            continue
        batches += 1
        n = _component(changed, n_changed, path_start, path_links, hop_flow, on_links, seen, queue, batches, component)
        if n == 0:
            continue
        recomputations += 1
        for i in range(n):  # the fluid of the flows whose rates may change, up to now
            f = component[i]
            left_bits[f] -= flow_rate[f] * (now - mark_ps[f]) / PS_PER_S
            mark_ps[f] = now
            previous[i] = flow_rate[f]
        rounds += waterfill(component, n, path_start, path_links, links.rate_bps, flow_rate, scratch)
        times, payloads = _room(times, payloads, size, n)
        for i in range(n):
            f = component[i]
            if flow_rate[f] != previous[i]:
                drain_ps[f] = now + max(np.int64(0), np.int64(round(left_bits[f] * PS_PER_S / flow_rate[f])))
                size = _push(times, payloads, size, drain_ps[f], 4 * f + _DRAIN)
    return begin_ps, finish_ps, link_bytes, events, recomputations, rounds, end


# The buffered model's heap events besides _START and _FINISH: a flow's sender has put its last
# byte on its first link; a link's output changes (its head segment has left, or its queue is
# empty). Why a link is on the work list: its input changed; its output's change is due.
_SENT, _LINK = 1, 3
_INPUT, _DUE = 1, 2
_PASSES_PER_LINK = 64  # link updates in one picosecond, per link, before the rest wait a picosecond


@numba.njit(cache=True, error_model="numpy")
def _grown(a, n):
    """`a` with room for n entries (twice that, when it grows)."""
    if n <= len(a):
        return a
    return np.concatenate((a, np.empty(2 * n - len(a), a.dtype)))


@numba.njit(cache=True, error_model="numpy")
def _advance(link, now, fluid, cap):
    """Move `link`'s counters of bits arrived and departed on to `now` at the rates held since
    its mark: in at its input's total, out at its rate while it has a backlog, else as they come."""
    arrived, departed, in_total, busy, mark = fluid
    dt = now - mark[link]
    if dt > 0:
        arrived[link] += in_total[link] * dt
        if busy[link]:
            departed[link] = min(departed[link] + cap[link] * dt, arrived[link])
        else:
            departed[link] = arrived[link]
        mark[link] = now


@numba.njit(cache=True, error_model="numpy")
def _feed(h, link, rate, now, in_rate, fluid, cap, inputs, dirty, work):
    """Hop h enters `link` at `rate` (bits/ps) from now: the link's counters move on to now at the
    old rates first, and the link goes on the work list (a circular queue: work[0] its head,
    work[1] its length, the links from work[2] on)."""
    _advance(link, now, fluid, cap)
    if in_rate[h] == 0.0 and rate > 0.0:
        _join(h, link, inputs)
    elif in_rate[h] > 0.0 and rate == 0.0:
        _leave(h, link, inputs)
    fluid[2][link] += rate - in_rate[h]
    in_rate[h] = rate
    if dirty[link] == 0:
        n = len(work) - 2
        work[2 + (work[0] + work[1]) % n] = link
        work[1] += 1
    dirty[link] |= _INPUT


@numba.njit(cache=True, error_model="numpy", nogil=True)  # threads run candidates side by side
def simulate_queued(links, flows):  # pragma: no cover - compiled
    """Run `flows` over `links` as fluids through FIFO queues (module docstring, "Buffered");
    returns what simulate_flows does, with link updates for rate recomputations and queue
    segments for water-filling rounds."""
    n_links, n_flows = len(links.rate_bps), len(flows.nbytes)
    path_start, path_links = flows.path_start, flows.path_links
    n_hops = len(path_links)
    cap = links.rate_bps / PS_PER_S  # bits per picosecond
    eps = 0.5 * cap  # bits a link sends in half a picosecond: what rounding to a picosecond leaves
    tail = _tails(links, flows)
    hop_flow = np.empty(n_hops, np.int64)
    for f in range(n_flows):
        hop_flow[path_start[f] : path_start[f + 1]] = f
    times = np.empty(2 * n_flows + n_links, np.int64)
    payloads = np.empty(2 * n_flows + n_links, np.int64)
    size = 0
    deps_left = flows.dep_count.copy()
    for f in range(n_flows):
        if deps_left[f] == 0:
            size = _push(times, payloads, size, flows.start_ps[f], 4 * f + _START)
    state = np.zeros(n_flows, np.int8)  # _WAITING, _ACTIVE, _DRAINED
    sent = np.zeros(n_flows, np.bool_)
    begin_ps = np.full(n_flows, -1, np.int64)
    finish_ps = np.full(n_flows, -1, np.int64)
    link_bytes = np.zeros(n_links, np.int64)
    # per hop: the rate at which its flow enters and leaves that hop's link
    in_rate = np.zeros(n_hops)
    out_rate = np.zeros(n_hops)
    inputs = _member_lists(path_links, n_links)  # hops entering a link at a rate > 0
    outputs = _member_lists(path_links, n_links)  # hops leaving it at a rate > 0
    fluid = (np.zeros(n_links), np.zeros(n_links), np.zeros(n_links), np.zeros(n_links, np.bool_), np.zeros(n_links, np.int64))
    arrived, departed, in_total, busy, _ = fluid
    # each link's queue: a list of segments from head to tail, each the bits that arrived while
    # its input held one composition (from position seg_start to seg_end of the link's arrived
    # count; the tail is open), its hops and their rates in comp_hop, comp_rate
    head = np.full(n_links, -1, np.int64)
    last = np.full(n_links, -1, np.int64)
    n_segs = n_links + 16
    seg_start, seg_end, seg_total = np.empty(n_segs), np.empty(n_segs), np.empty(n_segs)
    seg_comp, seg_len, seg_next = np.empty(n_segs, np.int64), np.empty(n_segs, np.int64), np.empty(n_segs, np.int64)
    free = np.arange(n_segs - 1, -1, -1)
    n_free = n_segs
    comp_hop, comp_rate = np.empty(2 * n_hops, np.int64), np.empty(2 * n_hops)
    comp_used = 0
    next_ps = np.full(n_links, -1, np.int64)  # a link's output change due (its _LINK event)
    dirty = np.zeros(n_links, np.int8)
    carried = np.zeros(n_links, np.int8)  # flags of an update put off to the next picosecond
    work = np.zeros(n_links + 2, np.int64)
    new_out = np.zeros(n_hops)
    seen = np.full(n_hops, -1, np.int64)
    candidates = np.empty(n_hops, np.int64)
    now = end = np.int64(0)
    events = updates = segments = 0
    while size > 0:
        now = times[0]
        while size > 0 and times[0] == now:  # every event of this picosecond, in any order
            payload, size = _pop(times, payloads, size)
            f, kind = payload >> 2, payload & 3
            if kind == _LINK:
                link = f
                if next_ps[link] != now:
                    continue  # superseded: the link was updated since
                next_ps[link] = -1
                if dirty[link] == 0:
                    work[2 + (work[0] + work[1]) % n_links] = link
                    work[1] += 1
                dirty[link] |= _DUE | carried[link]
                carried[link] = 0
                events += 1
                continue
            events += 1
            end = now
            h = path_start[f]
            if kind == _START:  # its sender puts its bytes on its first link at that link's rate
                state[f] = _ACTIVE
                begin_ps[f] = now
                times, payloads = _room(times, payloads, size, 1)
                sent_ps = now + max(np.int64(1), np.int64(round(flows.nbytes[f] * 8.0 / cap[path_links[h]])))
                size = _push(times, payloads, size, sent_ps, 4 * f + _SENT)
                _feed(h, path_links[h], cap[path_links[h]], now, in_rate, fluid, cap, inputs, dirty, work)
            elif kind == _SENT:
                sent[f] = True
                _feed(h, path_links[h], 0.0, now, in_rate, fluid, cap, inputs, dirty, work)
            else:  # its last byte is at the receiver
                finish_ps[f] = now
                times, payloads = _room(
                    times, payloads, size, flows.dependents_start[f + 1] - flows.dependents_start[f]
                )
                for k in range(flows.dependents_start[f], flows.dependents_start[f + 1]):
                    d = flows.dependents[k]
                    deps_left[d] -= 1
                    if deps_left[d] == 0:
                        at = max(flows.start_ps[d], now + flows.gap_ps[d])
                        size = _push(times, payloads, size, at, 4 * d + _START)
        passes = 0
        while work[1] > 0:
            link = work[2 + work[0]]
            work[0] = (work[0] + 1) % n_links
            work[1] -= 1
            flags = dirty[link]
            dirty[link] = 0
            if passes >= _PASSES_PER_LINK * n_links:  # a cycle of links feeding each other: go on later
                carried[link] = flags
                next_ps[link] = now + 1
                times, payloads = _room(times, payloads, size, 1)
                size = _push(times, payloads, size, now + 1, 4 * link + _LINK)
                continue
            passes += 1
            updates += 1
            _advance(link, now, fluid, cap)
            first, length, members, _ = inputs
            if flags & _INPUT:  # a new segment: the input's composition from now
                total = 0.0
                for k in range(first[link], first[link] + length[link]):
                    total += in_rate[members[k]]
                in_total[link] = total
                if arrived[link] - departed[link] <= eps[link]:  # the queue is empty: no segments
                    departed[link] = arrived[link]
                    s = head[link]
                    while s != -1:
                        free[n_free] = s
                        n_free += 1
                        s = seg_next[s]
                    head[link] = last[link] = -1
                t = last[link]
                if t != -1 and seg_start[t] >= arrived[link] - eps[link]:
                    s = t  # opened this picosecond, nothing in it yet: rewritten
                elif total > 0.0 or t != -1:
                    if n_free == 0:
                        need = n_segs + 1
                        seg_start, seg_end, seg_total = _grown(seg_start, need), _grown(seg_end, need), _grown(seg_total, need)
                        seg_comp, seg_len, seg_next = _grown(seg_comp, need), _grown(seg_len, need), _grown(seg_next, need)
                        free = _grown(free, len(seg_start))
                        for k in range(n_segs, len(seg_start)):
                            free[n_free] = k
                            n_free += 1
                        n_segs = len(seg_start)
                    n_free -= 1
                    s = free[n_free]
                    segments += 1
                    seg_start[s] = arrived[link]
                    seg_next[s] = -1
                    if t != -1:
                        seg_end[t] = arrived[link]
                        seg_next[t] = s
                    else:
                        head[link] = s
                    last[link] = s
                else:
                    s = -1  # nothing queued, nothing coming
                if s != -1:
                    n = length[link]
                    if comp_used + n > len(comp_hop):  # compact: only queued segments' entries live on
                        live = n
                        for j in range(n_links):
                            q = head[j]
                            while q != -1:
                                live += seg_len[q]
                                q = seg_next[q]
                        kept_hop = np.empty(max(len(comp_hop), 2 * live), np.int64)
                        kept_rate = np.empty(len(kept_hop))
                        at = 0
                        for j in range(n_links):
                            q = head[j]
                            while q != -1:
                                kept_hop[at : at + seg_len[q]] = comp_hop[seg_comp[q] : seg_comp[q] + seg_len[q]]
                                kept_rate[at : at + seg_len[q]] = comp_rate[seg_comp[q] : seg_comp[q] + seg_len[q]]
                                seg_comp[q] = at
                                at += seg_len[q]
                                q = seg_next[q]
                        comp_hop, comp_rate, comp_used = kept_hop, kept_rate, at
                    seg_end[s] = np.inf
                    seg_total[s] = total
                    seg_comp[s] = comp_used
                    seg_len[s] = n
                    for k in range(n):
                        comp_hop[comp_used + k] = members[first[link] + k]
                        comp_rate[comp_used + k] = in_rate[members[first[link] + k]]
                    comp_used += n
            while head[link] != last[link] and seg_end[head[link]] - departed[link] <= eps[link]:
                s = head[link]  # its bits have left
                head[link] = seg_next[s]
                free[n_free] = s
                n_free += 1
            # the output: the input as it comes while nothing waits and the link keeps up, else
            # the head segment's composition at the link's rate
            busy[link] = arrived[link] - departed[link] > eps[link] or in_total[link] > cap[link] * (1.0 + _TIE)
            if not busy[link]:
                departed[link] = arrived[link]
            n_candidates = 0
            o_first, o_length, o_members, _ = outputs
            for k in range(o_first[link], o_first[link] + o_length[link]):
                h = o_members[k]
                new_out[h] = 0.0
                seen[h] = updates
                candidates[n_candidates] = h
                n_candidates += 1
            if not busy[link]:
                for k in range(first[link], first[link] + length[link]):
                    h = members[k]
                    new_out[h] = in_rate[h]
                    if seen[h] != updates:
                        seen[h] = updates
                        candidates[n_candidates] = h
                        n_candidates += 1
            else:
                s = head[link]
                scale = cap[link] / seg_total[s] if seg_total[s] > 0.0 else 0.0
                for k in range(seg_comp[s], seg_comp[s] + seg_len[s]):
                    h = comp_hop[k]
                    new_out[h] = comp_rate[k] * scale
                    if seen[h] != updates:
                        seen[h] = updates
                        candidates[n_candidates] = h
                        n_candidates += 1
            for i in range(n_candidates):
                h = candidates[i]
                rate, old = new_out[h], out_rate[h]
                if rate == old:
                    continue
                if old == 0.0:
                    _join(h, link, outputs)
                elif rate == 0.0:
                    _leave(h, link, outputs)
                out_rate[h] = rate
                f = hop_flow[h]
                if h + 1 < path_start[f + 1]:
                    _feed(h + 1, path_links[h + 1], rate, now, in_rate, fluid, cap, inputs, dirty, work)
                elif rate == 0.0 and sent[f] and state[f] == _ACTIVE:  # its last bit has left
                    state[f] = _DRAINED
                    for j in range(path_start[f], path_start[f + 1]):
                        link_bytes[path_links[j]] += flows.nbytes[f]
                    times, payloads = _room(times, payloads, size, 1)
                    size = _push(times, payloads, size, now + tail[f], 4 * f + _FINISH)
            # the next change of the output: the head segment leaves, or the queue empties
            next_ps[link] = -1
            if busy[link]:
                wait = -1.0
                if head[link] != last[link]:
                    wait = (seg_end[head[link]] - departed[link]) / cap[link]
                elif in_total[link] < cap[link]:
                    wait = (arrived[link] - departed[link]) / (cap[link] - in_total[link])
                if wait >= 0.0:
                    next_ps[link] = now + max(np.int64(1), np.int64(round(wait)))
                    times, payloads = _room(times, payloads, size, 1)
                    size = _push(times, payloads, size, next_ps[link], 4 * link + _LINK)
    return begin_ps, finish_ps, link_bytes, events, updates, segments, end
