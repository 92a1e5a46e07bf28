"""Pipeline schedules simulated as events per stage (Numba), not as a bubble formula.

Each pipeline stage runs its own list of operations in the order its schedule prescribes:
F (forward of one micro-batch through one model chunk), B (backward; for the zero-bubble
schedule only the input-gradient half) and W (weight-gradient half, zero-bubble only). An
operation starts when its stage is free and its inputs have arrived: F needs the previous
virtual stage's F of the same micro-batch, B the next virtual stage's B, each plus one
point-to-point transfer when the two virtual stages sit on different GPUs.

The engine is a discrete-event loop on integer nanoseconds: it always advances the stage
whose clock is earliest (ties: lowest stage index), so the result is a total order independent
of floating-point summation order. Zero-bubble (ZB-H1, Qi et al., "Zero Bubble Pipeline
Parallelism", ICLR 2024) keeps 1F1B's order of F and B and runs a deferred W whenever the next
F or B would otherwise wait, but never lets a stage hold more micro-batches (forwards run less
weight gradients done) than the first stage holds under 1F1B, min(pp, m): the first stage's
peak activation memory stays that of 1F1B, and later stages keep at most that many (those
past their 1F1B count only the inputs their weight gradients read).

Schedules: GPIPE (all forwards, then all backwards), ONE_F_ONE_B (PipeDream-Flush / Megatron
1F1B), INTERLEAVED (Megatron's interleaved 1F1B with v chunks per stage), ZB_H1.

Long steady phases are not simulated operation by operation: once the whole state repeats
exactly, shifted in time, the kernel jumps over the repeats (_steady_state.py), which gives the
same integer clocks as running them.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from simulators.analytical._steady_state import counts, jump, recurs, reference

GPIPE, ONE_F_ONE_B, INTERLEAVED, ZB_H1 = 0, 1, 2, 3
SCHEDULES = {"gpipe": GPIPE, "1f1b": ONE_F_ONE_B, "interleaved": INTERLEAVED, "zb-h1": ZB_H1}

_F, _B = 0, 1
NS_PER_S = 1e9


class PipelineBatch(NamedTuple):
    """Structure of arrays for n candidates; stage arrays are concatenated, candidate i owning
    entries stage_offset[i] : stage_offset[i] + pp[i]. Times in seconds, per micro-batch and
    per model chunk."""

    pp: np.ndarray  # int64[n]
    chunks: np.ndarray  # int64[n] model chunks per stage (virtual pipeline size v)
    microbatches: np.ndarray  # int64[n]
    schedule: np.ndarray  # int64[n]
    send_s: np.ndarray  # float64[n] one activation or gradient transfer between stages
    stage_offset: np.ndarray  # int64[n + 1]
    forward_s: np.ndarray  # float64[stages] F of one chunk on that stage
    backward_s: np.ndarray  # float64[stages] B (input gradient) of one chunk
    weight_s: np.ndarray  # float64[stages] W (weight gradient) of one chunk


def make_pipeline_batch(pp, chunks, microbatches, schedule, send_s, forward_s, backward_s, weight_s) -> PipelineBatch:
    """Validate and convert once at the Python boundary (STYLE 9)."""
    pp = np.ascontiguousarray(pp, dtype=np.int64)
    offset = np.zeros(len(pp) + 1, dtype=np.int64)
    np.cumsum(pp, out=offset[1:])
    batch = PipelineBatch(
        pp,
        np.ascontiguousarray(chunks, dtype=np.int64),
        np.ascontiguousarray(microbatches, dtype=np.int64),
        np.ascontiguousarray(schedule, dtype=np.int64),
        np.ascontiguousarray(send_s, dtype=np.float64),
        offset,
        np.ascontiguousarray(forward_s, dtype=np.float64),
        np.ascontiguousarray(backward_s, dtype=np.float64),
        np.ascontiguousarray(weight_s, dtype=np.float64),
    )
    if len(batch.forward_s) != offset[-1]:
        raise ValueError(f"{len(batch.forward_s)} stage times for {offset[-1]} stages")
    if np.any(batch.pp < 1) or np.any(batch.chunks < 1) or np.any(batch.microbatches < 1):
        raise ValueError("pp, chunks and microbatches must be >= 1")
    interleaved = batch.schedule == INTERLEAVED
    if np.any(interleaved & (batch.microbatches % batch.pp != 0)):
        raise ValueError("the interleaved schedule needs microbatches divisible by pp")
    if np.any(~interleaved & (batch.chunks != 1)):
        raise ValueError("only the interleaved schedule runs more than one chunk per stage")
    return batch


def simulate_pipelines(batch: PipelineBatch) -> tuple[np.ndarray, np.ndarray]:
    """Makespan of each candidate's pipeline (s) and each stage's finishing time (s)."""
    makespan = np.empty(len(batch.pp), dtype=np.float64)
    stage_end = np.empty(len(batch.forward_s), dtype=np.float64)
    _simulate_all(*batch, makespan, stage_end)
    return makespan, stage_end


def stage_order(stage: int, pp: int, chunks: int, microbatches: int, schedule: str) -> list[tuple[str, int, int]]:
    """("F" or "B", micro-batch, chunk) of every operation pipeline stage `stage` runs, in the
    order the timeline runs them. ZB-H1 places its deferred W by timing, so it is listed in its
    1F1B order with each W fused to its B."""
    code = SCHEDULES[schedule]
    code = ONE_F_ONE_B if code == ZB_H1 else code
    warm = _warmup(stage, pp, chunks, microbatches, code)
    mb_of, chunk_of = _numbering(pp, chunks, microbatches)
    order = []
    for j in range(2 * microbatches * chunks):
        kind, n = _operation(j, warm, microbatches * chunks)
        chunk = chunk_of[n] if kind == _F else chunks - 1 - chunk_of[n]
        order.append(("F" if kind == _F else "B", int(mb_of[n]), int(chunk)))
    return order


@numba.njit(cache=True)
def _warmup(s, pp, v, m, schedule):
    """Forwards stage s runs before its first backward."""
    if schedule == GPIPE:
        return m
    if schedule == INTERLEAVED:
        return min((pp - s - 1) * 2 + (v - 1) * pp, m * v)
    return min(pp - s - 1, m * v)


@numba.njit(cache=True)
def _operation(j, warm, total):
    """(kind, n) of the j-th operation of a stage: its n-th forward or backward. A stage warms
    up with `warm` forwards, alternates forward and backward until the forwards run out, then
    drains the backwards. Decoded from j rather than stored: the order is pure arithmetic."""
    steady = total - warm  # forward/backward pairs after the warm-up
    if j < warm:
        return _F, j
    r = j - warm
    if r < 2 * steady:
        return (_F, warm + r // 2) if r % 2 == 0 else (_B, r // 2)
    return _B, r - steady


@numba.njit(cache=True)
def _numbering(pp, v, m):
    """Micro-batch and chunk of the n-th forward of every stage (the n-th backward runs the
    same micro-batch on the mirrored chunk v - 1 - chunk): micro-batches go through the chunks
    in groups of pp (Megatron's interleaved order; with one chunk, n is the micro-batch)."""
    total = m * v
    mb_of = np.empty(total, dtype=np.int64)
    chunk_of = np.empty(total, dtype=np.int64)
    for n in range(total):
        mb_of[n] = (n // (pp * v)) * pp + n % pp
        chunk_of[n] = (n // pp) % v
    return mb_of, chunk_of


@numba.njit(cache=True)
def _advance(pp, v, stages, send, warm, mb_of, chunk_of, f_ns, b_ns, f_end, b_end, clock, ptr, limit):
    """Run every stage up to operation limit[s] (limits must close over inputs). An operation
    starts at max(stage free, inputs arrived), whatever order the stages are visited in. A stage
    runs until it must wait; finishing an operation wakes only the stage that consumes its
    output, so each operation is looked at about once."""
    waiting = np.empty(pp, dtype=np.int64)  # stages to visit (a stack, each stage at most once)
    queued = np.ones(pp, dtype=np.bool_)
    for s in range(pp):
        waiting[s] = pp - 1 - s
    top = pp
    total = len(mb_of)
    while top > 0:
        top -= 1
        s = waiting[top]
        queued[s] = False
        while ptr[s] < limit[s]:
            k, n = _operation(ptr[s], warm[s], total)
            mb, g = mb_of[n], (chunk_of[n] if k == _F else v - 1 - chunk_of[n]) * pp + s
            # Inputs: the previous virtual stage's F, or the next one's B, plus one transfer.
            # (Written out here and in _run_zero_bubble: Numba calls with array arguments cost
            # more than the rest of an event, 6x in benchmarks/training_speed.py.)
            if k == _F:
                ready = 0 if g == 0 else (-1 if f_end[g - 1, mb] < 0 else f_end[g - 1, mb] + send)
            else:
                ready = 0 if g == stages - 1 else (-1 if b_end[g + 1, mb] < 0 else b_end[g + 1, mb] + send)
            if ready < 0:
                break
            clock[s] = max(clock[s], ready) + (f_ns[s] if k == _F else b_ns[s])
            if k == _F:
                f_end[g, mb] = clock[s]
            else:
                b_end[g, mb] = clock[s]
            ptr[s] += 1
            consumer = g + 1 if k == _F else g - 1  # the virtual stage that waits for this output
            if 0 <= consumer < stages:
                t = consumer % pp
                if t != s and not queued[t]:
                    queued[t] = True
                    waiting[top] = t
                    top += 1
    for s in range(pp):
        if ptr[s] < limit[s]:
            raise RuntimeError("pipeline schedule deadlocked")


@numba.njit(cache=True)
def _run_in_order(pp, v, m, stages, send, warm, mb_of, chunk_of, f_ns, b_ns, f_end, b_end, clock):
    """Fixed-order schedules, round by round through the steady state: round r ends stage s
    after warm[s] + 2 (r pairs + s) operations, `pairs` forward/backward pairs being the period
    of the order (1, or pp * v interleaved: micro-batch + pp, same chunk). Every input of a
    round comes from the round or an earlier one, so a round's end state (clocks and end times
    still to be read) determines every later round, and the update max(free, input + send) +
    duration is shift-invariant: once that state repeats exactly, shifted by c ns after d
    rounds, each later d rounds repeat it. Jump over them (_steady_state.jump), then run the cool-down."""
    total = m * v
    ptr = np.zeros(pp, dtype=np.int64)
    limit = np.empty(pp, dtype=np.int64)
    pairs = 1 if v == 1 else pp * v
    rounds = total  # last round whose end leaves every stage in its steady phase
    for s in range(pp):
        rounds = min(rounds, (total - warm[s] - s) // pairs)
    if rounds >= 3:
        ref = reference(pp, warm, mb_of)
        never = np.zeros(pp, dtype=np.int64)  # no deferred Ws, no blocked flags
        for r in range(rounds + 1):
            for s in range(pp):
                limit[s] = warm[s] + 2 * (r * pairs + s)
            _advance(pp, v, stages, send, warm, mb_of, chunk_of, f_ns, b_ns, f_end, b_end, clock, ptr, limit)
            ref[6][2] += 1
            if recurs(pp, v, warm, mb_of, chunk_of, f_end, b_end, clock, ptr, never, never, ref):
                jump(pp, v, warm, mb_of, chunk_of, f_end, b_end, clock, ptr, ref)
                break
    limit[:] = 2 * total
    _advance(pp, v, stages, send, warm, mb_of, chunk_of, f_ns, b_ns, f_end, b_end, clock, ptr, limit)


@numba.njit(cache=True)
def _run_zero_bubble(pp, v, m, stages, send, warm, mb_of, chunk_of, f_ns, b_ns, w_ns, f_end, b_end, clock):
    """ZB-H1: as 1F1B, but a deferred W fills every stall, and a stage runs a deferred W before
    a forward that would hold more micro-batches than the first stage holds under 1F1B (forwards
    run less weight gradients done: min(pp, m)), as ZB-H1 delays W only so far that every stage
    keeps the same number of micro-batches in flight (Qi et al. 2024, Sec. 2.1). The stage with
    the earliest clock acts first (ties: the lowest index), so the choice of what fills a stall
    is deterministic. Every decision compares clocks, end times and counts, so it is
    shift-invariant: once the whole state repeats (_steady_state.recurs), jump over the repeats while every
    stage stays steady."""
    ptr = np.zeros(pp, dtype=np.int64)
    pending_w = np.zeros(pp, dtype=np.int64)
    in_flight = min(pp, m * v)
    blocked = np.zeros(pp, dtype=np.bool_)  # waiting for an input: only its producer clears it
    count = 2 * m * v  # operations per stage
    ref = reference(pp, warm, mb_of)
    row, info = ref[0], ref[6]
    jumping = count > 6 * pp  # room for a repeat and a jump
    remaining = count * pp
    deferred = 0
    while remaining > 0 or deferred > 0:
        s = -1
        for t in range(pp):
            if blocked[t] or (ptr[t] >= count and pending_w[t] == 0):
                continue
            if s < 0 or clock[t] < clock[s]:
                s = t
        if s < 0:
            raise RuntimeError("pipeline schedule deadlocked")
        if ptr[s] >= count:  # only deferred weight gradients left: nothing waits for them
            clock[s] += pending_w[s] * w_ns[s]
            deferred -= pending_w[s]
            pending_w[s] = 0
            continue
        k, n = _operation(ptr[s], warm[s], m * v)
        mb, g = mb_of[n], (chunk_of[n] if k == _F else v - 1 - chunk_of[n]) * pp + s
        if k == _F:
            ready = 0 if g == 0 else (-1 if f_end[g - 1, mb] < 0 else f_end[g - 1, mb] + send)
            forwards, backwards = counts(ptr[s], warm[s], m * v)
            if forwards - backwards + pending_w[s] >= in_flight:  # one more would exceed: a W first
                ready = -1
        else:
            ready = 0 if g == stages - 1 else (-1 if b_end[g + 1, mb] < 0 else b_end[g + 1, mb] + send)
        if ready < 0 and pending_w[s] > 0:  # input not produced yet (or no room): one deferred W
            clock[s] += w_ns[s]
            pending_w[s] -= 1
            deferred -= 1
        elif ready < 0:
            blocked[s] = True
        else:
            # The input arrives at a known time: fill the wait with deferred Ws (what other
            # stages do meanwhile cannot change it), then run the operation.
            while ready > clock[s] and pending_w[s] > 0:
                clock[s] += w_ns[s]
                pending_w[s] -= 1
                deferred -= 1
            clock[s] = max(clock[s], ready) + (f_ns[s] if k == _F else b_ns[s])
            if k == _F:
                f_end[g, mb] = clock[s]
            else:
                b_end[g, mb] = clock[s]
                pending_w[s] += 1
                deferred += 1
            ptr[s] += 1
            remaining -= 1
            consumer = g + 1 if k == _F else g - 1  # the virtual stage that waits for this output
            if 0 <= consumer < stages:
                blocked[consumer % pp] = False
            if jumping and s == 0 and k == _B:  # every stage has run a backward: all are steady
                info[2] += 1  # a call costs more than several events: only where the last clock matches
                if (info[2] >= info[3] or clock[pp - 1] - clock[0] == row[pp - 1]) and recurs(
                    pp, v, warm, mb_of, chunk_of, f_end, b_end, clock, ptr, pending_w, blocked, ref
                ):
                    remaining -= pp * jump(pp, v, warm, mb_of, chunk_of, f_end, b_end, clock, ptr, ref)
                    jumping = False


@numba.njit(cache=True)
def _simulate_all(
    pp_all, v_all, m_all, sched_all, send_all, offset, fwd_s, bwd_s, wgt_s, makespan, stage_end
):  # pragma: no cover - compiled
    for i in range(len(pp_all)):
        pp, v, m, schedule = pp_all[i], v_all[i], m_all[i], sched_all[i]
        base = offset[i]
        send = np.int64(round(send_all[i] * NS_PER_S)) if pp > 1 else np.int64(0)
        warm = np.empty(pp, dtype=np.int64)
        mb_of, chunk_of = _numbering(pp, v, m)
        f_ns = np.empty(pp, dtype=np.int64)
        b_ns = np.empty(pp, dtype=np.int64)
        w_ns = np.empty(pp, dtype=np.int64)
        for s in range(pp):
            warm[s] = _warmup(s, pp, v, m, schedule)
            f_ns[s] = round(fwd_s[base + s] * NS_PER_S)
            b_ns[s] = round(bwd_s[base + s] * NS_PER_S)
            w_ns[s] = round(wgt_s[base + s] * NS_PER_S)
            if schedule != ZB_H1:  # W runs fused with its B
                b_ns[s] += w_ns[s]
        stages = pp * v
        f_end = np.full((stages, m), -1, dtype=np.int64)
        b_end = np.full((stages, m), -1, dtype=np.int64)
        clock = np.zeros(pp, dtype=np.int64)
        if schedule == ZB_H1:
            _run_zero_bubble(pp, v, m, stages, send, warm, mb_of, chunk_of, f_ns, b_ns, w_ns, f_end, b_end, clock)
        else:
            _run_in_order(pp, v, m, stages, send, warm, mb_of, chunk_of, f_ns, b_ns, f_end, b_end, clock)
        last = np.int64(0)
        for s in range(pp):
            stage_end[base + s] = clock[s] / NS_PER_S
            last = max(last, clock[s])
        makespan[i] = last / NS_PER_S
