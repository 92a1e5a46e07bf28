"""Offloaded memory: what moves to the host tier, by hand; HBM + host conserve the bytes."""

import dataclasses

import pytest

from simulators._errors import PlanError
from simulators.hardware import get_gpu, host_tier_for
from simulators.models import get_model
from simulators.workload import (
    ParallelPlan,
    TrainingCandidate,
    TrainingSystem,
    layer_activation_bytes,
    training_memory,
)


def plan(**kw):
    base = dict(tp=8, pp=1, dp=1, micro_batch=1, global_batch=16, seq_len=4096, zero_stage=0)
    return ParallelPlan(**{**base, **kw})


def test_optimizer_offload_moves_the_12_bytes_per_parameter_and_nothing_else():
    model = get_model("llama3-70b")
    plain = training_memory(model, plan(), 4.0)
    offloaded = training_memory(model, plan(offload="optimizer"), 4.0)
    assert offloaded.optimizer_bytes == 0
    assert offloaded.host_optimizer_bytes == plain.optimizer_bytes
    assert offloaded.weights_bytes == plain.weights_bytes and offloaded.gradients_bytes == plain.gradients_bytes
    assert offloaded.total_bytes + offloaded.host_bytes == pytest.approx(plain.total_bytes)


def test_activation_offload_keeps_two_layers_in_hbm_and_sends_all_but_the_last():
    model = get_model("llama3-8b")
    plain = training_memory(model, plan(tp=1, dp=1), 4.0)
    offloaded = training_memory(model, plan(tp=1, dp=1, offload="activations"), 4.0)
    layer = layer_activation_bytes(model, plan(tp=1, dp=1))
    assert offloaded.host_activations_bytes == pytest.approx((model.layers - 1) * layer)
    assert offloaded.activations_bytes == pytest.approx(plain.activations_bytes - (model.layers - 2) * layer)
    # HBM + host: the plain plan's bytes plus the one layer buffered in transit.
    assert offloaded.total_bytes + offloaded.host_bytes == pytest.approx(plain.total_bytes + layer)


def test_a_plan_that_does_not_fit_hbm_fits_with_optimizer_offload():
    model, gpu = get_model("llama3-70b"), get_gpu("H100-SXM")
    plain = training_memory(model, plan(recompute="full"), 4.0)
    offloaded = training_memory(model, plan(recompute="full", offload="optimizer"), 4.0)
    assert plain.total_bytes > gpu.hbm_bytes
    assert offloaded.total_bytes <= gpu.hbm_bytes
    assert offloaded.host_bytes <= host_tier_for(gpu.name).memory_bytes_per_gpu


def system(gpu="H100-SXM", n=8):
    g = get_gpu(gpu)
    return TrainingSystem(g, n, 4.0, host=host_tier_for(g.name))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(pp=2, offload="activations"), "offload='activations' needs pp=1"),
        (dict(recompute="full", offload="optimizer+activations"), "needs recompute=none"),
        (dict(cuda_graphs=True, offload="activations"), "cannot run with cuda_graphs"),
    ],
)
def test_megatron_refusals_of_activation_offload_are_one_line(kw, message):
    with pytest.raises(PlanError, match=message):
        TrainingCandidate(get_model("llama3-8b"), system(), plan(tp=4, dp=2 // kw.get("pp", 1), **kw))


def test_offload_without_a_host_tier_names_the_gpu_and_the_allowed():
    g = get_gpu("MI300X")
    with pytest.raises(PlanError, match=r"MI300X has none in simulators/hardware/memory_tiers.yaml.*allowed: none"):
        TrainingCandidate(get_model("llama3-8b"), TrainingSystem(g, 8), plan(offload="optimizer"))


def test_an_unknown_offload_mode_is_one_line_with_the_allowed():
    with pytest.raises(PlanError, match="offload='weights'; allowed: none, optimizer, activations, optimizer"):
        plan(offload="weights")


def test_plans_without_offload_are_unchanged():
    model = get_model("llama3-8b")
    memory = training_memory(model, plan(), 4.0)
    assert memory.host_bytes == 0
    assert dataclasses.replace(memory) == memory


def test_weight_offload_keeps_only_the_gathered_layers_in_hbm():
    model = get_model("llama3-70b")
    zero3 = dict(dp=2, global_batch=16, zero_stage=3)
    plain = training_memory(model, plan(**zero3), 4.0)
    offloaded = training_memory(model, plan(offload="optimizer+weights", **zero3), 4.0)
    largest_layer = max(model.layer_params(first) for first, _ in model.layer_runs) / 8
    gathered = 2 * largest_layer * 2  # the layer in use and the one prefetched, bf16
    assert offloaded.weights_bytes == pytest.approx(gathered)
    assert offloaded.host_weights_bytes == pytest.approx(plain.weights_bytes - gathered)
    assert offloaded.total_bytes + offloaded.host_bytes == pytest.approx(plain.total_bytes)


def test_weight_offload_needs_zero_3():
    with pytest.raises(PlanError, match=r"offload='optimizer\+weights' needs zero_stage=3 .*; zero_stage=1"):
        TrainingCandidate(get_model("llama3-8b"), system(), plan(dp=1, zero_stage=1, offload="optimizer+weights"))
