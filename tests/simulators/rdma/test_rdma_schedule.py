"""Schedules as data: step counts, ring and pairwise peers, chunk order, buckets, and every
schedule run in lockstep in memory against the numpy result."""

from __future__ import annotations

import numpy as np
import pytest

from simulators._errors import SpecError
from simulators.rdma import (
    OPS,
    Plan,
    Schedule,
    Step,
    Traffic,
    bucket_sizes,
    replay_algorithm,
    round_nbytes,
    schedule_of,
)
from simulators.rdma._executor import expected_message, expected_results, lockstep, pattern


def run_all_steps(plan: Plan, t: int = 0) -> list[np.ndarray]:
    """Every rank's result of traffic item t, its schedules run in lockstep in memory."""
    results: list[list[np.ndarray]] = [[] for _ in range(plan.world)]
    for b, sch in enumerate(plan.schedules(t)):
        _, outs = lockstep(plan, t, b)
        for r in range(plan.world):
            results[r].append(outs[r][slice(*sch.result[r])])
    return [np.concatenate(parts) for parts in results]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_every_schedule_computes_the_numpy_result(op, world):
    nbytes = round_nbytes(op, world, 3000)
    plan = Plan(world, (Traffic(op, nbytes, bucket_bytes=round_nbytes(op, world, 1000)),), seed=3)
    got, want = run_all_steps(plan), expected_results(plan, 0)
    for r in range(world):
        np.testing.assert_array_equal(got[r], want[r], err_msg=f"{op} rank {r}")


def test_ring_all_reduce_steps_follow_the_ring():
    n, size = 4, 64
    sch = schedule_of("all_reduce", n, n * size)
    assert sch.num_steps == 2 * (n - 1)
    for i in range(n):
        for k, st in enumerate(sch.steps[i]):
            assert (st.send_peer, st.recv_peer) == ((i + 1) % n, (i - 1) % n)
            assert st.send_bytes == st.recv_bytes == size
            assert st.reduce == (k < n - 1)
        for k in range(n - 1):  # reduce-scatter: send chunk (i - k), receive chunk (i - k - 1)
            assert sch.steps[i][k].send_lo == ((i - k) % n) * size
            assert sch.steps[i][k].recv_lo == ((i - k - 1) % n) * size


def test_pairwise_all_to_all_pairs_i_plus_k_with_i_minus_k():
    n = 5
    sch = schedule_of("all_to_all", n, n * 8)
    assert sch.num_steps == n - 1
    for i in range(n):
        for k, st in enumerate(sch.steps[i], start=1):
            assert (st.send_peer, st.recv_peer) == ((i + k) % n, (i - k) % n)
            assert st.send_lo == ((i + k) % n) * 8 and st.recv_lo == ((i - k) % n) * 8


@pytest.mark.parametrize("op,steps", [("all_gather", 7), ("reduce_scatter", 7), ("all_reduce", 14), ("all_to_all", 7)])
def test_step_counts(op, steps):
    assert schedule_of(op, 8, 8 * 4 * 10).num_steps == steps


def test_reduce_scatter_leaves_chunk_i_on_rank_i():
    sch = schedule_of("reduce_scatter", 4, 4 * 16)
    assert sch.result == ((0, 16), (16, 32), (32, 48), (48, 64))


def test_buckets_split_the_collective():
    assert bucket_sizes("all_reduce", 2, 80, 32) == (32, 32, 16)
    assert bucket_sizes("all_gather", 4, 100) == (100,)
    plan = Plan(2, (Traffic("all_reduce", 80, 32),))
    assert plan.step_bytes(0).tolist() == [16, 16, 16, 16, 8, 8]


def test_bad_sizes_name_the_value_and_what_is_allowed():
    with pytest.raises(SpecError, match=r"nbytes: 100 .* allowed: positive multiples of 32"):
        schedule_of("all_reduce", 8, 100)
    with pytest.raises(SpecError, match=r"bucket_bytes: 20 .* allowed: positive multiples of 8"):
        bucket_sizes("all_reduce", 2, 80, 20)
    with pytest.raises(SpecError, match=r"op: 'broadcast' .* allowed: all_reduce"):
        schedule_of("broadcast", 2, 64)
    with pytest.raises(SpecError, match=r"ranks: 1 .* allowed: integers >= 2"):
        schedule_of("all_gather", 1, 64)
    assert round_nbytes("all_reduce", 8, 100) == 96 and round_nbytes("all_gather", 8, 3) == 8


