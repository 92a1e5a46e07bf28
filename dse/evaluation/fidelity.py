"""The fidelity ladder: the analytical front's best candidates re-evaluated at a higher level.

The spec's `fidelity` section names the level (each of its fields is a registered level of
simulators.fidelity.LEVELS: today `packet`). The first `top` candidates of the Pareto front (in
the order of the first objective) have their collectives run on their fabric by that level's
simulator, every group of the step at once, each by the algorithm the analytical model chose for it
(named in the `factors` column); the training timeline is re-run with those collectives slowed
by their factors, and both evaluations are reported side by side with each candidate's rank
under either (`fidelity.csv`, and a section of report.html)."""

from __future__ import annotations

import dataclasses

import pandas as pd

from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.spec.resolved import ResolvedStudy
from simulators.fidelity import LEVELS

FIDELITY_FILE = "fidelity.csv"


def packet_fidelity(front: pd.DataFrame, resolved: ResolvedStudy) -> pd.DataFrame:
    """One row per re-evaluated candidate: its knobs, the objectives at both fidelities, the
    ranks under each (by the first objective) and the largest congestion factor found."""
    chosen = [(name, settings) for name, settings in resolved.study.fidelity if settings is not None]
    if not chosen or front.empty:
        return pd.DataFrame()
    ((name, settings),) = chosen  # the spec holds one level above the analytical one
    level = LEVELS.lookup(name, f"fidelity.{name}")
    space = SearchSpace.from_study(resolved)
    evaluator = Evaluator(space)
    cap = int(settings.message_cap_mb * 2**20)
    rows = []
    for _, row in front.head(settings.top).iterrows():
        params = space.params_of_row(row)
        candidate = space.candidate(params)
        factors = level.congestion_factors(candidate, space.fabric(params["fabric"], params["nic_gbps"]), cap)
        slowdown = tuple((f.key, f.factor) for f in factors)
        network = dataclasses.replace(candidate.system.fabric_network, slowdown=slowdown)
        above = evaluator.evaluate(params, network=network)
        record = {"trial": row["trial"], "level": level.name, **params}
        for metric in resolved.objectives:
            record[f"{metric}_analytical"] = row[metric]
            record[f"{metric}_{level.name}"] = above.metrics.get(metric)
        record["largest_factor"] = max((f.factor for f in factors), default=1.0)
        record["factors"] = (
            "; ".join(f"{f.op} {f.ranks}x{f.stride} {f.algorithm}: {f.factor:.3g}" for f in factors) or "none"
        )
        rows.append(record)
    table = pd.DataFrame(rows)
    first, direction = resolved.objectives[0], resolved.directions[0]
    ascending = direction == "minimize"
    for fidelity in ("analytical", level.name):
        table[f"rank_{fidelity}"] = table[f"{first}_{fidelity}"].rank(ascending=ascending, method="min").astype(int)
    return table
