"""Asking a batch of trials and telling their outcomes, each trial a few entries in the study.

Optuna's `study.ask` creates a trial and then writes each knob as its own storage entry (with a
copy of the trial for each), and `Trial.set_user_attr`/`set_constraint` read the trial back
before each write: ~1.5 ms a trial of a 20-knob study. A sampler with a `propose(study,
distributions, count)` method (dse.search.samplers: the random and TPE samplers) proposes the
whole batch at once, and each trial is created with its knobs in one entry; its outcome is
three or four entries (the outcome, its constraints, its values and state). On disk the study
is what `study.ask`/`study.tell` write: the same trials, params, attributes and states.
Trials Optuna has enqueued (what an interrupted run left running, asked again on --resume) and
samplers without `propose` go through `study.ask` as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.study._constrained_optimization import _CONSTRAINTS_KEY
from optuna.trial import TrialState


@dataclass(frozen=True)
class Asked:
    """A trial asked and not yet told: its number, storage id and params."""

    number: int
    trial_id: int
    params: dict[str, Any]


def ask_batch(study: optuna.Study, distributions: dict[str, BaseDistribution], count: int) -> list[Asked]:
    """`count` new running trials: enqueued ones first, then the sampler's proposals."""
    storage = study._storage
    waiting = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
    asked = [_asked(study.ask(distributions)) for _ in range(min(count, waiting))]
    propose = getattr(study.sampler, "propose", None)
    if propose is None:
        return asked + [_asked(study.ask(distributions)) for _ in range(count - len(asked))]
    for params in propose(study, distributions, count - len(asked)) if count > len(asked) else ():
        template = optuna.trial.create_trial(state=TrialState.RUNNING, params=params, distributions=distributions)
        trial_id = storage.create_new_trial(study._study_id, template_trial=template)
        asked.append(Asked(storage.get_trial_number_from_id(trial_id), trial_id, dict(params)))
    return asked


def tell(
    study: optuna.Study,
    asked: Asked,
    user_attrs: Mapping[str, Any],
    constraints: Mapping[str, float],
    values: Sequence[float] | None,
) -> None:
    """Finish a trial: its user attributes and constraints, then its values (None: failed)."""
    storage = study._storage
    for key, value in user_attrs.items():
        storage.set_trial_user_attr(asked.trial_id, key, value)
    for name, value in constraints.items():
        if math.isnan(value):
            raise ValueError(f"constraint {name!r} of trial {asked.number} is NaN; a constraint needs a number")
        storage.set_trial_system_attr(asked.trial_id, f"{_CONSTRAINTS_KEY}:{name}", float(value))
    state = TrialState.FAIL if values is None else TrialState.COMPLETE
    if values is not None:
        values = [float(v) for v in values]
        if len(values) != len(study.directions) or any(math.isnan(v) for v in values):
            raise ValueError(f"trial {asked.number}: {len(study.directions)} objective values needed, got {values}")
    # study.tell does this and also returns a deep copy of the trial, a third of a told trial's cost
    study.sampler.after_trial(study, storage.get_trial(asked.trial_id), state, values)
    storage.set_trial_state_values(asked.trial_id, state, values)


def _asked(trial: optuna.Trial) -> Asked:
    return Asked(trial.number, trial._trial_id, trial.params)
