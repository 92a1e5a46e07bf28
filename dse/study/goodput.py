"""The cost and goodput metrics of a training candidate, added in the driver after its step is
simulated (so a cached step outcome stays valid whatever the study's `reliability:` section
says), with the hot spare servers bought or rented beside the job.

`search.spare_servers: [auto]` tries 0, 1, 2, ... spares and keeps the count with the lowest
cost per hour of useful training (owned $/hour where the price book prices the servers, else
rental), stopping once a spare is free for all but one failure in a million."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from dse.cost import Ownership, PriceBook, cost_metrics, ownership
from dse.evaluation.space import SearchSpace
from simulators.network import Fabric
from simulators.reliability import job_goodput

IDEAL_TO_TRAIN = ("time_to_train_days", "cost_to_train_usd", "owned_cost_to_train_usd")
AUTO_SPARES_CERTAINTY = 1.0 - 1e-6
MAX_AUTO_SPARES = 4096


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


def training_costs(
    space: SearchSpace, params: Mapping[str, Any], metrics: Mapping[str, float], owned: dict
) -> dict[str, float]:
    """Rental and owned cost, energy and carbon of a training step, its goodput under failures,
    and the time and cost to train with failures (each ideal figure over the goodput fraction)."""
    fabric = space.fabric(params["fabric"], params["nic_gbps"])
    candidate = space.candidate(params)
    settings = space.resolved.study.reliability
    interval = params.get("checkpoint_interval_s", "optimal")  # absent from studies before the knobs
    config = settings.config(interval_s=None if interval == "optimal" else float(interval))
    wanted = params.get("spare_servers", 0)
    best: tuple[float, dict[str, float]] | None = None
    for spares in range(MAX_AUTO_SPARES + 1) if wanted == "auto" else (int(wanted),):
        costs = priced_costs(space, params, metrics, owned, spares)
        job = job_goodput(
            candidate.model,
            candidate.plan,
            fabric,
            dataclasses.replace(config, spare_servers=spares),
            metrics["iteration_time_s"],
        )
        out = costs | job.metrics() | {"spare_servers_chosen": float(spares)}
        fraction = out["goodput_fraction"]
        out |= {f"{ideal}_with_failures": costs[ideal] / fraction for ideal in IDEAL_TO_TRAIN if ideal in costs}
        per_useful_hour = costs.get("owned_usd_per_hour", costs["usd_per_hour"]) / fraction
        if best is None or per_useful_hour < best[0]:
            best = (per_useful_hour, out)
        if job.spare_free_probability >= AUTO_SPARES_CERTAINTY:
            break
    return best[1]


def priced_costs(
    space: SearchSpace, params: Mapping[str, Any], metrics: Mapping[str, float], owned: dict, spares: int
) -> dict[str, float]:
    """The cost metrics of a training step on the plan's cluster with `spares` hot spare servers,
    without failures (what the exact mode's bounds need: no goodput); buying a cluster is
    costed once per GPU type, count and fabric in `owned`."""
    resolved = space.resolved
    gpu = space.gpu(params["gpu"])
    fabric = space.fabric(params["fabric"], params["nic_gbps"])
    key = (gpu.name, params["num_gpus"], params["fabric"], params["nic_gbps"])
    if key not in owned:
        owned[key] = ownership(gpu, params["num_gpus"], fabric, resolved.prices)
    return cost_metrics(
        metrics,
        params["num_gpus"] + spares * fabric.gpus_per_server,  # spares are rented too
        resolved.usd_per_gpu_hour[gpu.name],
        resolved.study.training.train_tokens,
        with_spares(owned[key], fabric, spares, resolved.prices, gpu.name),
        resolved.prices,
    )
