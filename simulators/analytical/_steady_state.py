"""The pipeline timeline's jump over a steady state that repeats exactly (simulators/analytical/_timeline.py).

Why: a pipeline's steady phase repeats the same operations with the same durations, and the
timeline's update (max of stage free and input arrival, plus a duration; ZB-H1's choices compare
clocks and counts) is shift-invariant: once the whole live state (stage clocks relative to stage
0's, the end times other stages have still to read, pointers, deferred weight gradients, blocked
flags) equals an earlier state shifted by c ns after whole stretches, every later stretch repeats
it. The timeline records states (`recurs`) and moves clocks, pointers and live end times on by
whole stretches (`jump`), which gives the same integer clocks as running them; the operation
order of a stage is the one _timeline.py's `_operation` decodes.
"""

from __future__ import annotations

import numba
import numpy as np

_F = 0  # a forward (_timeline.py's operation kinds)


@numba.njit(cache=True)
def counts(j, warm, total):
    """Forwards and backwards a stage has run after its first j operations (_timeline.py's _operation)."""
    if j <= warm:
        return j, 0
    r = j - warm
    if r <= 2 * (total - warm):
        return warm + (r + 1) // 2, r // 2
    return total, r - (total - warm)


@numba.njit(cache=True)
def _live(pp, v, total, warm, ptr, mb_of, chunk_of, f_end, b_end, nf, nb, out, at, origin, dn, dt):
    """Visit the end times still to be read: each stage's forwards the next virtual stage has not
    run yet, and its backwards the previous one has not. With dn == 0, write them less `origin`
    into out[at:] and return the new end (-1 if out is full); else move each by dn forward
    indices and dt ns (the jump over repeating periods), latest first so none is overwritten
    before it is read."""
    for s in range(pp):
        nf[s], nb[s] = counts(ptr[s], warm[s], total)
    for s in range(pp):
        for kind in range(2):
            if kind == _F:
                lo = nf[s + 1] if s < pp - 1 else (max(0, nf[0] - pp) if v > 1 else nf[s])
                hi = nf[s]
            else:
                lo = nb[s - 1] if s > 0 else (max(0, nb[pp - 1] - pp) if v > 1 else nb[s])
                hi = nb[s]
            ends = f_end if kind == _F else b_end
            for n in range(hi - 1, lo - 1, -1):
                chunk = chunk_of[n] if kind == _F else v - 1 - chunk_of[n]
                if dn == 0:
                    if at >= len(out):
                        return -1
                    out[at] = ends[chunk * pp + s, mb_of[n]] - origin
                    at += 1
                else:
                    ends[chunk * pp + s, mb_of[n + dn]] = ends[chunk * pp + s, mb_of[n]] + dt
    return at


@numba.njit(cache=True)
def reference(pp, warm, mb_of):
    """Arrays for recurs: the reference state (row: clocks less stage 0's, blocked flags, then
    _live), its pointers and deferred Ws, scratch for the state it is compared with, and
    [length, stage 0 clock, snapshots since (the caller counts), snapshots before the reference
    moves on]."""
    width = 2 * pp + 4 * (warm[0] + pp) + 8
    return (
        np.empty(width, dtype=np.int64),
        np.empty(pp, dtype=np.int64),
        np.empty(pp, dtype=np.int64),
        np.empty(width, dtype=np.int64),
        np.empty(pp, dtype=np.int64),
        np.empty(pp, dtype=np.int64),
        np.zeros(4, dtype=np.int64),
    )


@numba.njit(cache=True)
def _state(pp, v, warm, mb_of, chunk_of, f_end, b_end, clock, ptr, blocked, ref, row):
    """Write the state into row; its length, -1 if it does not fit."""
    for t in range(pp):
        row[t] = clock[t] - clock[0]
        row[pp + t] = blocked[t]
    return _live(
        pp, v, len(mb_of), warm, ptr, mb_of, chunk_of, f_end, b_end, ref[4], ref[5], row, 2 * pp, clock[0], 0, 0
    )


@numba.njit(cache=True)
def recurs(pp, v, warm, mb_of, chunk_of, f_end, b_end, clock, ptr, pending_w, blocked, ref):
    """Snapshots since the reference if the state now repeats it, shifted in time and with every
    pointer the same number of operations on (deferred Ws and blocked flags equal); else 0.
    The reference moves to the newest state after 1, 2, 4, ... snapshots (Brent's cycle
    detection): a period of any length is found once the reference lies past the transient, for
    one comparison per snapshot, and most comparisons stop at the first clock."""
    row, ptrs, pend, scratch, _, _, info = ref
    if info[3] > 0:
        same = True
        for t in range(pp):
            same = same and ptr[t] - ptrs[t] == ptr[0] - ptrs[0] and clock[t] - clock[0] == row[t]
            same = same and blocked[t] == row[pp + t] and pending_w[t] == pend[t]
            if not same:
                break
        if same and _state(pp, v, warm, mb_of, chunk_of, f_end, b_end, clock, ptr, blocked, ref, scratch) == info[0]:
            for i in range(info[0]):
                same = same and scratch[i] == row[i]
            if same:
                return info[2]
    if info[2] >= info[3]:
        info[0] = _state(pp, v, warm, mb_of, chunk_of, f_end, b_end, clock, ptr, blocked, ref, row)
        info[1], info[2], info[3] = clock[0], 0, max(1, 2 * info[3])
        if info[0] < 0:
            info[3] = 0
        for t in range(pp):
            ptrs[t], pend[t] = ptr[t], pending_w[t]
    return 0


@numba.njit(cache=True)
def jump(pp, v, warm, mb_of, chunk_of, f_end, b_end, clock, ptr, ref):
    """Repeat the stretch since the reference as often as every operation it looks at stays in
    its stage's steady phase (operation ptr + jumps * step < 2 total - warm): move pointers,
    clocks and the end times still to be read on. Returns the operations each stage moved on
    (0 if there is no room for one stretch)."""
    row, ptrs, _, _, _, _, info = ref
    total = len(mb_of)
    step = ptr[0] - ptrs[0]
    jumps = total
    for t in range(pp):
        jumps = min(jumps, (2 * total - warm[t] - 1 - ptr[t]) // step)
    if jumps <= 0:
        return 0
    dt = jumps * (clock[0] - info[1])
    _live(pp, v, total, warm, ptr, mb_of, chunk_of, f_end, b_end, ref[4], ref[5], row, 0, 0, jumps * step // 2, dt)
    for t in range(pp):
        ptr[t] += jumps * step
        clock[t] += dt
    return jumps * step
