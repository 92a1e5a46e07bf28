"""A training candidate as SimAI/AICB workload files: one GPU of one pipeline stage each.

A SimAI workload file is one rank's view of an iteration (FORMAT.md in ../shared/reference/simai),
so a pipeline-parallel plan is one file per stage; `simai_workload_of` writes the stage asked,
by default the busiest (`busiest_stage`), whose rank paces the pipeline and is the one SimAI
should time. Rows follow AICB's layout: the data-parallel gradient and parameter collectives of
the stage's parameters (`step_collectives`) and the optimizer step first, then every micro-batch
unrolled, each layer as an attention row and an MLP (or MoE) row whose compute times come from
`layer_blocks` (the same numbers the training model sums), and the output layer on the last
stage. A row carries one collective per column, so an MoE block with both tensor- and
expert-parallel traffic gets a second, compute-free row. SimAI has no context parallelism: cp
ranks count as data-parallel ones in the header.
"""

from __future__ import annotations

from simulators._errors import PlanError
from simulators.analytical._layer import adam_step_s, layer_blocks, output_layer, per_layer_plan
from simulators.analytical._stage_costs import busiest_stage
from simulators.workload import (
    SimAIWorkload,
    TrainingCandidate,
    ep_dispatch_bytes,
    pipeline_send_bytes,
    simai_workload_from_layers,
    stage_layers,
    stage_params,
    step_collectives,
    tp_activation_bytes,
)


def simai_workload_of(candidate: TrainingCandidate, stage: int | None = None) -> SimAIWorkload:
    """The candidate's training step, seen from rank 0 of pipeline stage `stage` (default: the
    busiest), in SimAI's HYBRID_TRANSFORMER format."""
    model, plan, system = candidate.model, candidate.plan, candidate.system
    if stage is None:
        stage = busiest_stage(candidate)
    if not 0 <= stage < plan.pp:
        raise PlanError(f"stage={stage}: the plan has pp={plan.pp} stages; allowed: 0 to {plan.pp - 1}")
    gpu = system.gpu
    layer_plan = per_layer_plan(plan)
    dense, expert = stage_params(model, plan, stage)
    rows: list[dict] = [
        {"name": f"{c.group}_{c.op}", "wg_comm": (c.op, c.group, int(c.nbytes))}
        for c in step_collectives(model, plan, stage)
        if c.per == "step"
    ]
    rows.append({"name": "optimizer", "wg_compute_s": adam_step_s(gpu, plan, dense, expert)})

    tp_comm = ("all_reduce", "tp", tp_activation_bytes(model, plan)) if plan.tp > 1 else None
    layer_rows: list[dict] = []
    for index in stage_layers(model, plan, stage):
        for block in layer_blocks(model, gpu, layer_plan, index, system.calibration, system.compute_fraction):
            row = {
                "name": f"{block.name}_layer",
                "fwd_compute_s": block.forward_s,
                "ig_compute_s": block.input_grad_s,
                "wg_compute_s": block.weight_grad_s,
                "fwd_comm": tp_comm,
                "ig_comm": tp_comm,
            }
            if block.name == "moe" and plan.ep > 1:
                dispatch = ("all_to_all", "ep", 2 * ep_dispatch_bytes(model, plan))  # dispatch + combine
                row["fwd_comm"] = row["ig_comm"] = dispatch
                if tp_comm:  # the block's tensor-parallel traffic on a second, compute-free row
                    layer_rows.append(row)
                    row = {"name": "moe_tp_comm", "fwd_comm": tp_comm, "ig_comm": tp_comm}
            layer_rows.append(row)
    if stage == plan.pp - 1:  # the last stage holds the output layer
        block = output_layer(model, gpu, layer_plan, system.calibration, system.compute_fraction)
        layer_rows.append(
            {
                "name": "output_layer",
                "fwd_compute_s": block.forward_s,
                "ig_compute_s": block.input_grad_s,
                "wg_compute_s": block.weight_grad_s,
            }
        )
    rows += layer_rows * plan.microbatches
    return simai_workload_from_layers(
        tp=plan.tp,
        ep=plan.ep,
        pp=plan.pp,
        vpp=plan.vpp,
        ga=plan.microbatches,
        all_gpus=system.num_gpus,
        pp_comm_bytes=pipeline_send_bytes(model, plan) if plan.pp > 1 else 0,
        layers=rows,
    )
