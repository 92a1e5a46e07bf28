"""How often a synchronous job on a cluster is interrupted: component counts from the fabric's
bill of materials times per-component rates.

Rule for redundancy: every failure of a GPU, host, NIC or software stops the whole job (one rank
lost stops every collective). A switch or link stops it only where it is a single point of
failure: in a single-homed fabric, each NIC's leaf switch and its NIC-to-leaf link (tier 0 of the
bill of materials); switches and links above the leaves have parallel paths (ECMP) and are taken
to slow the job, not stop it. So the observed run's network interruptions are spread over its
tier-0 parts (an assumption: the report does not say where its switch and cable failures were).
Where each NIC has two ports on two different leaves or planes (`fat-tree-dual-tor`,
`dual-plane`: the family's ports per NIC >= 2), a failed leaf or NIC link leaves the NIC its other
port: no switch or link stops the job.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from simulators.network import Fabric, bill_of_materials
from simulators.reliability._catalog import COMPONENTS, failure_catalog


@dataclass(frozen=True)
class Counts:
    """What one cluster holds of each failing kind of part; `fabric_parts` are the switches and
    links whose failure stops the job (the redundancy rule above), of `all_fabric_parts`."""

    gpus: int
    servers: int
    nics: int
    fabric_parts: int
    all_fabric_parts: int

    def of(self, per: str) -> int:
        return {"gpu": self.gpus, "server": self.servers, "nic": self.nics, "fabric_part": self.fabric_parts}[per]


@cache
def counts(fabric: Fabric, num_gpus: int) -> Counts:
    bom = bill_of_materials(fabric, num_gpus)
    single_points = 0 if fabric.traits.ports_per_nic >= 2 else bom.switches[0] + bom.links[0]
    return Counts(num_gpus, bom.servers, bom.nics, single_points, bom.total_switches + bom.total_links)


@cache
def observed_rates_per_day() -> dict[str, float]:
    """Interruptions per component-day of each component, from the observed run (failures.yaml)."""
    catalog = failure_catalog()
    run = catalog.observed
    fabric = Fabric(
        family=run.fabric_family,
        nic_gbps=run.nic_gbps,
        gpus_per_server=run.gpus_per_server,
        nics_per_server=run.nics_per_server,
    )
    seen = counts(fabric, run.gpus)
    return {
        name: component.interruptions / (seen.of(component.per) * run.days)
        for name, component in catalog.components.items()
    }


@dataclass(frozen=True)
class Interruptions:
    """Expected interruptions per day of one job, by component."""

    per_day: Mapping[str, float]

    @property
    def total_per_day(self) -> float:
        return sum(self.per_day.values())

    @property
    def server_loss_per_day(self) -> float:
        """Those that take a server out of the job until it is replaced."""
        components = failure_catalog().components
        return sum(rate for name, rate in self.per_day.items() if components[name].replaces_server)

    @property
    def mtbf_s(self) -> float:
        """Mean time between interruptions of the job, s."""
        return 86400.0 / self.total_per_day


def interruptions(fabric: Fabric, num_gpus: int, rates_per_day: Mapping[str, float] | None = None) -> Interruptions:
    """Interruptions per day of a job on `num_gpus` GPUs of `fabric`; `rates_per_day` replaces
    the observed rate of the components it names (per component-day). Memoised: a search asks
    for the same few clusters once per candidate."""
    return _interruptions(fabric, num_gpus, tuple(sorted((rates_per_day or {}).items())))


@functools.lru_cache(maxsize=1024)
def _interruptions(fabric: Fabric, num_gpus: int, rates_per_day: tuple[tuple[str, float], ...]) -> Interruptions:
    rates = {**observed_rates_per_day(), **dict(rates_per_day)}
    components = failure_catalog().components
    cluster = counts(fabric, num_gpus)
    return Interruptions({name: rates[name] * cluster.of(components[name].per) for name in COMPONENTS})
