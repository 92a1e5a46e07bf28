"""Seconds of the training model's collectives, priced per distinct collective, many at once.

Candidates of a study repeat the same few thousand collectives (op, bytes, ranks, stride on one
network), and one call of the algorithm chooser costs ~0.2 ms whatever its length: so a batch
gathers the collectives it has not met yet and prices them in one vectorised call per network
and op (`price_collectives`); a single collective goes through the same call as one row. Every
price is memoised for the process."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from simulators._memo import trim
from simulators.network import Network, collective_time_s
from simulators.workload import Collective
from simulators.workload._memory import WEIGHT_BYTES

# ZeRO-3 moves parameters and gradients in buckets, each collective paying its latency: DeepSpeed's
# defaults are stage3_prefetch_bucket_size = 5e7 and reduce_bucket_size = 5e8 elements
# (deepspeed.ai/docs/config-json; recalled, not re-read here).
ZERO3_GATHER_BUCKET = 50_000_000
ZERO3_REDUCE_BUCKET = 500_000_000

Row = tuple[str, float, int, int]  # op, nbytes, ranks, stride
_PRICES: dict[tuple[Network, str, float, int, int], float] = {}


def price_collectives(network: Network, rows: Iterable[Row]) -> None:
    """Memoise the seconds of every row not priced yet: the fastest NCCL algorithm (0 for one
    rank or no bytes), times the network's measured slowdown of that collective."""
    trim(_PRICES)
    todo: dict[str, dict[Row, None]] = defaultdict(dict)
    for row in rows:
        if (network, *row) not in _PRICES:
            todo[row[0]][row] = None
    for op, distinct in todo.items():
        live = [row for row in distinct if row[2] != 1 and row[1] != 0]
        for row in distinct.keys() - set(live):
            _PRICES[(network, *row)] = 0.0
        if not live:
            continue
        # A forced algorithm that cannot run on a row raises for the whole call (PlanError):
        # nothing of it is memoised, so each plan priced alone meets its own error again.
        _, nbytes, ranks, stride = zip(*live)
        times = np.atleast_1d(collective_time_s(op, np.array(nbytes, dtype=float), ranks, stride, network)).tolist()
        for row, time_s in zip(live, times):
            factor = network.slowdown_factor(op, row[2], row[3], row[1]) if network.slowdown else 1.0
            _PRICES[(network, *row)] = factor * time_s


def collective_s(network: Network, op: str, nbytes: float, ranks: int, stride: int) -> float:
    """Seconds for `op` on `ranks` members `stride` apart (0 for one), memoised."""
    key = (network, op, nbytes, ranks, stride)
    if key not in _PRICES:
        price_collectives(network, [(op, nbytes, ranks, stride)])
    return _PRICES[key]


def collective_rows(c: Collective) -> tuple[tuple[float, Row], ...]:
    """(count, row) pairs one collective of the inventory is priced from: per-layer
    data-parallel traffic (ZeRO-3) moves in DeepSpeed's buckets, each paying the latency."""
    if c.group != "dp" or c.per != "micro-batch":
        return ((1, (c.op, c.nbytes, c.ranks, c.stride)),)
    gather = c.op == "all_gather"
    bucket_bytes = ZERO3_GATHER_BUCKET * WEIGHT_BYTES if gather else ZERO3_REDUCE_BUCKET * 4  # fp32 gradients
    full, rest = divmod(c.nbytes, bucket_bytes)
    return ((full, (c.op, bucket_bytes, c.ranks, c.stride)), (1, (c.op, rest, c.ranks, c.stride)))


def priced_s(network: Network, c: Collective) -> float:
    """Seconds for one collective of the inventory (`collective_rows`)."""
    return sum(count * collective_s(network, *row) for count, row in collective_rows(c))
