"""NVLS: reduction inside the NVSwitch (NVLink SHARP), and NVLS + tree across domains.

All-reduce inside a domain of g members: each member asks the switch for its 1/g shard reduced
over every member (multimem.ld_reduce: the switch reads S from each member's memory, returns
S/g), then stores the shard once for the switch to multicast to all (sends S/g, receives S). A
member thus sends S + S/g and receives as much: S (g+1)/g at the NVLS rate (the effective NVLink
rate times NCCL's nvlsEfficiency), about half of a ring's 2(g-1)/g * S over NVLink at a cheaper
rate (netsim.md section 2: "each GPU sends ~S and receives ~S"). Reduce-scatter or all-gather
alone moves S per member. One switch operation is the whole intra-domain latency (NCCL: NVLS
NVLink 25 us, no base), so unlike step-based algorithms its latency does not grow with g.

Across N domains NCCL runs NVLSTree (all-reduce only): NVLS reduce-scatter inside each domain,
a double binary tree over the domains on S/g per member (each member's own NIC: 2 * S/g sent and
received, S/g when N = 2), NVLS all-gather; the phases pipeline, so the slower one sets the
pace. Latency: one NVLS step plus 2 * floor(log2 N) NVLSTree network steps (tuning.cc).
NVLS needs an NVLS-capable switch and at least two members per domain; NCCL runs NVLS
reduce-scatter and all-gather inside one domain only. Elsewhere the time is inf.
"""

from __future__ import annotations

import numpy as np

from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, at_level


def _all_reduce(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    g, N, top = group.per_domain, group.domains, group.top
    active = (group.ranks > 1).astype(float)
    bw = network.levels.bytes_per_s
    inside = nbytes * (g + 1) / g / network.nvls_bytes_per_s
    across = np.where(N > 1, np.where(N > 2, 2.0, 1.0) * nbytes / g / (bw[top]), 0.0)
    levels = len(bw)
    return Recipe(
        family="nvls",
        calls=active,
        steps=at_level(active, 0, levels) + at_level(2 * np.floor(np.log2(N)), top, levels),
        transfer_s=active * np.maximum(inside, across),
        valid=(active == 0) | (network.nvls & (g > 1)),
    )


def _reduce_scatter(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    """Also all-gather (multimem stores instead of reducing loads: the same bytes)."""
    g, N = group.per_domain, group.domains
    active = (group.ranks > 1).astype(float)
    return Recipe(
        family="nvls",
        calls=active,
        steps=at_level(active, 0, len(network.levels.bytes_per_s)),
        transfer_s=active * nbytes / network.nvls_bytes_per_s,
        valid=(active == 0) | (network.nvls & (g > 1) & (N == 1)),
    )


register(
    Algorithm(
        name="nvls",
        costs={"all_reduce": _all_reduce, "reduce_scatter": _reduce_scatter, "all_gather": _reduce_scatter},
        in_nccl=True,
        aliases=("nvls_tree",),
    )
)
