"""fidelity.csv: what each level of the ladder changed, per promoted candidate.

One row per candidate a level above the analytical one evaluated: its knobs, the level it is
ranked at (`fidelity`), and for each level of the study (analytical first) the step time
(`iteration_time_s`) and the objectives there,
its rank there by the first objective (among every candidate feasible at that level; empty where
it was not evaluated or not feasible), the largest congestion factor the level found and each
collective's factor. Read from the study's stored records (dse.search.level_records)."""

from __future__ import annotations

from collections.abc import Mapping

import optuna
import pandas as pd

from dse.search.level_records import ANALYTICAL, Standing
from dse.spec.resolved import ResolvedStudy

FIDELITY_FILE = "fidelity.csv"
STEP_TIME = "iteration_time_s"  # what a level re-times: shown at every level whatever the objectives


def fidelity_frame(study: optuna.Study, resolved: ResolvedStudy, standing: Mapping[int, Standing]) -> pd.DataFrame:
    levels = [ANALYTICAL, *(name for name, _ in resolved.study.fidelity.levels())]
    promoted = [t for t, s in standing.items() if len(s.outcomes) > 1]
    if not promoted:
        return pd.DataFrame()
    first, ascending = resolved.objectives[0], resolved.directions[0] == "minimize"
    ranks = {}
    for level in levels:
        values = pd.Series(
            {t: s.outcomes[level].metrics[first] for t, s in standing.items() if s.feasible_at(level)}, dtype=float
        )
        ranks[level] = values.rank(ascending=ascending, method="min")
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    kind = resolved.kind
    shown = [m for m in dict.fromkeys((STEP_TIME, *resolved.objectives)) if m in kind.metrics]
    rows = []
    for t in promoted:
        s = standing[t]
        params = kind.canonical_params(trials[t].params)
        row = {"trial": t, "fidelity": s.level, **{k: params[k] for k in kind.knobs}}
        for level in levels:
            outcome = s.outcomes.get(level)
            for metric in shown:
                row[f"{metric}_{level}"] = outcome.metrics.get(metric) if outcome else None
            row[f"rank_{level}"] = int(ranks[level][t]) if t in ranks[level].index else None
            if level != ANALYTICAL:
                factors = outcome.details.get("factors", []) if outcome else []
                row[f"largest_factor_{level}"] = max((f["factor"] for f in factors), default=1.0) if outcome else None
                row[f"factors_{level}"] = "; ".join(
                    f"{f['op']} {f['ranks']}x{f['stride']} {f['algorithm']}: {f['factor']:.3g}" for f in factors
                ) or ("none" if outcome else None)
        rows.append(row)
    table = pd.DataFrame(rows)
    rank_columns = [f"rank_{level}" for level in levels]
    table[rank_columns] = table[rank_columns].astype("Int64")
    order = [f"rank_{level}" for level in reversed(levels)]
    return table.sort_values(order, na_position="last", ignore_index=True)
