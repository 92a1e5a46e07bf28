"""The failure and storage catalogues (failures.yaml, storage.yaml), validated at load.

Failure rates are not stored: each component's rate per component-day is derived from the
observed run's interruption count, its component count and its length, so the catalogue holds
only what the source reports."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simulators._errors import CatalogError
from simulators._registry import validation_line
from simulators._yaml import safe_load

Per = Literal["gpu", "server", "nic", "fabric_part"]
COMPONENTS = ("gpu", "host", "software", "nic", "fabric")
RESTART_STEPS = ("detection_s", "reschedule_s", "warmup_s", "no_spare_wait_s", "server_repair_s")


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Observed(_Row):
    run: str
    gpus: int = Field(ge=1)
    gpus_per_server: int = Field(ge=1)
    nics_per_server: int = Field(ge=1)
    days: float = Field(gt=0)
    fabric_family: str
    nic_gbps: float = Field(gt=0)


class Component(_Row):
    per: Per
    interruptions: int = Field(ge=0)
    replaces_server: bool  # the failed part takes its server out of the job until replaced
    source: str


class Sourced(_Row):
    value: float = Field(ge=0)
    source: str


class PlannedStops(_Row):
    """Job-level stops for maintenance, each right after a checkpoint: a relaunch, no lost work."""

    interruptions: int = Field(ge=0)
    source: str


class FailureCatalog(_Row):
    observed: Observed
    components: dict[Literal[COMPONENTS], Component]
    planned: PlannedStops
    restart: dict[Literal[RESTART_STEPS], Sourced]


class StorageTier(_Row):
    per_server_write_gbytes_per_s: float = Field(gt=0)
    per_server_read_gbytes_per_s: float = Field(gt=0)
    aggregate_write_gbytes_per_s: float | None = Field(gt=0)  # None: no shared limit
    aggregate_read_gbytes_per_s: float | None = Field(gt=0)
    replicates_to_peer: bool
    source: str


class StorageCatalog(_Row):
    tiers: dict[str, StorageTier]
    device_to_host_gbytes_per_s_per_gpu: Sourced


def _load(filename: str, model: type[_Row]) -> _Row:
    raw = safe_load(resources.files(__package__).joinpath(filename).read_text())
    try:
        catalog = model.model_validate(raw)
    except ValidationError as exc:
        raise CatalogError(f"{filename}: {validation_line(exc)}") from None
    return catalog


@cache
def failure_catalog() -> FailureCatalog:
    catalog = _load("failures.yaml", FailureCatalog)
    missing = [name for name in (*COMPONENTS, *RESTART_STEPS) if name not in {**catalog.components, **catalog.restart}]
    if missing:
        raise CatalogError(
            f"failures.yaml: {', '.join(missing)} missing; allowed: every component and restart step named"
        )
    return catalog


@cache
def storage_catalog() -> StorageCatalog:
    return _load("storage.yaml", StorageCatalog)


def storage_names() -> tuple[str, ...]:
    return tuple(storage_catalog().tiers)
