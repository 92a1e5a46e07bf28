"""The fidelity ladder in the engine: promotion, storage, ranking, budgets, resumption, and
reports that read what was stored without simulating."""

from __future__ import annotations

import dataclasses
import threading

import pandas as pd
import pytest

from dse.evaluation.evaluate import Evaluator
from dse.evaluation.outcome import Outcome
from dse.evaluation.space import SearchSpace
from dse.report.files import write_reports
from dse.search.engine import RunSettings, run_search
from dse.search.ladder import Contender, promote
from dse.search.level_records import standings
from dse.spec import load_study
from dse.study import resolve_study
from simulators.analytical import plan_collectives
from simulators.fidelity import SimulatedLevel
from simulators.network import CongestionFactor
from tests.conftest import FABRIC_SPEC

SLOW = 3.0  # the fake level's factor on every collective that crosses servers of a tp-1 plan


def fake_factors(calls: list, stop: threading.Event | None = None):
    """A level that slows every crossing collective of a tp-1 plan by SLOW and nothing else,
    counting its calls (and setting `stop` after the first one)."""

    def congestion_factors(self, candidate, fabric, message_cap_bytes):
        calls.append(candidate.plan)
        if stop is not None:
            stop.set()
        factor = SLOW if candidate.plan.tp == 1 else 1.0
        return [
            CongestionFactor(u.op, u.ranks, u.stride, int(u.nbytes), 1, 1.0, factor, u.algorithm)
            for u in plan_collectives(candidate)
            if u.ranks > 1 and u.ranks * u.stride > fabric.gpus_per_server
        ]

    return congestion_factors


def run(write_spec, tmp_path, spec=FABRIC_SPEC, resume=False, stop=None):
    resolved = resolve_study(load_study(write_spec(spec)))
    return resolved, run_search(resolved, RunSettings(tmp_path, None, "off", resume), stop=stop)


def contender(metrics: tuple[float, float], trial: int) -> Contender:
    return Contender(trial, {}, Outcome({"a": metrics[0], "b": metrics[1]}, {"plan_valid": 0.0}))


def test_promotion_takes_the_front_then_its_neighbourhood_best_first():
    points = [(3, 3), (1, 5), (6, 6), (5, 1), (2, 2), (4, 4)]
    pool = [contender(p, i) for i, p in enumerate(points)]
    chosen = promote(pool, 5, ("a", "b"), ("minimize", "minimize"))
    # the front (1,5), (2,2), (5,1) by the first objective; then the next layer: (3,3), then (4,4)
    assert [points[e.trial] for e in chosen] == [(1, 5), (2, 2), (5, 1), (3, 3), (4, 4)]
    maximised = promote(pool, 2, ("a", "b"), ("maximize", "maximize"))
    assert [points[e.trial] for e in maximised] == [(6, 6), (5, 1)]  # (6,6) alone dominates, then (5,1)


