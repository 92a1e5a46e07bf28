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

Schedule, on n = g N chunks, member i of domain d being rank d g + i: the part of local member i
is every g-th chunk from i (strided), so after both reduce-scatters rank r holds chunk r, as
nccl's reduce-scatter defines; the rings of one phase run side by side, each phase waiting for
what each member received in the one before.
"""

from __future__ import annotations

import numpy as np

from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, at_level
from simulators.network._schedule import Builder, domains_of, ring_pass


def _phases(nbytes: np.ndarray, group: Group, network: Network, inside_passes: int, across_passes: int) -> Recipe:
    """`inside_passes` ring RS/AG sweeps inside the domains on S, `across_passes` across them on
    S/g (all-reduce: 2 and 2; reduce-scatter and all-gather: 1 and 1)."""
    g, N, top = group.per_domain, group.domains, group.top
    levels = len(network.levels.bytes_per_s)
    inside = (g > 1).astype(float)
    across = (N > 1).astype(float)
    inside_s = (g - 1) / g * nbytes / group.bytes_per_s[0]
    across_s = (N - 1) / N * (nbytes / g) / group.rate(top)
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


def _schedule(*phases: tuple[str, tuple[tuple[int, bool], ...]]):
    """Phases ("inside" or "across", ring passes (shift, reduce)) one after another."""

    def schedule(n: int, g: int):
        domains = domains_of(n, g, "hierarchical", exact=True)
        inside = [([d * g + i for i in range(g)], [range(i, n, g) for i in range(g)]) for d in range(domains)]
        across = [
            ([d * g + i for d in range(domains)], [range(d * g + i, d * g + i + 1) for d in range(domains)])
            for i in range(g)
        ]
        b, got, step = Builder(), {r: [] for r in range(n)}, 0  # every transfer each member received
        for where, passes in phases:
            rings = inside if where == "inside" else across
            for shift, reduce in passes:
                for members, parts in rings:
                    for m, received in ring_pass(b, members, parts, shift, step, reduce, got).items():
                        got[m] = got[m] + received
                step += len(rings[0][0]) - 1
        return n, b.transfers

    return schedule


register(
    Algorithm(
        name="hierarchical",
        costs={"all_reduce": _all_reduce, "reduce_scatter": _reduce_scatter, "all_gather": _reduce_scatter},
        schedules={
            "all_reduce": _schedule(
                ("inside", ((1, True),)), ("across", ((0, True), (-1, False))), ("inside", ((0, False),))
            ),
            "reduce_scatter": _schedule(("inside", ((1, True),)), ("across", ((1, True),))),
            "all_gather": _schedule(("across", ((0, False),)), ("inside", ((0, False),))),
        },
        in_nccl=False,
        aliases=("two_level", "2d"),
    )
)
