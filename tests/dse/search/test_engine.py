"""The search engine in-process (`ray_address="off"`): determinism, resume, duplicates, failures."""

import pandas as pd
import pytest

from dse.errors import SpecError
from dse.evaluation.space import KNOBS, SearchSpace
from dse.report.files import write_reports
from dse.search.engine import RunSettings, batch_size, run_search
from dse.search.executor import InProcessExecutor
from dse.spec import load_study
from dse.spec.kind import STUDY_KINDS
from dse.study import resolve_study
from tests.conftest import TINY_PARAMS, TINY_SPEC

TRAINING = STUDY_KINDS["training"]


def search(spec_path, out, on_trial=None, resume=False, storage=None, **overrides):
    resolved = resolve_study(load_study(spec_path, **overrides))
    summary = run_search(resolved, RunSettings(out, storage, "off", resume), on_trial=on_trial)
    trials, front = write_reports(summary.study, resolved, out)
    return summary, trials, front


def test_same_seed_same_trials_and_another_seed_differs(write_spec, tmp_path):
    spec = write_spec()
    search(spec, tmp_path / "a")
    search(spec, tmp_path / "b")
    search(spec, tmp_path / "c", seed=8)
    a, b, c = ((tmp_path / d / "trials.csv").read_text() for d in "abc")
    assert a == b
    assert a != c


def test_trials_csv_has_every_trial_with_params_metrics_and_feasibility(write_spec, tmp_path):
    summary, trials, front = search(write_spec(), tmp_path / "out")
    assert summary.finished == len(trials) == 30
    assert list(trials["trial"]) == list(range(30))
    assert set(KNOBS) | {"dp", "feasible", "reason", "error", "tokens_per_s_per_gpu", "usd_per_mtok"} <= set(trials)
    infeasible = trials[~trials["feasible"]]
    assert infeasible["reason"].notna().all()
    assert (tmp_path / "out" / "study.journal").exists()
    assert not front.empty and len(front) <= trials["feasible"].sum()
    parts = front[[c for c in front.columns if c.startswith("breakdown_")]]
    assert {"breakdown_gemm_s", "breakdown_pipeline_bubble_s", "breakdown_dp_comm_s"} <= set(parts.columns)
    assert parts.sum(axis=1).to_numpy() == pytest.approx(front["iteration_time_s"].to_numpy(), rel=1e-9)


def test_identical_candidates_are_simulated_once(write_spec, tmp_path):
    summary, trials, _ = search(write_spec(), tmp_path / "out", **{"budget.trials": 60})
    repeats = trials[trials["duplicate_of"].notna()]
    assert len(repeats) > 0 and summary.evaluated == 60 - len(repeats)
    originals = trials.set_index("trial")
    for _, row in repeats.iterrows():
        first = originals.loc[row["duplicate_of"]]
        assert TRAINING.params_key(row) == TRAINING.params_key(first)
        assert row["usd_per_mtok"] == first["usd_per_mtok"] or pd.isna(first["usd_per_mtok"])


def test_interrupted_study_resumes_without_losing_or_repeating_trials(write_spec, tmp_path):
    spec, out = write_spec(), tmp_path / "out"
    seen = []

    def interrupt_after_eleven(number, outcome):
        seen.append(number)
        if len(seen) == 11:
            raise KeyboardInterrupt

    summary, before, _ = search(spec, out, on_trial=interrupt_after_eleven)
    assert summary.stopped_because == "interrupted"
    assert len(before) == 11
    summary, after, _ = search(spec, out, resume=True)
    assert summary.finished == len(after) == 30
    assert after["trial"].is_unique
    kept = after.set_index("trial").loc[before["trial"]]
    assert kept["usd_per_mtok"].equals(before.set_index("trial")["usd_per_mtok"])
    # The trials the interruption cut short were asked again, not dropped.
    stored = summary.study.get_trials(deepcopy=False)
    cut = [t for t in stored if t.user_attrs.get("interrupted")]
    assert cut
    evaluated = {tuple(t.params[k] for k in KNOBS) for t in stored if t.number in set(after["trial"])}
    assert all(tuple(t.params[k] for k in KNOBS) in evaluated for t in cut)


