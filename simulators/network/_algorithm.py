"""Collective algorithms: the registry, `collective_time_s`, `auto`, and nccl-tests bandwidths.

Message size follows nccl-tests (NVIDIA/nccl-tests doc/PERFORMANCE.md): `nbytes` is, per op,
  all_reduce       the buffer each rank holds (and gets back reduced);
  reduce_scatter   the whole input buffer of a rank (each rank keeps nbytes / n);
  all_gather       the whole gathered output buffer (each rank contributes nbytes / n);
  all_to_all       a rank's whole send buffer (nbytes / n to each member);
  broadcast        the buffer the root sends;
  send_recv        the message each member sends to the next one (`stride` apart).

Every function takes numpy arrays (broadcast together) or scalars for nbytes, ranks and stride,
and returns seconds of the same shape (a numpy scalar for scalar inputs). inf marks an algorithm
that cannot run for that candidate (NVLS outside an NVLS domain); a one-rank group costs 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from simulators._errors import CatalogError, PlanError, SpecError
from simulators._registry import Registry
from simulators.network._network import Network
from simulators.network._placement import Group
from simulators.network._protocols import Recipe, recipe_time_s
from simulators.network._schedule import Schedule, Transfer

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "send_recv")
AUTO = "auto"

CostFn = Callable[[np.ndarray, Group, Network], Recipe]
ScheduleFn = Callable[[int, int], tuple[int, Sequence[Transfer]]]  # (ranks >= 2, per_domain) -> (chunks, transfers)


@dataclass(frozen=True)
class Algorithm:
    """One collective algorithm: for each op it implements, a pure function building its recipe.

    Contract for every cost function: takes nbytes (float array, nccl-tests convention), a
    placed `Group` of the same shape and the `Network`; returns a `Recipe` of that shape with no
    Python branching on values; zero calls, steps and transfer for a one-rank group.
    Every op also has a schedule (`schedules`, see simulators/network/_schedule.py): for a group
    of n >= 2 members, g to an NVLink domain, the chunk count and the transfers of the steps the
    recipe prices, as many steps as its latency term counts; the packet simulator and the RDMA
    replay run it. `in_nccl` marks what NCCL itself runs, the set NCCL's tuner (`auto`) chooses from.
    """

    name: str
    costs: Mapping[str, CostFn]
    schedules: Mapping[str, ScheduleFn]
    in_nccl: bool
    aliases: tuple[str, ...] = ()

    def recipe(self, op: str, nbytes: np.ndarray, group: Group, network: Network) -> Recipe:
        if op not in self.costs:
            raise SpecError(
                f"algorithm: {self.name!r} does not implement op {op!r}; allowed ops: {', '.join(self.costs)}"
            )
        return self.costs[op](nbytes, group, network)

    def schedule(self, op: str, ranks: int, per_domain: int = 1) -> Schedule:
        """The transfers of `op` over `ranks` members, `per_domain` of them to an NVLink domain
        (`Group.per_domain` of the placed group; 1: every member in a domain of its own)."""
        if op not in self.schedules:
            raise SpecError(
                f"algorithm: {self.name!r} does not implement op {op!r}; allowed ops: {', '.join(self.schedules)}"
            )
        for field, value in (("ranks", ranks), ("per_domain", per_domain)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(f"{field}: {value!r} is not allowed; allowed: integers >= 1")
        return _schedule(self.name, op, ranks, per_domain)


@lru_cache(maxsize=64)  # a 128-rank ring all-reduce lists 32,512 transfers
def _schedule(name: str, op: str, ranks: int, per_domain: int) -> Schedule:
    """Memoised (schedules are immutable): every group of a packet run asks for the same one."""
    algorithm = ALGORITHMS[name]
    if ranks == 1:
        return Schedule(op, algorithm.name, 1, 1, 1, ())
    chunks, transfers = algorithm.schedules[op](ranks, per_domain)
    nodes = 1 + max(max(t.src for t in transfers), max(t.dst for t in transfers))
    return Schedule(op, algorithm.name, ranks, per_domain, chunks, tuple(transfers), max(0, nodes - ranks))


ALGORITHMS: Registry[Algorithm] = Registry("collective algorithm")


def register(algorithm: Algorithm) -> None:
    """Add `algorithm` to ALGORITHMS (each entry's module calls this beside its definition)."""
    unknown = [op for op in algorithm.costs if op not in OPS]
    if unknown:
        raise SpecError(f"algorithm {algorithm.name!r}: op {unknown[0]!r} is unknown; allowed: {', '.join(OPS)}")
    if set(algorithm.schedules) != set(algorithm.costs):
        raise SpecError(
            f"algorithm {algorithm.name!r}: schedules for {sorted(algorithm.schedules)}, costs for "
            f"{sorted(algorithm.costs)}; allowed: a schedule for every op it prices"
        )
    ALGORITHMS.register(algorithm.name, algorithm, algorithm.aliases)


class Choice(NamedTuple):
    """What `auto` picked: the time, and the index into `names` of the algorithm, per candidate."""

    time_s: np.ndarray
    index: np.ndarray
    names: tuple[str, ...]

    @property
    def algorithm(self) -> np.ndarray:
        return np.asarray(self.names)[self.index]


def _check_op(op: str) -> None:
    if op not in OPS:
        raise SpecError(f"op: {op!r} is not a collective; allowed: {', '.join(OPS)}")


def _inputs(op: str, nbytes: object, ranks: object, stride: object, network: Network) -> tuple[np.ndarray, Group]:
    size = np.asarray(nbytes, dtype=float)
    bad = ~np.isfinite(size) | (size < 0)
    if np.any(bad):
        raise SpecError(f"nbytes: {size[bad].flat[0]:g} is not allowed; allowed: finite numbers >= 0")
    size, ranks, stride = np.broadcast_arrays(size, np.asarray(ranks), np.asarray(stride))
    return size, Group.place(ranks, stride, network, point_to_point=op == "send_recv")


def _lookup(algorithm: str) -> Algorithm:
    try:
        return ALGORITHMS.lookup(algorithm, "algorithm")
    except CatalogError as err:
        raise CatalogError(f"{err}, or {AUTO}") from None


def _candidates(op: str, among: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """Algorithms `auto` weighs for `op`: those of `among` implementing it (default: NCCL's)."""
    _check_op(op)
    pool = [_lookup(name) for name in among] if among is not None else [a for a in ALGORITHMS.values() if a.in_nccl]
    return tuple(a.name for a in pool if op in a.costs)


def collective_schedule(op: str, ranks: int, algorithm: str, per_domain: int = 1) -> Schedule:
    """The schedule of `op` by `algorithm` (a name or alias) on `ranks` members, `per_domain` to
    an NVLink domain: what the packet simulator and the RDMA replay run."""
    _check_op(op)
    return ALGORITHMS.lookup(algorithm, "algorithm").schedule(op, ranks, per_domain)


def collective_time_s(
    op: str,
    nbytes: object,
    ranks: object,
    stride: object,
    network: Network,
    algorithm: str = AUTO,
    *,
    protocol: str | None = None,
) -> np.ndarray:
    """Seconds for `op` on groups of `ranks` members `stride` apart, with `algorithm` (or the
    fastest NCCL algorithm, `auto`) and the fastest NCCL protocol (or the one named)."""
    _check_op(op)
    if algorithm.lower() == AUTO:
        return choose_algorithm(op, nbytes, ranks, stride, network, protocol=protocol).time_s
    entry = _lookup(algorithm)
    size, group = _inputs(op, nbytes, ranks, stride, network)
    time_s = recipe_time_s(entry.recipe(op, size, group, network), network, protocol)
    return (time_s * _calibration_factor(op, size, group, network))[()]


def choose_algorithm(
    op: str,
    nbytes: object,
    ranks: object,
    stride: object,
    network: Network,
    among: tuple[str, ...] | None = None,
    *,
    protocol: str | None = None,
) -> Choice:
    """NCCL's tuner: every candidate algorithm priced, the fastest kept per element; where the
    network forces an algorithm for `op` (hardware.collective_algorithm) and `among` is not
    given, that one alone, a PlanError where it cannot run on a group of more than one."""
    forced = network.algorithm_for(op) if among is None else AUTO
    if forced != AUTO:
        among = (forced,)
    names = _candidates(op, among)
    if not names:
        allowed = ", ".join(a.name for a in ALGORITHMS.values() if op in a.costs)
        raise SpecError(f"among: none of {among!r} implements {op!r}; allowed: {allowed}")
    size, group = _inputs(op, nbytes, ranks, stride, network)
    times = np.stack([recipe_time_s(ALGORITHMS[n].recipe(op, size, group, network), network, protocol) for n in names])
    if forced != AUTO and np.any(np.isinf(times) & (group.ranks > 1)):
        where = np.isinf(times[0]) & (group.ranks > 1)
        raise PlanError(
            f"hardware.collective_algorithm.{op}: {forced!r} cannot run on {int(group.ranks[where].flat[0])} ranks "
            f"of this network; allowed: auto, or an algorithm that runs there"
        )
    index = np.argmin(times, axis=0)
    chosen = np.take_along_axis(times, index[None], axis=0)[0] * _calibration_factor(op, size, group, network)
    return Choice(chosen[()], index[()], names)


def _calibration_factor(op: str, size: np.ndarray, group: Group, network: Network) -> np.ndarray | float:
    """The network's measured correction of `op` at each size (1 without a calibration): a
    group spanning several scale-up domains takes the scale-out curve."""
    if network.calibration is None:
        return 1.0
    return network.calibration.factor(op, size, group.domains > 1)


def _bus_factor(op: str, ranks: np.ndarray) -> np.ndarray:
    _check_op(op)
    if op == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if op in ("reduce_scatter", "all_gather", "all_to_all"):
        return (ranks - 1) / ranks
    return np.ones_like(ranks)


def algorithm_bandwidth_gbytes_per_s(nbytes: object, time_s: object) -> np.ndarray:
    """nccl-tests algbw: nbytes / time, GB/s (1e9 B)."""
    time = np.asarray(time_s, dtype=float)
    if np.any(~(time > 0)):
        raise SpecError(f"time_s: {time[~(time > 0)].flat[0]:g} is not allowed; allowed: numbers > 0")
    return (np.asarray(nbytes, dtype=float) / time / 1e9)[()]


def bus_bandwidth_gbytes_per_s(op: str, nbytes: object, ranks: object, time_s: object) -> np.ndarray:
    """nccl-tests busbw: algbw times 2(n-1)/n (all_reduce), (n-1)/n (reduce_scatter, all_gather,
    all_to_all) or 1 (broadcast, send_recv), so a bandwidth-optimal algorithm reads the link rate."""
    factor = _bus_factor(op, np.asarray(ranks, dtype=float))
    return (algorithm_bandwidth_gbytes_per_s(nbytes, time_s) * factor)[()]
