"""The packet-level discrete-event engine (Numba): integer picoseconds, packets as rows of arrays.

Model. Directed links carry packets store-and-forward: a packet is serialised at the link's rate
(its bytes x 8 / rate, rounded to a picosecond) and arrives at the far end after the link's
propagation delay; each link has an output queue (FIFO) at its near end. A switch holds queued
packets in one shared buffer; a packet whose bytes do not fit is dropped. Hosts queue without
limit. Senders emit a flow's packets at a pace (the rate congestion control gives them),
the first one pace after the flow starts, into their NIC's queue, each on the flow's route of
the moment (a flow has one, or more when routing converges around a failure). A flow completes
when its last byte reaches the receiver; flows may wait for other flows (a DAG), starting `gap`
after the last of them completes.

Loss: a link loses a frame it finishes sending with its loss rate, and every frame while it is
down. With recovery on (it needs ACKs, which carry the receiver's count of packets in order) the
receiver answers the first packet beyond a gap with one NAK; go-back-N keeps only packets in
order and its sender resumes from the NAK's count, selective repeat keeps every packet and
resends only the one NAKed. A flow without ACK progress for the timeout resends from its first
unacknowledged packet, and gives up after `retries` timeouts in a row. A resend after a NAK or
a timeout goes at once, not a pace later.

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
factored out, 1.7 times slower, and 1.5 times with numba's inline="always"). Numba counts an
array's references up and down, atomically, on every such call and on every reassignment of an
array in a loop: the event loop passes helpers scalars, and the queue and the pool are
reassigned (grown) only in the loop around it. The queue's helpers are not inlined into the
loop (numba's inline="always"): that made the event-heavy references 10-20 % faster but the
engine's first compilation 2.3 times longer (24 s against 10 s), which every fresh install's
first run waits for.

Numba's on-disk cache keys a kernel on its own file, so the event queue, the packet pool and the named
tuples the kernel reads stay in this file (a helper edited elsewhere would leave the cached
kernel running the old code); the hooks are called through their addresses and cached on their
own. Only the shared columns (RATE ... OWN, MAX_INT_HOPS of _congestion.py) come from
elsewhere: after changing them, delete simulators/packet/__pycache__.
"""

from __future__ import annotations

import functools
import threading
from typing import NamedTuple

import llvmlite.ir
import numba
import numba.extending
import numpy as np
from numba.core.types.function_type import CompileResultWAP

from simulators._kernels import SignedHelpers
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
_SEND, _TX_DONE, _ARRIVE, _PAUSE, _RESUME, _CNP, _START, _ACK, _RTO = 0, 1, 2, 3, 4, 5, 6, 7, 8
_KIND_BITS = 4
# what a packet is: data, or a control frame going back (an ACK, or an ACK carrying a CNP;
# either may also be a NAK)
_DATA, _PLAIN_ACK, _CNP_ACK, _NAK = 0, 1, 2, 4
# loss recovery (Fabric.recovery): none (a lost packet stays lost), go-back-N, selective repeat
NO_RECOVERY, GO_BACK_N, SELECTIVE_REPEAT = 0, 1, 2
PS_PER_S = 1e12
CNP_BYTES = 64
NEVER_BYTES = np.iinfo(np.int64).max  # the queue adaptive routing sees on a link that is down
INT_WIDTH = 3 * MAX_INT_HOPS  # a data packet's telemetry: queue bytes, link bytes sent, time per hop
# A packet's fields, the columns of its row in the pool: its flow, bytes on the wire, position in
# path_links (an ACK: in reverse_links), ECN mark, whether it is its flow's last, what it is
# (_DATA, ...), its index in its flow (an ACK: the receiver's cumulative count), the route it
# takes (an ACK: back along its packet's), the next packet in its queue or the free list, and when
# its sender's NIC began sending it (its ACK echoes it). One row, not an array per field: a
# packet leaving a deep queue is then one or two cache misses, not one per field.
_P_FLOW, _P_BYTES, _P_HOP, _P_ECN, _P_LAST, _P_KIND, _P_SEQ, _P_ROUTE, _P_NEXT, _P_SENT_PS = range(10)
_P_WIDTH = 10
# The queue's and the serialisation's signatures, given: called with constants (an event kind),
# numba would otherwise compile a copy per literal value (15 of _push).
_I, _QUEUE = numba.int64, numba.int64[::1]
# The event queue orders events by (time, order of scheduling), as a binary heap on (time,
# sequence) would, exactly. Near events (within _Q_SLOTS slots of 2^_Q_SHIFT ps of the last one
# taken out: ~4 us, every serialisation and link delay of a fabric) wait on a timing wheel: a
# slot holds the events of its 4 ns in a list kept in order (nearly always by appending: a new
# event has the highest sequence), a bitmap of non-empty slots with a summary word finds the
# next one. Far events (starts after a gap, timeouts) wait in a radix heap (Ahuja, Mehlhorn,
# Orlin and Tarjan, J. ACM 1990) whose buckets are FIFO lists: an event at time t in bucket
# bit_length(t ^ last), `last` the time of the last far event taken out; when bucket 0 is empty
# the lowest non-empty bucket is spread around its earliest time, only when that time is the
# next event's (so `last` never passes the present). A lower bound on the far events' earliest
# time spares the heap on almost every event. The radix heap alone moved each event ~3 times
# between buckets, a third of the all-to-all's time. Every event must be at or after the last
# one taken out: an engine never schedules into the past. One flat int64 array of rows of
# _Q_WIDTH (flat: a row is then a shift away, where a 2-D array's runtime row length cost a
# multiply on every step of every list walk, 10-15 % of the engine): rows 0-1 the cells below,
# then the buckets' (head, tail), the bitmap words, the slots' (head, tail, the last event put
# in its middle), and from _Q_ENTRY the entries (time, payload, next, sequence).
_Q_SHIFT = 12
_Q_SLOTS = 1024  # 16 bitmap words (at most 64: the summary is one int64); 1024 ran as fast as 4096 of 1 ns
_Q_WIDTH = 4
_Q_BUCKET = 2  # rows 0 and 1 hold the 8 cells below
_Q_BITS = _Q_BUCKET + 64
_Q_SLOT = _Q_BITS + _Q_SLOTS // 64
_Q_ENTRY = _Q_SLOT + _Q_SLOTS
# the free-list head, the radix heap's `last` and bucket mask, the bitmap's summary, the
# number of events, the next sequence number, the far events' lower bound, the slot of the last
# event taken out
_FREE, _LAST, _BUCKETS, _SUMMARY, _COUNT, _NEXT_SEQ, _FAR_BOUND, _CURSOR = range(8)
# an entry's cells, and a bucket's or a slot's
_TIME, _PAYLOAD, _NEXT, _SEQ = range(4)
_HEAD, _TAIL, _HINT = range(3)
_NO_TIME = np.iinfo(np.int64).max
_HELPERS = SignedHelpers()  # the queue's helpers, each with its one signature (simulators/_kernels.py)


