"""Network fidelity levels: simulators that re-price a training candidate's collectives on its
fabric, every group of the step at once, as factors by which contention slows each one.

The analytical model prices each collective alone (bus bandwidth, no contention); a level above
it runs the collectives together on the fabric graph and reports, per collective, its time with
the other groups against its time alone. Each level is one entry of LEVELS, registered beside
its definition (simulators/fidelity/_analytical.py, _flow.py, _packet.py) in the order of the
ladder, cheapest first; the contract suite tests/simulators/fidelity/test_level_contract.py runs
every registered level.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from simulators._errors import SpecError
from simulators._registry import Registry
from simulators.network import CongestionFactor, Fabric, FlowArrays, Link
from simulators.workload import TrainingCandidate


class NetworkLevel(ABC):
    """One fidelity level. Contract: a factor per collective of the candidate that crosses
    servers (none for one inside a server: the fabric plays no part), each at least 1 (running
    with the other groups never speeds a collective up), named by the op, group, message size
    and the algorithm the analytical model chose for it; the same inputs give the same factors."""

    name: ClassVar[str]

    @abstractmethod
    def congestion_factors(
        self, candidate: TrainingCandidate, fabric: Fabric, message_cap_bytes: int
    ) -> list[CongestionFactor]:
        """The factors of `candidate`'s collectives on `fabric`, messages capped at the cap."""

    def configured(self, options: Mapping[str, Any]) -> NetworkLevel:
        """This level with `options` set (a spec's level settings beyond top, budget and cap);
        a level without options accepts none."""
        if options:
            raise SpecError(f"fidelity.{self.name}.{next(iter(options))}: not allowed; {self.name} takes no options")
        return self


class SimulatedLevel(NetworkLevel):
    """A level that times flow DAGs on the fabric graph: the driver of simulators/fidelity
    /_contention.py builds every collective's runs and this level's simulator times them."""

    # Whether this level models an adaptive-routing family's per-packet spraying (as a fluid
    # spread over all equal-cost paths); a level that does not routes it with per-flow ECMP.
    spreads_adaptive_routing: ClassVar[bool] = False

    @abstractmethod
    def makespan_s(self, links: Sequence[Link], flows: FlowArrays, switches: set[int]) -> float:
        """Seconds until the last of `flows` completes on `links`."""

    def kernels(self) -> tuple[Any, ...]:
        """The compiled (numba) entry points this level runs, loaded on call; the warm-up
        (simulators/fidelity/_warmup.py) looks for them in numba's disk cache. None by default."""
        return ()

    def congestion_factors(
        self, candidate: TrainingCandidate, fabric: Fabric, message_cap_bytes: int
    ) -> list[CongestionFactor]:
        from simulators.fidelity._contention import congestion_factors  # networkx loads on first use

        return congestion_factors(candidate, fabric, message_cap_bytes, self)


LEVELS: Registry[NetworkLevel] = Registry("network fidelity level")


def register(level: NetworkLevel) -> None:
    """Add `level` to LEVELS (each level's module calls this beside its definition)."""
    LEVELS.register(level.name, level)
