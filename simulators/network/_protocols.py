"""From an algorithm's recipe (steps per level, bytes on the wire) to seconds, per NCCL protocol.

Costs are alpha-beta (Thakur, Rabenseifner & Gropp, IJHPCA 2005): every collective launch pays a
base latency, every sequential step a per-step latency of the level it crosses, and the bytes pay
the effective bandwidth. NCCL's tuner (NVIDIA/nccl `src/graph/tuning.cc`, constants as in
../shared/reference/netsim.md section 2) prices each algorithm under three protocols and keeps the
fastest: LL (8-byte stores with a flag: low latency, a quarter of the bandwidth), LL128 (128-byte
lines, 120 of 128 bytes data) and Simple (full bandwidth, highest latency); NVLS runs Simple only.
Latencies below are microseconds as NCCL lists them. Per-channel bandwidth caps, the tree
correction factors and the ring "plateau" multiplier of tuning.cc are left out: they need
NCCL's channel counts, which this model does not track.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simulators._errors import CatalogError
from simulators.network._network import Network

US = 1e-6


class Protocol(NamedTuple):
    name: str
    base_s: float  # per collective launch (NCCL baseLat)
    scaleup_step_s: float  # per step over NVLink (NCCL hwLat NVLINK)
    net_step_s: float  # per step over the network (NCCL hwLat NET)
    bandwidth_factor: float  # share of the effective bandwidth the protocol delivers


# family -> protocols. "ring" also prices the point-to-point steps of non-NCCL algorithms
# (halving-doubling, pairwise, hierarchical phases, direct sends), which are ring-like sends.
# Ring LL: busBw/4 (NCCL: 1/3 for single-node RS/AG, not modelled); LL128: x0.92 (tuning.cc).
# Double binary tree: x0.92 for every protocol, LL a further /3.8, LL128 x120/128 (multi-node; 7/9 on one node
# is not modelled). NVLS: NVLink 25 us (no base); across domains NCCL's NVLSTree step 20.9 us.
PROTOCOLS: dict[str, tuple[Protocol, ...]] = {
    "ring": (
        Protocol("LL", 6.6 * US, 0.6 * US, 2.7 * US, 1 / 4),
        Protocol("LL128", 14.0 * US, 1.9 * US, 4.0 * US, 0.92),
        Protocol("Simple", 8.4 * US, 3.4 * US, 14.0 * US, 1.0),
    ),
    "double_binary_tree": (
        Protocol("LL", 6.8 * US, 0.6 * US, 5.0 * US, 0.92 / 3.8),
        Protocol("LL128", 14.0 * US, 1.25 * US, 8.5 * US, 0.92 * 120 / 128),
        Protocol("Simple", 8.4 * US, 4.0 * US, 14.0 * US, 0.92),
    ),
    "nvls": (Protocol("Simple", 0.0, 25.0 * US, 20.9 * US, 1.0),),
}
PROTOCOL_NAMES = ("LL", "LL128", "Simple")


class Recipe(NamedTuple):
    """What one algorithm does for one op, per candidate (arrays of one broadcast shape).

    `calls` collective launches, each paying the base latency; `steps[L]` sequential steps that
    cross level L; `transfer_s` the time the bytes take at the full effective bandwidths (a
    protocol divides it by its bandwidth factor); `valid` False where the algorithm cannot run.
    """

    family: str
    calls: np.ndarray
    steps: np.ndarray
    transfer_s: np.ndarray
    valid: np.ndarray | bool = True


def at_level(count: np.ndarray, level: np.ndarray, levels: int) -> np.ndarray:
    """(levels, *shape) array holding `count` at index `level`, zero elsewhere."""
    index = np.arange(levels).reshape((-1,) + (1,) * max(np.ndim(count), np.ndim(level)))
    return np.where(index == level, count, 0.0)


def recipe_time_s(recipe: Recipe, network: Network, protocol: str | None = None) -> np.ndarray:
    """Seconds under the fastest protocol of the recipe's family (or the one named); inf
    where the recipe is not valid or the family has no such protocol."""
    if protocol is not None and protocol.lower() not in {p.lower() for p in PROTOCOL_NAMES}:
        raise CatalogError(f"protocol: {protocol!r} is not a known NCCL protocol; allowed: {', '.join(PROTOCOL_NAMES)}")
    levels = network.levels
    best = np.full(np.shape(recipe.transfer_s), np.inf)
    for p in PROTOCOLS[recipe.family]:
        if protocol is not None and p.name.lower() != protocol.lower():
            continue
        step_s = np.where(levels.is_scaleup, p.scaleup_step_s, p.net_step_s) + levels.latency_s
        step_s = step_s.reshape((-1,) + (1,) * (recipe.steps.ndim - 1))
        latency = recipe.calls * p.base_s + (step_s * recipe.steps).sum(axis=0)
        best = np.minimum(best, latency + recipe.transfer_s / p.bandwidth_factor)
    return np.where(recipe.valid, best, np.inf)
