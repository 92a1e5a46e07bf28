"""Recursive halving / doubling (MPICH; not in NCCL): log2 n latency steps, optimal bandwidth.

Reduce-scatter by recursive halving: in step j a member exchanges half of what it still holds
with the member 2^j away, S/2, S/4, ... down to S/p (p = 2^floor(log2 n)): log2 p steps and
(p-1)/p * S bytes (Thakur et al. 2005). Partners are taken nearest first, so the big early
halves stay inside the domain and only the small late ones cross the network; each step is
priced on the level joining members 2^j apart, at one member's own rate (every pair exchanges
at once, each over its own link or NIC). All-gather by recursive doubling is the mirror image
(farthest first, the data doubling as partners get nearer): the same steps and bytes. The
all-reduce is Rabenseifner's: reduce-scatter then all-gather, 2 log2 p steps, 2(p-1)/p * S.

For n that is not a power of two the standard extra-step treatment applies (Thakur et al.
2005, section 4): the r = n - p extra members first hand their data to a partner p away and
get their result back at the end. Penalty: all-reduce two steps moving S each; reduce-scatter
one step of S before and one of S/n after; all-gather one of S/n before and one of S after.

Schedule, on n chunks (chunk c belongs to core member c mod p, who hands chunk c >= p to its
extra partner): in halving step j member q keeps the chunks whose owner agrees with q in bits
0..j and sends the others to q xor 2^j, every 2^(j+1)-th chunk: strided, not contiguous, which
keeps the partners nearest first and every member's own chunk at its nccl offset.
"""

from __future__ import annotations

import numpy as np

from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, at_level
from simulators.network._schedule import Builder


def _halving(nbytes: np.ndarray, group: Group, network: Network, passes: int, extra_bytes: np.ndarray) -> Recipe:
    """`passes` sweeps (1: reduce-scatter or all-gather, 2: all-reduce) over the power-of-two
    core, plus the two extra steps (moving `extra_bytes` in all) where n is not a power of two."""
    levels = len(network.levels.bytes_per_s)
    n = group.ranks
    core_steps = np.floor(np.log2(n))
    core = 2.0**core_steps
    steps = np.zeros((levels,) + n.shape)
    transfer_s = np.zeros(n.shape)
    for j in range(int(np.max(core_steps, initial=0))):
        active = (j < core_steps).astype(float)
        level = group.level_of(2**j)
        steps += at_level(passes * active, level, levels)
        transfer_s += passes * active * nbytes / 2 ** (j + 1) / group.rate(level)
    extra = (n > core).astype(float)
    level = group.level_of(core)  # partners p apart
    steps += at_level(2 * extra, level, levels)
    transfer_s += extra * extra_bytes / group.rate(level)
    return Recipe(family="ring", calls=(n > 1).astype(float), steps=steps, transfer_s=transfer_s)


def _all_reduce(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    return _halving(nbytes, group, network, passes=2, extra_bytes=2 * nbytes)


def _reduce_scatter(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    """Also all-gather: the extra steps move S and S/n either way round."""
    return _halving(nbytes, group, network, passes=1, extra_bytes=nbytes + nbytes / group.ranks)


def _schedule(halve: bool, double: bool):
    """Recursive halving (reduce-scatter), doubling (all-gather) or both, with the extra steps."""

    def schedule(n: int, per_domain: int):
        b, p = Builder(), 1 << (n.bit_length() - 1)
        levels, extra, step = p.bit_length() - 1, n - p, 0
        got: dict[int, list[int]] = {q: [] for q in range(p)}  # what each core member received so far
        if extra:  # the extra members hand over their data (all of it, or their own chunk)
            for q in range(extra):
                got[q].append(b.add(p + q, q, range(n) if halve else range(p + q, p + q + 1), 0, reduce=halve))
            step = 1
        rounds = [(j, True) for j in range(levels)] * halve + [(j, False) for j in reversed(range(levels))] * double
        for j, reducing in rounds:
            sent = {}
            for q in range(p):
                partner = q ^ (1 << j)
                first = (partner if reducing else q) % (2 << j)  # halving: the partner's half; doubling: all q holds
                sent[partner] = b.add(q, partner, range(first, n, 2 << j), step, got[q], reduce=reducing)
            for q in range(p):
                got[q].append(sent[q])
            step += 1
        for q in range(extra):  # and get their result back
            b.add(q, p + q, range(n) if double else range(p + q, p + q + 1), step, got[q])
        return n, b.transfers

    return schedule


register(
    Algorithm(
        name="halving_doubling",
        costs={"all_reduce": _all_reduce, "reduce_scatter": _reduce_scatter, "all_gather": _reduce_scatter},
        schedules={
            "all_reduce": _schedule(halve=True, double=True),
            "reduce_scatter": _schedule(halve=True, double=False),
            "all_gather": _schedule(halve=False, double=True),
        },
        in_nccl=False,
        aliases=("rabenseifner",),
    )
)
