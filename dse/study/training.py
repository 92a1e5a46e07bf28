"""The training study kind: a step of a parallel plan on a cluster, costed per token trained."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dse.errors import PlanError, SpecError
from dse.evaluation.outcome import PLAN_VALID, Outcome, crashed, invalid
from dse.evaluation.space import KNOBS, SearchSpace
from dse.spec.kind import StudyKind, register
from dse.spec.metrics import TRAINING_METRICS
from dse.spec.resolved import ResolvedStudy
from dse.spec.study import Study
from dse.study.goodput import priced_costs, training_costs
from dse.study.training_checks import check_training
from simulators.analytical import TrainingResult, floor_training_batch, memory_only, simulate_training_batch
from simulators.hardware import GpuSpec
from simulators.models import ModelSpec
from simulators.network import Network
from simulators.workload import GIB, TrainingCandidate

COST_ONLY = {"train_tokens"}  # a training setting only the cost metrics read


class TrainingKind(StudyKind):
    name = "training"
    knobs = KNOBS
    shown_metrics = ("mfu", "memory_gib_per_gpu")
    settings_section = "training"
    fits_constraint = "memory_fits"
    derived_columns = ("dp",)
    nullable_columns = ("dp",)  # no whole data-parallel degree: the plan is invalid
    has_step_breakdowns = True
    replays_collectives = True
    # simulators.analytical.floor_training_batch bounds the step; the throughputs are tokens (or
    # FLOPs) over it, the time to train its inverse throughput; prices per hour are fixed by the
    # cluster, its spares and its power (dse.cost.cost_metrics).
    step_monotone = {
        "iteration_time_s": "rises",
        "tokens_per_s": "falls",
        "tokens_per_s_per_gpu": "falls",
        "mfu": "falls",
        "hfu": "falls",
        "time_to_train_days": "rises",
    }
    step_monotone_fixed_spares = {
        "cost_to_train_usd": "rises",
        "owned_cost_to_train_usd": "rises",
        "usd_per_mtok": "rises",
        "owned_usd_per_mtok": "rises",
        "kwh_per_mtok": "rises",
        "co2e_kg_per_mtok": "rises",
        "co2e_kg_to_train": "rises",
    }

    @property
    def metrics(self):
        return TRAINING_METRICS

    def check(self, study: Study, model: ModelSpec, gpus: tuple[GpuSpec, ...]) -> None:
        check_training(study, model, gpus)

    def knob_lists(self, resolved: ResolvedStudy) -> dict[str, Any]:
        study = resolved.study
        return {
            "gpu": [gpu.name for gpu in resolved.gpus],
            "num_gpus": study.hardware.num_gpus,
            **{name: getattr(study.search, name) for name in KNOBS[2:-2]},
            "fabric": study.hardware.fabric.family,
            "nic_gbps": list(resolved.nic_gbps),
        }

    def describe(self, study: Study) -> str:
        return f"seq_len {study.training.seq_len}, {study.training.precision}"

    def work(self, study: Study) -> dict[str, Any]:
        return {"work": study.training.model_dump(exclude=COST_ONLY), "seed": None}

    def canonical_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The schedule of a one-stage pipeline, sequence parallelism without tensor
        parallelism, ZeRO without data parallelism have no effect."""
        canonical = dict(params)
        canonical.setdefault("pipeline_split", "even")  # studies recorded before the knob split evenly
        canonical.setdefault("offload", "none")  # studies recorded before the knob offloaded nothing
        canonical.setdefault("spare_servers", 0)  # and before the reliability knobs
        canonical.setdefault("checkpoint_interval_s", "optimal")
        canonical.setdefault("tp_comm_overlap", False)  # and before tensor-parallel overlap
        if canonical["pp"] == 1:
            canonical["schedule"] = "1f1b"
            canonical["pipeline_split"] = "even"
        if canonical["tp"] == 1:
            canonical["sequence_parallel"] = True
            canonical["tp_comm_overlap"] = False
        if canonical["num_gpus"] == canonical["tp"] * canonical["pp"]:  # dp * cp == 1: nothing to shard over
            canonical["zero_stage"] = 0
        return canonical

    def derived(self, params: Mapping[str, Any]) -> dict[str, Any]:
        split = params["tp"] * params["pp"] * params["cp"]
        return {"dp": params["num_gpus"] // split if params["num_gpus"] % split == 0 else None}

    def check_runnable(self, space: SearchSpace, limit: int) -> None:
        """Each knob value passes its own check, but maybe no combination does (say vpp 2 whose
        micro-batches never fill pp): stops at the first plan that can run; a space larger than
        `limit` whose first `limit` plans all fail is left to the search (no verdict)."""
        reasons: Counter[str] = Counter()
        for combo in itertools.islice(itertools.product(*space.values.values()), limit):
            try:
                space.candidate(dict(zip(space.values, combo)))
                return
            except (PlanError, SpecError) as exc:
                reasons[str(exc)] += 1
        if space.size <= limit:
            reason, count = reasons.most_common(1)[0]
            raise SpecError(
                f"search: no plan of the search space can run ({space.size} combinations); the commonest "
                f"reason ({count} of them): {reason}"
            )

    def simulate_many(
        self,
        space: SearchSpace,
        batch: Sequence[Mapping[str, Any]],
        network: Network | None,
        feasible_only: bool = False,
    ) -> list[Outcome]:
        """The valid plans are simulated together in one batch call; with `feasible_only`, those
        the memory model alone finds too big are not simulated (no metrics, their reason)."""
        outcomes: list[Outcome | None] = [None] * len(batch)
        valid: list[tuple[int, TrainingCandidate]] = []
        for i, params in enumerate(batch):
            try:
                valid.append((i, space.candidate(params, network)))
            except PlanError as exc:
                outcomes[i] = invalid(exc, self.fits_constraint)
        if feasible_only:
            sized = memory_only([c for _, c in valid])
            for (i, candidate), result in zip(valid, sized):
                if not result.feasible:
                    outcomes[i] = self._fit(candidate, result)
            valid = [(i, c) for (i, c), result in zip(valid, sized) if result.feasible]
        try:
            results = simulate_training_batch([c for _, c in valid], breakdown=False)
        except Exception:  # find the culprit: simulate one by one, so one bug fails one trial
            results = [_simulate_one(c, self.fits_constraint) for _, c in valid]
        for (i, candidate), result in zip(valid, results):
            outcomes[i] = result if isinstance(result, Outcome) else self._fit(candidate, result)
        return outcomes

    def step_floors(
        self, space: SearchSpace, batch: Sequence[Mapping[str, Any]], owned: dict
    ) -> tuple[list[Outcome | None], list[Outcome | None]]:
        """Plans that cannot be built or do not fit get their outcome (as `simulate_many` with
        `feasible_only` gives it); those that fit, at simulators.analytical's step floor, priced
        on their cluster with its fixed spares (`auto` spares: neither)."""
        known: list[Outcome | None] = [None] * len(batch)
        floors: list[Outcome | None] = [None] * len(batch)
        valid: list[tuple[int, TrainingCandidate]] = []
        for i, params in enumerate(batch):
            if params.get("spare_servers", 0) == "auto":
                continue
            try:
                valid.append((i, space.candidate(params)))
            except PlanError as exc:
                known[i] = invalid(exc, self.fits_constraint)
        sized = memory_only([c for _, c in valid])
        fitting = []
        for (i, candidate), result in zip(valid, sized):
            if result.feasible:
                fitting.append((i, candidate, result.memory))
            else:
                known[i] = self._fit(candidate, result)
        try:
            results = floor_training_batch([c for _, c, _ in fitting], [m for _, _, m in fitting])
        except PlanError:  # found only while pricing: left to the simulation to report
            return known, floors
        for (i, candidate, _), result in zip(fitting, results):
            params = batch[i]
            outcome = self._fit(candidate, result)
            costs = priced_costs(space, params, outcome.metrics, owned, int(params.get("spare_servers", 0)))
            floors[i] = dataclasses.replace(outcome, metrics={**outcome.metrics, **costs})
        return known, floors

    def step_details(
        self, space: SearchSpace, batch: Sequence[Mapping[str, Any]], network: Network | None = None
    ) -> list[dict[str, float]]:
        out: list[dict[str, float]] = [{} for _ in batch]
        valid = []
        for i, params in enumerate(batch):
            with contextlib.suppress(PlanError):
                valid.append((i, space.candidate(params, network)))
        for (i, _), result in zip(valid, simulate_training_batch([c for _, c in valid]) if valid else ()):
            memory = {
                f"memory_{name.removesuffix('_bytes')}_gib": value / GIB
                for name, value in dataclasses.asdict(result.memory).items()
            }
            out[i] = {**{f"breakdown_{name}": float(v) for name, v in result.breakdown_s.items()}, **memory}
        return out

    def _fit(self, candidate: TrainingCandidate, result: TrainingResult) -> Outcome:
        """The simulated step with its memory constraint (<= 0 when it fits); a result of
        `memory_only` gives the constraint and reason without metrics."""
        capacity_gib = candidate.system.gpu.hbm_bytes / GIB
        fits = (result.memory.total_gib - capacity_gib) / capacity_gib
        if result.host_memory_bytes is not None:  # offloaded bytes must fit the GPU's share of host memory
            fits = max(fits, (result.memory.host_bytes - result.host_memory_bytes) / result.host_memory_bytes)
        if result.nvme_bytes is not None:  # and the NVMe drives' share
            fits = max(fits, (result.memory.nvme_bytes - result.nvme_bytes) / result.nvme_bytes)
        return Outcome(dict(result.metrics), {PLAN_VALID: 0.0, self.fits_constraint: fits}, result.infeasible_reason)

    def costs(
        self, space: SearchSpace, params: Mapping[str, Any], metrics: Mapping[str, float], owned: dict
    ) -> dict[str, float]:
        """Rental and owned cost, energy and carbon of a training step, and its goodput under
        failures (dse/study/goodput.py); buying a cluster, hot spares included, is costed once
        per GPU type, count and fabric."""
        return training_costs(space, params, metrics, owned)


def _simulate_one(candidate: TrainingCandidate, fits_constraint: str) -> TrainingResult | Outcome:
    try:
        return simulate_training_batch([candidate], breakdown=False)[0]
    except PlanError as exc:  # found only while pricing (a forced collective algorithm that cannot run)
        return invalid(exc, fits_constraint)
    except Exception as exc:
        return crashed(exc)


register(TrainingKind())
