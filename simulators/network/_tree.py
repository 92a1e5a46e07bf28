"""NCCL's double binary tree all-reduce: logarithmic latency across domains.

Inside a domain NCCL chains the g members (reduce up the chain, broadcast down it, pipelined):
each member sends S to one neighbour and S to the other, 2S through its NVLink. Across the N
domains two complementary binary trees each carry half the data; every domain sends and
receives 2S in total over the network (S when N = 2: each tree is then one exchange), spread
over its g NICs. The latency is NCCL's tree model (tuning.cc):
2 * ((ppn - 1) * intraLat + floor(log2 nNodes) * interLat), with ppn = g and nNodes = N.
The tree's bandwidth factor (x0.92) is part of its protocol table.
"""

from __future__ import annotations

import numpy as np

from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, at_level


def _all_reduce(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    g, N, top = group.per_domain, group.domains, group.top
    bw = network.levels.bytes_per_s
    network_factor = np.where(N > 2, 2.0, 1.0)
    inverse_bw = np.maximum(np.where(g > 1, 2 / bw[0], 0.0), np.where(N > 1, network_factor / (g * bw[top]), 0.0))
    levels = len(bw)
    return Recipe(
        family="tree",
        calls=(group.ranks > 1).astype(float),
        steps=at_level(2 * (g - 1), 0, levels) + at_level(2 * np.floor(np.log2(N)), top, levels),
        transfer_s=nbytes * inverse_bw,
    )


register(
    Algorithm(
        name="double_binary_tree",
        costs={"all_reduce": _all_reduce},
        in_nccl=True,
        aliases=("tree",),
    )
)
