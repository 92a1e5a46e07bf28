"""The fidelity ladder: the analytical front's best candidates re-evaluated at packet level.

The first `top` candidates of the Pareto front (in the order of the first objective) have their
collectives run on their fabric by the packet simulator, every group of the step at once
(simulators.packet congestion factors), each by the algorithm the analytical model chose for it
(named in the `factors` column); the training timeline is re-run with those collectives slowed
by their factors, and both evaluations are reported side by side with each candidate's rank
under either (`fidelity.csv`, and a section of report.html)."""

from __future__ import annotations

import dataclasses

import pandas as pd

from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.spec.resolved import ResolvedStudy

FIDELITY_FILE = "fidelity.csv"


def packet_fidelity(front: pd.DataFrame, resolved: ResolvedStudy) -> pd.DataFrame:
    """One row per re-evaluated candidate: its knobs, the objectives at both fidelities, the
    ranks under each (by the first objective) and the largest congestion factor found."""
    settings = resolved.study.fidelity.packet
    if settings is None or front.empty:
        return pd.DataFrame()
    from simulators.packet import congestion_factors  # networkx and the packet engine: only when asked

    space = SearchSpace.from_study(resolved)
    evaluator = Evaluator(space)
    cap = int(settings.message_cap_mb * 2**20)
    rows = []
    for _, row in front.head(settings.top).iterrows():
        params = space.params_of_row(row)
        candidate = space.candidate(params)
        factors = congestion_factors(candidate, space.fabric(params["fabric"], params["nic_gbps"]), cap)
        slowdown = tuple(((f.op, f.ranks, f.stride), f.factor) for f in factors)
        network = dataclasses.replace(candidate.system.fabric_network, slowdown=slowdown)
        packet = evaluator.evaluate(params, network=network)
        record = {"trial": row["trial"], **params}
        for metric in resolved.objectives:
            record[f"{metric}_analytical"] = row[metric]
            record[f"{metric}_packet"] = packet.metrics.get(metric)
        record["largest_factor"] = max((f.factor for f in factors), default=1.0)
        record["factors"] = (
            "; ".join(f"{f.op} {f.ranks}x{f.stride} {f.algorithm}: {f.factor:.3g}" for f in factors) or "none"
        )
        rows.append(record)
    table = pd.DataFrame(rows)
    first, direction = resolved.objectives[0], resolved.directions[0]
    ascending = direction == "minimize"
    for fidelity in ("analytical", "packet"):
        table[f"rank_{fidelity}"] = table[f"{first}_{fidelity}"].rank(ascending=ascending, method="min").astype(int)
    return table