@numba.extending.intrinsic
def _bit_length(typingctx, x):
    """Bits needed for non-negative x (0 for 0): 64 less its leading zeros (one instruction)."""

    def codegen(context, builder, signature, args):
        zeros = builder.ctlz(args[0], llvmlite.ir.Constant(llvmlite.ir.IntType(1), 0))
        return builder.sub(llvmlite.ir.Constant(llvmlite.ir.IntType(64), 64), zeros)

    return _I(_I), codegen


@numba.extending.intrinsic
def _lowest_bit(typingctx, x):
    """The index of x's lowest set bit (x != 0)."""

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], llvmlite.ir.Constant(llvmlite.ir.IntType(1), 0))

    return _I(_I), codegen


@_HELPERS.njit(_QUEUE(_I), error_model="numpy")
def _queue(capacity):
    """An empty queue with room for `capacity` events."""
    q = np.full(_Q_WIDTH * (_Q_ENTRY + capacity), -1, np.int64)
    for i in range(_Q_ENTRY, _Q_ENTRY + capacity - 1):
        q[_Q_WIDTH * i + _NEXT] = i + 1
    for w in range(_Q_SLOTS // 64):
        q[_Q_WIDTH * (_Q_BITS + w)] = 0
    q[_FREE], q[_LAST], q[_BUCKETS], q[_SUMMARY] = _Q_ENTRY, 0, 0, 0
    q[_COUNT], q[_NEXT_SEQ], q[_FAR_BOUND], q[_CURSOR] = 0, 0, _NO_TIME, 0
    return q


@_HELPERS.njit(_I(_QUEUE), error_model="numpy")
def _room(q):
    """Events the queue can take before it must grow."""
    return len(q) // _Q_WIDTH - _Q_ENTRY - q[_COUNT]


@_HELPERS.njit(_QUEUE(_QUEUE), error_model="numpy")
def _grow_queue(q):
    """The queue with twice the room, its events in place."""
    old = len(q) // _Q_WIDTH
    q = np.concatenate((q, np.full(_Q_WIDTH * (old - _Q_ENTRY), -1, np.int64)))
    new = len(q) // _Q_WIDTH
    for i in range(old, new - 1):
        q[_Q_WIDTH * i + _NEXT] = i + 1
    q[_Q_WIDTH * (new - 1) + _NEXT] = q[_FREE]
    q[_FREE] = old
    return q


@_HELPERS.njit(numba.void(_QUEUE, _I, _I), error_model="numpy")
def _append(q, b, i):
    """Put entry i at the end of bucket b (marking the bucket non-empty)."""
    bucket = _Q_WIDTH * (_Q_BUCKET + b)
    if q[bucket + _TAIL] < 0:
        q[bucket + _HEAD] = i
        q[_BUCKETS] |= np.int64(1) << b
    else:
        q[_Q_WIDTH * q[bucket + _TAIL] + _NEXT] = i
    q[bucket + _TAIL] = i


@_HELPERS.njit(numba.void(_QUEUE, _I, _I, _I), error_model="numpy")
def _push(q, t, kind, a):
    """Schedule event (kind, a) at time t (>= the last event's), after every event already at t."""
    i = q[_FREE]
    e = _Q_WIDTH * i
    q[_FREE] = q[e + _NEXT]
    q[e + _TIME], q[e + _PAYLOAD], q[e + _NEXT], q[e + _SEQ] = t, (a << _KIND_BITS) + kind, -1, q[_NEXT_SEQ]
    q[_NEXT_SEQ] += 1
    q[_COUNT] += 1
    if (t >> _Q_SHIFT) - q[_CURSOR] >= _Q_SLOTS:  # far
        _append(q, _bit_length(t ^ q[_LAST]), i)
        q[_FAR_BOUND] = min(q[_FAR_BOUND], t)
        return
    s = (t >> _Q_SHIFT) & (_Q_SLOTS - 1)
    slot = _Q_WIDTH * (_Q_SLOT + s)
    tail = q[slot + _TAIL]
    if tail < 0:
        q[slot + _HEAD], q[slot + _TAIL] = i, i
        q[_Q_WIDTH * (_Q_BITS + (s >> 6))] |= np.int64(1) << (s & 63)
        q[_SUMMARY] |= np.int64(1) << (s >> 6)
    elif q[_Q_WIDTH * tail + _TIME] <= t:
        q[_Q_WIDTH * tail + _NEXT] = i
        q[slot + _TAIL] = i
    else:  # before the first event of the slot later than t, looked for from the last put here so
        # (events at one time come in runs: a walk from the head crossed each run once per event)
        before, j = -1, q[slot + _HEAD]
        hint = q[slot + _HINT]
        if hint >= 0 and q[_Q_WIDTH * hint + _TIME] <= t:
            before, j = hint, q[_Q_WIDTH * hint + _NEXT]
        while q[_Q_WIDTH * j + _TIME] <= t:
            before, j = j, q[_Q_WIDTH * j + _NEXT]
        q[e + _NEXT] = j
        q[slot + _HINT] = i
        if before < 0:
            q[slot + _HEAD] = i
        else:
            q[_Q_WIDTH * before + _NEXT] = i


@_HELPERS.njit(numba.types.UniTuple(_I, 3)(_QUEUE), error_model="numpy")
def _pop(q):
    """Remove the earliest event (the first scheduled of the earliest); returns (t, kind, a)."""
    slot, j, t = -1, -1, _NO_TIME
    if q[_SUMMARY] != 0:  # the wheel's first: the first non-empty slot from the last event's, round
        c = q[_CURSOR] & (_Q_SLOTS - 1)
        w = c >> 6
        bits = q[_Q_WIDTH * (_Q_BITS + w)] & (np.int64(-1) << (c & 63))
        if bits == 0:
            later = q[_SUMMARY] & (np.int64(-2) << w)
            w = _lowest_bit(later if later != 0 else q[_SUMMARY])
            bits = q[_Q_WIDTH * (_Q_BITS + w)]
        slot = _Q_WIDTH * (_Q_SLOT + (w << 6) + _lowest_bit(bits))
        j = q[slot + _HEAD]
        t = q[_Q_WIDTH * j + _TIME]
    if q[_FAR_BOUND] <= t:  # a far event may come first: find the earliest
        if q[_Q_WIDTH * _Q_BUCKET + _HEAD] < 0:
            b = _lowest_bit(q[_BUCKETS])
            bucket = _Q_WIDTH * (_Q_BUCKET + b)
            i = q[bucket + _HEAD]
            first = q[_Q_WIDTH * i + _TIME]
            while i >= 0:
                first = min(first, q[_Q_WIDTH * i + _TIME])
                i = q[_Q_WIDTH * i + _NEXT]
            q[_FAR_BOUND] = first
            if first <= t:  # it does (or ties): spread its bucket around it
                q[_LAST] = first
                i = q[bucket + _HEAD]
                q[bucket + _HEAD], q[bucket + _TAIL] = -1, -1
                q[_BUCKETS] &= ~(np.int64(1) << b)
                while i >= 0:
                    after = q[_Q_WIDTH * i + _NEXT]
                    q[_Q_WIDTH * i + _NEXT] = -1
                    _append(q, _bit_length(q[_Q_WIDTH * i + _TIME] ^ first), i)
                    i = after
        i = q[_Q_WIDTH * _Q_BUCKET + _HEAD]
        e = _Q_WIDTH * i
        if i >= 0 and (q[e + _TIME] < t or (q[e + _TIME] == t and q[e + _SEQ] < q[_Q_WIDTH * j + _SEQ])):
            q[_Q_WIDTH * _Q_BUCKET + _HEAD] = q[e + _NEXT]
            if q[e + _NEXT] < 0:
                q[_Q_WIDTH * _Q_BUCKET + _TAIL] = -1
                q[_BUCKETS] &= ~np.int64(1)
                q[_FAR_BOUND] = q[_LAST] + 1 if q[_BUCKETS] != 0 else _NO_TIME  # a bound: later ones are later
            slot, j = -1, i
    e = _Q_WIDTH * j
    if slot >= 0:  # the wheel's
        q[slot + _HEAD] = q[e + _NEXT]
        if q[slot + _HINT] == j:
            q[slot + _HINT] = -1
        if q[e + _NEXT] < 0:
            q[slot + _TAIL] = -1
            s = slot // _Q_WIDTH - _Q_SLOT
            q[_Q_WIDTH * (_Q_BITS + (s >> 6))] &= ~(np.int64(1) << (s & 63))
            if q[_Q_WIDTH * (_Q_BITS + (s >> 6))] == 0:
                q[_SUMMARY] &= ~(np.int64(1) << (s >> 6))
    q[_CURSOR] = q[e + _TIME] >> _Q_SHIFT
    q[e + _NEXT] = q[_FREE]
    q[_FREE] = j
    q[_COUNT] -= 1
    return q[e + _TIME], q[e + _PAYLOAD] & ((1 << _KIND_BITS) - 1), q[e + _PAYLOAD] >> _KIND_BITS


@numba.njit(cache=True, error_model="numpy")
def _grow_pool(pkt, pkt_int):
    """The packet pool and the telemetry rows at twice their rows, the old ones copied: rows are
    handed out from the free list, else the first never used (np.empty: pages untouched until
    then cost nothing)."""
    bigger = np.empty((2 * len(pkt), pkt.shape[1]), np.int64)
    bigger_int = np.empty((2 * len(pkt), pkt_int.shape[1]), np.int64)
    _copy_rows(pkt, bigger)
    _copy_rows(pkt_int, bigger_int)
    return bigger, bigger_int


@numba.njit(cache=True, error_model="numpy")
def _copy_rows(a, b):
    """b's first rows = a (flat: a 2-D slice assignment compiles for seconds)."""
    a, b = a.reshape(-1), b.reshape(-1)
    for i in range(len(a)):
        b[i] = a[i]


@numba.njit(cache=True, error_model="numpy")
def _uniform(rng_state):
    """A uniform draw in [0, 1) from the xorshift64* state; returns (draw, next state)."""
    rng_state ^= rng_state >> np.uint64(12)
    rng_state ^= rng_state << np.uint64(25)
    rng_state ^= rng_state >> np.uint64(27)
    return ((rng_state * np.uint64(2685821657736338717)) >> np.uint64(11)) / 9007199254740992.0, rng_state


@numba.njit(cache=True, error_model="numpy")
def _in_flight(recovery, in_flight, next_seq, highest_sent, acked, mtu):
    """Bytes a flow has sent and not had acknowledged: counted per ACK without recovery; with
    it, the packets from the cumulative ACK to the next to send (go-back-N resends all of them)
    or to the highest sent (selective repeat). Its flow's values, not arrays: an array argument
    costs a reference count up and down a call."""
    if recovery == NO_RECOVERY:
        return in_flight
    return ((next_seq if recovery == GO_BACK_N else highest_sent) - acked) * mtu


@numba.njit(cache=True, error_model="numpy")
def _go_back(recovery, f, s, next_seq, resend_seq):
    """Flow f resends from packet s: go-back-N sends everything from s again, selective repeat
    only s."""
    if recovery == GO_BACK_N:
        next_seq[f] = min(next_seq[f], s)
    else:
        resend_seq[f] = s


@_HELPERS.njit(_I(_I, numba.float64), error_model="numpy")
def _ser_ps(nbytes, rate_bps):
    return np.int64(round(nbytes * 8.0 * PS_PER_S / rate_bps))


class Links(NamedTuple):
    """One entry per directed link."""

    rate_bps: np.ndarray  # float64
    delay_ps: np.ndarray  # int64
    to: np.ndarray  # int64: the node it feeds
    xoff_bytes: np.ndarray  # int64: PFC thresholds of the switch port it feeds
    xon_bytes: np.ndarray
    loss_rate: np.ndarray  # float64: the chance a frame is lost on the wire
    down_from_ps: np.ndarray  # int64: the link loses every frame it finishes in [from, until)
    down_until_ps: np.ndarray


class Flows(NamedTuple):
    """One entry per flow (int64); paths, dependants and reverse paths as CSR lists."""

    nbytes: np.ndarray
    mtu: np.ndarray
    start_ps: np.ndarray
    gap_ps: np.ndarray
    path_start: np.ndarray  # route r's links: path_links[path_start[r]:path_start[r + 1]]
    path_links: np.ndarray
    dep_count: np.ndarray  # flows each waits for
    dependents_start: np.ndarray  # flows waiting for f: dependents[dependents_start[f]:...]
    dependents: np.ndarray
    reverse_start: np.ndarray  # its ACKs' links, receiver to sender (empty without ACKs)
    reverse_links: np.ndarray
    # Flow f's routes route_list[route_start[f]:route_start[f + 1]], route f first; a packet
    # takes the last of them whose route_from_ps has come when it is sent (a reroute).
    route_start: np.ndarray
    route_list: np.ndarray
    route_from_ps: np.ndarray


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
    recovery: int  # NO_RECOVERY, GO_BACK_N or SELECTIVE_REPEAT
    rto_ps: int  # retransmission timeout: no cumulative ACK progress for this long resends
    retries: int  # timeouts in a row after which a flow fails (the NIC's retry count)
    reorder_packets: int  # the receiver NAKs a gap once it holds a packet this far beyond it
    adaptive: bool  # at each switch a packet takes the least-queued of its flow's routes


@numba.njit(cache=True, error_model="numpy", nogil=True)  # threads run candidates side by side
def _simulate(
    links, flows, fabric, cc_params, cc_columns, on_start, on_timer, on_marked, on_cnp, on_ack
):  # pragma: no cover - compiled
    # every array out of its tuple once, before the loop
    link_rate_bps, link_delay_ps, link_to, xoff_bytes, xon_bytes, loss_rate, down_from_ps, down_until_ps = links
    flow_bytes, flow_mtu, start_ps, gap_ps, path_start, path_links, dep_count = flows[:7]
    dependents_start, dependents, reverse_start, reverse_links, route_start, route_list, route_from_ps = flows[7:]
    pfc_on, ecn_on, acks_on, int_on = fabric.pfc, fabric.ecn, fabric.acks, fabric.telemetry
    kmin_bytes, kmax_bytes = fabric.kmin_bytes, fabric.kmax_bytes
    n_links = len(link_rate_bps)
    ps_per_byte = 8.0 * PS_PER_S / link_rate_bps  # serialisation: one multiply per packet
    n_flows = len(flow_bytes)
    # ---- events
    queue = _queue(1024 + 4 * n_flows + 4 * n_links)
    # ---- packets (a pool; free slots chained)
    # Room for every packet of the run at once (as deep NIC queues hold), up to 2^20 rows, then
    # doubling: np.empty, so pages never reached cost nothing; growing costs a copy.
    pcap = 1024
    for f in range(n_flows):
        pcap += (flow_bytes[f] + flow_mtu[f] - 1) // flow_mtu[f]
    pcap = min(pcap, 1 << 20)
    pkt = np.empty((pcap, _P_WIDTH), np.int64)  # a row per packet (the _P_ columns)
    pkt_int = np.empty((pcap, INT_WIDTH if int_on else 0), np.int64)
    free_head = -1  # freed rows, chained
    fresh = 0  # rows from here on have never been used
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
    lost = np.zeros(n_links, np.int64)  # frames lost on the wire (random loss, a link down)
    faulty = (loss_rate > 0.0) | (down_from_ps < down_until_ps)
    # ---- flows
    n_packets = np.zeros(n_flows, np.int64)
    recovery = fabric.recovery
    # sender: the next new packet, one to resend first (selective repeat; -1: none), the
    # cumulative ACK, when it last advanced, whether a send and a timeout check are scheduled
    next_seq = np.zeros(n_flows, np.int64)
    resend_seq = np.full(n_flows, -1, np.int64)
    acked = np.zeros(n_flows, np.int64)
    progress_ps = np.zeros(n_flows, np.int64)
    sending = np.zeros(n_flows, np.bool_)
    rto_due = np.zeros(n_flows, np.bool_)
    retransmits = np.zeros(n_flows, np.int64)
    timeouts = np.zeros(n_flows, np.int64)
    stalls = np.zeros(n_flows, np.int64)  # timeouts since the last progress
    failed = np.zeros(n_flows, np.bool_)  # more than `retries` timeouts in a row: given up
    # receiver: the next packet in order, the one it last sent a NAK for and (selective repeat)
    # the highest it holds and which it holds, flow f's from got_start[f]
    expected = np.zeros(n_flows, np.int64)
    nak_for = np.full(n_flows, -1, np.int64)
    highest = np.full(n_flows, -1, np.int64)
    highest_sent = np.zeros(n_flows, np.int64)  # packets below it were sent before: a resend
    in_flight = np.zeros(n_flows, np.int64)  # without recovery: bytes sent and not yet acknowledged
    blocked = np.zeros(n_flows, np.bool_)  # at its window: the next ACK below it resumes the sender
    received_bytes = np.zeros(n_flows, np.int64)
    window_bytes = np.zeros(n_flows, np.int64)  # delivered within [window_start_ps, window_end_ps)
    finish_ps = np.full(n_flows, -1, np.int64)
    begin_ps = np.full(n_flows, -1, np.int64)
    deps_left = dep_count.copy()
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
            _push(queue, start_ps[f], _START, f)
    got_start = np.zeros(n_flows + 1, np.int64)
    if recovery == SELECTIVE_REPEAT:
        for f in range(n_flows):  # a loop, not a slice assignment: its shape check compiles for seconds
            got_start[f + 1] = got_start[f] + n_packets[f]
    got = np.zeros(got_start[n_flows], np.bool_)
    rng_state = np.uint64(fabric.seed) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)
    done = 0
    now = np.int64(0)
    events = 0
    # Room for what one event schedules: a few events, or a START per flow waiting on the one
    # that completes.
    fanout = 0
    for f in range(n_flows):
        fanout = max(fanout, dependents_start[f + 1] - dependents_start[f])
    per_event = 8 + fanout
    while queue[_COUNT] > 0:
        # The queue and the pool grow here, out of the loop of events: an array reassigned in
        # that loop costs a reference count up and down every event.
        while _room(queue) < 64 * per_event:
            queue = _grow_queue(queue)
        if free_head < 0 and fresh == len(pkt):
            pkt, pkt_int = _grow_pool(pkt, pkt_int)
        budget = _room(queue) // per_event
        while budget > 0 and (free_head >= 0 or fresh < len(pkt)) and queue[_COUNT] > 0:  # a SEND takes a row
            budget -= 1
            now, kind, a = _pop(queue)
            events += 1
            kick = -1  # the link that may start its next transmission once the event is handled
            resend = False  # a sender's next packet, scheduled after that transmission
            deliver = -1  # a data packet that reached its receiver at `arrival`
            arrival = now
            if kind == _START:
                f = a
                begin_ps[f] = now
                progress_ps[f] = now
                sending[f] = True
                on_start(state, cc_params, f, now)
                pace = _ser_ps(min(flow_mtu[f], flow_bytes[f]), state[f, RATE])
                _push(queue, now + pace, _SEND, f)
            elif kind == _SEND and failed[a]:
                sending[a] = False
            elif kind == _SEND:
                f = a
                if now >= state[f, TIMER]:
                    on_timer(state, cc_params, f, now)
                if (
                    resend_seq[f] < 0
                    and _in_flight(recovery, in_flight[f], next_seq[f], highest_sent[f], acked[f], flow_mtu[f])
                    >= (state[f, WINDOW])
                ):  # at its window (a resend goes regardless): an ACK resumes it
                    blocked[f] = True
                    sending[f] = False
                    continue
                # the packet (the loop above keeps one free)
                if free_head >= 0:
                    p = free_head
                    free_head = pkt[p, _P_NEXT]
                else:
                    p = fresh
                    fresh += 1
                s = next_seq[f]
                if resend_seq[f] >= 0:
                    s = resend_seq[f]
                    resend_seq[f] = -1
                else:
                    next_seq[f] += 1
                nbytes = flow_mtu[f] if s < n_packets[f] - 1 else flow_bytes[f] - (n_packets[f] - 1) * flow_mtu[f]
                pkt[p, _P_FLOW] = f
                pkt[p, _P_BYTES] = nbytes
                r = f  # its own route, unless a reroute has taken effect
                for k in range(route_start[f] + 1, route_start[f + 1]):
                    if route_from_ps[route_list[k]] > now:
                        break
                    r = route_list[k]
                pkt[p, _P_ROUTE] = r
                pkt[p, _P_HOP] = path_start[r]
                pkt[p, _P_ECN] = False
                pkt[p, _P_LAST] = s == n_packets[f] - 1
                pkt[p, _P_KIND] = _DATA
                pkt[p, _P_SEQ] = s
                pkt[p, _P_NEXT] = -1
                if recovery != NO_RECOVERY:
                    if s < highest_sent[f]:
                        retransmits[f] += 1
                    else:
                        highest_sent[f] = s + 1
                    if not rto_due[f]:
                        rto_due[f] = True
                        _push(queue, max(now, progress_ps[f] + fabric.rto_ps), _RTO, f)
                else:
                    in_flight[f] += nbytes
                link = path_links[path_start[r]]
                # enqueue at the host's NIC (hosts do not drop or pause their senders)
                if q_tail[link] < 0:
                    q_head[link] = p
                else:
                    pkt[q_tail[link], _P_NEXT] = p
                q_tail[link] = p
                q_bytes[link] += nbytes
                q_max[link] = max(q_max[link], q_bytes[link])
                kick = link
                resend = next_seq[f] < n_packets[f] or resend_seq[f] >= 0
                sending[f] = resend
            elif kind == _TX_DONE and tx_control[a]:  # a control frame left: on to the next hop
                link = a
                tx_control[link] = False
                p = c_head[link]
                c_head[link] = pkt[p, _P_NEXT]
                if c_head[link] < 0:
                    c_tail[link] = -1
                link_bytes[link] += pkt[p, _P_BYTES]
                if faulty[link] and down_from_ps[link] <= now < down_until_ps[link]:
                    lost[link] += 1
                    pkt[p, _P_NEXT] = free_head
                    free_head = p
                else:
                    _push(queue, now + link_delay_ps[link], _ARRIVE, p)
                busy[link] = False
                kick = link
            elif kind == _TX_DONE:
                link = a
                p = q_head[link]
                q_head[link] = pkt[p, _P_NEXT]
                if q_head[link] < 0:
                    q_tail[link] = -1
                q_bytes[link] -= pkt[p, _P_BYTES]
                link_bytes[link] += pkt[p, _P_BYTES]
                r = pkt[p, _P_ROUTE]
                if pkt[p, _P_HOP] > path_start[r]:  # it left a switch: free its buffer
                    inbound = path_links[pkt[p, _P_HOP] - 1]
                    shared_used[link_to[inbound]] -= pkt[p, _P_BYTES]
                    in_switch[inbound] -= pkt[p, _P_BYTES]
                    if pfc_on and pause_sent[inbound] and in_switch[inbound] <= xon_bytes[inbound]:
                        pause_sent[inbound] = False
                        _push(queue, now + link_delay_ps[inbound], _RESUME, inbound)
                else:  # it left its sender's NIC, which stamps when it began sending it
                    pkt[p, _P_SENT_PS] = now - np.int64(round(pkt[p, _P_BYTES] * ps_per_byte[link]))
                f = pkt[p, _P_FLOW]
                gone = False
                if faulty[link]:
                    gone = down_from_ps[link] <= now < down_until_ps[link]
                    if not gone and loss_rate[link] > 0.0:
                        u, rng_state = _uniform(rng_state)
                        gone = u < loss_rate[link]
                if gone:
                    lost[link] += 1
                    pkt[p, _P_NEXT] = free_head
                    free_head = p
                elif pkt[p, _P_HOP] == path_start[r + 1] - 1 and not pkt[p, _P_LAST]:
                    # Reaching the receiver changes nothing but its count until the flow's last
                    # packet (which does get an event: completion starts dependants).
                    deliver = p
                    arrival = now + link_delay_ps[link]
                else:
                    _push(queue, now + link_delay_ps[link], _ARRIVE, p)
                busy[link] = False
                kick = link
            elif kind == _ARRIVE and pkt[a, _P_KIND] != _DATA:  # a control frame on its way back
                p = a
                f = pkt[p, _P_FLOW]
                if pkt[p, _P_HOP] == reverse_start[pkt[p, _P_ROUTE] + 1] - 1:  # at the sender: the data packet's echo
                    if recovery != NO_RECOVERY:
                        if pkt[p, _P_SEQ] > acked[f]:
                            acked[f] = pkt[p, _P_SEQ]
                            progress_ps[f] = now
                            stalls[f] = 0
                        if pkt[p, _P_KIND] & _NAK:  # resend from the first packet the receiver lacks
                            _go_back(recovery, f, pkt[p, _P_SEQ], next_seq, resend_seq)
                            if not sending[f]:
                                sending[f] = True
                                blocked[f] = False
                                _push(queue, now, _SEND, f)
                    else:
                        last_bytes = flow_bytes[f] - (n_packets[f] - 1) * flow_mtu[f]
                        in_flight[f] -= flow_mtu[f] if not pkt[p, _P_LAST] else last_bytes
                    state[f, RTT_PS] = now - pkt[p, _P_SENT_PS]
                    if int_on:
                        r = pkt[p, _P_ROUTE]
                        hops = path_start[r + 1] - path_start[r] - 1
                        state[f, INT_HOPS] = hops
                        for i in range(hops):
                            state[f, INT + 4 * i + INT_QLEN] = pkt_int[p, 3 * i]
                            state[f, INT + 4 * i + INT_TX_BYTES] = pkt_int[p, 3 * i + 1]
                            state[f, INT + 4 * i + INT_TS_PS] = pkt_int[p, 3 * i + 2]
                            state[f, INT + 4 * i + INT_RATE_BPS] = link_rate_bps[path_links[path_start[r] + 1 + i]]
                    if pkt[p, _P_KIND] & _CNP_ACK:
                        _push(queue, now, _CNP, f)
                    else:
                        on_ack(state, cc_params, f, now)
                    pkt[p, _P_NEXT] = free_head
                    free_head = p
                    if (
                        blocked[f]
                        and not sending[f]
                        and _in_flight(recovery, in_flight[f], next_seq[f], highest_sent[f], acked[f], flow_mtu[f])
                        < state[f, WINDOW]
                    ):  # the window opened: send now
                        blocked[f] = False
                        sending[f] = True
                        _push(queue, now, _SEND, f)
                    continue
                pkt[p, _P_HOP] += 1
                link = reverse_links[pkt[p, _P_HOP]]
                pkt[p, _P_NEXT] = -1
                if c_tail[link] < 0:
                    c_head[link] = p
                else:
                    pkt[c_tail[link], _P_NEXT] = p
                c_tail[link] = p
                kick = link
            elif kind == _ARRIVE and pkt[a, _P_HOP] == path_start[pkt[a, _P_ROUTE] + 1] - 1:  # at the receiver
                deliver = a
            elif kind == _ARRIVE:  # at a switch
                p = a
                f = pkt[p, _P_FLOW]
                if fabric.adaptive and route_start[f + 1] - route_start[f] > 1:
                    # adaptive routing: of the flow's routes through this switch so far, the one
                    # whose next link has the fewest bytes queued (the current one on a tie); a link
                    # that is down counts as full, as a switch skips a dead port
                    r = pkt[p, _P_ROUTE]
                    h = pkt[p, _P_HOP] - path_start[r]
                    nl = path_links[pkt[p, _P_HOP] + 1]
                    dead = faulty[nl] and down_from_ps[nl] <= now < down_until_ps[nl]
                    best, best_q = r, NEVER_BYTES if dead else q_bytes[nl]
                    for k in range(route_start[f], route_start[f + 1]):
                        rk = route_list[k]
                        if path_start[rk + 1] - path_start[rk] <= h + 1 or rk == r:
                            continue
                        same = True
                        for i in range(h + 1):
                            if path_links[path_start[rk] + i] != path_links[path_start[r] + i]:
                                same = False
                                break
                        nl = path_links[path_start[rk] + h + 1]
                        if (
                            same
                            and q_bytes[nl] < best_q
                            and not (faulty[nl] and down_from_ps[nl] <= now < down_until_ps[nl])
                        ):
                            best, best_q = rk, q_bytes[nl]
                    pkt[p, _P_ROUTE] = best
                    pkt[p, _P_HOP] = path_start[best] + h
                inbound = path_links[pkt[p, _P_HOP]]
                node = link_to[inbound]
                out = path_links[pkt[p, _P_HOP] + 1]
                nbytes = pkt[p, _P_BYTES]
                if shared_used[node] + nbytes > fabric.buffer_bytes:
                    drops[out] += 1
                    pkt[p, _P_NEXT] = free_head
                    free_head = p
                    continue
                if ecn_on and not pkt[p, _P_ECN] and q_bytes[out] > kmin_bytes:
                    if q_bytes[out] >= kmax_bytes:
                        pkt[p, _P_ECN] = True
                    else:
                        u, rng_state = _uniform(rng_state)
                        if u < fabric.pmax * (q_bytes[out] - kmin_bytes) / (kmax_bytes - kmin_bytes):
                            pkt[p, _P_ECN] = True
                shared_used[node] += nbytes
                in_switch[inbound] += nbytes
                if pfc_on and not pause_sent[inbound] and in_switch[inbound] > xoff_bytes[inbound]:
                    pause_sent[inbound] = True
                    pauses[inbound] += 1
                    _push(queue, now + link_delay_ps[inbound], _PAUSE, inbound)
                pkt[p, _P_HOP] += 1
                pkt[p, _P_NEXT] = -1
                if q_tail[out] < 0:
                    q_head[out] = p
                else:
                    pkt[q_tail[out], _P_NEXT] = p
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
            elif kind == _ACK:  # the receiver's 64-byte acknowledgement (built on delivery) sets off back
                p = a
                link = reverse_links[reverse_start[pkt[p, _P_ROUTE]]]
                if c_tail[link] < 0:
                    c_head[link] = p
                else:
                    pkt[c_tail[link], _P_NEXT] = p
                c_tail[link] = p
                kick = link
            elif kind == _CNP:
                cnps[a] += 1
                on_cnp(state, cc_params, a, now)
            elif kind == _RTO:  # no cumulative ACK progress for a timeout: resend from the first unacked
                f = a
                rto_due[f] = False
                if acked[f] < n_packets[f] and not failed[f]:
                    due = progress_ps[f] + fabric.rto_ps
                    if now >= due and stalls[f] == fabric.retries:
                        failed[f] = True
                        continue
                    if now >= due:
                        timeouts[f] += 1
                        stalls[f] += 1
                        progress_ps[f] = now
                        _go_back(recovery, f, acked[f], next_seq, resend_seq)
                        if not sending[f]:
                            sending[f] = True
                            blocked[f] = False
                            _push(queue, now, _SEND, f)
                        due = now + fabric.rto_ps
                    rto_due[f] = True
                    _push(queue, due, _RTO, f)
            # A data packet at its receiver: counted, perhaps answered with a CNP, acknowledged; the
            # flow's last byte completes it and starts the flows waiting for it.
            if deliver >= 0:
                p = deliver
                f = pkt[p, _P_FLOW]
                # Go-back-N keeps only the next packet in order; selective repeat every packet it
                # lacks. A gap (a packet beyond the next in order) is answered with one NAK.
                s = pkt[p, _P_SEQ]
                accept = True
                gap = False
                if recovery == GO_BACK_N:
                    accept = s == expected[f]
                    gap = s >= expected[f] + fabric.reorder_packets
                    expected[f] += accept
                elif recovery == SELECTIVE_REPEAT:
                    accept = not got[got_start[f] + s]
                    got[got_start[f] + s] = True
                    highest[f] = max(highest[f], s)
                    while expected[f] < n_packets[f] and got[got_start[f] + expected[f]]:
                        expected[f] += 1
                    gap = highest[f] >= expected[f] + fabric.reorder_packets
                nak = gap and nak_for[f] != expected[f]
                if nak:
                    nak_for[f] = expected[f]
                if accept:
                    received_bytes[f] += pkt[p, _P_BYTES]
                    if fabric.window_start_ps <= arrival < fabric.window_end_ps:
                        window_bytes[f] += pkt[p, _P_BYTES]
                cnp = False
                if pkt[p, _P_ECN]:
                    marked[f] += 1
                    if on_marked(state, cc_params, f, arrival):
                        cnp = True
                        if not acks_on:  # the CNP alone, in the reverse path's latency
                            _push(queue, arrival + reverse_ps[f], _CNP, f)
                if acks_on:  # the receiver acknowledges every packet (a CNP, a NAK ride on it)
                    pkt[p, _P_FLOW] = f
                    pkt[p, _P_BYTES] = CNP_BYTES
                    pkt[p, _P_HOP] = reverse_start[pkt[p, _P_ROUTE]]
                    pkt[p, _P_KIND] = (_CNP_ACK if cnp else _PLAIN_ACK) | (_NAK if nak else 0)
                    pkt[p, _P_SEQ] = expected[f]
                    pkt[p, _P_NEXT] = -1
                    _push(queue, arrival, _ACK, p)
                else:
                    pkt[p, _P_NEXT] = free_head
                    free_head = p
                if accept and received_bytes[f] == flow_bytes[f]:
                    finish_ps[f] = arrival
                    done += 1
                    for k in range(dependents_start[f], dependents_start[f + 1]):
                        d = dependents[k]
                        deps_left[d] -= 1
                        if deps_left[d] == 0:
                            at = max(start_ps[d], arrival + gap_ps[d])
                            _push(queue, at, _START, d)
            # One place for every event that queued a frame or freed a link: start the link's next
            # transmission, control frames first (strict priority, never paused), then data.
            if kick >= 0 and not busy[kick]:
                nxt = c_head[kick] if c_head[kick] >= 0 else (q_head[kick] if not paused[kick] else -1)
                if nxt >= 0:
                    busy[kick] = True
                    tx_control[kick] = c_head[kick] >= 0
                    if int_on and not tx_control[kick] and pkt[nxt, _P_HOP] > path_start[pkt[nxt, _P_ROUTE]]:
                        # a switch's egress dequeues it: the bytes left behind it, the link's bytes
                        # sent with it, the time (as ns-3 HPCC's switch stamps INT at dequeue)
                        i = 3 * (pkt[nxt, _P_HOP] - path_start[pkt[nxt, _P_ROUTE]] - 1)
                        pkt_int[nxt, i] = q_bytes[kick] - pkt[nxt, _P_BYTES]
                        pkt_int[nxt, i + 1] = link_bytes[kick] + pkt[nxt, _P_BYTES]
                        pkt_int[nxt, i + 2] = now
                    done_ps = now + np.int64(round(pkt[nxt, _P_BYTES] * ps_per_byte[kick]))
                    _push(queue, done_ps, _TX_DONE, kick)
            if resend:
                s = resend_seq[f] if resend_seq[f] >= 0 else next_seq[f]
                nxt = flow_mtu[f] if s < n_packets[f] - 1 else flow_bytes[f] - (n_packets[f] - 1) * flow_mtu[f]
                _push(queue, now + _ser_ps(nxt, state[f, RATE]), _SEND, f)
    return (
        begin_ps,
        finish_ps,
        link_bytes,
        q_max,
        pauses,
        drops,
        lost,
        retransmits,
        timeouts,
        failed,
        cnps,
        marked,
        window_bytes,
        events,
        now,
        state,
    )


