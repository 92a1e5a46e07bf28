"""What a study stores of its fidelity ladder, and each trial's standing read back from it.

Beside the trials (dse.search.trial_records), the study's user attributes hold, for every
candidate a level evaluated, `ladder:<level>:<trial>` (the judged outcome at that level: metrics,
constraints, reason, error, and details such as congestion factors and the step breakdown); for
every level, `ladder:<level>` (its LevelProgress); and for candidates of the final front that only
the analytical model priced, `details:<trial>` (their step breakdown). Reports and `dse simulate
--config` read these and never simulate. A trial's standing is its outcome at the highest level
it reached, levels ordered as simulators.fidelity.LEVELS registers them (cheapest first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import optuna

from dse.evaluation.outcome import Outcome
from dse.search.trial_records import OUTCOME_ATTR, counts, outcome_attrs, outcome_from_attrs
from dse.spec.resolved import ResolvedStudy
from simulators.fidelity import LEVELS

ANALYTICAL = "analytical"


@dataclass(frozen=True)
class LevelProgress:
    """How far one level got: candidates promoted to it, evaluated at it, wall seconds spent
    there over every run, and why it stopped."""

    level: str
    promoted: int = 0
    evaluated: int = 0
    wall_s: float = 0.0
    stopped: str = "not started"

    @classmethod
    def stored(cls, study: optuna.Study, level: str) -> LevelProgress:
        return cls(**study.user_attrs.get(f"ladder:{level}", {"level": level}))

    def describe(self) -> str:
        seen = f"{self.evaluated} of {self.promoted} promoted candidates"
        return f"{self.level}: {seen} in {self.wall_s:.1f} s ({self.stopped})"


@dataclass(frozen=True)
class Standing:
    """A trial's judged outcome at each level it reached, analytical first."""

    outcomes: Mapping[str, Outcome]
    front_details: Mapping[str, Any]  # the step breakdown stored for an analytical front candidate

    @property
    def level(self) -> str:
        return next(reversed(self.outcomes))

    @property
    def outcome(self) -> Outcome:
        return self.outcomes[self.level]

    @property
    def metrics(self) -> Mapping[str, float]:
        return self.outcome.metrics

    @property
    def feasible(self) -> bool:
        return self.feasible_at(self.level)

    def feasible_at(self, level: str) -> bool:
        """Evaluated at `level` and feasible there (a plan without metrics never is: its
        plan_valid constraint is violated, or it failed)."""
        return level in self.outcomes and self.outcomes[level].feasible

    @property
    def details(self) -> Mapping[str, Any]:
        """The details at the highest level (a level's factors and breakdown), else the front's."""
        return self.outcome.details or self.front_details

    def at(self, level: str) -> bool:
        return level in self.outcomes


def save_record(study: optuna.Study, level: str, trial: int, outcome: Outcome) -> None:
    study.set_user_attr(f"ladder:{level}:{trial}", {**outcome_attrs(outcome), "constraints": dict(outcome.constraints)})


def save_progress(study: optuna.Study, progress: LevelProgress) -> None:
    study.set_user_attr(f"ladder:{progress.level}", asdict(progress))


def save_front_details(study: optuna.Study, trial: int, details: Mapping[str, Any]) -> None:
    study.set_user_attr(f"details:{trial}", dict(details))


def progress_of(study: optuna.Study, resolved: ResolvedStudy) -> list[LevelProgress]:
    """The stored progress of each level the spec climbs."""
    return [LevelProgress.stored(study, name) for name, _ in resolved.study.fidelity.levels()]


def standings(study: optuna.Study, resolved: ResolvedStudy) -> dict[int, Standing]:
    """Every distinct finished trial (not a duplicate, not cut short) by number, with its standing."""
    attrs = study.user_attrs
    order = [name for name in LEVELS if name != ANALYTICAL]
    out: dict[int, Standing] = {}
    for trial in study.get_trials(deepcopy=False):
        record = trial.user_attrs.get(OUTCOME_ATTR)
        if not counts(trial) or record is None or "duplicate_of" in record:
            continue
        outcomes = {ANALYTICAL: outcome_from_attrs(record, trial.constraints)}
        for name in order:
            stored = attrs.get(f"ladder:{name}:{trial.number}")
            if stored is not None:
                outcomes[name] = outcome_from_attrs(stored, stored.get("constraints", {}))
        out[trial.number] = Standing(outcomes, attrs.get(f"details:{trial.number}", {}))
    return out
