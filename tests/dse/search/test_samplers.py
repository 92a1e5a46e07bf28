"""The refine sampler on small synthetic studies (no simulation), and once through `dse search`."""

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution

from dse.search.asking import ask_batch, tell
from dse.search.engine import RunSettings, run_search
from dse.search.samplers import RefineSampler, make_sampler
from dse.spec import load_study
from dse.study import resolve_study
from tests.conftest import TINY_SPEC

# Ordered knobs: a list kept in spec order (not sorted) and an integer range with a step.
DISTRIBUTIONS = {
    "x": CategoricalDistribution([0, 1, 2, 3, 4, 5]),
    "y": IntDistribution(0, 10, step=2),
    "mode": CategoricalDistribution(["c", "a", "b"]),
}
ORDER = {"x": [0, 1, 2, 3, 4, 5], "y": [0, 2, 4, 6, 8, 10], "mode": ["c", "a", "b"]}

FRONT = [{"x": 1, "y": 2, "mode": "c"}, {"x": 2, "y": 0, "mode": "c"}]  # non-dominated, feasible
DOMINATED = {"x": 2, "y": 2, "mode": "c"}
INFEASIBLE = {"x": 5, "y": 10, "mode": "b"}  # best in both objectives, but violates a constraint


def _trial(params, values, violation=0.0):
    return optuna.trial.create_trial(
        params=params, distributions=DISTRIBUTIONS, values=values, constraints={"memory": violation}
    )


def _study(seed=0, **options):
    sampler = RefineSampler(seed, **{"probability": 1.0, "start": 1, **options})
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=sampler)
    study.add_trials(
        [
            _trial(FRONT[0], [1.0, 5.0]),
            _trial(FRONT[1], [2.0, 6.0]),
            _trial(DOMINATED, [3.0, 5.0]),
            _trial(INFEASIBLE, [0.0, 9.0], violation=1.0),
        ]
    )
    return study


def _steps(a, b):
    """Knobs in which b differs from a, or None when one of them differs by more than one step."""
    moved = [k for k in a if a[k] != b[k]]
    if any(abs(ORDER[k].index(a[k]) - ORDER[k].index(b[k])) != 1 for k in moved):
        return None
    return moved


def _neighbourhood(anchors, known):
    """Every params dict one or two knobs, one step each, from an anchor, less the known ones."""
    found = set()
    for anchor in anchors:
        for x in ORDER["x"]:
            for y in ORDER["y"]:
                for mode in ORDER["mode"]:
                    params = {"x": x, "y": y, "mode": mode}
                    moved = _steps(anchor, params)
                    if moved is not None and 1 <= len(moved) <= 2:
                        found.add(tuple(params.items()))
    return found - {tuple(p.items()) for p in known}


def test_a_proposal_is_one_or_two_adjacent_steps_from_a_feasible_front_member():
    study = _study()
    for _ in range(12):
        params = study.ask(DISTRIBUTIONS).params
        moved = [_steps(anchor, params) for anchor in FRONT]
        assert any(m is not None and 1 <= len(m) <= 2 for m in moved), params
        assert _steps(INFEASIBLE, params) is None or len(_steps(INFEASIBLE, params)) > 2  # never its anchor


def test_every_fresh_neighbour_is_proposed_once_before_anything_else():
    """Running trials count as proposed: a batch asked without telling never repeats a plan,
    and no known plan comes back while fresh neighbours remain; then TPE takes over."""
    study = _study()
    expected = _neighbourhood(FRONT, FRONT + [DOMINATED, INFEASIBLE])
    asked = [tuple(study.ask(DISTRIBUTIONS).params.items()) for _ in range(len(expected))]
    assert len(set(asked)) == len(asked)
    assert set(asked) == expected
    study.ask(DISTRIBUTIONS)  # the front has nothing fresh left: TPE answers, no error


def test_one_knob_moves_come_first_when_two_knob_moves_are_off():
    study = _study(two_knobs=0.0)
    ones = _neighbourhood(FRONT, FRONT + [DOMINATED, INFEASIBLE])
    ones = {p for p in ones if any(len(_steps(a, dict(p)) or []) == 1 for a in FRONT)}
    asked = {tuple(study.ask(DISTRIBUTIONS).params.items()) for _ in range(len(ones))}
    assert asked == ones


def test_same_seed_same_proposals_and_another_seed_differs():
    def proposals(seed):
        study = _study(seed, probability=0.5)
        return [study.ask(DISTRIBUTIONS).params for _ in range(10)]

    assert proposals(3) == proposals(3)
    assert proposals(3) != proposals(4)


def test_without_a_feasible_trial_there_is_no_anchor_and_tpe_proposes():
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=RefineSampler(0, probability=1.0, start=1))
    study.add_trials([_trial(INFEASIBLE, [0.0, 9.0], violation=1.0), _trial(DOMINATED, [3.0, 5.0], violation=0.5)])
    for _ in range(5):
        params = study.ask(DISTRIBUTIONS).params
        assert set(params) == set(DISTRIBUTIONS)


def test_refine_runs_a_study_to_its_budget(write_spec, tmp_path):
    assert isinstance(make_sampler("refine", 0), RefineSampler)
    spec = write_spec(TINY_SPEC.replace("sampler: tpe", "sampler: refine"))
    resolved = resolve_study(load_study(spec))
    assert resolved.study.sampler == "refine"
    summary = run_search(resolved, RunSettings(tmp_path / "out", None, "off"))
    assert summary.finished == resolved.study.budget.trials == 30
    assert len(summary.study.get_trials(states=[optuna.trial.TrialState.COMPLETE])) == 30


def test_the_spec_names_exactly_the_registered_samplers():
    from dse.search.samplers import SAMPLER_FACTORIES
    from dse.spec import SAMPLERS

    assert set(SAMPLERS) == {"auto", *SAMPLER_FACTORIES}


def _every_sampler():
    from dse.search.samplers import SAMPLER_FACTORIES

    return sorted(SAMPLER_FACTORIES)


@pytest.mark.parametrize("name", _every_sampler())
def test_contract_every_registered_sampler_runs_a_two_objective_study_with_constraints(name):
    """What the engine needs of a sampler: two objectives, batches asked before any is told, only
    values of the space proposed, the same proposals for the same seed."""

    def proposals(seed):
        sampler = make_sampler(name, seed)
        assert isinstance(sampler, optuna.samplers.BaseSampler)
        study = optuna.create_study(directions=["minimize", "maximize"], sampler=sampler)
        asked = []
        for _ in range(3):
            for trial in ask_batch(study, DISTRIBUTIONS, 4):  # as the engine asks: in bulk where it can
                assert set(trial.params) == set(DISTRIBUTIONS)
                assert all(trial.params[k] in d.choices for k, d in DISTRIBUTIONS.items() if hasattr(d, "choices"))
                assert DISTRIBUTIONS["y"].low <= trial.params["y"] <= DISTRIBUTIONS["y"].high
                asked.append(tuple(sorted(trial.params.items())))
                tell(study, trial, {}, {"memory": trial.params["y"] - 6.0}, [trial.params["x"], trial.params["y"]])
        assert len(study.get_trials(states=[optuna.trial.TrialState.COMPLETE])) == 12
        return asked

    assert proposals(3) == proposals(3)


def test_an_unknown_sampler_is_one_line_naming_the_registered_ones():
    from dse.errors import SpecError

    with pytest.raises(SpecError, match="sampler: 'cmaes' is not allowed; allowed: tpe, nsga2, random, refine, grid"):
        make_sampler("cmaes", 0)
