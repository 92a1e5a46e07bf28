"""Two-level collectives (astra-sim/SimAI's hierarchical 2-D; Horovod and Megatron style).

For g members per domain over N domains, as separate collective calls one after another:
  all-reduce      ring reduce-scatter inside each domain ((g-1)/g * S over NVLink), ring
                  all-reduce of the S/g shards across domains, one ring per rail (member i of
                  every domain: 2(N-1)/N * S/g over its own NIC), ring all-gather inside;
  reduce-scatter  inside first (S -> S/g), then across domains on S/g ((N-1)/N * S/g);
  all-gather      the mirror image: across domains on S/g first, then inside.
Each phase is a ring with its own launch (base latency) and steps; the phases do not overlap.
(netsim.md section 2: RS over NVLink (g-1)/g * S/B_nvl, AllReduce across nodes on S/g per rail
2(N-1)/N * (S/g)/B_nic, AG over NVLink, plus latency terms.)
"""

from __future__ import annotations

import numpy as np

from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, at_level


def _phases(nbytes: np.ndarray, group: Group, network: Network, inside_passes: int, across_passes: int) -> Recipe:
    """`inside_passes` ring RS/AG sweeps inside the domains on S, `across_passes` across them on
    S/g (all-reduce: 2 and 2; reduce-scatter and all-gather: 1 and 1)."""
    g, N, top = group.per_domain, group.domains, group.top
    bw = network.levels.bytes_per_s
    levels = len(bw)
    inside = (g > 1).astype(float)
    across = (N > 1).astype(float)
    inside_s = (g - 1) / g * nbytes / bw[0]
    across_s = (N - 1) / N * (nbytes / g) / bw[top]
    return Recipe(
        family="ring",
        calls=inside * inside_passes + across,  # the across phase is one all-reduce / RS / AG call
        steps=at_level(inside_passes * (g - 1), 0, levels) + at_level(across_passes * (N - 1), top, levels),
        transfer_s=inside_passes * inside_s + across_passes * across_s,
    )


def _all_reduce(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    return _phases(nbytes, group, network, inside_passes=2, across_passes=2)


def _reduce_scatter(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    """Also all-gather: the same two phases in the other order."""
    return _phases(nbytes, group, network, inside_passes=1, across_passes=1)


register(
    Algorithm(
        name="hierarchical",
        costs={"all_reduce": _all_reduce, "reduce_scatter": _reduce_scatter, "all_gather": _reduce_scatter},
        in_nccl=False,
        aliases=("two_level", "2d"),
    )
)
