"""What the packet engine takes: links, flows and fabric settings as named tuples of arrays and
scalars (STYLE 9), and the one signature the engine is compiled for."""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from simulators.packet._congestion import HOOK, MARK


class Links(NamedTuple):
    """One entry per directed link."""

    rate_bps: np.ndarray  # float64
    delay_ps: np.ndarray  # int64
    to: np.ndarray  # int64: the node it feeds
    xoff_bytes: np.ndarray  # int64: PFC thresholds of the switch port it feeds
    xon_bytes: np.ndarray


class Flows(NamedTuple):
    """One entry per flow (int64); paths, dependants and reverse paths as CSR lists."""

    nbytes: np.ndarray
    mtu: np.ndarray
    start_ps: np.ndarray
    gap_ps: np.ndarray
    path_start: np.ndarray  # flow f's links: path_links[path_start[f]:path_start[f + 1]]
    path_links: np.ndarray
    dep_count: np.ndarray  # flows each waits for
    dependents_start: np.ndarray  # flows waiting for f: dependents[dependents_start[f]:...]
    dependents: np.ndarray
    reverse_start: np.ndarray  # its ACKs' links, receiver to sender (empty without ACKs)
    reverse_links: np.ndarray


class Fabric(NamedTuple):
    """Switch buffers, PFC, ECN, ACKs, the seed and the rate-counting window (scalars)."""

    n_nodes: int
    buffer_bytes: int
    pfc: bool
    ecn: bool
    kmin_bytes: int
    kmax_bytes: int
    pmax: float
    acks: bool
    seed: int
    window_start_ps: int
    window_end_ps: int


def signature():
    """Argument types of the one compiled engine: the hooks are first-class function values."""
    ints, floats = numba.int64[::1], numba.float64[::1]
    links = numba.types.NamedTuple([floats] + [ints] * 4, Links)
    flows = numba.types.NamedUniTuple(ints, 11, Flows)
    i, b = numba.int64, numba.boolean
    fabric = numba.types.NamedTuple([i, i, b, b, i, i, numba.float64, b, i, i, i], Fabric)
    return (links, flows, fabric, floats, i, HOOK, HOOK, MARK, HOOK, HOOK)
