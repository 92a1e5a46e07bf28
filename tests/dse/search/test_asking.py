"""Asking a batch and telling in bulk (dse.search.asking), against Optuna's own ask and tell as
the oracle of what a study on disk holds, and the batch TPE's proposals (dse.search.samplers)."""

from __future__ import annotations

import json

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution

from dse.search.asking import ask_batch, tell
from dse.search.journal import journal_storage
from dse.search.samplers import BatchRandomSampler, BatchTPESampler

DISTRIBUTIONS = {
    "x": IntDistribution(0, 9),
    "y": IntDistribution(0, 10, step=2),
    "fixed": CategoricalDistribution(["only"]),
}


def _study(path, sampler=None) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(
        study_name="s", storage=journal_storage(path), directions=["minimize", "minimize"], sampler=sampler
    )


def _record(trial):
    return (
        trial.number,
        trial.state,
        trial.params,
        trial.distributions,
        trial.user_attrs,
        trial.constraints,
        trial.values,
    )


def _objectives(params) -> list[float]:
    """Both least near x = 7, y = 6."""
    distance = (params["x"] - 7) ** 2 + (params["y"] - 6) ** 2
    return [float(distance), float(distance + params["x"])]


def test_a_batch_told_in_bulk_is_on_disk_what_optuna_ask_and_tell_write(tmp_path):
    bulk = _study(tmp_path / "bulk.journal", BatchRandomSampler(seed=3))
    asked = ask_batch(bulk, DISTRIBUTIONS, 6)
    plain = _study(tmp_path / "plain.journal")
    for number, trial in enumerate(asked):
        assert trial.number == number and trial.params["fixed"] == "only"
        plain.enqueue_trial(trial.params)
        theirs = plain.ask(DISTRIBUTIONS)
        failed = number == 4
        attrs = {"outcome": {"n": number}}
        constraints = {} if failed else {"memory": number - 2.5, "valid": 0.0}
        values = None if failed else _objectives(trial.params)
        tell(bulk, trial, attrs, constraints, values)
        theirs.set_user_attr("outcome", {"n": number})
        for name, value in constraints.items():
            theirs.set_constraint(name, value)
        plain.tell(theirs, values, state=optuna.trial.TrialState.FAIL if failed else None)
    again = optuna.load_study(study_name="s", storage=journal_storage(tmp_path / "bulk.journal"))
    expected = optuna.load_study(study_name="s", storage=journal_storage(tmp_path / "plain.journal"))
    assert [_record(t) for t in again.trials] == [_record(t) for t in expected.trials]
    assert sum(t.state == optuna.trial.TrialState.COMPLETE for t in again.trials) == 5


def test_a_group_told_together_reaches_the_file_at_its_end_and_not_before(tmp_path):
    path = tmp_path / "study.journal"
    study = _study(path, BatchRandomSampler(seed=0))
    on_disk = len(path.read_text().splitlines())
    asked = ask_batch(study, DISTRIBUTIONS, 4)
    with study._storage.together():
        for trial in asked[:3]:
            tell(study, trial, {}, {}, _objectives(trial.params))
        assert len(path.read_text().splitlines()) == on_disk
    entries = [json.loads(line) for line in path.read_text().splitlines()[on_disk:]]
    finished = [e["trial_id"] for e in entries if e["op_code"] == 6]
    assert len(entries) == 4 + 3 and finished == [t.trial_id for t in asked[:3]]  # 4 created, 3 told


def test_enqueued_trials_are_asked_first_then_the_sampler_proposes(tmp_path):
    study = _study(tmp_path / "study.journal", BatchRandomSampler(seed=0))
    study.enqueue_trial({"x": 9, "y": 10, "fixed": "only"})
    asked = ask_batch(study, DISTRIBUTIONS, 3)
    assert asked[0].params == {"x": 9, "y": 10, "fixed": "only"}
    assert [t.number for t in asked] == [0, 1, 2]
    assert all(t.state == optuna.trial.TrialState.RUNNING for t in study.trials)


def _fitted_proposals(seed: int, explore: float = 0.0, count: int = 12) -> list[dict]:
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=BatchTPESampler(seed, explore=explore))
    warm = BatchRandomSampler(seed=100)
    for params in warm.propose(study, DISTRIBUTIONS, 40):
        trial = optuna.trial.create_trial(params=params, distributions=DISTRIBUTIONS, values=_objectives(params))
        study.add_trial(trial)
    return study.sampler.propose(study, DISTRIBUTIONS, count)


def test_batch_tpe_proposes_distinct_plans_mostly_near_the_best_and_the_same_again_for_its_seed():
    proposals = _fitted_proposals(0)
    assert len({tuple(sorted(p.items())) for p in proposals}) == 12  # 60 plans: no need to repeat one
    near = [p for p in proposals if abs(p["x"] - 7) <= 1 and abs(p["y"] - 6) <= 2]
    assert len(near) >= 6  # a uniform draw lands there with probability 3/10 * 3/6 = 0.15
    assert proposals == _fitted_proposals(0)


def test_the_explore_share_of_a_batch_is_what_the_random_sampler_proposes():
    explored = _fitted_proposals(0, explore=0.5)
    assert explored[:6] == _fitted_proposals(0)[:6]
    study = optuna.create_study(directions=["minimize", "minimize"])
    assert explored[6:] == BatchRandomSampler(seed=0).propose(study, DISTRIBUTIONS, 6)


def test_batch_tpe_starts_at_random_and_fills_a_batch_larger_than_the_space():
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=BatchTPESampler(0))
    first = study.sampler.propose(study, DISTRIBUTIONS, 8)  # no finished trial: TPE's random start-up
    assert len(first) == 8 and all(set(p) == set(DISTRIBUTIONS) for p in first)
    small = {"x": CategoricalDistribution([0, 1]), "y": IntDistribution(0, 2, step=2)}
    for params in BatchRandomSampler(seed=1).propose(study, small, 12):
        study.add_trial(
            optuna.trial.create_trial(
                params=params, distributions=small, values=[float(params["x"]), float(params["y"])]
            )
        )
    batch = study.sampler.propose(study, small, 10)
    assert len(batch) == 10 and len({tuple(sorted(p.items())) for p in batch}) <= 4