@functools.cache
def _signature():
    """Argument types of the one compiled engine: the hooks are first-class function values."""
    ints, floats = numba.int64[::1], numba.float64[::1]
    links = numba.types.NamedTuple([floats] + [ints] * 4 + [floats] + [ints] * 2, Links)
    flows = numba.types.NamedUniTuple(ints, 14, Flows)
    i, b = numba.int64, numba.boolean
    fabric = numba.types.NamedTuple([i, i, b, b, i, i, numba.float64, b, b, i, i, i, i, i, i, i, b], Fabric)
    return (links, flows, fabric, floats, i, HOOK, HOOK, MARK, HOOK, HOOK)


@functools.cache
def _engine():
    """The engine's compiled entry point (compiled, or loaded from the on-disk cache, for the one
    signature). Called directly, not through the dispatcher, which works out every argument's
    numba type on each call (60 of a small run's 200 us); the entry point converts arrays
    checking only their item size, so simulate_packets checks their types. Threads that ask at
    once (a fidelity level's) take turns: the cache does not hold back a second caller, and one
    that compiles after the first has disabled compiling fails ("compilation disabled")."""
    args = _signature()
    with _ENGINE_LOCK:
        if args not in _simulate.overloads:
            _HELPERS.before(_simulate)
            _simulate.compile(args)
            _simulate.disable_compile()
    return _simulate.overloads[args].entry_point


