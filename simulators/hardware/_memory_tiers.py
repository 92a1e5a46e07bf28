"""Host memory tiers: the CPU memory a GPU offloads to and the link it crosses (STYLE 5).

`memory_tiers.yaml` lists reference host systems (DGX-class servers with DDR, Grace superchips
with LPDDR5X over NVLink-C2C), each with the catalogue GPUs that sit in it, and configurations a
spec picks by name (`hardware.host_tier`), such as a host with CXL memory expanders: CXL memory
adds to the host's capacity and, interleaved with the DIMMs, to its bandwidth; the GPU reaches
it through the same host link. The table is apart
from gpus.yaml so users' GPU files keep their schema: a GPU no row names has no host tier, and
a plan that offloads on it is an error that says so (no guessed host). Each GPU takes an equal
share of its host's memory and DRAM bandwidth; the link is its own.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from simulators._errors import CatalogError
from simulators._yaml import safe_load

GIB = 2**30
LINKS = ("pcie-gen3-x16", "pcie-gen4-x16", "pcie-gen5-x16", "nvlink-c2c")


class HostTier(BaseModel):
    """One host system's memory tier as its datasheets give it."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=255)
    gpus: tuple[str, ...] = Field(strict=False)  # empty: a configuration a spec names (hardware.host_tier)
    gpus_per_host: int = Field(ge=1)
    host_memory_gib: float = Field(gt=0)
    host_memory_gbytes_per_s: float = Field(gt=0)
    link: str
    link_gbytes_per_s: float = Field(gt=0)
    # The host's local NVMe drives (ZeRO-Infinity's third tier); both or neither: none, no tier.
    nvme_gib: float | None = Field(default=None, gt=0)
    nvme_gbytes_per_s: float | None = Field(default=None, gt=0)
    # CXL memory expanders of the host (CXL 2.0 Type 3 modules); both or neither.
    cxl_gib: float | None = Field(default=None, gt=0)
    cxl_gbytes_per_s: float | None = Field(default=None, gt=0)
    as_of: str
    sources: dict[str, str]

    @model_validator(mode="after")
    def _checked(self) -> HostTier:
        if self.link not in LINKS:
            raise ValueError(f"link: {self.link!r}; allowed: {', '.join(LINKS)}")
        for tier in ("nvme", "cxl"):
            if (getattr(self, f"{tier}_gib") is None) != (getattr(self, f"{tier}_gbytes_per_s") is None):
                raise ValueError(f"{tier}_gib and {tier}_gbytes_per_s: give both or neither")
        numeric = [k for k, v in self if isinstance(v, (int, float)) and not isinstance(v, bool)]
        missing = [k for k in numeric if k not in self.sources]
        if missing:
            raise ValueError(f"no source for {', '.join(missing)}")
        return self

    def __hash__(self) -> int:
        figures = (self.host_memory_gib, self.host_memory_gbytes_per_s, self.link_gbytes_per_s)
        figures += (self.nvme_gib, self.cxl_gib)
        return hash((self.name, *figures))

    @property
    def memory_bytes_per_gpu(self) -> float:
        """Host memory one GPU's offloaded state may take: its equal share of the host's DIMMs
        and CXL expanders."""
        return (self.host_memory_gib + (self.cxl_gib or 0.0)) * GIB / self.gpus_per_host

    @property
    def nvme_bytes_per_gpu(self) -> float | None:
        """The GPU's equal share of the host's NVMe capacity, or None without an NVMe tier."""
        return None if self.nvme_gib is None else self.nvme_gib * GIB / self.gpus_per_host

    @property
    def nvme_gbytes_per_s_per_gpu(self) -> float | None:
        """The GPU's equal share of the host's NVMe bandwidth, or None without an NVMe tier."""
        return None if self.nvme_gbytes_per_s is None else self.nvme_gbytes_per_s / self.gpus_per_host

    @property
    def memory_gbytes_per_s_per_gpu(self) -> float:
        """Host memory bandwidth one GPU's CPU-side work (a CPU optimizer step) gets: its share of
        the DIMMs' and the CXL expanders' (interleaved across both)."""
        return (self.host_memory_gbytes_per_s + (self.cxl_gbytes_per_s or 0.0)) / self.gpus_per_host


def transfer_s(nbytes: float, gbytes_per_s: float) -> float:
    """Seconds to move `nbytes` over a link of `gbytes_per_s` (1e9 B/s, one direction)."""
    return nbytes / (gbytes_per_s * 1e9)


@cache
def host_tiers() -> tuple[HostTier, ...]:
    """Every row of memory_tiers.yaml, validated; a GPU named by two rows is an error."""
    rows = safe_load(resources.files(__package__).joinpath("memory_tiers.yaml").read_text())
    tiers, owner = [], {}
    for row in rows:
        try:
            tier = HostTier.model_validate(row)
        except ValidationError as exc:
            raise CatalogError(f"memory_tiers.yaml: {row.get('name', '?')}: {exc.errors()[0]['msg']}") from None
        for gpu in tier.gpus:
            if gpu in owner:
                raise CatalogError(f"memory_tiers.yaml: {gpu} is in both {owner[gpu]} and {tier.name}")
            owner[gpu] = tier.name
        tiers.append(tier)
    return tuple(tiers)


def host_tier_for(gpu_name: str) -> HostTier | None:
    """The host tier of the system `gpu_name` sits in, or None where memory_tiers.yaml has none."""
    return next((tier for tier in host_tiers() if gpu_name in tier.gpus), None)


def host_tier_named(name: str, field: str) -> HostTier:
    """The row called `name`; a CatalogError naming `field` and the rows there are otherwise."""
    found = next((tier for tier in host_tiers() if tier.name == name), None)
    if found is None:
        allowed = ", ".join(tier.name for tier in host_tiers())
        raise CatalogError(f"{field}: {name!r} is not a host tier of memory_tiers.yaml; allowed: {allowed}")
    return found


def gpus_with_host_tier() -> tuple[str, ...]:
    """The GPU names some row of memory_tiers.yaml serves, for error messages."""
    return tuple(gpu for tier in host_tiers() for gpu in tier.gpus)
