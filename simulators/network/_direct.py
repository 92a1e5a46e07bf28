"""Direct point-to-point collectives, as NCCL runs them: all-to-all and send/recv.

All-to-all: each member posts its n - 1 sends of S/n at once (NCCL groups them). Its NVLink
carries what goes to the g - 1 members of its domain while its NIC carries the rest, in
parallel; the NIC sends to each farther level at that level's (oversubscribed) rate, one after
another. Latency: n - 1 point-to-point steps, each on the level of its peer (Thakur et al.
2005: pairwise/direct all-to-all (n-1) alpha + (n-1)/n S beta).

Send/recv: every member sends S to the next member (`stride` GPUs away), as pipeline stages do;
one step on the level joining neighbours.

Schedules: all-to-all has no dependencies (every send is posted at once); the send to the member
k ahead is labelled step k - 1, the latency term's n - 1 steps. Send/recv: member i to i + 1.
"""

from __future__ import annotations

import numpy as np

from simulators.network._algorithm import Algorithm, register
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, at_level
from simulators.network._schedule import Builder


def _all_to_all(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    peers = group.peers_per_level
    per_level_s = peers * (nbytes / group.ranks) / group.bytes_per_s
    return Recipe(
        family="ring",
        calls=(group.ranks > 1).astype(float),
        steps=peers,
        transfer_s=np.maximum(per_level_s[0], per_level_s[1:].sum(axis=0)),
    )


def _send_recv(nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
    active = (group.ranks > 1).astype(float)
    level = group.level_of(1)
    return Recipe(
        family="ring",
        calls=active,
        steps=at_level(active, level, len(network.levels.bytes_per_s)),
        transfer_s=active * nbytes / group.rate(level),
    )


def _all_to_all_schedule(n: int, per_domain: int):
    b = Builder()
    for src in range(n):
        for dst in range(n):
            if src != dst:  # block dst of src's input lands in block src of dst's output
                b.add(src, dst, range(src, src + 1), (dst - src) % n - 1, source=range(dst, dst + 1), from_input=True)
    return n, b.transfers


def _send_recv_schedule(n: int, per_domain: int):
    b = Builder()
    for i in range(n - 1):
        b.add(i, i + 1, range(1), 0, from_input=True)
    return 1, b.transfers


register(
    Algorithm(
        name="direct",
        costs={"all_to_all": _all_to_all, "send_recv": _send_recv},
        schedules={"all_to_all": _all_to_all_schedule, "send_recv": _send_recv_schedule},
        in_nccl=True,
    )
)
