"""Study output: trials.csv (every finished trial), pareto.csv (the feasible front), terminal table."""

from __future__ import annotations

from pathlib import Path

import optuna
import pandas as pd
from optuna.trial import TrialState

from dse.checks import ResolvedStudy
from dse.engine import INTERRUPTED_ATTR, OUTCOME_ATTR
from dse.metrics import TRAINING_METRICS
from dse.pareto import pareto_mask
from dse.space import KNOBS, SearchSpace, canonical_params, params_of_row
from simulators.analytical import simulate_training_batch


def trials_frame(study: optuna.Study, resolved: ResolvedStudy) -> pd.DataFrame:
    """One row per finished trial: parameters, metrics, feasibility and the reason or error."""
    metric_order = [*resolved.objectives, *(m for m in TRAINING_METRICS if m not in resolved.objectives)]
    rows = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        if trial.user_attrs.get(INTERRUPTED_ATTR) or OUTCOME_ATTR not in trial.user_attrs:
            continue
        record = trial.user_attrs[OUTCOME_ATTR]
        params = canonical_params(trial.params)
        split = params["tp"] * params["pp"] * params["cp"]
        constraints = trial.constraints
        row = {
            "trial": trial.number,
            "state": "complete" if trial.state == TrialState.COMPLETE else "failed",
            "feasible": trial.state == TrialState.COMPLETE and all(v <= 0 for v in constraints.values()),
            "duplicate_of": record.get("duplicate_of"),
            **{name: params[name] for name in KNOBS},
            "dp": params["num_gpus"] // split if params["num_gpus"] % split == 0 else None,
            **{name: record["metrics"].get(name) for name in metric_order},
            "reason": record.get("reason"),
            "error": record.get("error"),
        }
        rows.append(row)
    columns = ["trial", "state", "feasible", "duplicate_of", *KNOBS, "dp", *metric_order, "reason", "error"]
    frame = pd.DataFrame(rows, columns=columns)
    unused = [m for m in metric_order[len(resolved.objectives) :] if frame[m].isna().all()]
    frame = frame.drop(columns=unused).astype({"duplicate_of": "Int64", "dp": "Int64"})
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


def with_breakdown(front: pd.DataFrame, resolved: ResolvedStudy) -> pd.DataFrame:
    """The front with each candidate's time breakdown (the search ranks metrics only, so the
    few Pareto candidates are simulated once more, with the breakdown)."""
    if front.empty:
        return front
    space = SearchSpace.from_study(resolved)
    candidates = [space.candidate(params_of_row(row)) for _, row in front.iterrows()]
    parts = pd.DataFrame([result.breakdown_s for result in simulate_training_batch(candidates)], index=front.index)
    return pd.concat([front, parts.add_prefix("breakdown_")], axis=1)


def write_reports(study: optuna.Study, resolved: ResolvedStudy, out_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write trials.csv and pareto.csv (the front, with each candidate's time breakdown) into
    `out_dir`; return both frames."""
    out_dir.mkdir(parents=True, exist_ok=True)
    trials = trials_frame(study, resolved)
    front = with_breakdown(pareto_frame(trials, resolved), resolved)
    trials.to_csv(out_dir / "trials.csv", index=False)
    front.to_csv(out_dir / "pareto.csv", index=False)
    return trials, front
