"""What evaluating one candidate produced: metrics, constraints (<= 0 when met), a reason, an error.

An `Outcome` is one of three things: a result (metrics, feasible or not, with the reason), an
infeasible plan that could not be simulated at all (no metrics, a reason), or an error (the
simulator raised: the trial is recorded as failed and the study goes on).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PLAN_VALID = "plan_valid"  # the constraint every kind has first: 1 when the plan cannot be built


@dataclass(frozen=True)
class Outcome:
    """What one candidate evaluation produced; `constraints` are <= 0 when satisfied;
    `details` what a fidelity level reports beyond metrics (the step's breakdown, the
    congestion factors it found), as JSON-ready values the study stores."""

    metrics: Mapping[str, float] = field(default_factory=dict)
    constraints: Mapping[str, float] = field(default_factory=dict)
    reason: str | None = None
    error: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def feasible(self) -> bool:
        return not self.failed and all(v <= 0 for v in self.constraints.values())


def invalid(exc: Exception, fits_constraint: str) -> Outcome:
    """A plan that cannot be built: only `plan_valid` is violated."""
    return Outcome(constraints={PLAN_VALID: 1.0, fits_constraint: 0.0}, reason=str(exc))


def crashed(exc: Exception) -> Outcome:
    """A simulator bug must not end the study: the trial records it and fails."""
    return Outcome(error=f"{type(exc).__name__}: {exc}")
