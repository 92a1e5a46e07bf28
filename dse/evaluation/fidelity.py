"""One candidate at a level of the fidelity ladder (simulators.fidelity.LEVELS).

The level runs the candidate's collectives on its fabric, every group of the step at once, each
by the algorithm the analytical model chose for it, and reports a congestion factor per
collective; the training timeline is run again with those collectives slowed by their factors.
The outcome carries the level's metrics and, as details, the factors and the step's breakdown
at that level, which the study stores (dse.search.ladder) and the reports read."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dse.errors import PlanError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.outcome import Outcome, crashed, invalid
from simulators.fidelity import LEVELS


@dataclass(frozen=True)
class LevelEvaluator:
    """Evaluates candidates of one study at one level; picklable (Ray ships it once a level).
    `options` are the level's own settings (the packet level's congestion control, say)."""

    evaluator: Evaluator
    level: str
    message_cap_bytes: int
    options: Mapping[str, Any] = field(default_factory=dict)
    task_size: ClassVar[int] = 1  # one candidate a task: a level's budget stops between candidates
    releases_gil: ClassVar[bool] = True  # its time is in the flow and packet engines, compiled nogil

    def simulate_many(self, batch: Sequence[Mapping[str, Any]]) -> list[Outcome]:
        """Outcomes in order, before the study's prices and own constraints (Evaluator.judge)."""
        return [self._simulate(params) for params in batch]

    def _simulate(self, params: Mapping[str, Any]) -> Outcome:
        space = self.evaluator.space
        kind = space.resolved.kind
        try:
            candidate = space.candidate(params)
        except PlanError as exc:
            return invalid(exc, kind.fits_constraint)
        try:
            level = LEVELS.lookup(self.level, f"fidelity.{self.level}").configured(self.options)
            fabric = space.fabric(params["fabric"], params["nic_gbps"])
            factors = level.congestion_factors(candidate, fabric, self.message_cap_bytes)
            slowdown = tuple((f.key, f.factor) for f in factors)
            network = dataclasses.replace(candidate.system.fabric_network, slowdown=slowdown)
            (outcome,) = kind.simulate_many(space, [params], network)
            (breakdown,) = kind.step_details(space, [params], network)
        except Exception as exc:  # a simulator bug fails this candidate's level, not the study
            return crashed(exc)
        found = [{**dataclasses.asdict(f), "factor": f.factor} for f in factors]
        return dataclasses.replace(outcome, details={**breakdown, "factors": found})
