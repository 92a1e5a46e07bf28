"""The flow-level event engines (Numba): integer picoseconds, flows as rows of arrays. Two
models of how flows share links, for two kinds of fabric; both fluids, both event-driven.

Max-min (simulate_flows): every active flow moves its bytes at a rate; the rates are the max-min
fair share of the links' capacities (progressive filling: raise every flow's rate together until
a link is full, freeze the flows crossing it at that link's share, repeat with the capacity that
is left). Rates change only when a flow starts or drains, so the run jumps from event to event,
and all the events of one picosecond are handled before one rate recomputation (a symmetric
collective's step is one recomputation, however many flows it has). A recomputation covers only
the flows linked to those that started or drained through shared links, transitively (max-min
rates of the others cannot change): on a fabric most flows meet few others, so it is small. No
queues: a flow's rate holds on every link of its path at once, as where a transport keeps
queues short; a bottleneck whose flows are held back elsewhere idles.

Buffered (simulate_queued): a fluid FIFO queue at every link, the packet engine at line rate
(senders paced at their NIC's rate, no congestion control, lossless) as a fluid. A sender puts
a flow's bytes on its first link at that link's rate; a link whose input exceeds its rate, or
that has a backlog, sends at its rate, from the head of its queue: a list of segments, each the
bits that arrived while its input held one composition (which flows at which rates), sent in
that composition; otherwise it passes its input on as it comes. So a link shares its rate in
proportion to its flows' arrival rates and serves the bytes that came first first, and a
bottleneck behind senders at line rate never idles while it has a backlog. Rates change when a
flow starts, its sender is done, a segment leaves a queue or a queue empties; a change passes
down each flow's path within its picosecond, and a flow drains when its last bit leaves its last
link. A cycle of links that keep changing each other's input within one picosecond goes on a
picosecond later after 64 updates a link.

In both, a flow finishes (its last byte is at the receiver) a fixed tail after it drains: each
hop's propagation delay plus a packet's serialisation there: on a path of one hop the last
packet's, on longer paths a full packet's (the last, shorter packet waits behind the full one
before it at the second hop and so trails it to the end). A lone flow on links of one rate then
finishes at the packet engine's time to the picosecond; at mixed rates the tail differs from it
by about a packet's serialisation. Flows may wait for other flows (a DAG), starting `gap` after
the last of them finishes, or at their own start time if that is later, exactly as in the
packet engine. Against the packet engine at line rate (benchmarks/flow_vs_packet.py) the
buffered model agrees within 0.2 % on collectives whose groups collide on oversubscribed and
ECMP-shared links, where max-min is up to 25 % slow (a step of one group that meets another
group's later flow is slowed at once in max-min, and only once the bytes ahead of it have gone
in a FIFO queue). Such DAGs are also sensitive to the last picosecond: a 1 ps change early in a
512-GPU run grows to a ~1 % change of its makespan, in any of the engines.

Numba's on-disk cache keys a kernel on its own file, so the heap, the water-filling and the
helpers the kernels call stay in this file.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from simulators._kernels import SignedHelpers

PS_PER_S = 1e12
# heap events: a flow starts (joins the fluid), drains (its bytes are through), finishes (its
# last byte is at the receiver); a flow's state
_START, _DRAIN, _FINISH = 0, 1, 2
_WAITING, _ACTIVE, _DRAINED = 0, 1, 2
_TIE = 1e-9  # links whose shares differ by less than this fraction fill in one round
# The heap's signatures, given when an engine compiles (`HELPERS.before(engine)` ahead of its
# first call): called with an initial size of 0, numba would otherwise compile a copy for that
# literal value.
_I, _ARRAY = numba.int64, numba.int64[::1]
HELPERS = SignedHelpers()


class Links(NamedTuple):
    """One entry per directed link."""

    rate_bps: np.ndarray  # float64
    delay_ps: np.ndarray  # int64


@HELPERS.njit(_I(_ARRAY, _ARRAY, _I, _I, _I), error_model="numpy")
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


@HELPERS.njit(numba.types.UniTuple(_I, 2)(_ARRAY, _ARRAY, _I), error_model="numpy")
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
def _moved(arrived, departed, in_total, busy, cap, dt):
    """A link's counts of bits arrived and departed `dt` ps on at the rates held since: in at
    its input's total, out at its rate while it has a backlog, else as they come."""
    arrived += in_total * dt
    return arrived, min(departed + cap * dt, arrived) if busy else arrived


