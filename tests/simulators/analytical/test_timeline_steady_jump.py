"""The pipeline kernel's steady-state jump against a plain event loop, to the nanosecond.

The reference below simulates every operation: any stage whose input is there for the
in-order schedules, for ZB-H1 always the stage with the earliest clock (ties: lowest index),
which runs a deferred W when its input is missing or a forward would hold more micro-batches
than min(pp, m). Durations are small integers of ns so that ties, zero
times and exactly repeating steady states (the jump's fast path) are common."""

from pathlib import Path

import numba
import numpy as np
import pytest

import simulators.analytical._training as training
from dse.errors import PlanError
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study
from simulators.analytical import simulate_training_batch
from simulators.analytical._timeline import (
    GPIPE,
    INTERLEAVED,
    ONE_F_ONE_B,
    ZB_H1,
    PipelineBatch,
    make_pipeline_batch,
    simulate_pipelines,
)


@numba.njit
def reference(pp, v, m, schedule, send, f, b, w):
    """Each stage's finishing clock (ns): all 2 m v operations per stage, one at a time."""
    total = m * v
    send = send if pp > 1 else 0  # one GPU: its chunks pass activations without a transfer
    warm = np.empty(pp, dtype=np.int64)
    for s in range(pp):
        if schedule == GPIPE:
            warm[s] = m
        elif schedule == INTERLEAVED:
            warm[s] = min((pp - s - 1) * 2 + (v - 1) * pp, total)
        else:
            warm[s] = min(pp - s - 1, total)
    b = b + w if schedule != ZB_H1 else b
    f_end = np.full((pp * v, m), -1, dtype=np.int64)
    b_end = np.full((pp * v, m), -1, dtype=np.int64)
    clock = np.zeros(pp, dtype=np.int64)
    ptr = np.zeros(pp, dtype=np.int64)
    pending = np.zeros(pp, dtype=np.int64)
    blocked = np.zeros(pp, dtype=np.bool_)
    forwards = np.zeros(pp, dtype=np.int64)  # forwards run
    weights = np.zeros(pp, dtype=np.int64)  # ZB-H1: weight gradients run (B and W fused otherwise)
    while True:
        s = -1  # in-order schedules: any stage whose next input is there; ZB-H1: earliest clock
        for t in range(pp):
            if not blocked[t] and (ptr[t] < 2 * total or pending[t] > 0) and (s < 0 or clock[t] < clock[s]):
                s = t
        if s < 0:
            break
        if ptr[s] == 2 * total:
            clock[s] += pending[s] * w[s]
            pending[s] = 0
            continue
        j = ptr[s]
        if j < warm[s]:
            forward, n = True, j
        elif j - warm[s] < 2 * (total - warm[s]):
            r = j - warm[s]
            forward, n = r % 2 == 0, (warm[s] + r // 2 if r % 2 == 0 else r // 2)
        else:
            forward, n = False, j - total
        mb, chunk = (n // (pp * v)) * pp + n % pp, (n // pp) % v
        g = (chunk if forward else v - 1 - chunk) * pp + s
        if forward:
            ready = 0 if g == 0 else (-1 if f_end[g - 1, mb] < 0 else f_end[g - 1, mb] + send)
            if schedule == ZB_H1 and forwards[s] - weights[s] >= min(pp, total):
                ready = -1  # ZB-H1 holds no more micro-batches than the first stage does in 1F1B
        else:
            ready = 0 if g == pp * v - 1 else (-1 if b_end[g + 1, mb] < 0 else b_end[g + 1, mb] + send)
        if ready < 0:
            if schedule == ZB_H1 and pending[s] > 0:
                clock[s] += w[s]
                pending[s] -= 1
                weights[s] += 1
            else:
                blocked[s] = True
            continue
        while schedule == ZB_H1 and ready > clock[s] and pending[s] > 0:
            clock[s] += w[s]
            pending[s] -= 1
            weights[s] += 1
        clock[s] = max(clock[s], ready) + (f[s] if forward else b[s])
        if forward:
            f_end[g, mb] = clock[s]
            forwards[s] += 1
        else:
            b_end[g, mb] = clock[s]
            pending[s] += schedule == ZB_H1
        ptr[s] += 1
        consumer = g + 1 if forward else g - 1
        if 0 <= consumer < pp * v:
            blocked[consumer % pp] = False
    for s in range(pp):
        if ptr[s] < 2 * total:
            raise RuntimeError("reference deadlocked")
    return clock


def random_cases(seed, n):
    """Random plans: pp 1-32 (mostly small), m below and above pp, durations 0-6 ns drawn per
    stage or shared by all stages, sends of 0-3 ns."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        pp = int(rng.choice([1, 2, 3, 4, 5, 8, 16, 32], p=[0.1, 0.2, 0.15, 0.2, 0.1, 0.15, 0.07, 0.03]))
        schedule = int(rng.choice([GPIPE, ONE_F_ONE_B, INTERLEAVED, ZB_H1], p=[0.1, 0.3, 0.3, 0.3]))
        v = int(rng.integers(2, 5)) if schedule == INTERLEAVED else 1
        if schedule == INTERLEAVED:
            m = pp * int(rng.integers(1, max(2, 160 // pp)))
        else:
            m = int(rng.integers(1, 4 * pp + 2)) if rng.random() < 0.3 else int(rng.integers(1, 200))
        shared = rng.random() < 0.5
        f, b, w = (np.repeat(rng.integers(0, 7, 1), pp) if shared else rng.integers(0, 7, pp) for _ in range(3))
        cases.append((pp, v, m, schedule, int(rng.integers(0, 4)), f, b, w))
    return cases


def batch_of(cases):
    pp, v, m, schedule, send, f, b, w = zip(*cases)
    return make_pipeline_batch(pp, v, m, schedule, np.array(send) / 1e9, *(np.concatenate(x) / 1e9 for x in (f, b, w)))


def assert_same(batch: PipelineBatch, cases):
    makespan, stage_end = simulate_pipelines(batch)
    for i, (pp, v, m, schedule, send, f, b, w) in enumerate(cases):
        clock = reference(pp, v, m, schedule, send, f.astype(np.int64), b.astype(np.int64), w.astype(np.int64))
        got = np.round(stage_end[batch.stage_offset[i] : batch.stage_offset[i + 1]] * 1e9).astype(np.int64)
        assert got.tolist() == clock.tolist(), (pp, v, m, schedule, send, f, b, w)
        assert round(makespan[i] * 1e9) == clock.max()


@pytest.mark.parametrize("seed", range(6))
def test_random_plans_match_the_plain_event_loop_to_the_ns(seed):
    cases = random_cases(seed, 500)
    assert_same(batch_of(cases), cases)


@pytest.mark.parametrize("schedule", [ONE_F_ONE_B, ZB_H1])
def test_long_uniform_pipelines_keep_the_closed_form(schedule):
    # Equal stages, no sends: 1F1B takes (m + pp - 1)(f + b + w) and ZB-H1 no longer, whatever
    # the number of micro-batches the steady state is repeated for.
    pp, m, f, b, w = 8, 20_000, 3e-9, 4e-9, 2e-9
    batch = make_pipeline_batch([pp], [1], [m], [schedule], [0.0], [f] * pp, [b] * pp, [w] * pp)
    makespan, _ = simulate_pipelines(batch)
    one_f_one_b_ns = (m + pp - 1) * 9
    if schedule == ONE_F_ONE_B:
        assert round(makespan[0] * 1e9) == one_f_one_b_ns
    else:
        assert m * 9 <= round(makespan[0] * 1e9) <= one_f_one_b_ns


def test_llama70b_plans_match_the_plain_event_loop(monkeypatch):
    """Every 12th plan of search_spaces/llama70b.yaml, as the training model prices it."""
    spec = Path(__file__).resolve().parents[3] / "search_spaces" / "llama70b.yaml"
    space = SearchSpace.from_study(resolve_study(load_study(spec)))
    candidates = []
    for params in space.grid()[::12]:
        try:
            candidates.append(space.candidate(params))
        except PlanError:
            pass
    seen = []
    monkeypatch.setattr(training, "simulate_pipelines", lambda batch: seen.append(batch) or simulate_pipelines(batch))
    simulate_training_batch(candidates, breakdown=False)
    (batch,) = seen
    makespan, stage_end = simulate_pipelines(batch)
    to_ns = lambda seconds: np.round(np.asarray(seconds) * 1e9).astype(np.int64)  # noqa: E731
    for i in range(len(batch.pp)):
        lo, hi = batch.stage_offset[i], batch.stage_offset[i + 1]
        f, b, w = (to_ns(x[lo:hi]) for x in (batch.forward_s, batch.backward_s, batch.weight_s))
        send = int(to_ns(batch.send_s[i])) if batch.pp[i] > 1 else 0
        clock = reference(batch.pp[i], batch.chunks[i], batch.microbatches[i], batch.schedule[i], send, f, b, w)
        assert (stage_end[lo:hi] == clock / 1e9).all() and makespan[i] == clock.max() / 1e9
