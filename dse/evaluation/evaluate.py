"""Evaluating one candidate: simulate, add cost, judge feasibility. Runs inside Ray workers.

An `Outcome` is one of three things: a result (metrics, feasible or not, with the reason), an
infeasible plan that could not be simulated at all (no metrics, a reason), or an error (the
simulator raised: the trial is recorded as failed and the study goes on).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dse.cost import cost_metrics, ownership
from dse.errors import PlanError, SpecError
from dse.evaluation.serving import serve, serving_costs
from dse.evaluation.space import SearchSpace
from simulators.analytical import TrainingResult, simulate_training_batch
from simulators.network import Network
from simulators.workload import GIB, TrainingCandidate


@dataclass(frozen=True)
class Outcome:
    """What one candidate evaluation produced; `constraints` are <= 0 when satisfied."""

    metrics: Mapping[str, float] = field(default_factory=dict)
    constraints: Mapping[str, float] = field(default_factory=dict)
    reason: str | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def feasible(self) -> bool:
        return not self.failed and all(v <= 0 for v in self.constraints.values())


@dataclass(frozen=True)
class Evaluator:
    """Everything a worker needs to evaluate params of one study; picklable, shipped once."""

    space: SearchSpace
    _owned: dict = field(default_factory=dict, compare=False, repr=False)  # ownership per cluster bought

    @property
    def constraint_names(self) -> tuple[str, ...]:
        user = tuple(
            f"constraints[{i}]:{c.metric}_{'max' if c.max is not None else 'min'}"
            for i, c in enumerate(self.space.resolved.constraints)
        )
        fits = "slo_met" if self.space.resolved.study.mode == "inference" else "memory_fits"
        return ("plan_valid", fits, *user)

    def evaluate(self, params: Mapping[str, Any], network: Network | None = None) -> Outcome:
        """One candidate; `network` replaces its fabric's (the fidelity ladder's slowed one)."""
        return self.evaluate_many([params], network)[0]

    def evaluate_many(self, batch: Sequence[Mapping[str, Any]], network: Network | None = None) -> list[Outcome]:
        """Outcomes in order, judged against the study's own constraints."""
        return [self.judge(params, outcome) for params, outcome in zip(batch, self.simulate_many(batch, network))]

    def simulate_many(self, batch: Sequence[Mapping[str, Any]], network: Network | None = None) -> list[Outcome]:
        """Outcomes in order before the study's prices and own constraints (what studies can
        share: see dse.search.cache); the valid plans are simulated together in one batch call."""
        if self.space.resolved.study.mode == "inference":
            return [self._serve(params) for params in batch]
        outcomes: list[Outcome | None] = [None] * len(batch)
        valid: list[tuple[int, TrainingCandidate]] = []
        for i, params in enumerate(batch):
            try:
                valid.append((i, self.space.candidate(params, network)))
            except PlanError as exc:
                outcomes[i] = self._invalid(exc)
        try:
            results = simulate_training_batch([c for _, c in valid], breakdown=False)
        except Exception:  # find the culprit: simulate one by one, so one bug fails one trial
            results = [_simulate_one(c) for _, c in valid]
        for (i, candidate), result in zip(valid, results):
            outcomes[i] = result if isinstance(result, Outcome) else self._fit(candidate, result)
        return outcomes

    def judge(self, params: Mapping[str, Any], outcome: Outcome) -> Outcome:
        """The outcome with the study's cost metrics and own constraints added (<= 0 when met),
        and the reason each violated one gives."""
        if outcome.failed:
            return outcome
        user = self.constraint_names[2:]
        if not outcome.metrics:  # an invalid plan: only plan_valid is violated
            return dataclasses.replace(outcome, constraints={**outcome.constraints, **dict.fromkeys(user, 0.0)})
        resolved = self.space.resolved
        if resolved.study.mode == "inference":
            costs = serving_costs(resolved, params, outcome.metrics)
        else:
            costs = self._training_costs(params, outcome.metrics)
        metrics = {**outcome.metrics, **costs}
        constraints = dict(outcome.constraints)
        reasons = [outcome.reason] if outcome.reason else []
        for name, c in zip(user, resolved.constraints):
            value = metrics[c.metric]
            bound = c.max if c.max is not None else c.min
            excess = value - bound if c.max is not None else bound - value
            constraints[name] = excess / abs(bound) if bound else excess
            if excess > 0:
                side = "above max" if c.max is not None else "below min"
                reasons.append(f"{c.metric}={value:.4g} is {side} {bound:g}")
        return Outcome(metrics, constraints, "; ".join(reasons) or None)

    def _fit(self, candidate: TrainingCandidate, result: TrainingResult) -> Outcome:
        """The simulated step with its memory constraint (<= 0 when it fits)."""
        capacity_gib = candidate.system.gpu.hbm_bytes / GIB
        fits = (result.metrics["memory_gib_per_gpu"] - capacity_gib) / capacity_gib
        return Outcome(dict(result.metrics), {"plan_valid": 0.0, "memory_fits": fits}, result.infeasible_reason)

    def _training_costs(self, params: Mapping[str, Any], metrics: Mapping[str, float]) -> dict[str, float]:
        """Rental and owned cost, energy and carbon of a training step; buying a cluster is
        costed once per GPU type, count and fabric (the judge runs in the driver)."""
        resolved = self.space.resolved
        gpu = next(g for g in resolved.gpus if g.name == params["gpu"])
        key = (gpu.name, params["num_gpus"], params["fabric"], params["nic_gbps"])
        if key not in self._owned:
            fabric = self.space.fabric(params["fabric"], params["nic_gbps"])
            self._owned[key] = ownership(gpu, params["num_gpus"], fabric, resolved.prices)
        return cost_metrics(
            metrics,
            params["num_gpus"],
            resolved.usd_per_gpu_hour[gpu.name],
            resolved.study.training.train_tokens,
            self._owned[key],
            resolved.prices,
        )

    def _serve(self, params: Mapping[str, Any]) -> Outcome:
        """One inference candidate: capacity (or the fixed rate) on the study's request stream."""
        try:
            metrics, slo_excess, reason = serve(self.space.resolved, params)
        except (PlanError, SpecError) as exc:
            return self._invalid(exc)
        except Exception as exc:  # a simulator bug must not end the study: record it
            return Outcome(error=f"{type(exc).__name__}: {exc}")
        return Outcome(metrics, {"plan_valid": 0.0, "slo_met": slo_excess}, reason)

    def _invalid(self, exc: Exception) -> Outcome:
        """A plan that cannot be built: only `plan_valid` is violated."""
        return Outcome(constraints={"plan_valid": 1.0, self.constraint_names[1]: 0.0}, reason=str(exc))


def _simulate_one(candidate: TrainingCandidate) -> TrainingResult | Outcome:
    try:
        return simulate_training_batch([candidate], breakdown=False)[0]
    except Exception as exc:  # a simulator bug must not end the study: record it
        return Outcome(error=f"{type(exc).__name__}: {exc}")
