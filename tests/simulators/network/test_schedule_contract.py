"""The contract every registered algorithm's schedule keeps, for every op it prices (STYLE 12):
it computes the op (run symbolically on chunk ids, in several orders its dependencies allow),
its dependencies are acyclic, it moves the bytes the algorithm's description says, and it has as
many steps as the cost recipe's latency term counts."""

import dataclasses
import random
from fractions import Fraction

import numpy as np
import pytest

from simulators._errors import CatalogError, SpecError
from simulators.hardware import get_gpu
from simulators.network import ALGORITHMS, Group, Network, Tier, collective_schedule

NETWORK = dataclasses.replace(Network.from_gpu(get_gpu("H100-SXM"), tiers=(Tier(256), Tier(8192, 2.0))), nvls=True)
PAIRS = [(name, op) for name, algorithm in ALGORITHMS.items() for op in algorithm.costs]
# (ranks, stride): one domain; two, three and four domains of 8; domains of 1, 2 and 4 members
SHAPES = [(2, 1), (5, 1), (8, 1), (16, 1), (24, 1), (32, 1), (4, 8), (6, 4), (12, 2)]


def _power_of_two(n):
    return n & (n - 1) == 0


# Bytes all members receive together, in units of S, from each algorithm's own description
# (module docstrings in simulators/network); None where the description gives no closed form.
TOTALS = {
    ("ring", "all_reduce"): lambda n, g, N: 2 * (n - 1),
    ("ring", "reduce_scatter"): lambda n, g, N: n - 1,
    ("ring", "all_gather"): lambda n, g, N: n - 1,
    ("ring", "broadcast"): lambda n, g, N: n - 1,
    ("double_binary_tree", "all_reduce"): lambda n, g, N: 2 * (n - 1),  # 2 trees, n - 1 edges up and down, S/2
    ("halving_doubling", "all_reduce"): lambda n, g, N: 2 * (n - 1) if _power_of_two(n) else None,
    ("halving_doubling", "reduce_scatter"): lambda n, g, N: n - 1 if _power_of_two(n) else None,
    ("halving_doubling", "all_gather"): lambda n, g, N: n - 1 if _power_of_two(n) else None,
    ("hierarchical", "all_reduce"): lambda n, g, N: n * (2 * Fraction(g - 1, g) + 2 * Fraction(N - 1, N * g)),
    ("hierarchical", "reduce_scatter"): lambda n, g, N: n * (Fraction(g - 1, g) + Fraction(N - 1, N * g)),
    ("hierarchical", "all_gather"): lambda n, g, N: n * (Fraction(g - 1, g) + Fraction(N - 1, N * g)),
    ("nvls", "all_reduce"): lambda n, g, N: n + 2 * (N - 1),  # S/g back, (g-1)/g multicast; trees on S/g
    ("nvls", "reduce_scatter"): lambda n, g, N: 1,
    ("nvls", "all_gather"): lambda n, g, N: n - 1,
    ("direct", "all_to_all"): lambda n, g, N: n - 1,
    ("direct", "send_recv"): lambda n, g, N: n - 1,
    ("pairwise", "all_to_all"): lambda n, g, N: n - 1,
}


def least_received(op, n, rank):
    """What a member must receive at least, in units of S (nccl-tests sizes): a sum of the others'
    contributions for every chunk it ends with (all_reduce: S, reduce_scatter: S/n; it cannot make
    them itself), or the others' data itself (all_gather, all_to_all: (n-1)/n S; broadcast and
    send_recv: S for every member but the first)."""
    if op in ("broadcast", "send_recv"):
        return 0 if rank == 0 else 1
    return {"all_reduce": 1, "reduce_scatter": Fraction(1, n)}.get(op, Fraction(n - 1, n))


