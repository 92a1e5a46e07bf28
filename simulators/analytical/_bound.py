"""A lower bound of a training step's time from the model's own layer prices, without its
pipeline simulation: what the exact search mode (dse.search.exhaustive) compares with the plans
already found, to skip the simulation of a plan that cannot reach them.

Why it is a bound of `simulate_training_batch`'s iteration time: the step is the pipeline's
makespan plus non-negative terms (exposed gradient reduction, parameter gather, optimizer);
the pipeline's last stage runs all of its m * vpp forwards, backwards and weight gradients one
after another (`_timeline`), and cannot start before the first micro-batch's forward of chunk 0
has passed every earlier stage and its send. Each stage's per-chunk cost is at least the sum of
its layers' costs (`layer_costs`: compute, exposed communication, launch waits) and, on the
last stage, the output layer's (offload copies and the embedding only add to it). The pipeline
kernel rounds each operation to a whole nanosecond, so the bound gives that back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simulators.analytical._layer import output_layer, per_layer_plan
from simulators.analytical._layer_costs import layer_costs
from simulators.analytical._stage_costs import send_s
from simulators.analytical._training import TrainingResult, _host_shares, _metrics
from simulators.workload import MemoryBreakdown, TrainingCandidate, stage_layer_kinds, training_memory_batch

NS_ROUNDING_S = 1.5e-9  # the most the pipeline kernel's rounding takes from one F + B + W


def step_floor_s(candidate: TrainingCandidate) -> float:
    """Seconds `simulate_training_batch` cannot undercut for this candidate's iteration time."""
    model, system = candidate.model, candidate.system
    plan = candidate.plan
    layer_plan = per_layer_plan(plan)  # the key stage_costs prices layers by (it normalises what _per_stage_plan does)
    host_s = 0.0 if plan.cuda_graphs else system.kernel_host_s
    last = plan.pp - 1
    busy_s = earlier_fwd_s = 0.0  # the last stage's work per micro-batch; earlier stages' chunk-0 forwards
    totals = {False: model.layers - model.moe_layers, True: model.moe_layers}
    for kind, count in stage_layer_kinds(model, plan, last).items():
        layer = layer_costs(
            model,
            system.gpu,
            system.fabric_network,
            layer_plan,
            model.layers - 1 if kind else 0,
            system.calibration,
            system.compute_fraction,
            host_s,
        )
        busy_s += count * (layer.forward_s + layer.backward_s + layer.weight_s)
        earlier_fwd_s += (totals[kind] - count) * layer.forward_s
    output = output_layer(model, system.gpu, layer_plan, system.calibration, system.compute_fraction)
    busy_s += output.forward_s + output.input_grad_s + output.weight_grad_s
    m, v = plan.microbatches, plan.vpp
    fill_s = earlier_fwd_s / v + last * send_s(candidate)
    return m * busy_s + fill_s - (m * v + plan.pp) * NS_ROUNDING_S


def floor_training_batch(
    candidates: Sequence[TrainingCandidate], memories: Sequence[MemoryBreakdown] | None = None
) -> list[TrainingResult]:
    """Each candidate's result with its step at `step_floor_s` (no breakdown): metrics no
    simulation of it beats, for whichever of them are monotonic in the step time. `memories`:
    the candidates' `training_memory`, where the caller has it."""
    floors = np.array([step_floor_s(c) for c in candidates], dtype=np.float64)
    if memories is None:
        memories = training_memory_batch([(c.model, c.plan, c.system.memory_reserve_gib) for c in candidates])
    metrics = _metrics(candidates, floors, memories)
    return [
        TrainingResult(m, None, memory, c.system.gpu, *_host_shares(c))
        for c, m, memory in zip(candidates, metrics, memories)
    ]
