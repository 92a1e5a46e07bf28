"""The price book: dated, sourced defaults (prices.yaml and the GPU catalogue) with a study's
overrides applied, so every figure a cost metric uses can say where it came from."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dse.errors import SpecError
from simulators._yaml import safe_load
from simulators.hardware import GpuSpec

GPU_CATALOGUE_TIER = "neocloud"  # the GPU catalogue's default rental prices


class Price(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float = Field(ge=0)
    as_of: str
    source: str


class PriceBook(BaseModel):
    """Every price and power figure of the cost model. Keys of the per-speed tables are line
    rates in Gb/s."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cloud_usd_per_gpu_hour: dict[str, dict[str, Price]]
    server_usd: dict[str, Price]
    nic_usd: dict[int, Price]
    switch_usd_per_port: dict[int, Price]
    link_usd: dict[int, Price]
    server_overhead_watts: Price
    switch_watts_per_port: Price
    link_watts: Price
    pue: Price
    usd_per_kwh: Price
    amortisation_years: Price
    utilisation: Price
    grid_kg_co2e_per_kwh: Price

    @property
    def tiers(self) -> tuple[str, ...]:
        return (GPU_CATALOGUE_TIER, *self.cloud_usd_per_gpu_hour)

    def cloud_price(self, tier: str, gpu: GpuSpec) -> Price | None:
        """$ per GPU-hour of `gpu` in provider `tier`, or None where the book has none."""
        if tier == GPU_CATALOGUE_TIER:
            return Price(value=gpu.usd_per_gpu_hour, as_of=gpu.usd_as_of, source="GPU catalogue (gpus.yaml)")
        return self.cloud_usd_per_gpu_hour[tier].get(gpu.name)

    def by_speed(self, table: str, gbps: float) -> Price:
        """The entry of a per-speed table for line rate `gbps` (SpecError naming the table if absent)."""
        entries: dict[int, Price] = getattr(self, table)
        key = int(gbps) if float(gbps).is_integer() else None
        if key not in entries:
            allowed = ", ".join(map(str, entries))
            raise SpecError(f"cost.{table}: no price for {gbps:g} Gb/s; allowed: {allowed} (or give one in the spec)")
        return entries[key]


@cache
def default_price_book() -> PriceBook:
    text = resources.files("dse.cost").joinpath("prices.yaml").read_text()
    return PriceBook.model_validate(safe_load(text))


def price_book(overrides: dict[str, Any], base: PriceBook | None = None) -> PriceBook:
    """`base` (the default book, or the study's own `cost.price_book`) with a study's `cost:`
    overrides: plain numbers replace values (their source becomes the spec); per-GPU and
    per-speed tables merge entry by entry."""
    book = (base or default_price_book()).model_dump()
    for name, value in overrides.items():
        if isinstance(value, dict):
            for key, entry in value.items():
                target = book[name] if name != "cloud_usd_per_gpu_hour" else book[name].setdefault(key, {})
                if name == "cloud_usd_per_gpu_hour":
                    for gpu, price in entry.items():
                        target[gpu] = _from_spec(price)
                else:
                    target[key] = _from_spec(entry)
        else:
            book[name] = _from_spec(value)
    return PriceBook.model_validate(book)


def _from_spec(value: float) -> dict[str, Any]:
    return {"value": value, "as_of": "spec", "source": "the study spec"}
