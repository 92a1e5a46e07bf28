"""Ring collectives (NCCL's Ring): bandwidth-optimal, latency linear in the group size.

Every member sends to the next and receives from the previous at each of the ring's steps, all
pipelined, so the bytes move at the pace of the slowest hop (Thakur et al. 2005: all-reduce
2(n-1) steps moving 2(n-1)/n * S; reduce-scatter and all-gather n-1 steps moving (n-1)/n * S).
In a two-level group (g members per domain, N domains) the hops inside a domain run over NVLink
and N of them cross the network; NCCL lays one ring per channel and spreads the channels over
the g NICs, so a domain pushes the same bytes through g NICs at once: the network hop runs at
g times the per-GPU rate of the outermost level crossed (this is why 8 NICs of 400 Gb/s give
a multi-node ring all-reduce ~370-385 GB/s busbw, nccl-tests issue #290).

Step latencies follow NCCL's tuning model: a ring of nsteps has nInter = 2*nNodes network steps
for all-reduce and nNodes - 1 for reduce-scatter / all-gather (tuning.cc), the rest on NVLink.
A broadcast is a pipelined chain: n - 1 hops, S through each.

Schedules (the transfers of those steps, one chunk of S / n each; a broadcast's chain moves S
per hop, without the chunk pipelining): all-reduce is a reduce-scatter pass that leaves member i
with chunk i + 1 fully reduced, then an all-gather pass circulating it.
"""

from __future__ import annotations

import numpy as np

from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, at_level
from simulators.network._schedule import Builder, ring_pass


def ring_recipe(wire_bytes: np.ndarray, steps: np.ndarray, inter: np.ndarray, group: Group, network: Network) -> Recipe:
    """A pipelined ring moving `wire_bytes` through every member in `steps` steps, `inter` of
    them across the network (on the group's outermost level)."""
    g, N, top = group.per_domain, group.domains, group.top
    inside = np.where(g > 1, 1 / group.bytes_per_s[0], 0.0)
    inverse_bw = np.maximum(inside, np.where(N > 1, 1 / (g * group.rate(top)), 0.0))
    levels = len(network.levels.bytes_per_s)
    return Recipe(
        family="ring",
        calls=(group.ranks > 1).astype(float),
        steps=at_level(steps - inter, 0, levels) + at_level(inter, top, levels),
        transfer_s=wire_bytes * inverse_bw,
    )


def _all_reduce(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    n, N = group.ranks, group.domains
    steps = 2 * (n - 1)
    inter = np.where(N > 1, np.minimum(2 * N, steps), 0.0)
    return ring_recipe(nbytes * steps / n, steps, inter, group, network)


def _reduce_scatter(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    """Also all-gather: the same traffic in the other direction."""
    n, N = group.ranks, group.domains
    return ring_recipe(nbytes * (n - 1) / n, n - 1, N - 1, group, network)


def _broadcast(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    n, N = group.ranks, group.domains
    return ring_recipe(nbytes, n - 1, N - 1, group, network)


def _ring_schedule(passes: tuple[tuple[int, bool], ...]):
    """Ring passes (shift, reduce) over the members in rank order, chunk i = S / n each."""

    def schedule(n: int, per_domain: int):
        b, members, parts = Builder(), list(range(n)), [range(c, c + 1) for c in range(n)]
        last: dict = {}
        for k, (shift, reduce) in enumerate(passes):  # the first chunk a pass sends is the last one received
            last = {m: got[-1:] for m, got in ring_pass(b, members, parts, shift, k * (n - 1), reduce, last).items()}
        return n, b.transfers

    return schedule


def _broadcast_schedule(n: int, per_domain: int):
    b = Builder()
    for i in range(n - 1):
        b.add(i, i + 1, range(1), i, [i - 1] if i else ())
    return 1, b.transfers


register(
    Algorithm(
        name="ring",
        costs={
            "all_reduce": _all_reduce,
            "reduce_scatter": _reduce_scatter,
            "all_gather": _reduce_scatter,
            "broadcast": _broadcast,
        },
        schedules={
            "all_reduce": _ring_schedule(((0, True), (-1, False))),
            "reduce_scatter": _ring_schedule(((1, True),)),
            "all_gather": _ring_schedule(((0, False),)),
            "broadcast": _broadcast_schedule,
        },
        in_nccl=True,
    )
)