_ENGINE_LOCK = threading.Lock()


@functools.cache
def _compiled_hook(hook, kind):
    """A hook as its compiled code's address: handed a dispatcher, numba looks its compiled code
    up on every call of the engine (two look-ups a hook, 130 of a small run's 340 us)."""
    return CompileResultWAP(hook.get_compile_result(kind.signature))


# What the entry point converts each field from (it checks arrays only by item size): numba type,
# and the Python values accepted.
_ACCEPTED = {
    numba.int64[::1]: (np.ndarray, np.dtype(np.int64)),
    numba.float64[::1]: (np.ndarray, np.dtype(np.float64)),
    numba.int64: ((int, np.integer), None),
    numba.float64: ((float, np.floating), None),
    numba.boolean: ((bool, np.bool_), None),
}


@functools.cache
def _expected():
    """For Links, Flows and Fabric, (what is accepted, dtype, numba type) for each field."""
    return [[(*_ACCEPTED[kind], kind) for kind in tuple_type.types] for tuple_type in _signature()[:3]]


def _check(values: tuple, expected) -> None:
    """A one-line TypeError naming the first field of `values` that is not what the engine reads
    (an array: C-contiguous, 1-D, of its dtype)."""
    for value, (accepted, dtype, kind), name in zip(values, expected, values._fields):
        if not isinstance(value, accepted) or (
            dtype is not None and (value.dtype != dtype or value.ndim != 1 or not value.flags.c_contiguous)
        ):
            given = type(value).__name__
            if isinstance(value, np.ndarray):
                given = f"{value.dtype} {value.ndim}-D array{'' if value.flags.c_contiguous else ', not contiguous'}"
            raise TypeError(f"{type(values).__name__}.{name}: {given} given; the engine reads {kind}")


def simulate_packets(links: Links, flows: Flows, fabric: Fabric, cc_params: np.ndarray, cc_columns: int, hooks):
    """Run the engine; `hooks` (on_start, on_timer, on_marked, on_cnp, on_ack) and the state
    row of `cc_columns` own columns as _congestion.py describes."""
    for values, expected in zip((links, flows, fabric), _expected()):
        _check(values, expected)
    hooks = [_compiled_hook(hook, kind) for hook, kind in zip(hooks, (HOOK, HOOK, MARK, HOOK, HOOK))]
    params = np.ascontiguousarray(cc_params, np.float64)
    return _engine()(links, flows, fabric, params, int(cc_columns), *hooks)