def test_failing_simulation_is_recorded_and_the_study_goes_on(write_spec, tmp_path, monkeypatch):
    import dse.study.training

    real = dse.study.training.simulate_training_batch

    def flaky(candidates, **kwargs):
        if any(c.plan.tp == 2 for c in candidates):
            raise RuntimeError("boom")
        return real(candidates, **kwargs)

    monkeypatch.setattr(dse.study.training, "simulate_training_batch", flaky)
    summary, trials, front = search(write_spec(), tmp_path / "out")
    failed = trials[trials["state"] == "failed"]
    assert summary.finished == 30
    assert len(failed) > 0 and (failed["tp"] == 2).all()
    assert failed["error"].str.contains("RuntimeError: boom").all()
    assert not failed["feasible"].any()
    assert (front["tp"] != 2).all()


def test_small_space_is_enumerated_once_then_the_search_stops(write_spec, tmp_path):
    summary, trials, _ = search(write_spec(), tmp_path / "out", sampler="auto", **{"budget.trials": 500})
    assert summary.space.size == 48
    assert summary.stopped_because == "every candidate of the space evaluated"
    assert len(trials) == 48 and trials[list(KNOBS)].drop_duplicates().shape[0] == 48


def test_any_optuna_storage_url_works(write_spec, tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    summary, trials, _ = search(write_spec(), tmp_path / "out", storage=url, **{"budget.trials": 8})
    assert len(trials) == 8 and (tmp_path / "study.db").exists()


def test_an_existing_study_is_not_overwritten_and_resume_needs_one(write_spec, tmp_path):
    spec = write_spec()
    with pytest.raises(SpecError, match="--resume: .* holds no study 'tiny'"):
        search(spec, tmp_path / "out", resume=True)
    search(spec, tmp_path / "out", **{"budget.trials": 4})
    with pytest.raises(SpecError, match="already holds study 'tiny'; pass --resume"):
        search(spec, tmp_path / "out")


def test_resume_refuses_a_changed_search_space(write_spec, tmp_path):
    search(write_spec(), tmp_path / "out", **{"budget.trials": 4})
    changed = write_spec(name="changed.yaml", extra="")
    changed.write_text(changed.read_text().replace("micro_batch: [1, 2]", "micro_batch: [1, 2, 4]"))
    with pytest.raises(SpecError, match="micro_batch changed"):
        search(changed, tmp_path / "out", resume=True)


def test_ctrl_c_stops_after_the_chunk_in_hand_and_keeps_every_told_trial(write_spec, tmp_path):
    import os
    import signal

    told = []

    def press_ctrl_c_once(number, outcome):
        told.append(number)
        if len(told) == 5:
            os.kill(os.getpid(), signal.SIGINT)

    summary, trials, _ = search(write_spec(), tmp_path / "out", on_trial=press_ctrl_c_once)
    assert summary.stopped_because == "interrupted"
    assert 5 <= len(trials) < 30
    assert sorted(trials["trial"]) == sorted(told)


def test_resuming_with_the_grid_sampler_enumerates_what_tpe_left(write_spec, tmp_path):
    spec, out = write_spec(), tmp_path / "out"
    search(spec, out, **{"budget.trials": 10})
    summary, trials, _ = search(spec, out, resume=True, sampler="grid", **{"budget.trials": 500})
    assert summary.stopped_because == "every candidate of the space evaluated"
    distinct = trials[trials["duplicate_of"].isna()]
    assert len(distinct) == 48 and distinct[list(KNOBS)].drop_duplicates().shape[0] == 48


def test_plans_that_differ_only_in_knobs_without_effect_are_one_candidate(write_spec):
    one_stage = dict(TINY_PARAMS)
    assert TRAINING.params_key(one_stage) == TRAINING.params_key(
        {**one_stage, "schedule": "zb-h1", "sequence_parallel": False}
    )
    assert TRAINING.params_key(one_stage) != TRAINING.params_key({**one_stage, "pp": 2})
    spec = (
        write_spec(extra="")
        .read_text()
        .replace("recompute: [none, full]", "recompute: [none, full]\n  schedule: [1f1b, zb-h1]")
    )
    space = SearchSpace.from_study(resolve_study(load_study(write_spec(spec))))
    assert space.size == 96
    # pp=1 plans (half of the 96) do not depend on the schedule: 24 + 48 distinct plans.
    assert len(space.grid()) == 72


def test_user_constraints_make_candidates_infeasible_with_their_reason(write_spec, tmp_path):
    extra = "constraints:\n  - {metric: usd_per_hour, max: 30}\n  - {metric: usd_per_hour, min: 10}\n"
    summary, trials, front = search(write_spec(extra=extra), tmp_path / "out")
    sixteen = trials[(trials["num_gpus"] == 16) & (trials["state"] == "complete") & trials["usd_per_hour"].notna()]
    assert len(sixteen) and not sixteen["feasible"].any()  # 16 H100s cost 47.84 $/h > 30
    assert sixteen["reason"].str.contains("usd_per_hour=47.84 is above max 30").all()
    assert (front["num_gpus"] == 8).all()
    stored = summary.study.get_trials(deepcopy=False)[0].constraints
    assert set(stored) == {
        "plan_valid",
        "memory_fits",
        "constraints[0]:usd_per_hour_max",
        "constraints[1]:usd_per_hour_min",
    }


def test_auto_batch_gives_each_cpu_two_candidates_and_never_fewer_than_32():
    assert [batch_size("auto", cpus) for cpus in (1, 2, 16, 17, 64)] == [32, 32, 32, 34, 128]
    assert batch_size("auto", 64, studies_sharing=3) == 43  # the studies of a batch share the CPUs
    assert batch_size("auto", 64, studies_sharing=8) == 32
    assert batch_size(8, 64) == 8  # a number in the spec is kept, whatever the cluster


def test_on_a_large_cluster_a_study_asks_two_trials_per_cpu_before_telling_any(write_spec, tmp_path):
    executor = InProcessExecutor()
    executor.usage.cpus = 40  # what a 40-CPU Ray cluster reports
    spec = write_spec(TINY_SPEC.replace("batch_size: 8", "batch_size: auto"))
    resolved = resolve_study(load_study(spec, **{"budget.trials": 100}))
    summary = run_search(resolved, RunSettings(tmp_path / "out", None, "off", False), executor=executor)
    trials = summary.study.get_trials(deepcopy=False)
    first_batch = trials[:80]
    assert all(t.datetime_start <= min(u.datetime_complete for u in first_batch) for t in first_batch)
    assert trials[80].datetime_start >= max(t.datetime_complete for t in first_batch)


def test_the_timeout_stops_a_batch_between_its_results_and_resume_loses_nothing(write_spec, tmp_path, monkeypatch):
    """One asked batch of all 30 trials, results coming one at a time, a clock that advances a
    second per told trial and a 5 s timeout: the batch stops after its sixth result (not after
    all 30), and --resume finishes the study without losing or repeating a told trial."""
    import dse.search.engine

    class OneByOne(InProcessExecutor):
        def run(self, evaluator, items):
            for group in super().run(evaluator, items):
                for pair in group:
                    yield [pair]

    clock = [0.0]
    monkeypatch.setattr(dse.search.engine, "_now", lambda: clock[0])
    spec, out = write_spec(), tmp_path / "out"
    resolved = resolve_study(load_study(spec, **{"budget.timeout_s": 5, "budget.batch_size": 30}))

    def tick(number, outcome):
        clock[0] += 1.0

    settings = RunSettings(out, None, "off", False)
    summary = run_search(resolved, settings, on_trial=tick, executor=OneByOne())
    assert summary.stopped_because == "timeout reached"
    assert 5 <= summary.finished < 30
    told = {t.number for t in summary.study.get_trials(deepcopy=False) if t.state.is_finished()}
    monkeypatch.undo()
    resumed = run_search(resolve_study(load_study(spec)), RunSettings(out, None, "off", True))
    assert resumed.finished == 30
    after = {t.number: t for t in resumed.study.get_trials(deepcopy=False)}
    assert all(after[n].state.is_finished() for n in told)
