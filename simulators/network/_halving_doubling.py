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
"""

from __future__ import annotations

import numpy as np

from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, at_level


def _halving(nbytes: np.ndarray, group: Group, network: Network, passes: int, extra_bytes: np.ndarray) -> Recipe:
    """`passes` sweeps (1: reduce-scatter or all-gather, 2: all-reduce) over the power-of-two
    core, plus the two extra steps (moving `extra_bytes` in all) where n is not a power of two."""
    bw = network.levels.bytes_per_s
    levels = len(bw)
    n = group.ranks
    core_steps = np.floor(np.log2(n))
    core = 2.0**core_steps
    steps = np.zeros((levels,) + n.shape)
    transfer_s = np.zeros(n.shape)
    for j in range(int(np.max(core_steps, initial=0))):
        active = (j < core_steps).astype(float)
        level = group.level_of(2**j)
        steps += at_level(passes * active, level, levels)
        transfer_s += passes * active * nbytes / 2 ** (j + 1) / bw[level]
    extra = (n > core).astype(float)
    level = group.level_of(core)  # partners p apart
    steps += at_level(2 * extra, level, levels)
    transfer_s += extra * extra_bytes / bw[level]
    return Recipe(family="ring", calls=(n > 1).astype(float), steps=steps, transfer_s=transfer_s)


def _all_reduce(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    return _halving(nbytes, group, network, passes=2, extra_bytes=2 * nbytes)


def _reduce_scatter(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    """Also all-gather: the extra steps move S and S/n either way round."""
    return _halving(nbytes, group, network, passes=1, extra_bytes=nbytes + nbytes / group.ranks)


register(
    Algorithm(
        name="halving_doubling",
        costs={"all_reduce": _all_reduce, "reduce_scatter": _reduce_scatter, "all_gather": _reduce_scatter},
        in_nccl=False,
        aliases=("rabenseifner",),
    )
)
