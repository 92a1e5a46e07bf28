"""Evaluating one candidate: simulate, add cost, judge feasibility. Runs inside Ray workers.

An `Outcome` is one of three things: a result (metrics, feasible or not, with the reason), an
infeasible plan that could not be simulated at all (no metrics, a reason), or an error (the
simulator raised: the trial is recorded as failed and the study goes on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dse.cost import cost_metrics, ownership
from dse.errors import PlanError, SpecError
from dse.serving import serve
from dse.space import SearchSpace
from simulators.analytical import TrainingResult, simulate_training_batch
from simulators.network import Network
from simulators.workload import TrainingCandidate


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
        """Outcomes in order; the valid plans are simulated together in one batch call."""
        if self.space.resolved.study.mode == "inference":
            return [self._serve(params) for params in batch]
        outcomes: list[Outcome | None] = [None] * len(batch)
        valid: list[tuple[int, TrainingCandidate]] = []
        for i, params in enumerate(batch):
            try:
                valid.append((i, self.space.candidate(params, network)))
            except PlanError as exc:
                violated = {name: 0.0 for name in self.constraint_names}
                violated["plan_valid"] = 1.0
                outcomes[i] = Outcome(constraints=violated, reason=str(exc))
        try:
            results = simulate_training_batch([c for _, c in valid], breakdown=False)
        except Exception:  # find the culprit: simulate one by one, so one bug fails one trial
            results = [_simulate_one(c) for _, c in valid]
        for (i, candidate), result in zip(valid, results):
            outcomes[i] = result if isinstance(result, Outcome) else self._judge(batch[i], candidate, result)
        return outcomes

    def _judge(self, params: Mapping[str, Any], candidate: TrainingCandidate, result: TrainingResult) -> Outcome:
        """Cost metrics, then the memory and user constraints (<= 0 when met) with reasons."""
        resolved = self.space.resolved
        metrics = dict(result.metrics)
        gpu, num_gpus = candidate.system.gpu, candidate.system.num_gpus
        fabric = self.space.fabric(params["fabric"], params["nic_gbps"])
        metrics.update(
            cost_metrics(
                metrics,
                num_gpus,
                resolved.usd_per_gpu_hour[gpu.name],
                resolved.study.training.train_tokens,
                ownership(gpu, num_gpus, fabric, resolved.prices),
                resolved.prices,
            )
        )
        capacity_gb = candidate.system.gpu.hbm_bytes / 1e9
        fits = (metrics["memory_gb_per_gpu"] - capacity_gb) / capacity_gb
        return self._constrained(metrics, fits, result.infeasible_reason)

    def _serve(self, params: Mapping[str, Any]) -> Outcome:
        """One inference candidate: capacity (or the fixed rate) on the study's request stream."""
        try:
            metrics, slo_excess, reason = serve(self.space.resolved, params)
        except (PlanError, SpecError) as exc:
            violated = {name: 0.0 for name in self.constraint_names}
            violated["plan_valid"] = 1.0
            return Outcome(constraints=violated, reason=str(exc))
        except Exception as exc:  # a simulator bug must not end the study: record it
            return Outcome(error=f"{type(exc).__name__}: {exc}")
        return self._constrained(metrics, slo_excess, reason)

    def _constrained(self, metrics: dict[str, float], fits: float, reason: str | None) -> Outcome:
        """The outcome with its constraints (<= 0 when met): the plan is valid, it fits (memory,
        or the SLO for serving), and the user's bounds; `reason` says why it does not fit."""
        resolved = self.space.resolved
        constraints = {"plan_valid": 0.0, self.constraint_names[1]: fits}
        reasons = [reason] if reason else []
        for name, c in zip(self.constraint_names[2:], resolved.constraints):
            value = metrics[c.metric]
            bound = c.max if c.max is not None else c.min
            excess = value - bound if c.max is not None else bound - value
            constraints[name] = excess / abs(bound) if bound else excess
            if excess > 0:
                side = "above max" if c.max is not None else "below min"
                reasons.append(f"{c.metric}={value:.4g} is {side} {bound:g}")
        return Outcome(metrics=metrics, constraints=constraints, reason="; ".join(reasons) or None)


def _simulate_one(candidate: TrainingCandidate) -> TrainingResult | Outcome:
    try:
        return simulate_training_batch([candidate], breakdown=False)[0]
    except Exception as exc:  # a simulator bug must not end the study: record it
        return Outcome(error=f"{type(exc).__name__}: {exc}")
