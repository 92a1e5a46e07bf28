"""SimAI export of a pipeline-parallel candidate: one rank's file per stage, the busiest by
default, every stage's layers and collectives accounted for."""

from collections import Counter

import pytest

from simulators._errors import PlanError
from simulators.analytical import busiest_stage, simai_workload_of
from simulators.analytical._stage_costs import stage_costs
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem, stage_layers, step_operations

MODEL = get_model("deepseek-v3")  # 61 layers, the first 3 dense, then MoE


def candidate(pp=16, ep=8, microbatches=4):
    dp = 128 // pp
    plan = ParallelPlan(tp=1, pp=pp, dp=dp, ep=ep, micro_batch=1, global_batch=dp * microbatches, seq_len=4096)
    return TrainingCandidate(MODEL, TrainingSystem(get_gpu("H800"), 128), plan)


def rows_by_kind(workload):
    return Counter(layer.name for layer in workload.layers)


def test_every_stage_exports_its_own_layers_and_the_busiest_is_the_default():
    c = candidate()
    files = [simai_workload_of(c, stage) for stage in range(16)]
    ga = c.plan.microbatches
    # Each file holds its stage's layers once per micro-batch: over all stages, every layer of
    # the model exactly once per micro-batch (attention rows), and the output layer on the last.
    attention = [rows_by_kind(w)["attention_layer"] for w in files]
    assert attention == [len(stage_layers(MODEL, c.plan, s)) * ga for s in range(16)]
    assert sum(attention) == MODEL.layers * ga
    assert [rows_by_kind(w)["output_layer"] for w in files] == [0] * 15 + [ga]
    # The first stage holds only dense layers (no expert traffic); the MoE stages dispatch and
    # combine with one all-to-all per phase and layer.
    assert stage_layers(MODEL, c.plan, 0) == [0, 1, 2]
    alltoall = [
        sum(1 for layer in w.layers for comm in (layer.fwd_comm, layer.ig_comm) if comm.name.startswith("ALLTOALL"))
        for w in files
    ]
    moe_layers = [sum(1 for i in stage_layers(MODEL, c.plan, s) if MODEL.is_moe_layer(i)) for s in range(16)]
    assert alltoall == [2 * n * ga for n in moe_layers] and alltoall[0] == 0 < min(alltoall[1:])
    busy = [st.forward_s + st.backward_s + st.weight_s for st in stage_costs(c)]
    assert busiest_stage(c) == busy.index(max(busy))
    assert simai_workload_of(c) == files[busiest_stage(c)]


def test_a_stage_the_plan_lacks_is_refused():
    with pytest.raises(PlanError, match=r"stage=16: the plan has pp=16 stages; allowed: 0 to 15"):
        simai_workload_of(candidate(), 16)


def test_every_stage_lists_its_operations_and_the_stages_add_up_to_the_unsplit_model():
    """Per micro-batch the FLOPs of all pp stages together are those of the same model on one
    stage: splitting the layers moves work, it does not make or lose any."""
    split, whole = candidate(pp=4, ep=1), candidate(pp=1, ep=1)
    ops = step_operations(split)
    assert sorted({op.stage for op in ops}) == [0, 1, 2, 3]
    layer_flops = sum(op.flops for op in ops if op.scope != "step")
    assert layer_flops == pytest.approx(sum(op.flops for op in step_operations(whole) if op.scope != "step"))
    assert [op.stage for op in step_operations(split, 2)] == [2] * len(step_operations(split, 2))
    with pytest.raises(PlanError, match=r"stage=4: the plan has pp=4 stages"):
        step_operations(split, 4)
