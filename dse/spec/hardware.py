"""The spec's hardware and cost sections: GPUs, the cluster fabric and the price-book overrides."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from dse.spec.fields import MAX_GBPS, FilePath, Frozen, Gbps, IntKnob, Name, Price, non_empty_unique, positive_knob
from dse.spec.inputs import brief
from simulators._errors import CatalogError
from simulators.network import Failures, family_names
from simulators.network._network import NIC_LATENCY_S

SwitchTier = Literal["leaf", "spine", "aggregation", "core"]
MAX_FAILED_SWITCHES = 1 << 16  # per tier: beyond any fabric's switch count
MAX_FAILED_LINKS = 1 << 20


class FailureSettings(Frozen):
    """Failed switches per tier and failed leaf uplinks every candidate's fabric loses
    (simulators/network/_failures.py says which ones); with any, the seconds ECMP takes to
    route around them, which the first step after the failure pays (`dse simulate --fail`)."""

    switches: dict[SwitchTier, Annotated[int, Field(ge=1, le=MAX_FAILED_SWITCHES)]] = {}
    links: int = Field(default=0, ge=0, le=MAX_FAILED_LINKS)
    ecmp_convergence_s: float | None = Field(default=None, ge=0, le=3600)

    @model_validator(mode="after")
    def _convergence(self) -> FailureSettings:
        if (self.switches or self.links) and self.ecmp_convergence_s is None:
            raise ValueError(
                "ecmp_convergence_s: needed with failed switches or links (seconds until ECMP routes around "
                "them); allowed: 0 to 3600"
            )
        return self

    def value(self) -> Failures:
        return Failures(tuple(self.switches.items()), self.links, self.ecmp_convergence_s)


class FabricSettings(Frozen):
    """The scale-out network (simulators/network/_fabric.py); `family` and `nic_gbps` are knobs."""

    family: list[str] = ["rail-optimized"]
    nic_gbps: list[float] | None = None  # default: the catalogue NIC speeds of hardware.gpu
    gpus_per_server: int = Field(default=8, ge=1, le=1024)
    nics_per_server: int = Field(default=8, ge=1, le=1024)
    switch_radix: int = Field(default=64, ge=4, le=4096)
    oversubscription: float = Field(default=1.0, ge=1.0, le=64.0)
    port_latency_s: float = Field(default=NIC_LATENCY_S, ge=0, lt=1e-3)  # a NIC or switch-to-switch link
    failures: FailureSettings = FailureSettings()

    @field_validator("family")
    @classmethod
    def _families(cls, values: list[str]) -> list[str]:
        non_empty_unique(values)
        for value in values:
            if value not in family_names():
                raise ValueError(f"{value!r} is not allowed; allowed: {', '.join(family_names())}")
        return values

    @field_validator("nic_gbps")
    @classmethod
    def _speeds(cls, values: list[float] | None) -> list[float] | None:
        if values is not None:
            non_empty_unique(values)
            if not all(0 < v <= MAX_GBPS for v in values):
                raise ValueError(f"{brief(values)} holds a value outside (0, {MAX_GBPS}] Gb/s")
        return values


class CostSettings(Frozen):
    """Overrides of the price book (dse/cost/prices.yaml, or the study's own `price_book` file
    of the same schema); unset fields keep the book's sourced figures."""

    price_book: FilePath | None = None
    cloud_tier: Name = "neocloud"
    usd_per_gpu_hour: dict[Name, Price] = {}  # GPU -> $/GPU-hour in cloud_tier
    server_usd: dict[Name, Price] = {}  # GPU -> one 8-GPU server without scale-out NICs
    nic_usd: dict[Gbps, Price] = {}  # Gb/s -> one NIC
    switch_usd_per_port: dict[Gbps, Price] = {}  # Gb/s -> switch price per port
    link_usd: dict[Gbps, Price] = {}  # Gb/s -> one link with its optics
    server_overhead_watts: float | None = Field(default=None, ge=0, le=1e7)
    switch_watts_per_port: float | None = Field(default=None, ge=0, le=1e5)
    link_watts: float | None = Field(default=None, ge=0, le=1e5)
    pue: float | None = Field(default=None, ge=1, le=10)
    usd_per_kwh: float | None = Field(default=None, ge=0, le=1e3)
    amortisation_years: float | None = Field(default=None, gt=0, le=100)
    utilisation: float | None = Field(default=None, gt=0, le=1)
    grid_kg_co2e_per_kwh: float | None = Field(default=None, ge=0, le=10)

    def overrides(self) -> dict[str, Any]:
        """The price-book entries this spec sets (the GPU rental prices are applied per tier)."""
        return {
            name: value
            for name, value in self.model_dump(exclude={"price_book", "cloud_tier", "usd_per_gpu_hour"}).items()
            if value not in (None, {})
        }


class Hardware(Frozen):
    gpu: list[Name] = ["H100-SXM"]
    gpu_catalog: FilePath | None = None  # a YAML list of extra GPUs, gpus.yaml's schema (dse/spec/catalogs.py)
    num_gpus: IntKnob = [8, 16, 32, 64]
    # What a GPU holds beyond the plan's tensors: the CUDA context and the cuBLAS/NCCL workspaces,
    # which live outside PyTorch's caching allocator, and the allocator's fragmentation. 4 GiB is
    # an assumption (no published figure for these together), shown as `reserve` in every
    # memory breakdown; set it to what your stack measures.
    memory_reserve_gib: float = Field(default=4.0, ge=0, le=1024)
    fabric: FabricSettings = FabricSettings()
    calibration: FilePath | None = None
    network_calibration: FilePath | None = None  # `dse validate --calibrate` output: the NIC efficiency
    compute_fraction: float | None = Field(default=None, gt=0, le=1)
    # The host memory tier (a row of simulators/hardware/memory_tiers.yaml, e.g. DGX-H100) every
    # GPU of the spec offloads to; null: the row that names the GPU (a GPU no row names has none).
    host_tier: Name | None = None
    # op -> the collective algorithm it runs with (dse collectives compares them); an op not
    # named, or named `auto`, runs what NCCL's tuner picks. Kept without the `auto` entries, so a
    # spec that spells out the default has the same cache address as one that does not.
    collective_algorithm: dict[str, str] = {}

    _unique = field_validator("gpu")(non_empty_unique)

    _counts = field_validator("num_gpus")(positive_knob)

    @field_validator("collective_algorithm")
    @classmethod
    def _algorithms(cls, values: dict[str, str]) -> dict[str, str]:
        from simulators.network import ALGORITHMS, OPS

        forced = {}
        for op, name in values.items():
            if op not in OPS:
                raise ValueError(f"{op!r} is not a collective; allowed: {', '.join(OPS)}")
            if name.lower() == "auto":
                continue
            try:
                algorithm = ALGORITHMS.lookup(name, op)
            except CatalogError as err:
                raise ValueError(f"{err}, or auto") from None
            if op not in algorithm.costs:
                able = [a.name for a in ALGORITHMS.values() if op in a.costs]
                raise ValueError(f"{op}: {algorithm.name!r} does not implement {op}; allowed: auto, {', '.join(able)}")
            forced[op] = algorithm.name
        return forced

    def forced_algorithms(self) -> tuple[tuple[str, str], ...]:
        """The (op, algorithm) pairs every candidate's network carries (Network.algorithms)."""
        return tuple(sorted(self.collective_algorithm.items()))