def test_the_front_is_ranked_at_the_highest_level_each_candidate_reached(write_spec, tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(SimulatedLevel, "congestion_factors", fake_factors(calls))
    resolved, summary = run(write_spec, tmp_path)
    (progress,) = summary.ladder
    assert (progress.level, progress.promoted, progress.evaluated) == ("packet", 3, 3) and len(calls) == 3
    trials, front = write_reports(summary.study, resolved, tmp_path)
    # the three promoted are the analytical front and its neighbourhood, best first
    analytical = {t: s.outcomes["analytical"] for t, s in standings(summary.study, resolved).items()}
    pool = [Contender(t, {}, o) for t, o in analytical.items() if o.feasible]
    expected = [e.trial for e in promote(pool, 3, resolved.objectives, resolved.directions)]
    climbed = trials[trials["fidelity"] == "packet"]
    assert sorted(climbed["trial"]) == sorted(expected)
    # each climbed row shows the level's metrics: the timeline re-run with the level's factors
    space = SearchSpace.from_study(resolved)
    for _, row in climbed.iterrows():
        params = space.params_of_row(row)
        factors = fake_factors([])(None, space.candidate(params), space.fabric(params["fabric"], 400), 0)
        base = space.candidate(params).system.fabric_network
        slowed = dataclasses.replace(base, slowdown=tuple((f.key, f.factor) for f in factors))
        again = Evaluator(space).evaluate(params, slowed)
        assert row["iteration_time_s"] == pytest.approx(again.metrics["iteration_time_s"])
        if params["tp"] == 1:
            assert again.metrics["iteration_time_s"] > analytical[row["trial"]].metrics["iteration_time_s"]
    # the front holds the level's numbers, says which level, and carries its breakdown
    assert set(front["fidelity"]) <= {"analytical", "packet"}
    for _, row in front.iterrows():
        parts = row[[c for c in front.columns if c.startswith("breakdown_")]].sum()
        assert parts == pytest.approx(row["iteration_time_s"], rel=1e-6)
    table = pd.read_csv(tmp_path / "fidelity.csv")
    assert sorted(table["trial"]) == sorted(expected)
    assert (table.loc[table["tp"] == 1, "largest_factor_packet"] == SLOW).all()
    summary_md = (tmp_path / "summary.md").read_text()
    assert "## Fidelity ladder" in summary_md and "packet: 3 of 3 promoted candidates" in summary_md
    assert "Fidelity ladder" in (tmp_path / "report.html").read_text()


def test_reports_read_what_the_study_stored_and_simulate_nothing(write_spec, tmp_path, monkeypatch):
    monkeypatch.setattr(SimulatedLevel, "congestion_factors", fake_factors([]))
    resolved, summary = run(write_spec, tmp_path)
    first_trials, first_front = write_reports(summary.study, resolved, tmp_path)

    def forbidden(*args, **kwargs):
        raise AssertionError("a report ran a simulator")

    import dse.study.training as training
    import simulators.analytical as analytical

    for owner, name in (
        (SimulatedLevel, "congestion_factors"),
        (Evaluator, "simulate_many"),
        (training, "simulate_training_batch"),
        (analytical, "simulate_training_batch"),
        (analytical, "simulate_training"),
        (type(resolved.kind), "simulate_many"),
        (type(resolved.kind), "step_details"),
    ):
        monkeypatch.setattr(owner, name, forbidden)
    trials, front = write_reports(summary.study, resolved, tmp_path)
    pd.testing.assert_frame_equal(front, first_front)
    assert front.filter(like="breakdown_").notna().all().all()


def test_an_interrupted_ladder_resumes_at_the_candidate_it_was_at(write_spec, tmp_path, monkeypatch):
    calls: list = []
    stop = threading.Event()
    monkeypatch.setattr(SimulatedLevel, "congestion_factors", fake_factors(calls, stop))
    _, first = run(write_spec, tmp_path, stop=stop)
    assert first.stopped_because == "interrupted"
    assert (first.ladder[0].evaluated, first.ladder[0].stopped) == (1, "interrupted")
    monkeypatch.setattr(SimulatedLevel, "congestion_factors", fake_factors(calls))
    resolved, again = run(write_spec, tmp_path, resume=True)
    assert again.evaluated == 0  # the analytical search was finished: nothing simulated again
    assert (again.ladder[0].evaluated, again.ladder[0].promoted) == (3, 3)
    assert len(calls) == 3  # the first candidate was not evaluated twice
    assert sum(s.level == "packet" for s in standings(again.study, resolved).values()) == 3


def test_a_level_stops_at_its_time_budget_and_a_resumed_run_keeps_it(write_spec, tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(SimulatedLevel, "congestion_factors", fake_factors(calls))
    spec = FABRIC_SPEC.replace("packet: {top: 3, message_cap_mb: 1}", "packet: {top: 3, budget_s: 1.0e-9}")
    _, summary = run(write_spec, tmp_path, spec)
    (progress,) = summary.ladder
    assert (progress.evaluated, progress.stopped) == (1, "time budget spent") and len(calls) == 1
    _, again = run(write_spec, tmp_path, spec, resume=True)
    assert (again.ladder[0].evaluated, again.ladder[0].stopped) == (1, "time budget spent") and len(calls) == 1


def test_dse_search_validates_the_top_and_simulate_reads_the_stored_levels(write_spec, tmp_path, capsys):
    """`dse search --validate 1` climbs, then replays the best candidate's collectives over the
    transport this machine has (TCP here, saying why); `dse simulate --config best` shows what
    the ladder stored for that candidate, read from the study, not simulated again."""
    import json

    from dse.cli.commands import main

    spec = write_spec(FABRIC_SPEC.replace("packet: {top: 3, message_cap_mb: 1}", "packet: {top: 2, message_cap_mb: 1}"))
    out = tmp_path / "out"
    assert main(["search", str(spec), "--ray-address", "off", "--out", str(out), "--validate", "1"]) == 0
    printed = capsys.readouterr().out
    assert "fidelity ladder, packet: 2 of 2 promoted candidates" in printed
    assert "validating the top 1 over tcp: no usable RDMA device" in printed
    validation = pd.read_csv(out / "validation.csv")
    front = pd.read_csv(out / "pareto.csv")
    assert set(validation["trial"]) == {front["trial"][0]} and validation["verified"].all()
    assert main(["simulate", str(spec), "--config", "best", "--study", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    table = pd.read_csv(out / "fidelity.csv").set_index("trial")
    best = int(front["trial"][0])
    assert ("levels" in report) == (front["fidelity"][0] == "packet")
    if "levels" in report:
        stored = report["levels"]["packet"]["metrics"]["iteration_time_s"]
        assert stored == pytest.approx(table.loc[best, "iteration_time_s_packet"])
        assert stored == pytest.approx(front["iteration_time_s"][0])


def test_the_fidelity_flag_stops_the_climb_at_a_level_and_the_saved_spec_says_so(write_spec, tmp_path, capsys):
    from dse.cli.commands import main

    spec = write_spec(FABRIC_SPEC.replace("  flow: null\n", "  flow: {top: 4}\n"))
    out = tmp_path / "out"
    assert main(["search", str(spec), "--ray-address", "off", "--out", str(out), "--fidelity", "flow"]) == 0
    printed = capsys.readouterr().out
    assert "fidelity ladder, flow: 4 of 4" in printed and "fidelity ladder, packet" not in printed
    saved = load_study(out / "spec.yaml")
    assert saved.fidelity.packet is None and saved.fidelity.flow.top == 4
    assert set(pd.read_csv(out / "trials.csv")["fidelity"]) == {"analytical", "flow"}
    assert main(["search", str(spec), "--out", str(tmp_path / "again"), "--fidelity", "pakcet"]) == 2
    assert "--fidelity: 'pakcet' is not a fidelity level; allowed: analytical, flow, packet" in capsys.readouterr().err
