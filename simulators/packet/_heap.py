"""The packet engine's event heap and packet pool (_engine.py compiles them into itself)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, error_model="numpy")
def push(heap, size, seq, t, kind, a):
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
def pop(heap, size):
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
def grow_pool(pkt_flow, pkt_bytes, pkt_hop, pkt_ecn, pkt_last, pkt_kind, pkt_next):
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
