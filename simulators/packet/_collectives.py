"""Collectives as flow DAGs for the packet simulator, on placed ranks.

A collective runs the steps of its algorithm (simulators/network: the same algorithms the
analytical model prices) as point-to-point flows; a rank's send in step k waits for what it
received in step k - 1 (the data dependency of ring and halving-doubling algorithms), so
collectives that share the fabric slow each other exactly where their packets meet. `route(src,
dst)` gives the link ids between two GPU nodes (e.g. ECMP over a fabric graph).
- ring all-reduce: 2 (n - 1) steps of S / n bytes (reduce-scatter then all-gather);
- ring reduce-scatter / all-gather: n - 1 steps of S / n;
- halving-doubling all-reduce (Rabenseifner): log2 n steps of recursive halving (S/2, S/4, ...)
  then log2 n of doubling, partner i xor 2^k (n a power of two);
- double binary tree all-reduce (NCCL): two complementary binary trees (the ranks in order and
  reversed) each reduce S / 2 to their root and broadcast it back, hop by hop;
- all-to-all (direct): every rank sends S / n to every other at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simulators._errors import SpecError
from simulators.packet._run import Flow

Route = Callable[[int, int], tuple[int, ...]]
OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
ALGORITHMS = ("ring", "halving_doubling", "tree")


def collective_flows(
    op: str,
    ranks: Sequence[int],
    nbytes: int,
    route: Route,
    *,
    algorithm: str = "ring",
    mtu_bytes: int = 4096,
    start_s: float = 0.0,
    offset: int = 0,
) -> list[Flow]:
    """The flows of `op` over GPU nodes `ranks` (in ring order); flow indices in `after` are
    shifted by `offset`, the position of the first flow in the caller's combined list."""
    if op not in OPS:
        raise SpecError(f"op: {op!r} is not allowed; allowed: {', '.join(OPS)}")
    if algorithm not in ALGORITHMS:
        raise SpecError(f"algorithm: {algorithm!r} is not allowed; allowed: {', '.join(ALGORITHMS)}")
    n = len(ranks)
    if n < 2:
        return []
    if op == "all_to_all":
        chunk = max(1, nbytes // n)
        return [Flow(route(src, dst), chunk, mtu_bytes, start_s) for src in ranks for dst in ranks if src != dst]
    if algorithm == "ring":
        steps = 2 * (n - 1) if op == "all_reduce" else n - 1
        chunk = max(1, nbytes // n)
        flows: list[Flow] = []
        for step in range(steps):
            for i in range(n):
                src, dst = ranks[i], ranks[(i + 1) % n]
                after = () if step == 0 else (offset + (step - 1) * n + (i - 1) % n,)
                flows.append(Flow(route(src, dst), chunk, mtu_bytes, start_s, after))
        return flows
    if algorithm == "halving_doubling":
        if op != "all_reduce" or n & (n - 1):
            raise SpecError(f"halving_doubling: needs all_reduce on a power of two ranks, not {op} on {n}")
        levels = n.bit_length() - 1
        sizes = [max(1, nbytes >> (k + 1)) for k in range(levels)]
        schedule = [(1 << k, sizes[k]) for k in range(levels)] + [(1 << k, sizes[k]) for k in reversed(range(levels))]
        flows = []
        for step, (distance, size) in enumerate(schedule):
            for i in range(n):
                partner = i ^ distance
                # what rank i sends now needs what it received in the previous step
                after = () if step == 0 else (offset + (step - 1) * n + (i ^ schedule[step - 1][0]),)
                flows.append(Flow(route(ranks[i], ranks[partner]), size, mtu_bytes, start_s, after))
        return flows
    if op != "all_reduce":  # the tree
        raise SpecError(f"tree: needs all_reduce, not {op}")
    flows = []
    for order in (list(ranks), list(reversed(ranks))):  # two complementary trees, S/2 each
        flows += _tree_all_reduce(order, max(1, nbytes // 2), route, mtu_bytes, start_s, offset + len(flows))
    return flows


def _tree_all_reduce(order, nbytes, route, mtu_bytes, start_s, offset) -> list[Flow]:
    """A binary tree over `order` (position k's parent is (k - 1) // 2): every position sends its
    reduced data up once both children's data arrived, then the root's result comes down, each
    position forwarding once it received it (NCCL's tree without chunk pipelining)."""
    n = len(order)
    flows: list[Flow] = []
    up: dict[int, int] = {}  # position -> index of its flow to its parent
    for k in range(n - 1, 0, -1):
        children = [c for c in (2 * k + 1, 2 * k + 2) if c < n]
        after = tuple(offset + up[c] for c in children)
        up[k] = len(flows)
        flows.append(Flow(route(order[k], order[(k - 1) // 2]), nbytes, mtu_bytes, start_s, after))
    root_children = tuple(offset + up[c] for c in (1, 2) if c < n)
    down: dict[int, int] = {}
    for k in range(1, n):
        parent = (k - 1) // 2
        after = root_children if parent == 0 else (offset + down[parent],)
        down[k] = len(flows)
        flows.append(Flow(route(order[parent], order[k]), nbytes, mtu_bytes, start_s, after))
    return flows
