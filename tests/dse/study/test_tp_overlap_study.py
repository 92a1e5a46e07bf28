"""Tensor-parallel overlap as a training knob: old studies read as without it, tp 1 has nothing
to overlap, and the plan that asks it without sequence parallelism is refused as Megatron does."""

from __future__ import annotations

from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study
from tests.conftest import TINY_PARAMS, TINY_SPEC

OVERLAP_SPEC = TINY_SPEC.replace(
    "recompute: [none, full]", "recompute: [none]\n  sequence_parallel: [true, false]\n  tp_comm_overlap: [false, true]"
)


def space_of(write_spec) -> SearchSpace:
    return SearchSpace.from_study(resolve_study(load_study(write_spec(OVERLAP_SPEC))))


def test_studies_recorded_before_the_knob_read_as_no_overlap(write_spec):
    space = space_of(write_spec)
    kind = space.resolved.kind
    assert "tp_comm_overlap" not in TINY_PARAMS
    params = {**TINY_PARAMS, "tp": 4}
    assert kind.params_key(params) == kind.params_key({**params, "tp_comm_overlap": False})
    assert space.candidate(params).plan.tp_comm_overlap is False


def test_at_tp_1_the_knob_is_one_plan(write_spec):
    kind = space_of(write_spec).resolved.kind
    assert kind.params_key({**TINY_PARAMS, "tp_comm_overlap": True}) == kind.params_key(TINY_PARAMS)


def test_overlap_speeds_a_tensor_parallel_plan_and_needs_sequence_parallelism(write_spec):
    evaluator = Evaluator(space_of(write_spec))
    params = {**TINY_PARAMS, "tp": 4}
    plain = evaluator.evaluate({**params, "tp_comm_overlap": False})
    overlapped = evaluator.evaluate({**params, "tp_comm_overlap": True})
    assert overlapped.metrics["iteration_time_s"] < plain.metrics["iteration_time_s"]
    refused = evaluator.evaluate({**params, "sequence_parallel": False, "tp_comm_overlap": True})
    assert not refused.feasible and "tp_comm_overlap needs sequence_parallel" in refused.reason
