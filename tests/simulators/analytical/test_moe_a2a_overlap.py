"""Megatron-Core's combined 1F1B (the expert-parallel all-to-alls under an adjacent micro-batch's
compute), against the all-to-all times of the same plan without it and the SM budget of the
communication kernels (DeepSeek-V3 report: 20 SMs)."""

import pytest

from simulators import DseError
from simulators.analytical import simulate_training
from simulators.analytical._layer_costs import EP_COMM_SMS
from simulators.analytical._stage_costs import stage_costs
from simulators.hardware import get_gpu
from simulators.models import ModelSpec
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem

MOE = ModelSpec(
    name="moe", layers=4, hidden=4096, ffn_hidden=8192, heads=32, kv_heads=8, vocab=32000,
    moe_experts=8, moe_top_k=2, moe_ffn_hidden=14336,
)  # fmt: skip
GPU = get_gpu("H100-SXM")


def candidate(**plan) -> TrainingCandidate:
    base = dict(tp=1, pp=1, dp=8, ep=8, micro_batch=2, global_batch=64, seq_len=4096)
    return TrainingCandidate(MOE, TrainingSystem(GPU, 8), ParallelPlan(**{**base, **plan}))


def test_overlap_with_pipelining_needs_interleaving():
    with pytest.raises(DseError, match="vpp > 1"):
        ParallelPlan(tp=1, pp=2, dp=4, ep=4, micro_batch=1, global_batch=8, seq_len=1024, moe_a2a_overlap=True)
    ParallelPlan(tp=1, pp=2, vpp=2, dp=4, ep=4, micro_batch=1, global_batch=8, seq_len=1024, moe_a2a_overlap=True)


def test_all_to_alls_hidden_under_longer_compute_cost_only_their_sm_share():
    """Inside one NVLink domain the all-to-alls (a few hundred us a layer) are far shorter than
    a layer's forward or backward, so each is hidden and costs what its 20 SMs take from the
    compute beside it: EP_COMM_SMS / sm_count of its own time."""
    exposed = stage_costs(candidate())[0].comm_s["ep"]
    hidden = stage_costs(candidate(moe_a2a_overlap=True))[0].comm_s["ep"]
    assert exposed > 0
    assert hidden == pytest.approx(exposed * EP_COMM_SMS / GPU.sm_count, rel=1e-9)


def test_overlap_never_slows_a_step_and_leaves_dense_models_alone():
    plain, overlapped = (simulate_training(candidate(moe_a2a_overlap=flag)) for flag in (False, True))
    assert overlapped.metrics["iteration_time_s"] < plain.metrics["iteration_time_s"]
    dense = ModelSpec(name="dense", layers=4, hidden=4096, ffn_hidden=8192, heads=32, kv_heads=8, vocab=32000)
    steps = [
        simulate_training(
            TrainingCandidate(dense, TrainingSystem(GPU, 8), ParallelPlan(tp=1, pp=1, dp=8, micro_batch=2,
                              global_batch=64, seq_len=4096, moe_a2a_overlap=flag))
        ).metrics["iteration_time_s"]
        for flag in (False, True)
    ]  # fmt: skip
    assert steps[0] == steps[1]
