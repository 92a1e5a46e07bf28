"""The exact mode (`sampler: exhaustive`) on a multi-node Ray cluster (issue 20), joined by its
address as `dse search --ray-address ADDR` joins one (tests/dse/search/conftest.py: two one-CPU
worker nodes): against the same space run in process and a brute-force evaluation of every
combination of knob values, not against what the mode reports of itself."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import dse.search.exhaustive as exhaustive
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.report.files import write_reports
from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.study import resolve_study

pytestmark = pytest.mark.slow
# 384 combinations: TINY_SPEC's knobs with two GPU types, two schedules and two ZeRO stages
SCHEDULES = "recompute: [none, full]\n  schedule: [zb-h1, 1f1b]\n  zero_stage: [1, 0]"


def test_the_exact_mode_on_two_nodes_records_every_plan_once_and_finds_the_brute_force_front(
    cluster, write_spec, tmp_path, monkeypatch
):
    # ranges are cut on the driver: 39 of them, so both nodes get work (one CPU each)
    monkeypatch.setattr(exhaustive, "RANGE_COMBINATIONS", 10)
    text = write_spec(extra="").read_text().replace("recompute: [none, full]", SCHEDULES)
    spec = write_spec(text.replace("gpu: [H100-SXM]", "gpu: [H100-SXM, H200]"))  # the faster GPU costs more
    study = load_study(spec, sampler="exhaustive")
    resolved = resolve_study(study.model_copy(update={"fidelity": study.fidelity.up_to("analytical")}))
    space, objectives = SearchSpace.from_study(resolved), list(resolved.objectives)
    key = resolved.kind.params_key

    # brute force: every combination, one per plan, each simulated and judged
    plans: dict[tuple, dict] = {}
    for combo in itertools.product(*space.values.values()):
        params = dict(zip(space.values, combo))
        plans.setdefault(key(params), params)
    outcomes = Evaluator(space).evaluate_many(list(plans.values()))
    feasible = {
        k: [o.metrics[name] for name in objectives]
        for k, o in zip(plans, outcomes)
        if not o.failed and all(v <= 0 for v in o.constraints.values())
    }
    signs = np.array([1.0 if d == "minimize" else -1.0 for d in resolved.directions])
    costs = np.array(list(feasible.values())) * signs
    beaten = [((costs <= c).all(axis=1) & (costs < c).any(axis=1)).any() for c in costs]
    brute_front = {k for k, lost in zip(feasible, beaten) if not lost}
    # the faster GPU costs more: a real trade-off, so the front holds plans of both, and not every plan
    assert {plans[k]["gpu"] for k in brute_front} == {"H100-SXM", "H200"} and brute_front != set(feasible)

    fronts, records = {}, {}
    for name, address in (("cluster", cluster.address), ("in process", "off")):
        out = tmp_path / name.replace(" ", "-")
        summary = run_search(resolved, RunSettings(out, None, address))
        _, front = write_reports(summary.study, resolved, out)
        fronts[name] = {key(space.params_of_row(row)): row for row in front.to_dict("records")}
        parts = sorted((out / "plans").glob("part-*.parquet"))
        records[name] = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
        if name == "cluster":
            usage = summary.usage

    assert set(fronts["cluster"]) == set(fronts["in process"]) == brute_front
    for k, row in fronts["cluster"].items():
        assert [row[name] for name in objectives] == pytest.approx(feasible[k])

    record = records["cluster"]
    recorded = [key(space.params_of_row(row)) for row in record.to_dict("records")]
    assert len(recorded) == len(set(recorded)) == len(plans) and set(recorded) == set(plans)
    simulated = record[record["feasible"].to_numpy()]  # pruned plans are never feasible
    assert len(simulated) > 0
    for row in simulated.to_dict("records"):
        assert [row[name] for name in objectives] == pytest.approx(feasible[key(space.params_of_row(row))])

    # both worker nodes ran ranges (the head has no CPUs), and every task is counted on one
    workers = {node.node_id for node in cluster.worker_nodes}
    assert set(usage.tasks_by_node) == workers and len(workers) == 2
    assert sum(usage.tasks_by_node.values()) == usage.tasks >= -(-space.size // 10)
