"""The search space of a study: knobs, their Optuna distributions, and candidates from params.

Every knob is a distribution, even one with a single value, so trial parameters always hold
the whole candidate. Knobs given as lists become categorical; ranges become integer ranges.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from dse.errors import PlanError, SpecError
from dse.spec.fields import IntRange, knob_values
from dse.spec.resolved import ResolvedStudy
from simulators.hardware import GpuSpec, HostTier, host_tier_for, host_tier_named
from simulators.network import Fabric, Network
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem

RECENT_CANDIDATES = 4096  # candidates SearchSpace.candidate keeps (a chunk's, between simulating and judging)
# Plans `check_runnable` tries before leaving a space to the search (~50 us each).
RUNNABLE_CHECK_LIMIT = 100_000
COMBINATION_BLOCK = 65_536  # combinations SearchSpace.combinations decodes at once (~10 MB of indices)
KNOBS = (
    "gpu",
    "num_gpus",
    "tp",
    "pp",
    "cp",
    "ep",
    "etp",
    "vpp",
    "pipeline_split",
    "micro_batch",
    "global_batch",
    "recompute",
    "schedule",
    "sequence_parallel",
    "tp_comm_overlap",
    "zero_stage",
    "offload",
    "spare_servers",
    "checkpoint_interval_s",
    "fabric",
    "nic_gbps",
)
SERVING_KNOBS = (
    "gpu",
    "tp",
    "pp",
    "moe_parallel",
    "replicas",
    "scheduler",
    "max_batch_requests",
    "max_batch_tokens",
    "prefix_caching",
    "speculative_tokens",
    "speculative_acceptance",
    "router",
    "disaggregated",
    "decode_tp",
    "decode_replicas",
)


@dataclass(frozen=True)
class SearchSpace:
    """Knob values of one study and the fixed settings needed to build its candidates."""

    resolved: ResolvedStudy
    distributions: Mapping[str, BaseDistribution]
    values: Mapping[str, tuple]
    _networks: dict = field(default_factory=dict, compare=False, repr=False)
    _fabrics: dict = field(default_factory=dict, compare=False, repr=False)
    _hosts: dict = field(default_factory=dict, compare=False, repr=False)  # GPU name -> its host tier
    _recent: dict = field(default_factory=dict, compare=False, repr=False)  # params -> candidate, see `candidate`

    def __getstate__(self) -> dict[str, Any]:
        """Shipped to a worker without the candidates this process built."""
        return {**self.__dict__, "_recent": {}}

    @classmethod
    def from_study(cls, resolved: ResolvedStudy) -> SearchSpace:
        knobs = resolved.kind.knob_lists(resolved)
        distributions = {name: _distribution(knob) for name, knob in knobs.items()}
        values = {name: knob_values(knob) for name, knob in knobs.items()}
        return cls(resolved, distributions, values)

    @property
    def knobs(self) -> tuple[str, ...]:
        return self.resolved.kind.knobs

    @property
    def size(self) -> int:
        """Number of knob combinations (valid or not)."""
        return math.prod(len(v) for v in self.values.values())

    def grid(self) -> list[dict[str, Any]]:
        """One params dict per distinct plan (see `params_key`), in knob order."""
        return list(self.distinct_plans())

    def distinct_plans(self, start: int = 0, stop: int | None = None) -> Iterator[dict[str, Any]]:
        """The params of each distinct plan among the knob combinations numbered `start` to
        `stop` (excluded) in knob order: the combination that represents its plan
        (StudyKind.represents_its_plan), so ranges of combinations split the plans exactly."""
        kind, values = self.resolved.kind, self.values
        for combo in self.combinations(start, self.size if stop is None else min(stop, self.size)):
            params = dict(zip(values, combo))
            if kind.represents_its_plan(params, values):
                yield params

    def combinations(self, start: int, stop: int) -> Iterator[tuple]:
        """The knob combinations numbered `start` to `stop` (excluded) in itertools.product's
        order, each decoded from its number (mixed radix, the last knob fastest) in blocks: a
        range deep in a space of 10^7 costs what the first does, where skipping to it in the
        product cost ~0.1 s (the exact mode's workers, benchmarks/RESULTS.md)."""
        columns = [_objects(v) for v in self.values.values()]
        radices = [len(c) for c in columns]
        for first in range(start, stop, COMBINATION_BLOCK):
            digits = np.unravel_index(np.arange(first, min(first + COMBINATION_BLOCK, stop)), radices)
            yield from zip(*(column[d].tolist() for column, d in zip(columns, digits)))

    def check_runnable(self, limit: int = RUNNABLE_CHECK_LIMIT) -> None:
        """SpecError naming the commonest reason when no plan of the space can run at all, so
        such a study stops before its first trial instead of ending with none feasible."""
        self.resolved.kind.check_runnable(self, limit)

    def params_of_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The knob values of a trials/pareto table row, as plain Python values (not numpy's)."""
        return {k: _plain(row[k]) for k in self.knobs if k in row}

    def gpu(self, name: str) -> GpuSpec:
        return next(g for g in self.resolved.gpus if g.name == name)

    def candidate(self, params: Mapping[str, Any], network: Network | None = None) -> TrainingCandidate:
        """The training candidate for one trial's params (on `network` if given, else its
        fabric's); PlanError if the plan cannot run. The last RECENT_CANDIDATES built on their
        fabric are kept, and the PlanError of those that cannot run: judging an outcome (its cost
        and goodput) needs the candidate just simulated, the exact mode asks for its bound first,
        and building it again was a sixth of an evaluation."""
        if network is None:
            key = tuple(params.items())
            found = self._recent.get(key)
            if found is None:  # (a fidelity level's threads share the dict: never read back what was put)
                if len(self._recent) >= RECENT_CANDIDATES:
                    self._recent.clear()
                try:
                    found = self._recent[key] = self._build(params, None)
                except PlanError as exc:  # kept without its traceback (and the frames that holds)
                    found = self._recent[key] = PlanError(str(exc))
            if isinstance(found, PlanError):  # a new one each time: one raised from here would hold this
                raise PlanError(*found.args)  # frame, which holds it (a cycle for the garbage collector)
            return found
        return self._build(params, network)

    def _build(self, params: Mapping[str, Any], network: Network | None) -> TrainingCandidate:
        settings = self.resolved.study.training
        n, tp, pp, cp = params["num_gpus"], params["tp"], params["pp"], params["cp"]
        layout = settings.layout_for(pp, params["vpp"])  # a shape with a layout takes it, not first/last counts
        first, last = (None, None) if layout else (settings.first_stage_layers, settings.last_stage_layers)
        if n % (tp * pp * cp):
            raise PlanError(f"num_gpus={n} is not a multiple of tp*pp*cp={tp}*{pp}*{cp}")
        plan = ParallelPlan(
            tp=tp,
            pp=pp,
            cp=cp,
            dp=n // (tp * pp * cp),
            ep=params["ep"],
            etp=params["etp"],
            vpp=params["vpp"],
            micro_batch=params["micro_batch"],
            global_batch=params["global_batch"],
            seq_len=settings.seq_len,
            recompute=params["recompute"],
            recompute_modules=tuple(settings.recompute_modules),
            grad_reduce_in_bf16=settings.grad_reduce_in_bf16,
            cuda_graphs=settings.cuda_graphs,
            moe_a2a_overlap=settings.moe_a2a_overlap and params["ep"] > 1 and (pp == 1 or params["vpp"] > 1),
            moe_grouped_gemm=settings.moe_grouped_gemm,
            schedule=params["schedule"],
            sequence_parallel=params["sequence_parallel"] and tp > 1,
            # absent from studies before the knob: no overlap
            tp_comm_overlap=params.get("tp_comm_overlap", False) and tp > 1,
            zero_stage=params["zero_stage"],
            precision=settings.precision,
            overlap_grad_reduce=settings.overlap_grad_reduce,
            overlap_param_gather=settings.overlap_param_gather,
            pipeline_split=params.get("pipeline_split", "even"),  # absent from studies before the knob
            first_stage_layers=first,
            last_stage_layers=last,
            pipeline_layout=layout,
            offload=params.get("offload", "none"),  # absent from studies before the knob: nothing offloaded
            overlap_cpu_optimizer=settings.overlap_cpu_optimizer,
            optimizer_offload_fraction=settings.optimizer_offload_fraction,
        )
        hardware = self.resolved.study.hardware
        gpu = self.gpu(params["gpu"])
        system = TrainingSystem(
            gpu,
            n,
            hardware.memory_reserve_gib,
            hardware.calibration,
            self.resolved.compute_fraction[gpu.name],
            network or self.network(gpu, n, params["fabric"], params["nic_gbps"]),
            host=self.host_tier(gpu),
        )
        return TrainingCandidate(self.resolved.model, system, plan)

    def host_tier(self, gpu: GpuSpec) -> HostTier | None:
        """The host memory tier the GPU offloads to: the spec's `hardware.host_tier`, else the
        memory_tiers.yaml row naming the GPU, else none (memoised: every candidate asks)."""
        if gpu.name not in self._hosts:
            self._hosts[gpu.name] = host_tier_of(self.resolved.study.hardware.host_tier, gpu)
        return self._hosts[gpu.name]

    def fabric(self, family: str, nic_gbps: float) -> Fabric:
        """The cluster fabric a trial's `fabric` and `nic_gbps` knobs pick (memoised with the networks)."""
        key = (family, nic_gbps)
        if key not in self._fabrics:
            self._fabrics[key] = self.resolved.fabric(family, nic_gbps)
        return self._fabrics[key]

    def network(self, gpu: GpuSpec, num_gpus: int, family: str, nic_gbps: float) -> Network:
        """The fabric's network (memoised: candidates share a handful); PlanError if it cannot
        hold num_gpus."""
        key = (gpu.name, num_gpus, family, nic_gbps)
        if key not in self._networks:
            try:
                network = self.fabric(family, nic_gbps).network(gpu, num_gpus)
                if self.resolved.nic_efficiency is not None:  # measured on the user's fabric
                    network = dataclasses.replace(network, nic_efficiency=self.resolved.nic_efficiency)
                if self.resolved.collective_calibration is not None:  # nccl-tests on the user's system
                    network = dataclasses.replace(network, calibration=self.resolved.collective_calibration)
                forced = self.resolved.study.hardware.forced_algorithms()
                if forced:  # hardware.collective_algorithm: what every collective of the candidate runs
                    network = dataclasses.replace(network, algorithms=forced)
                self._networks[key] = network
            except SpecError as exc:
                self._networks[key] = PlanError(str(exc))
        found = self._networks[key]
        if isinstance(found, PlanError):
            raise found
        return found


def host_tier_of(named: str | None, gpu: GpuSpec) -> HostTier | None:
    """`hardware.host_tier` if the spec names one, else the row of memory_tiers.yaml naming `gpu`."""
    return host_tier_named(named, "hardware.host_tier") if named is not None else host_tier_for(gpu.name)


def _distribution(knob: Any) -> BaseDistribution:
    if isinstance(knob, IntRange):
        return IntDistribution(knob.low, knob.high, step=knob.step)
    return CategoricalDistribution(list(knob))


def _plain(value: Any) -> Any:
    """A table cell as a plain value; an empty cell (a knob without effect) as None."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _objects(values: tuple) -> np.ndarray:
    """A knob's values as an object array holding the very values (no numpy scalars come back)."""
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column
