"""NCCL's double binary tree all-reduce: logarithmic latency across domains.

Inside a domain NCCL chains the g members (reduce up the chain, broadcast down it, pipelined):
each member sends S to one neighbour and S to the other, 2S through its NVLink. Across the N
domains two complementary binary trees each carry half the data; every domain sends and
receives 2S in total over the network (S when N = 2: each tree is then one exchange), spread
over its g NICs. The latency is NCCL's tree model (tuning.cc):
2 * ((ppn - 1) * intraLat + floor(log2 nNodes) * interLat), with ppn = g and nNodes = N.
The tree's bandwidth factor (x0.92) is part of its protocol table.

Schedule: tree t (0, 1) carries chunk t (S / 2) up the chain of every domain to its first member,
up a binary tree over those heads (in domain order for tree 0, reversed for tree 1, so a head
that is a leaf of one tends to be inside the other), and back down both; 2(g-1) + 2 floor(log2 N)
steps, without NCCL's chunk pipelining.
"""

from __future__ import annotations

import numpy as np

from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, at_level
from simulators.network._schedule import Builder, binary_tree, domains_of


def _all_reduce(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    g, N, top = group.per_domain, group.domains, group.top
    network_factor = np.where(N > 2, 2.0, 1.0)
    inside = np.where(g > 1, 2 / group.bytes_per_s[0], 0.0)
    inverse_bw = np.maximum(inside, np.where(N > 1, network_factor / (g * group.rate(top)), 0.0))
    levels = len(network.levels.bytes_per_s)
    return Recipe(
        family="double_binary_tree",
        calls=(group.ranks > 1).astype(float),
        steps=at_level(2 * (g - 1), 0, levels) + at_level(2 * np.floor(np.log2(N)), top, levels),
        transfer_s=nbytes * inverse_bw,
    )


def _all_reduce_schedule(n: int, g: int):
    domains = domains_of(n, g, "double_binary_tree")
    chains = [list(range(d * g, min(n, (d + 1) * g))) for d in range(domains)]
    b = Builder()
    for t in (0, 1):
        chunk = range(t, t + 1)
        entry = {}
        for chain in chains:  # up the chain: member j adds what j + 1 sent and passes it to j - 1
            for j in range(len(chain) - 1, 0, -1):
                entry[chain[j - 1]] = [
                    b.add(chain[j], chain[j - 1], chunk, g - 1 - j, entry.get(chain[j], ()), reduce=True)
                ]
        heads = [chain[0] for chain in chains]
        done = binary_tree(b, heads if t == 0 else heads[::-1], chunk, g - 1, entry)
        depth = 2 * ((domains).bit_length() - 1)
        for chain in chains:
            for j in range(1, len(chain)):
                done[chain[j]] = [b.add(chain[j - 1], chain[j], chunk, g - 1 + depth + j - 1, done[chain[j - 1]])]
    return 2, b.transfers


register(
    Algorithm(
        name="double_binary_tree",
        costs={"all_reduce": _all_reduce},
        schedules={"all_reduce": _all_reduce_schedule},
        in_nccl=True,
        aliases=("tree",),
    )
)
