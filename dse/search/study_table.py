"""A study's trials as a table, each at the highest fidelity it reached, and its Pareto front.

The search, the reports and the benchmarks read a study through these two tables: one row per
finished trial (knobs, metrics, feasibility, the reason or error, and `fidelity`, the level whose
evaluation the row shows: dse.search.level_records), and the front of the feasible distinct
candidates, ranked at those levels."""

from __future__ import annotations

import optuna
import pandas as pd
from optuna.trial import TrialState

from dse.search.level_records import ANALYTICAL, standings
from dse.search.pareto import pareto_mask
from dse.search.trial_records import INTERRUPTED_ATTR, OUTCOME_ATTR
from dse.spec.resolved import ResolvedStudy


def trials_frame(study: optuna.Study, resolved: ResolvedStudy) -> pd.DataFrame:
    """One row per finished trial: parameters, metrics, feasibility and the reason or error, at
    the highest fidelity level the trial reached (column `fidelity`)."""
    kind = resolved.kind
    metric_order = [*resolved.objectives, *(m for m in kind.metrics if m not in resolved.objectives)]
    knobs, derived = kind.knobs, kind.derived_columns
    standing = standings(study, resolved)
    rows = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        if trial.user_attrs.get(INTERRUPTED_ATTR) or OUTCOME_ATTR not in trial.user_attrs:
            continue
        record = trial.user_attrs[OUTCOME_ATTR]
        params = kind.canonical_params(trial.params)
        feasible = trial.state == TrialState.COMPLETE and all(v <= 0 for v in trial.constraints.values())
        metrics, reason, level = record["metrics"], record.get("reason"), ANALYTICAL
        if trial.number in standing and standing[trial.number].level != ANALYTICAL:
            best = standing[trial.number]
            metrics, reason, level, feasible = best.metrics, best.outcome.reason, best.level, best.feasible
        row = {
            "trial": trial.number,
            "state": "complete" if trial.state == TrialState.COMPLETE else "failed",
            "feasible": feasible,
            "duplicate_of": record.get("duplicate_of"),
            "fidelity": level,
            **{name: params[name] for name in knobs},
            **kind.derived(params),
            **{name: metrics.get(name) for name in metric_order},
            "reason": reason,
            "error": record.get("error"),
        }
        rows.append(row)
    columns = ["trial", "state", "feasible", "duplicate_of", "fidelity", *knobs, *derived, *metric_order]
    frame = pd.DataFrame(rows, columns=[*columns, "reason", "error"])
    unused = [m for m in metric_order[len(resolved.objectives) :] if frame[m].isna().all()]
    # Integer columns that may be empty (a knob without effect, a derived degree) stay integers.
    nullable = dict.fromkeys(("duplicate_of", *kind.nullable_columns), "Int64")
    frame = frame.drop(columns=unused).astype(nullable)
    return frame.sort_values("trial", ignore_index=True)


def pareto_frame(trials: pd.DataFrame, resolved: ResolvedStudy) -> pd.DataFrame:
    """The feasible, distinct candidates no other feasible candidate beats in every objective."""
    pool = trials[trials["feasible"] & trials["duplicate_of"].isna()]
    if pool.empty:
        return pool.drop(columns=["state", "feasible", "duplicate_of", "error"])
    mask = pareto_mask(pool[list(resolved.objectives)].to_numpy(dtype=float), resolved.directions)
    front = pool[mask].drop(columns=["state", "feasible", "duplicate_of", "error"])
    first = resolved.objectives[0]
    return front.sort_values(first, ascending=resolved.directions[0] == "minimize", ignore_index=True)
