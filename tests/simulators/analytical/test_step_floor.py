"""The step floor (simulators.analytical.step_floor_s) against the full training model: never
above the simulated step over plans of every shape the model prices differently (pipelines with
and without interleaving, zero-bubble, recomputation, ZeRO-3, offload, tensor-parallel overlap,
context parallelism, a MoE model), and the metrics at the floor on the right side of the
simulated ones. The exact mode prunes with it, so a floor above the step would lose plans."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dse.errors import PlanError
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study
from simulators.analytical import floor_training_batch, simulate_training_batch, step_floor_s

SPACE = """
name: floor
model: {model}
training: {{seq_len: 4096}}
hardware:
  gpu: [H100-SXM, B200]
  num_gpus: [16, 64]
search:
  tp: [1, 4]
  pp: [1, 2, 4]
  cp: [1, 2]
  vpp: [1, 2]
  micro_batch: [1, 2]
  global_batch: [64]
  recompute: [none, selective, full]
  schedule: [1f1b, zb-h1]
  zero_stage: [1, 3]
  offload: [none, optimizer]
  tp_comm_overlap: [false, true]
objectives:
  - tokens_per_s_per_gpu: maximize
sampler: grid
"""
RISES = ("iteration_time_s",)
FALLS = ("tokens_per_s", "tokens_per_s_per_gpu", "mfu", "hfu")


def _candidates(write_spec, model: str, every: int):
    space = SearchSpace.from_study(resolve_study(load_study(write_spec(SPACE.format(model=model)))))
    out = []
    for params in itertools.islice(space.grid(), 0, None, every):
        try:
            out.append(space.candidate(params))
        except PlanError:
            pass
    return out


@pytest.mark.parametrize(("model", "every"), [("llama3-8b", 3), ("mixtral-8x7b", 7)])
def test_the_floor_is_never_above_the_simulated_step(write_spec, model, every):
    candidates = _candidates(write_spec, model, every)
    assert len(candidates) > 100
    assert {c.plan.pp for c in candidates} == {1, 2, 4} and {c.plan.vpp for c in candidates} == {1, 2}
    simulated = simulate_training_batch(candidates, breakdown=False)
    floors = floor_training_batch(candidates)
    step = np.array([r.metrics["iteration_time_s"] for r in simulated])
    floor = np.array([step_floor_s(c) for c in candidates])
    assert (floor > 0).all() and (floor <= step).all()
    for name in RISES:
        assert all(f.metrics[name] <= s.metrics[name] for f, s in zip(floors, simulated))
    for name in FALLS:
        assert all(f.metrics[name] >= s.metrics[name] for f, s in zip(floors, simulated))
    # memory is the model's own, not bounded
    assert [f.memory for f in floors] == [s.memory for s in simulated]
    # a bound worth pruning with: most plans' floors within a few per cent of their step
    assert np.median(floor / step) > 0.8


def test_a_one_stage_plan_floors_at_its_micro_batches_of_stage_work(write_spec):
    """pp 1: the pipeline is one stage running its micro-batches back to back, so the floor is
    their work as the model's stage costs price it (only the kernel's rounding apart), and the
    simulated step adds the exposed gradient reduction, gather and optimizer to it."""
    from simulators.analytical._stage_costs import stage_costs

    one = [c for c in _candidates(write_spec, "llama3-8b", 1) if c.plan.pp == 1 and c.plan.offload == "none"]
    assert len(one) > 20
    for c in one:
        (stage,) = stage_costs(c)
        work = c.plan.microbatches * (stage.forward_s + stage.backward_s + stage.weight_s)
        assert step_floor_s(c) == pytest.approx(work, rel=1e-7)