def expected(op, n, chunks, rank):
    """What `rank`'s out buffer holds after `op`, chunk by chunk, as sets of (member, input chunk)."""
    m = chunks // n
    if op == "all_reduce":
        return {c: {(q, c) for q in range(n)} for c in range(chunks)}
    if op == "reduce_scatter":
        return {c: {(q, c) for q in range(n)} for c in range(rank * m, (rank + 1) * m)}
    if op == "all_gather":
        return {c: {(c // m, c % m)} for c in range(chunks)}
    if op == "all_to_all":
        return {c: {(c // m, rank * m + c % m)} for c in range(chunks)}
    if op == "broadcast":
        return {c: {(0, c)} for c in range(chunks)}
    return {c: {(rank - 1, c)} for c in range(chunks)} if rank else {}  # send_recv


def run_symbolically(sch, order):
    """Every node's out buffer after the transfers, run one at a time in `order`."""
    n, chunks = sch.ranks, sch.chunks
    ins = [[frozenset({(r, c)}) for c in range(sch.in_chunks)] for r in range(n)]
    outs = [[None] * chunks for _ in range(n + sch.switches)]
    for r in range(n):
        for src, dst in sch.prologue(r):
            for s, d in zip(src, dst):
                outs[r][d] = ins[r][s]
    for i in order:
        t = sch.transfers[i]
        assert len(t.sent) == len(t.chunks)
        data = [(ins if t.from_input else outs)[t.src][c] for c in t.sent]
        assert None not in data, f"transfer {i} sends chunks {t.src} does not hold"
        for c, value in zip(t.chunks, data):
            old = outs[t.dst][c]
            if t.reduce and old is not None:
                assert not old & value, f"transfer {i} adds contributions twice"
                value = old | value
            outs[t.dst][c] = value
    return outs


def topological_orders(sch, seeds=(1, 2, 3)):
    """The listed order, and random orders that respect `after` (a transfer runs when all of its
    dependencies have); an order missing transfers means a cycle."""
    yield list(range(len(sch.transfers)))
    waiting = [set(t.after) for t in sch.transfers]
    users = {}
    for i, t in enumerate(sch.transfers):
        for a in t.after:
            users.setdefault(a, []).append(i)
    for seed in seeds:
        rng, pending = random.Random(seed), [set(w) for w in waiting]
        ready, order = [i for i, w in enumerate(pending) if not w], []
        while ready:
            i = ready.pop(rng.randrange(len(ready)))
            order.append(i)
            for u in users.get(i, ()):
                pending[u].discard(i)
                if not pending[u]:
                    ready.append(u)
        yield order


def cases():
    for name, op in PAIRS:
        for ranks, stride in SHAPES:
            yield pytest.param(name, op, ranks, stride, id=f"{name}-{op}-{ranks}x{stride}")


@pytest.mark.parametrize("name,op,ranks,stride", list(cases()))
def test_the_schedule_computes_the_op_in_the_recipes_steps(name, op, ranks, stride):
    group = Group.place(ranks, stride, NETWORK)
    recipe = ALGORITHMS[name].recipe(op, np.array(1e6), group, NETWORK)
    g, N = int(group.per_domain), int(group.domains)
    try:
        sch = collective_schedule(op, ranks, name, g)
    except SpecError:
        assert not recipe.valid, "a schedule is missing where the cost model prices the algorithm"
        return
    assert recipe.valid
    # acyclic and complete: every order that respects the dependencies runs every transfer
    for order in topological_orders(sch):
        assert sorted(order) == list(range(len(sch.transfers)))
        outs = run_symbolically(sch, order)
        for r in range(ranks):
            for c, want in expected(op, ranks, sch.chunks, r).items():
                assert outs[r][c] == want, f"rank {r} chunk {c}"
            assert set(expected(op, ranks, sch.chunks, r)) == set(sch.result(r))
    # data: each member gets at least what it lacks, all of them what the description says
    received = [Fraction(0)] * ranks
    for t in sch.transfers:
        if t.dst < ranks:
            received[t.dst] += Fraction(len(t.chunks), sch.chunks)
    for r in range(ranks):
        assert received[r] >= least_received(op, ranks, r)
    total = TOTALS[name, op](ranks, g, N)
    if total is not None:
        assert sum(received) == total
    # the latency term: as many steps as the recipe counts, each label used
    assert sch.steps == recipe.steps.sum(axis=0)
    assert {t.step for t in sch.transfers} == set(range(sch.steps))


def test_every_priced_op_has_a_schedule():
    for name, algorithm in ALGORITHMS.items():
        assert set(algorithm.schedules) == set(algorithm.costs), name


def test_a_schedule_is_found_by_alias_and_unknown_names_are_one_line():
    assert collective_schedule("all_reduce", 4, "tree").algorithm == "double_binary_tree"
    assert collective_schedule("all_reduce", 8, "rabenseifner") == collective_schedule(
        "all_reduce", 8, "halving_doubling"
    )
    with pytest.raises(
        CatalogError,
        match=r"^algorithm: 'rings' is not a known collective algorithm \(did you mean 'ring'\?\); allowed: ",
    ):
        collective_schedule("all_reduce", 4, "rings")
    with pytest.raises(SpecError, match="^algorithm: 'double_binary_tree' does not implement op 'all_gather'"):
        collective_schedule("all_gather", 4, "tree")


def test_one_rank_moves_nothing():
    for name, op in PAIRS:
        assert collective_schedule(op, 1, name).transfers == ()


def test_ring_all_reduce_chains_each_send_to_the_previous_receive():
    n = 4
    sch = collective_schedule("all_reduce", n, "ring")
    assert len(sch.transfers) == 2 * (n - 1) * n
    for k in range(2 * (n - 1)):
        for i in range(n):
            t = sch.transfers[k * n + i]
            assert (t.src, t.dst, t.step, t.reduce) == (i, (i + 1) % n, k, k < n - 1)
            assert t.after == (() if k == 0 else ((k - 1) * n + (i - 1) % n,))
