"""The contract every registered study kind keeps (dse/spec/kind.py), run over each one."""

from __future__ import annotations

import pytest

from dse.errors import SpecError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.outcome import PLAN_VALID
from dse.evaluation.space import SearchSpace
from dse.spec import MODES, load_study
from dse.spec.kind import STUDY_KINDS
from dse.spec.study import SEARCH_OF_MODE
from dse.study import resolve_study
from tests.conftest import SERVING_SPEC, TINY_SPEC

SPEC_OF_MODE = {"training": TINY_SPEC, "inference": SERVING_SPEC}


def test_the_spec_offers_exactly_the_registered_kinds():
    assert set(MODES) == set(STUDY_KINDS) == set(SPEC_OF_MODE)


def test_an_unknown_mode_is_one_line_naming_the_registered_ones(write_spec):
    with pytest.raises(SpecError, match=r"^mode: 'serving' is not allowed; allowed: 'training' or 'inference'$"):
        load_study(write_spec(TINY_SPEC + "mode: serving\n"))


@pytest.fixture(params=sorted(STUDY_KINDS))
def resolved(request, write_spec):
    return resolve_study(load_study(write_spec(SPEC_OF_MODE[request.param])))


def test_the_study_carries_the_kind_its_mode_names(resolved):
    assert resolved.kind is STUDY_KINDS[resolved.study.mode]


def test_the_space_searches_exactly_the_kinds_knobs_in_table_order(resolved):
    space = SearchSpace.from_study(resolved)
    assert tuple(space.values) == resolved.kind.knobs == space.knobs


def test_default_objectives_shown_metrics_and_constraints_belong_to_the_kind(resolved):
    kind = resolved.kind
    defaults = [o["metric"] for o in SEARCH_OF_MODE[kind.name].DEFAULT_OBJECTIVES]
    assert all(m in kind.metrics for m in defaults) and all(m in kind.metrics for m in kind.shown_metrics)
    assert Evaluator(SearchSpace.from_study(resolved)).constraint_names[:2] == (PLAN_VALID, kind.fits_constraint)
    assert set(kind.nullable_columns) <= set(kind.knobs) | set(kind.derived_columns)


def test_every_plan_of_the_grid_gets_an_outcome_with_both_kind_constraints(resolved):
    space = SearchSpace.from_study(resolved)
    points = space.grid()[:6]
    outcomes = Evaluator(space).evaluate_many(points)
    assert len(outcomes) == len(points)
    for outcome in outcomes:
        assert not outcome.failed
        assert {PLAN_VALID, resolved.kind.fits_constraint} <= set(outcome.constraints)
        if outcome.constraints[PLAN_VALID] <= 0:  # a built plan has every objective's metric
            assert set(resolved.objectives) <= set(outcome.metrics)


def test_plan_identity_ignores_only_knobs_without_effect(resolved):
    kind, space = resolved.kind, SearchSpace.from_study(resolved)
    points = space.grid()
    keys = {kind.params_key(p) for p in points}
    assert len(keys) == len(points)  # the grid lists each distinct plan once
    for params in points:
        assert kind.params_key(kind.canonical_params(params)) == kind.params_key(params)
        assert set(kind.derived(params)) == set(kind.derived_columns)


def test_check_runnable_passes_a_space_with_a_runnable_plan(resolved):
    SearchSpace.from_study(resolved).check_runnable()
