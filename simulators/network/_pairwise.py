"""Pairwise-exchange all-to-all (MPI's classic schedule, not NCCL's): n - 1 rounds, one peer each.

Round d exchanges S/n with the member d away (rank XOR d, for power-of-two n), so the rounds
with d < g stay in the domain and the others cross the level joining members d apart; rounds
are synchronised, so unlike `direct` the NVLink and NIC rounds do not overlap and every round
waits for its own slowest pair. Bandwidth and latency terms are Thakur et al. 2005:
(n - 1) alpha + (n - 1)/n S beta, each round priced on its own level. For other n, MPI pairs
rank + d with rank - d, and some pairs of a round cross a domain boundary earlier than this
counts: a lower bound there.

Schedule: round d waits for the member's send and receive of round d - 1 (the rounds are
synchronised); each transfer carries input block `peer` into output block `member`.
"""

from __future__ import annotations

import numpy as np

from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe
from simulators.network._schedule import Builder


def _all_to_all(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    peers = group.peers_per_level  # rounds first crossing each level
    return Recipe(
        family="ring",
        calls=(group.ranks > 1).astype(float),
        steps=peers,
        transfer_s=(peers * (nbytes / group.ranks) / group.bytes_per_s).sum(axis=0),
    )


def _all_to_all_schedule(n: int, per_domain: int):
    b, power_of_two = Builder(), n & (n - 1) == 0
    sent: dict[int, int] = {}
    got: dict[int, int] = {}
    for d in range(1, n):
        now_sent, now_got = {}, {}
        for i in range(n):
            peer = i ^ d if power_of_two else (i + d) % n
            after = [x[i] for x in (sent, got) if i in x]
            now_sent[i] = now_got[peer] = b.add(
                i, peer, range(i, i + 1), d - 1, after, source=range(peer, peer + 1), from_input=True
            )
        sent, got = now_sent, now_got
    return n, b.transfers


register(
    Algorithm(
        name="pairwise",
        costs={"all_to_all": _all_to_all},
        schedules={"all_to_all": _all_to_all_schedule},
        in_nccl=False,
    )
)
