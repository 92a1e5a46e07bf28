"""A study whose names all resolved to catalogue entries: what the search, the evaluators
(shipped to Ray workers) and the reports start from (dse.study.resolve_study builds it)."""

from __future__ import annotations

from dataclasses import dataclass

from dse.cost import PriceBook
from dse.spec.kind import StudyKind
from dse.spec.study import Constraint, Study
from simulators.hardware import GpuSpec
from simulators.models import ModelSpec
from simulators.network import CollectiveCalibration, Fabric


@dataclass(frozen=True)
class ResolvedStudy:
    """A study whose names all resolved to catalogue entries; the search starts from this."""

    study: Study
    kind: StudyKind  # the study's mode: what differs between training and inference
    model: ModelSpec
    gpus: tuple[GpuSpec, ...]
    usd_per_gpu_hour: dict[str, float]  # in the spec's cloud tier
    prices: PriceBook  # the price book with the spec's overrides
    nic_gbps: tuple[float, ...]  # values of the nic_gbps knob
    objectives: tuple[str, ...]  # canonical metric names
    directions: tuple[str, ...]  # "minimize" / "maximize", one per objective
    constraints: tuple[Constraint, ...]  # with canonical metric names
    compute_fraction: dict[str, float]  # by GPU name: share of modelled kernel speed assumed sustained
    nic_efficiency: float | None = None  # measured by `dse validate --calibrate`; None: the fabric's own
    # Collective times by size measured with nccl-tests (`dse calibrate nccl-tests`); None: the model's.
    collective_calibration: CollectiveCalibration | None = None

    def fabric(self, family: str, nic_gbps: float) -> Fabric:
        """The cluster fabric of one family and NIC speed, with the spec's other fabric settings."""
        settings = self.study.hardware.fabric
        return Fabric(
            family=family,
            nic_gbps=nic_gbps,
            gpus_per_server=settings.gpus_per_server,
            nics_per_server=settings.nics_per_server,
            switch_radix=settings.switch_radix,
            oversubscription=settings.oversubscription,
            port_latency_s=settings.port_latency_s,
            failures=settings.failures.value(),
        )
