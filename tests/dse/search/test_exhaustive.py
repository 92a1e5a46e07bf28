"""The exact mode (`sampler: exhaustive`, dse.search.exhaustive): every distinct plan recorded in
Parquet parts, the same front and reasons as the grid mode that simulates and stores every plan as
a trial, and a resume that evaluates only the ranges no part covers."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dse.search.exhaustive as exhaustive
from dse.errors import DseError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.report.files import write_reports
from dse.search.engine import RunSettings, run_search
from dse.search.executor import InProcessExecutor
from dse.search.pareto import direction_signs, dominates
from dse.spec import load_study
from dse.study import resolve_study

ROOT = Path(__file__).resolve().parents[3]
SCHEDULES = "recompute: [none, full]\n  schedule: [zb-h1, 1f1b]\n  zero_stage: [1, 0]"


def _resolved(spec, sampler):
    """The spec with `sampler`, the ladder off, and a budget the grid cannot reach (every plan)."""
    study = load_study(spec, sampler=sampler, **{"budget.trials": 10_000})
    return resolve_study(study.model_copy(update={"fidelity": study.fidelity.up_to("analytical")}))


def _search(spec, out, sampler, resume=False, on_range=None):
    resolved = _resolved(spec, sampler)
    summary = run_search(resolved, RunSettings(out, None, "off", resume), on_range=on_range)
    trials, front = write_reports(summary.study, resolved, out)
    return summary, trials, front


def _record(out: Path) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in sorted((out / "plans").glob("part-*.parquet"))], ignore_index=True)


@pytest.mark.parametrize("spec", ["llama70b.yaml", "llama70b-serving.yaml", "small-cluster-star.yaml"])
def test_ranges_of_combinations_split_the_distinct_plans_exactly(spec):
    """Against remembering every key met (what the grid did before): the same plans, once each,
    whichever way the combinations are cut."""
    space = SearchSpace.from_study(resolve_study(load_study(ROOT / "search_spaces" / spec)))
    kind = space.resolved.kind
    first_met: dict[tuple, dict] = {}
    for combo in itertools.product(*space.values.values()):
        first_met.setdefault(kind.params_key(dict(zip(space.values, combo))), combo)
    cut = 1000
    pieces = [kind.params_key(p) for s in range(0, space.size, cut) for p in space.distinct_plans(s, s + cut)]
    assert len(pieces) == len(set(pieces)) == len(first_met) < space.size
    assert set(pieces) == set(first_met)


def test_the_exact_mode_finds_the_grids_front_and_records_every_plan(write_spec, tmp_path, monkeypatch):
    """Every plan simulated (pruning off: the test after this one compares it with pruning)."""
    monkeypatch.setattr(exhaustive, "RANGE_COMBINATIONS", 10)  # several ranges in a small space
    monkeypatch.setattr(exhaustive, "PRUNE", False)
    spec = write_spec(extra="").read_text().replace("recompute: [none, full]", SCHEDULES)
    spec = write_spec(spec)
    _, grid_trials, grid_front = _search(spec, tmp_path / "grid", "grid")
    summary, trials, front = _search(spec, tmp_path / "exact", "exhaustive")
    record = _record(tmp_path / "exact")
    assert len(record) == len(grid_trials) == summary.exhaustive.plans == summary.exhaustive.evaluated
    assert record["feasible"].sum() == grid_trials["feasible"].sum() == summary.exhaustive.feasible
    knobs = ["num_gpus", "tp", "pp", "micro_batch", "recompute"]
    assert sorted(map(tuple, front[knobs].to_numpy())) == sorted(map(tuple, grid_front[knobs].to_numpy()))
    assert len(trials) == len(front) == summary.exhaustive.front  # only the front is stored as trials
    merged = grid_trials.merge(record, on=["gpu", *knobs, "schedule", "zero_stage"], suffixes=("", "_rec"))
    assert len(merged) == len(record)  # the record's rows are the grid's plans, with the same numbers
    both = merged[merged["feasible"]]
    assert both["tokens_per_s_per_gpu_rec"].to_numpy() == pytest.approx(both["tokens_per_s_per_gpu"].to_numpy())
    # plans the memory model alone rules out are not simulated, with the reason the grid's
    # simulation of them gives
    unfit = merged[merged["reason"].fillna("").str.startswith("needs ")]
    assert len(unfit) and (unfit["reason_rec"] == unfit["reason"]).all() and unfit["iteration_time_s_rec"].isna().all()


@pytest.mark.parametrize("keep", [1, 4])
def test_pruning_keeps_the_pool_and_the_front_and_skips_only_dominated_plans(write_spec, tmp_path, monkeypatch, keep):
    """Against the same run with every plan simulated: the same pool (hence front and promoted
    plans) and the same numbers for every plan simulated; each pruned plan is one the full
    run finds dominated by at least `keep` feasible plans, and its recorded bounds are no worse
    than its simulated objectives."""
    monkeypatch.setattr(exhaustive, "RANGE_COMBINATIONS", 10)
    spec = write_spec(write_spec(extra="").read_text().replace("recompute: [none, full]", SCHEDULES))
    evaluator = Evaluator(SearchSpace.from_study(_resolved(spec, "exhaustive")))
    runs = {}
    for prune in (False, True):
        monkeypatch.setattr(exhaustive, "PRUNE", prune)
        run = exhaustive.ExhaustiveRun(evaluator, tmp_path / str(prune), keep)
        run.run(InProcessExecutor(), threading.Event(), lambda: False)
        runs[prune] = run
    full, pruned = runs[False], runs[True]
    key = evaluator.space.resolved.kind.params_key
    assert sorted(map(key, pruned.promoted_params())) == sorted(map(key, full.promoted_params()))
    objectives = list(evaluator.space.resolved.objectives)
    assert pruned.pool.sort_values(objectives)[objectives].to_numpy() == pytest.approx(
        full.pool.sort_values(objectives)[objectives].to_numpy()
    )
    record, everything = _record(tmp_path / "True"), _record(tmp_path / "False")
    assert record["pruned"].any() and not everything["pruned"].any() and len(record) == len(everything)
    knobs = list(evaluator.space.values)
    merged = record.merge(everything, on=knobs, suffixes=("", "_full"))
    assert len(merged) == len(record)
    kept = merged[~merged["pruned"]]
    assert (kept["feasible"] == kept["feasible_full"]).all()
    assert kept["tokens_per_s_per_gpu"].to_numpy() == pytest.approx(
        kept["tokens_per_s_per_gpu_full"].to_numpy(), nan_ok=True
    )
    cut = merged[merged["pruned"]]
    assert cut["iteration_time_s"].isna().all() and not cut["feasible"].any()
    assert (cut["floor:tokens_per_s_per_gpu"] >= cut["tokens_per_s_per_gpu_full"]).all()
    assert (cut["floor:usd_per_mtok"] <= cut["usd_per_mtok_full"]).all()
    feasible = everything[everything["feasible"]]
    costs = feasible[objectives].to_numpy() * direction_signs(evaluator.space.resolved.directions)
    cut_costs = cut[[f"{name}_full" for name in objectives]].to_numpy() * direction_signs(
        evaluator.space.resolved.directions
    )
    assert (dominates(costs, cut_costs).sum(axis=0) >= keep).all()


def test_an_interrupted_exact_run_resumes_with_the_ranges_no_part_covers(write_spec, tmp_path, monkeypatch):
    monkeypatch.setattr(exhaustive, "RANGE_COMBINATIONS", 6)
    spec, out = write_spec(), tmp_path / "out"
    stop = threading.Event()
    seen = []

    def interrupt_after_two(run):
        seen.append(run.recorded)
        if run.recorded >= 2:
            stop.set()

    resolved = _resolved(spec, "exhaustive")
    first = run_search(resolved, RunSettings(out, None, "off"), on_range=interrupt_after_two, stop=stop)
    assert first.stopped_because == "interrupted" and first.exhaustive.evaluated < first.exhaustive.plans + 1
    parts = sorted(p.name for p in (out / "plans").glob("part-*.parquet"))
    assert len(parts) == 2 and not list((out / "plans").glob(".*partial"))
    summary, _, front = _search(spec, out, "exhaustive", resume=True)
    space = SearchSpace.from_study(resolved)
    assert len(_record(out)) == summary.exhaustive.plans == len(space.grid())
    assert summary.exhaustive.evaluated == summary.exhaustive.plans - first.exhaustive.evaluated
    _, _, grid_front = _search(spec, tmp_path / "grid", "grid")
    knobs = ["num_gpus", "tp", "pp", "micro_batch", "recompute"]
    assert sorted(map(tuple, front[knobs].to_numpy())) == sorted(map(tuple, grid_front[knobs].to_numpy()))


def test_a_part_cut_another_way_is_refused_by_name(write_spec, tmp_path, monkeypatch):
    spec, out = write_spec(), tmp_path / "out"
    monkeypatch.setattr(exhaustive, "RANGE_COMBINATIONS", 6)
    _search(spec, out, "exhaustive")
    monkeypatch.setattr(exhaustive, "RANGE_COMBINATIONS", 8)
    with pytest.raises(DseError, match=r"part-000000000000-000000000006\.parquet does not match"):
        _search(spec, out, "exhaustive", resume=True)


@pytest.mark.parametrize("keep", [1, 5, 12])
def test_the_pool_keeps_exactly_the_layers_the_ladder_would_promote_from_every_plan(write_spec, tmp_path, keep):
    """Against non-dominated sorting of all the feasible plans at once: whole layers until `keep`
    are taken, whatever order and chunks the plans arrive in (random objectives, many ties)."""
    from dse.search.pareto import pareto_mask

    resolved = _resolved(write_spec(), "exhaustive")
    evaluator = Evaluator(SearchSpace.from_study(resolved))
    plans = evaluator.space.grid()
    rng = np.random.default_rng(keep)
    frame = pd.DataFrame(plans)
    for name in resolved.objectives:
        frame[name] = rng.integers(0, 6, len(frame)).astype(float)  # coarse: ties and equal points
    frame["feasible"] = rng.random(len(frame)) < 0.8
    run = exhaustive.ExhaustiveRun(evaluator, tmp_path, keep)
    shuffled = frame.sample(frac=1, random_state=keep)
    for cut in np.array_split(np.arange(len(shuffled)), 5):
        run._add(shuffled.iloc[cut])
    pool = frame[frame["feasible"]].reset_index(drop=True)
    values, left, expected = pool[list(resolved.objectives)].to_numpy(), np.arange(len(pool)), []
    while len(left) and len(expected) < keep:
        layer = pareto_mask(values[left], resolved.directions)
        expected += left[layer].tolist()
        left = left[~layer]
    key = resolved.kind.params_key
    assert sorted(map(key, run.promoted_params())) == sorted(
        key(p) for p in pool.iloc[expected][list(plans[0])].to_dict("records")
    )
    assert len(run.front) == pareto_mask(values, resolved.directions).sum()


def test_a_sampled_study_resumed_exhaustive_runs_the_exact_mode(write_spec, tmp_path):
    """--resume --sampler exhaustive on a TPE study: the loop follows the sampler now named,
    not the one the study began with (it had run TPE's loop with a random sampler)."""
    spec, out = write_spec(), tmp_path / "out"
    study = load_study(spec, sampler="tpe", **{"budget.trials": 10})
    run_search(
        resolve_study(study.model_copy(update={"fidelity": study.fidelity.up_to("analytical")})),
        RunSettings(out, None, "off"),
    )
    summary, _, _ = _search(spec, out, "exhaustive", resume=True)
    assert summary.exhaustive is not None
    assert summary.exhaustive.plans == len(SearchSpace.from_study(_resolved(spec, "exhaustive")).grid())


def test_a_range_is_sent_with_the_pool_as_it_is_when_sent_also_from_a_slice(write_spec, tmp_path, monkeypatch):
    """LocalExecutor hands a private Ray the ranges left as a slice: those must still carry the
    pool of the moment each goes out, not of the moment the slice was taken."""
    monkeypatch.setattr(exhaustive, "RANGE_COMBINATIONS", 6)
    resolved = _resolved(write_spec(), "exhaustive")
    evaluator = Evaluator(SearchSpace.from_study(resolved))
    run = exhaustive.ExhaustiveRun(evaluator, tmp_path, 1)
    rest = exhaustive._RangeItems(run, run.ranges())[1:]
    assert len(rest[0]["pool"]) == 0
    plans = pd.DataFrame(evaluator.space.grid()[:3])
    for name in resolved.objectives:
        plans[name] = [1.0, 2.0, 3.0]
    plans["feasible"] = True
    run._add(plans)
    assert len(rest[0]["pool"]) == len(run.pool) > 0 and rest[0]["keep"] == 1
