"""Evaluating candidates of one study: simulate (the study kind's step), add cost, judge
feasibility. Runs inside Ray workers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from dse.evaluation.outcome import PLAN_VALID, Outcome
from dse.evaluation.space import SearchSpace
from simulators.network import Network


@dataclass(frozen=True)
class Evaluator:
    """Everything a worker needs to evaluate params of one study; picklable, shipped once."""

    space: SearchSpace
    _owned: dict = field(default_factory=dict, compare=False, repr=False)  # ownership per cluster bought

    @cached_property
    def constraint_names(self) -> tuple[str, ...]:
        """The constraints every outcome is judged by, in order (asked for every plan: built once)."""
        user = tuple(
            f"constraints[{i}]:{c.metric}_{'max' if c.max is not None else 'min'}"
            for i, c in enumerate(self.space.resolved.constraints)
        )
        return (PLAN_VALID, self.space.resolved.kind.fits_constraint, *user)

    def evaluate(self, params: Mapping[str, Any], network: Network | None = None) -> Outcome:
        """One candidate; `network` replaces its fabric's (the fidelity ladder's slowed one)."""
        return self.evaluate_many([params], network)[0]

    def evaluate_many(
        self, batch: Sequence[Mapping[str, Any]], network: Network | None = None, feasible_only: bool = False
    ) -> list[Outcome]:
        """Outcomes in order, judged against the study's own constraints (`feasible_only`: see
        StudyKind.simulate_many)."""
        outcomes = self.simulate_many(batch, network, feasible_only)
        return [self.judge(params, outcome) for params, outcome in zip(batch, outcomes)]

    def simulate_many(
        self, batch: Sequence[Mapping[str, Any]], network: Network | None = None, feasible_only: bool = False
    ) -> list[Outcome]:
        """Outcomes in order before the study's prices and own constraints (what studies can
        share: see dse.search.cache)."""
        return self.space.resolved.kind.simulate_many(self.space, batch, network, feasible_only)

    def floor_outcomes(self, batch: Sequence[Mapping[str, Any]]) -> tuple[list[Outcome | None], list[Outcome | None]]:
        """Per plan, its judged outcome where it is known without simulating, else its outcome
        with the step at the kind's lower bound, priced, without the study's own constraints
        (StudyKind.step_floors)."""
        known, floors = self.space.resolved.kind.step_floors(self.space, batch, self._owned)
        return [None if o is None else self.judge(p, o) for p, o in zip(batch, known)], floors

    def judge(self, params: Mapping[str, Any], outcome: Outcome) -> Outcome:
        """The outcome with the study's cost metrics and own constraints added (<= 0 when met),
        and the reason each violated one gives. Buying a cluster is costed once per cluster
        (the judge runs in the driver)."""
        if outcome.failed:
            return outcome
        user = self.constraint_names[2:]
        if not outcome.metrics:  # an invalid plan: only plan_valid is violated
            constraints = {**outcome.constraints, **dict.fromkeys(user, 0.0)}
            return Outcome(outcome.metrics, constraints, outcome.reason, outcome.error, outcome.details)
        resolved = self.space.resolved
        costs = resolved.kind.costs(self.space, params, outcome.metrics, self._owned)
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
        return Outcome(metrics, constraints, "; ".join(reasons) or None, details=outcome.details)
