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

Schedule: the NVSwitch of domain d is a node of its own (pseudo-member n + d), which the packet
graphs have too: every member sends its whole buffer to it (a reducing load; the switch adds),
the switch returns shard i (chunks S/g) to member i, which stores it back once reduced across
domains (a double binary tree per rail over members i of every domain, on the two halves of the
shard) for the switch to multicast to the other members. The switch's legs are one operation
(one step, as NCCL counts it); across domains the multicast overlaps the tree's last step, as
NVLSTree pipelines them. The RDMA replay has no switch that adds, so it cannot replay NVLS.
"""

from __future__ import annotations

import numpy as np

from simulators._errors import SpecError
from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, at_level
from simulators.network._schedule import Builder, binary_tree, domains_of


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


def _domains(n: int, g: int, across: bool) -> int:
    domains = domains_of(n, g, "nvls", exact=True)
    if g < 2 or (domains > 1 and not across):
        where = "domains of 2 or more members" if across else "one NVLink domain of 2 or more members"
        raise SpecError(f"nvls: {n} ranks, {g} per NVLink domain; allowed: {where}")
    return domains


def _all_reduce_schedule(n: int, g: int):
    domains = _domains(n, g, across=True)
    chunks = g if domains == 1 else 2 * g
    shard = [range(i * chunks // g, (i + 1) * chunks // g) for i in range(g)]
    b, holds = Builder(), {}
    loads = {
        d: [b.add(r, n + d, range(chunks), 0, reduce=True) for r in range(d * g, (d + 1) * g)] for d in range(domains)
    }
    for r in range(n):
        holds[r] = [b.add(n + r // g, r, shard[r % g], 0, loads[r // g])]
    last_step = 2 * (domains.bit_length() - 1)
    if domains > 1:
        for i in range(g):
            rail = [d * g + i for d in range(domains)]
            entry = {r: holds[r] for r in rail}
            for t in (0, 1):
                chunk = range(shard[i][t], shard[i][t] + 1)
                done = binary_tree(b, rail if t == 0 else rail[::-1], chunk, 1, entry, copied=entry)
                for r in rail:
                    holds[r] = holds[r] + done[r] if t else done[r]
    for r in range(n):
        d, i = divmod(r, g)
        store = b.add(r, n + d, shard[i], last_step, holds[r])
        for j in range(d * g, (d + 1) * g):
            if j != r:
                b.add(n + d, j, shard[i], last_step, [store])
    return chunks, b.transfers


def _reduce_scatter_schedule(n: int, g: int):
    _domains(n, g, across=False)
    b = Builder()
    loads = [b.add(r, n, range(n), 0, reduce=True) for r in range(n)]
    for r in range(n):
        b.add(n, r, range(r, r + 1), 0, loads)
    return n, b.transfers


def _all_gather_schedule(n: int, g: int):
    _domains(n, g, across=False)
    b = Builder()
    for r in range(n):
        store = b.add(r, n, range(r, r + 1), 0)
        for j in range(n):
            if j != r:
                b.add(n, j, range(r, r + 1), 0, [store])
    return n, b.transfers


register(
    Algorithm(
        name="nvls",
        costs={"all_reduce": _all_reduce, "reduce_scatter": _reduce_scatter, "all_gather": _reduce_scatter},
        schedules={
            "all_reduce": _all_reduce_schedule,
            "reduce_scatter": _reduce_scatter_schedule,
            "all_gather": _all_gather_schedule,
        },
        in_nccl=True,
        aliases=("nvls_tree",),
    )
)
