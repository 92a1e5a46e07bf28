"""The goodput metrics of a training candidate, added in the driver after its step is simulated
(so a cached step outcome stays valid whatever the study's `reliability:` section says), and
what its hot spare servers cost."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from dse.cost import Ownership, PriceBook
from dse.spec.reliability import ReliabilitySettings
from simulators.network import Fabric
from simulators.reliability import job_goodput
from simulators.workload import TrainingCandidate


def with_spares(owned: Ownership | None, fabric: Fabric, spares: int, book: PriceBook, gpu: str) -> Ownership | None:
    """The cluster bought with `spares` hot spare servers beside it: each one a server with its
    NICs, their links and the leaf ports they take. Spares stand idle: no power is added."""
    if owned is None or spares == 0:
        return owned
    ports = fabric.nics_per_server * fabric.traits.ports_per_nic
    spare_usd = (
        book.server_usd[gpu].value
        + fabric.nics_per_server * book.by_speed("nic_usd", fabric.nic_gbps).value
        + ports * book.by_speed("link_usd", fabric.port_gbps).value
        + ports * book.by_speed("switch_usd_per_port", fabric.port_gbps).value
    )
    return dataclasses.replace(owned, capex_usd=owned.capex_usd + spares * spare_usd)


def goodput_metrics(
    candidate: TrainingCandidate,
    fabric: Fabric,
    reliability: ReliabilitySettings,
    metrics: Mapping[str, float],
    costs: Mapping[str, float],
) -> dict[str, float]:
    """Goodput, its breakdown, and the time and cost to train with failures (where the cost
    metrics give the ideal ones: each ideal figure over the goodput fraction)."""
    job = job_goodput(candidate.model, candidate.plan, fabric, reliability.config(), metrics["iteration_time_s"])
    out = job.metrics()
    fraction = out["goodput_fraction"]
    for ideal in ("time_to_train_days", "cost_to_train_usd", "owned_cost_to_train_usd"):
        if ideal in costs:
            out[f"{ideal}_with_failures"] = costs[ideal] / fraction
    return out
