"""What a study's trials record of their outcomes, and what a resumed study reads back: the
finished evaluations (so none is repeated) and the trials an interruption left running."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import TrialState

from dse.evaluation.outcome import Outcome
from dse.spec.kind import StudyKind

OUTCOME_ATTR = "outcome"
INTERRUPTED_ATTR = "interrupted"


def counts(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether a stored trial is a finished evaluation (not one an interruption cut short)."""
    return trial.state in (TrialState.COMPLETE, TrialState.FAIL) and not trial.user_attrs.get(INTERRUPTED_ATTR)


def requeue_interrupted(study: optuna.Study, kind: StudyKind) -> dict[tuple, tuple[int, Outcome]]:
    """Fail trials an interruption left running and ask their candidates again (a trial whose
    driver was killed while it was being asked holds only some knobs: it was never a candidate).

    Returns the cache of finished evaluations, so a resumed study does not repeat them.
    """
    cache: dict[tuple, tuple[int, Outcome]] = {}
    for trial in study.get_trials(deepcopy=False):
        if trial.state == TrialState.RUNNING:
            optuna.trial.Trial(study, trial._trial_id).set_user_attr(INTERRUPTED_ATTR, True)
            study.tell(trial.number, state=TrialState.FAIL)
            if set(kind.knobs) <= set(trial.params):
                study.enqueue_trial(trial.params, skip_if_exists=False)
        elif counts(trial) and OUTCOME_ATTR in trial.user_attrs:
            key = kind.params_key(trial.params)
            if key not in cache and "duplicate_of" not in trial.user_attrs[OUTCOME_ATTR]:
                cache[key] = (trial.number, outcome_from_attrs(trial.user_attrs[OUTCOME_ATTR], trial.constraints))
    return cache


def outcome_attrs(outcome: Outcome, duplicate_of: int | None = None) -> dict[str, Any]:
    """What a trial stores of its outcome besides values and constraints (`outcome_from_attrs` reads it)."""
    record: dict[str, Any] = {"metrics": dict(outcome.metrics), "reason": outcome.reason, "error": outcome.error}
    if outcome.details:
        record["details"] = dict(outcome.details)
    if duplicate_of is not None:
        record["duplicate_of"] = duplicate_of
    return record


def outcome_from_attrs(record: Mapping[str, Any], constraints: Mapping[str, float]) -> Outcome:
    return Outcome(
        metrics=record.get("metrics", {}),
        constraints=dict(constraints),
        reason=record.get("reason"),
        error=record.get("error"),
        details=record.get("details", {}),
    )