def test_inconsistent_schedule_is_rejected():
    good = schedule_of("all_gather", 2, 8)
    bad = Step(1, "out", 0, 4, 1, 4, 6, False)  # rank 0 expects 2 bytes where rank 1 sends 4
    with pytest.raises(SpecError, match="step 0: rank 1 sends 4 B to rank 0, which expects 2 B"):
        Schedule("all_gather", 2, 8, 4, 8, good.prologue, ((bad,), good.steps[1]), good.result)


def test_expected_message_is_what_the_sender_holds():
    plan = Plan(3, (Traffic("all_reduce", 3 * 4 * 5),), seed=1)
    sch = plan.schedules(0)[0]
    first = expected_message(plan, 0, 0, 1, 0)  # step 0: rank 0 sends its own chunk 0
    np.testing.assert_array_equal(first, pattern(1, 0, 0, 0, sch.in_bytes)[0:20])
    assert sch.writer_step(1, 0) == 3 and sch.writer_step(1, 20) == 2  # all-gather steps 2 and 3


# What ranks alone can run (no in-switch reduction, contiguous chunks), named independently of the code.
REPLAYABLE = [("ring", op) for op in ("all_reduce", "all_gather", "reduce_scatter")] + [
    ("double_binary_tree", "all_reduce"),
    ("direct", "all_to_all"),
    ("pairwise", "all_to_all"),
]


@pytest.mark.parametrize("algorithm,op", REPLAYABLE)
@pytest.mark.parametrize("world", [2, 3, 4, 7, 8])
def test_every_replayable_algorithm_computes_the_numpy_result(algorithm, op, world):
    nbytes = round_nbytes(op, world, 3000, algorithm)
    plan = Plan(world, (Traffic(op, nbytes, round_nbytes(op, world, 1000, algorithm), algorithm),), seed=5)
    got, want = run_all_steps(plan), expected_results(plan, 0)
    for r in range(world):
        np.testing.assert_array_equal(got[r], want[r], err_msg=f"{algorithm} {op} rank {r}")
    assert all(s.algorithm == algorithm for s in plan.schedules(0))


@pytest.mark.parametrize("world", [2, 3, 7, 8])
def test_the_tree_moves_each_half_up_and_down_every_edge_once(world):
    """Two trees over `world` ranks, S/2 each: every one of their 2 (n - 1) edges carries S/2 up
    and S/2 down, one send and one receive per rank and step."""
    nbytes = 64 * world
    sch = schedule_of("all_reduce", world, nbytes, "tree")
    sends = [st for steps in sch.steps for st in steps if st.send_peer is not None]
    assert sum(st.send_bytes for st in sends) == 2 * 2 * (world - 1) * nbytes // 2
    assert all(st.send_bytes == nbytes // 2 for st in sends)
    depth = (world).bit_length() - 1  # of the binary tree over positions 0..n-1
    assert sch.num_steps >= 2 * depth and sch.algorithm == "double_binary_tree"


def test_algorithms_the_ranks_cannot_run_are_one_line_naming_those_they_can():
    # hierarchical, every rank in a domain of its own, is one ring across the domains
    why = r"\(its transfers carry strided chunks\); allowed: hierarchical, ring, double_binary_tree$"
    with pytest.raises(SpecError, match=r"^algorithm: 'halving_doubling' cannot be replayed " + why):
        schedule_of("all_reduce", 4, 4 * 4 * 8, "rabenseifner")
    with pytest.raises(SpecError, match=r"^nvls: 4 ranks, 1 per NVLink domain; allowed: domains of 2 or more"):
        schedule_of("all_reduce", 4, 4 * 4 * 8, "nvls")
    with pytest.raises(SpecError, match=r"^algorithm: 'double_binary_tree' does not implement op 'all_gather'"):
        schedule_of("all_gather", 4, 4 * 8, "tree")


def test_a_replay_runs_the_chosen_algorithm_where_ranks_alone_can():
    assert replay_algorithm("all_reduce", 4, "tree") == "double_binary_tree"
    assert replay_algorithm("all_to_all", 4, "direct") == "direct"
    assert replay_algorithm("all_reduce", 4, "nvls") == "ring"  # the switch reduces: no rank can stand in
    assert replay_algorithm("reduce_scatter", 4, "halving_doubling") == "ring"  # strided chunks