@numba.njit(cache=True, error_model="numpy", nogil=True)  # threads run candidates side by side
def simulate_queued(links, flows, room):  # pragma: no cover - compiled
    """Run `flows` over `links` as fluids through FIFO queues (module docstring, "Buffered");
    returns what simulate_flows does, with link updates for rate recomputations and queue
    segments for water-filling rounds, and whether `room` (heap entries, queue segments,
    segment entries) ran out: then nothing else holds, and a run with more room answers. The
    arrays are never reallocated in the loop: numba counts references to an array variable
    that a loop may rebind at every turn, which took a third of the time."""
    n_links, n_flows = len(links.rate_bps), len(flows.nbytes)
    path_start, path_links = flows.path_start, flows.path_links
    n_hops = len(path_links)
    cap = links.rate_bps / PS_PER_S  # bits per picosecond
    eps = 0.5 * cap  # bits a link sends in half a picosecond: what rounding to a picosecond leaves
    tail = _tails(links, flows)
    nbytes, start_ps, gap_ps = flows.nbytes, flows.start_ps, flows.gap_ps  # read once: each read counts
    dependents_start, dependents = flows.dependents_start, flows.dependents
    hop_flow = np.empty(n_hops, np.int64)
    for f in range(n_flows):
        hop_flow[path_start[f] : path_start[f + 1]] = f
    state = np.zeros(n_flows, np.int8)  # _WAITING, _ACTIVE, _DRAINED
    sent = np.zeros(n_flows, np.bool_)
    begin_ps = np.full(n_flows, -1, np.int64)
    finish_ps = np.full(n_flows, -1, np.int64)
    link_bytes = np.zeros(n_links, np.int64)
    n_heap, n_segs, n_entries = room
    times, payloads = np.empty(n_heap, np.int64), np.empty(n_heap, np.int64)
    size = 0
    deps_left = flows.dep_count.copy()
    for f in range(n_flows):
        if deps_left[f] == 0:
            if size == n_heap:
                return begin_ps, finish_ps, link_bytes, 0, 0, 0, np.int64(0), True
            size = _push(times, payloads, size, start_ps[f], 4 * f + _START)
    # per hop: the rate at which its flow enters and leaves that hop's link
    in_rate = np.zeros(n_hops)
    out_rate = np.zeros(n_hops)
    # member lists (as _join and _leave keep them, written out here: a call with arrays counts
    # their references): hops entering a link at a rate > 0, and hops leaving it at a rate > 0,
    # in the same slices of `members`, `o_members`
    first, length, members, slot = _member_lists(path_links, n_links)
    o_length, o_members, o_slot = np.zeros(n_links, np.int64), np.empty(n_hops, np.int64), np.empty(n_hops, np.int64)
    arrived, departed, in_total = np.zeros(n_links), np.zeros(n_links), np.zeros(n_links)
    busy, mark = np.zeros(n_links, np.bool_), np.zeros(n_links, np.int64)  # mark: when counted
    # each link's queue: a list of segments from head to tail, each the bits that arrived while
    # its input held one composition (from position seg_start to seg_end of the link's arrived
    # count; the tail is open), its hops and their rates in comp_hop, comp_rate
    head = np.full(n_links, -1, np.int64)
    last = np.full(n_links, -1, np.int64)
    seg_start, seg_end, seg_total = np.empty(n_segs), np.empty(n_segs), np.empty(n_segs)
    seg_comp, seg_len, seg_next = np.empty(n_segs, np.int64), np.empty(n_segs, np.int64), np.empty(n_segs, np.int64)
    free = np.arange(n_segs - 1, -1, -1)
    n_free = n_segs
    comp_hop, comp_rate = np.empty(n_entries, np.int64), np.empty(n_entries)
    comp_used = 0
    next_ps = np.full(n_links, -1, np.int64)  # when a link's output changes next
    alarm_ps = np.full(n_links, -1, np.int64)  # its earliest _LINK event in the heap
    dirty = np.zeros(n_links, np.int8)
    carried = np.zeros(n_links, np.int8)  # flags of an update put off to the next picosecond
    work = np.empty(n_links, np.int64)  # links to update now, a circular queue from w_head
    w_head = n_work = 0
    feed_hop, feed_rate = np.empty(n_hops, np.int64), np.empty(n_hops)  # hops entering at new rates
    n_feeds = 0
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
                if alarm_ps[link] != now:
                    continue  # superseded by an earlier one
                alarm_ps[link] = -1
                if next_ps[link] != now:  # the change is later now (or off): an alarm for it
                    if next_ps[link] > now:
                        if size == n_heap:
                            return begin_ps, finish_ps, link_bytes, events, updates, segments, end, True
                        size = _push(times, payloads, size, next_ps[link], 4 * link + _LINK)
                        alarm_ps[link] = next_ps[link]
                    continue
                next_ps[link] = -1
                if dirty[link] == 0:
                    work[w_head + n_work - (n_links if w_head + n_work >= n_links else 0)] = link
                    n_work += 1
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
                if size == n_heap:
                    return begin_ps, finish_ps, link_bytes, events, updates, segments, end, True
                sent_ps = now + max(np.int64(1), np.int64(round(nbytes[f] * 8.0 / cap[path_links[h]])))
                size = _push(times, payloads, size, sent_ps, 4 * f + _SENT)
                feed_hop[n_feeds], feed_rate[n_feeds] = h, cap[path_links[h]]
                n_feeds += 1
            elif kind == _SENT:
                sent[f] = True
                feed_hop[n_feeds], feed_rate[n_feeds] = h, 0.0
                n_feeds += 1
            else:  # its last byte is at the receiver
                finish_ps[f] = now
                if size + dependents_start[f + 1] - dependents_start[f] > n_heap:
                    return begin_ps, finish_ps, link_bytes, events, updates, segments, end, True
                for k in range(dependents_start[f], dependents_start[f + 1]):
                    d = dependents[k]
                    deps_left[d] -= 1
                    if deps_left[d] == 0:
                        at = max(start_ps[d], now + gap_ps[d])
                        size = _push(times, payloads, size, at, 4 * d + _START)
        passes = 0
        while n_feeds > 0 or n_work > 0:
            for i in range(n_feeds):  # each hop's link counted up to now at the old rates first
                h, rate = feed_hop[i], feed_rate[i]
                link = path_links[h]
                arrived[link], departed[link] = _moved(
                    arrived[link], departed[link], in_total[link], busy[link], cap[link], now - mark[link]
                )
                mark[link] = now
                if in_rate[h] == 0.0 and rate > 0.0:
                    slot[h] = first[link] + length[link]
                    members[slot[h]] = h
                    length[link] += 1
                elif in_rate[h] > 0.0 and rate == 0.0:
                    length[link] -= 1
                    moved = members[first[link] + length[link]]
                    members[slot[h]] = moved
                    slot[moved] = slot[h]
                in_total[link] += rate - in_rate[h]
                in_rate[h] = rate
                if dirty[link] == 0:
                    work[w_head + n_work - (n_links if w_head + n_work >= n_links else 0)] = link
                    n_work += 1
                dirty[link] |= _INPUT
            n_feeds = 0
            if n_work == 0:
                break
            link = work[w_head]
            w_head = w_head + 1 if w_head + 1 < n_links else 0
            n_work -= 1
            flags = dirty[link]
            dirty[link] = 0
            if passes >= _PASSES_PER_LINK * n_links or size == n_heap:
                # a cycle of links feeding each other (or no room for the next event): later
                carried[link] = flags
                next_ps[link] = now + 1
                if alarm_ps[link] == -1 or now + 1 < alarm_ps[link]:
                    if size == n_heap:
                        return begin_ps, finish_ps, link_bytes, events, updates, segments, end, True
                    size = _push(times, payloads, size, now + 1, 4 * link + _LINK)
                    alarm_ps[link] = now + 1
                continue
            passes += 1
            updates += 1
            arrived[link], departed[link] = _moved(
                arrived[link], departed[link], in_total[link], busy[link], cap[link], now - mark[link]
            )
            mark[link] = now
            if flags & _INPUT:  # a new segment where a queue holds or starts: the input's composition
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
                elif t != -1 or total > cap[link] * (1.0 + _TIE):  # a queue, or one starts
                    if n_free == 0:
                        return begin_ps, finish_ps, link_bytes, events, updates, segments, end, True
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
                    s = -1  # nothing waits and the link keeps up: its output is its input
                if s != -1:
                    n = length[link]
                    if comp_used + n > n_entries:  # compact: only queued segments' entries live on
                        comp_used = 0  # in place, in the order they lie: each moves down
                        order = np.argsort(seg_comp)
                        live = np.zeros(n_segs, np.bool_)
                        for j in range(n_links):
                            q = head[j]
                            while q != -1:
                                live[q] = q != s
                                q = seg_next[q]
                        for q in order:
                            if live[q]:
                                for k in range(seg_len[q]):
                                    comp_hop[comp_used + k] = comp_hop[seg_comp[q] + k]
                                    comp_rate[comp_used + k] = comp_rate[seg_comp[q] + k]
                                seg_comp[q] = comp_used
                                comp_used += seg_len[q]
                        if comp_used + n > n_entries:
                            return begin_ps, finish_ps, link_bytes, events, updates, segments, end, True
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
            for k in range(first[link], first[link] + o_length[link]):
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
                    o_slot[h] = first[link] + o_length[link]
                    o_members[o_slot[h]] = h
                    o_length[link] += 1
                elif rate == 0.0:
                    o_length[link] -= 1
                    moved = o_members[first[link] + o_length[link]]
                    o_members[o_slot[h]] = moved
                    o_slot[moved] = o_slot[h]
                out_rate[h] = rate
                f = hop_flow[h]
                if h + 1 < path_start[f + 1]:
                    feed_hop[n_feeds], feed_rate[n_feeds] = h + 1, rate
                    n_feeds += 1
                elif rate == 0.0 and sent[f] and state[f] == _ACTIVE:  # its last bit has left
                    state[f] = _DRAINED
                    for j in range(path_start[f], path_start[f + 1]):
                        link_bytes[path_links[j]] += nbytes[f]
                    if size == n_heap:
                        return begin_ps, finish_ps, link_bytes, events, updates, segments, end, True
                    size = _push(times, payloads, size, now + tail[f], 4 * f + _FINISH)
            # the next change of the output: the head segment leaves, or the queue empties; an
            # alarm only if none is set earlier (one set earlier finds the change later and sets
            # the next), so a queue whose end recedes as it grows leaves one event in the heap
            next_ps[link] = -1
            if busy[link]:
                wait = -1.0
                if head[link] != last[link]:
                    wait = (seg_end[head[link]] - departed[link]) / cap[link]
                elif in_total[link] < cap[link]:
                    wait = (arrived[link] - departed[link]) / (cap[link] - in_total[link])
                if wait >= 0.0:
                    next_ps[link] = now + max(np.int64(1), np.int64(round(wait)))
                    if alarm_ps[link] == -1 or next_ps[link] < alarm_ps[link]:
                        if size == n_heap:
                            return begin_ps, finish_ps, link_bytes, events, updates, segments, end, True
                        size = _push(times, payloads, size, next_ps[link], 4 * link + _LINK)
                        alarm_ps[link] = next_ps[link]
    return begin_ps, finish_ps, link_bytes, events, updates, segments, end, False


def simulate_buffered(links: Links, flows) -> tuple:
    """simulate_queued with room enough: it starts with room for every flow's event and a few
    segments a link, and runs again with twice the room while that runs out (rarely: the
    answer is the same)."""
    n_links, n_flows, n_hops = len(links.rate_bps), len(flows.nbytes), len(flows.path_links)
    room = (2 * n_flows + 4 * n_links, 4 * n_links + 64, 2 * n_hops + 64)
    while True:
        *result, short = simulate_queued(links, flows, room)
        if not short:
            return tuple(result)
        room = tuple(2 * r for r in room)
