"""What a candidate costs: rental and owned $/hour, capex from the fabric's bill of materials,
power, energy and carbon per token, and the whole run for a token budget.

Owned cost per useful hour = capex / (amortisation hours x utilisation) + facility power x
$/kWh; facility power = IT power x PUE, with the GPUs at board power (TDP) while training, each
server's overhead, and every switch port and link of the fabric."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dse.cost._catalog import PriceBook
from simulators.hardware import GpuSpec
from simulators.network import BillOfMaterials, Fabric, bill_of_materials

HOURS_PER_YEAR = 24 * 365


@dataclass(frozen=True)
class Ownership:
    """Capex and IT power of one cluster: `num_gpus` GPUs on `fabric`."""

    capex_usd: float
    it_power_kw: float


def ownership(gpu: GpuSpec, num_gpus: int, fabric: Fabric, book: PriceBook) -> Ownership | None:
    """Capex and power of the cluster, or None where the book has no server price for `gpu`."""
    return bom_ownership(gpu, num_gpus, bill_of_materials(fabric, num_gpus), fabric.nic_gbps, book)


def bom_ownership(
    gpu: GpuSpec, num_gpus: int, bom: BillOfMaterials, nic_gbps: float, book: PriceBook
) -> Ownership | None:
    """Capex and power of `num_gpus` GPUs on a fabric built of `bom` (a family's, or one counted
    off a SimAI topology file), or None where the book has no server price for `gpu`."""
    server = book.server_usd.get(gpu.name)
    if server is None:
        return None
    ports = bom.total_links * 2 - bom.links[0]  # both ends of every link, less the NIC ends
    capex = (
        bom.servers * server.value
        + bom.nics * book.by_speed("nic_usd", nic_gbps).value
        + ports * book.by_speed("switch_usd_per_port", bom.port_gbps).value
        + bom.total_links * book.by_speed("link_usd", bom.port_gbps).value
    )
    watts = (
        num_gpus * gpu.tdp_w
        + bom.servers * book.server_overhead_watts.value
        + ports * book.switch_watts_per_port.value
        + bom.total_links * book.link_watts.value
    )
    return Ownership(capex, watts / 1e3)


def cost_metrics(
    metrics: Mapping[str, float],
    num_gpus: int,
    usd_per_gpu_hour: float,
    train_tokens: float | None,
    owned: Ownership | None,
    book: PriceBook,
) -> dict[str, float]:
    """Cost metrics from a throughput (`tokens_per_s`: training tokens, or a deployment's output
    tokens), for training and serving alike."""
    usd_per_hour = num_gpus * usd_per_gpu_hour
    tokens_per_hour = metrics["tokens_per_s"] * 3600.0
    out = {"usd_per_hour": usd_per_hour, "usd_per_mtok": usd_per_hour / tokens_per_hour * 1e6}
    if owned is not None:
        facility_kw = owned.it_power_kw * book.pue.value
        hours = book.amortisation_years.value * HOURS_PER_YEAR * book.utilisation.value
        owned_per_hour = owned.capex_usd / hours + facility_kw * book.usd_per_kwh.value
        kwh_per_mtok = facility_kw / tokens_per_hour * 1e6
        out |= {
            "capex_usd": owned.capex_usd,
            "power_kw": owned.it_power_kw,
            "owned_usd_per_hour": owned_per_hour,
            "owned_usd_per_mtok": owned_per_hour / tokens_per_hour * 1e6,
            "kwh_per_mtok": kwh_per_mtok,
            "co2e_kg_per_mtok": kwh_per_mtok * book.grid_kg_co2e_per_kwh.value,
        }
    if train_tokens is not None:
        hours = train_tokens / tokens_per_hour
        out["time_to_train_days"] = hours / 24.0
        out["cost_to_train_usd"] = hours * usd_per_hour
        if owned is not None:
            out["owned_cost_to_train_usd"] = hours * out["owned_usd_per_hour"]
            out["co2e_kg_to_train"] = train_tokens / 1e6 * out["co2e_kg_per_mtok"]
    return out
