"""Request states, replica roles, and the compiled helpers of the serving engine (`_engine.py`)
on a replica's queue, its running list and the heap of KV transfers.

Why a module of its own: they are the engine's small, stable pieces, each a few lines that
LLVM inlines into the event loop; the deployment reads the role codes from here too.
"""

from __future__ import annotations

import numba
import numpy as np

ROLE_BOTH, ROLE_PREFILL, ROLE_DECODE = 0, 1, 2
NEVER = np.iinfo(np.int64).max

# Request states
UNSEEN, WAITING, RUNNING, MOVING, DONE = 0, 1, 2, 3, 4


@numba.njit(cache=True)
def blocks_for(tokens, block_tokens):
    """KV blocks holding `tokens` tokens."""
    return (tokens + block_tokens - 1) // block_tokens


@numba.njit(cache=True)
def join(r, i, t, replica_of, state, outstanding, wake, head, tail, next_in_queue):
    """Request i, routed to replica r at time t, joins the back of its queue and wakes it."""
    replica_of[i] = r
    state[i] = WAITING
    outstanding[r] += 1
    if tail[r] < 0:
        head[r] = i
    else:
        next_in_queue[tail[r]] = i
    tail[r] = i
    next_in_queue[i] = -1
    wake[r] = min(wake[r], t)


@numba.njit(cache=True)
def admit(r, want, head, tail, next_in_queue, free_blocks, blocks, state, running, n_running):
    """The head of replica r's queue becomes a running request holding `want` KV blocks."""
    i = head[r]
    head[r] = next_in_queue[i]
    if head[r] < 0:
        tail[r] = -1
    free_blocks[r] -= want
    blocks[i] = want
    state[i] = RUNNING
    running[r, n_running[r]] = i
    n_running[r] += 1
    return i


@numba.njit(cache=True)
def remove_running(r, i, running, n_running):
    """Request i leaves replica r's running list (the others keep their admission order)."""
    for q in range(n_running[r]):
        if running[r, q] == i:
            for q2 in range(q, n_running[r] - 1):
                running[r, q2] = running[r, q2 + 1]
            n_running[r] -= 1
            return


@numba.njit(cache=True)
def in_batch(batch_req, r, slot, nb, i):
    """Whether request i is among the first nb of the batch being formed in slot."""
    for j in range(nb):
        if batch_req[r, slot, j] == i:
            return True
    return False


@numba.njit(cache=True)
def _heap_before(heap_t, heap_i, a, b):
    """Whether heap entry a comes before b: by time, then by request index."""
    return heap_t[a] < heap_t[b] or (heap_t[a] == heap_t[b] and heap_i[a] < heap_i[b])


@numba.njit(cache=True)
def heap_push(heap_t, heap_i, heap_n, t, i):
    """Add (t, i) to the binary heap of heap_n entries; returns the new size."""
    k = heap_n
    heap_t[k] = t
    heap_i[k] = i
    while k > 0:
        parent = (k - 1) // 2
        if _heap_before(heap_t, heap_i, parent, k):
            break
        heap_t[parent], heap_t[k] = heap_t[k], heap_t[parent]
        heap_i[parent], heap_i[k] = heap_i[k], heap_i[parent]
        k = parent
    return heap_n + 1


@numba.njit(cache=True)
def heap_pop(heap_t, heap_i, heap_n):
    """Remove the first entry of the heap of heap_n entries; returns (its request, the new size)."""
    i = heap_i[0]
    heap_n -= 1
    heap_t[0] = heap_t[heap_n]
    heap_i[0] = heap_i[heap_n]
    k = 0
    while True:
        child = 2 * k + 1
        if child >= heap_n:
            break
        if child + 1 < heap_n and _heap_before(heap_t, heap_i, child + 1, child):
            child += 1
        if _heap_before(heap_t, heap_i, k, child):
            break
        heap_t[k], heap_t[child] = heap_t[child], heap_t[k]
        heap_i[k], heap_i[child] = heap_i[child], heap_i[k]
        k = child
    return i, heap_n
