"""Offload time: the closed forms, and the step breakdown still adding up with offload_s."""

import pytest

from simulators.analytical import simulate_training
from simulators.analytical._offload import cpu_optimizer_step_s, exposed_offload_s
from simulators.hardware import get_gpu, host_tier_for
from simulators.models import get_model
from simulators.workload import (
    ParallelPlan,
    TrainingCandidate,
    TrainingSystem,
    layer_activation_bytes,
    optimizer_local_params,
    stage_params,
)
from simulators.workload._memory import ADAM_BYTES_PER_PARAM


def test_exposed_copy_is_what_the_layer_compute_does_not_hide():
    assert exposed_offload_s(63e9, 0.25, 63.0) == pytest.approx(0.75)
    assert exposed_offload_s(63e9, 2.0, 63.0) == 0.0


def test_cpu_optimizer_step_overlapped_is_the_slowest_stage_serial_the_sum():
    params, link, host = 1e9, 63.0, 76.8
    d2h, cpu, h2d = params * 4 / 63e9, params * ADAM_BYTES_PER_PARAM / 76.8e9, params * 2 / 63e9
    assert cpu_optimizer_step_s(params, 4, link, host, True) == pytest.approx(max(d2h, cpu, h2d))
    assert cpu_optimizer_step_s(params, 4, link, host, False) == pytest.approx(d2h + cpu + h2d)
    # Weights kept on the host (ZeRO-Infinity offload_param): nothing copied back.
    assert cpu_optimizer_step_s(params, 4, link, host, False, True) == pytest.approx(d2h + cpu)


def candidate(offload, gpu="H100-SXM", **kw):
    """llama3-8b at tp 8, without the host-launch floor: at one sequence per step the fitted host
    time per kernel would bound each layer and hide the copies these tests look at."""
    g = get_gpu(gpu)
    base = dict(tp=8, pp=1, dp=1, micro_batch=1, global_batch=8, seq_len=4096, zero_stage=0, offload=offload)
    system = TrainingSystem(g, 8, 4.0, host=host_tier_for(g.name), host_launch_s=0.0)
    return TrainingCandidate(get_model("llama3-8b"), system, ParallelPlan(**{**base, **kw}))


@pytest.mark.parametrize("offload", ["none", "optimizer", "activations", "optimizer+activations"])
def test_breakdown_adds_up_to_the_step(offload):
    result = simulate_training(candidate(offload))
    assert sum(result.breakdown_s.values()) == pytest.approx(result.metrics["iteration_time_s"], rel=1e-9)
    assert (result.breakdown_s["offload_s"] > 0) == (offload != "none")


@pytest.mark.parametrize("overlap", [True, False])
def test_optimizer_offload_step_is_the_cpu_closed_form(overlap):
    c = candidate("optimizer", overlap_cpu_optimizer=overlap)
    plain = simulate_training(candidate("none"))
    result = simulate_training(c)
    host = c.system.host
    params = optimizer_local_params(c.plan, *stage_params(c.model, c.plan, 0))
    expected = cpu_optimizer_step_s(
        params, c.plan.gradient_bytes, host.link_gbytes_per_s, host.memory_gbytes_per_s_per_gpu, overlap
    )
    assert result.breakdown_s["offload_s"] == pytest.approx(expected)
    assert result.breakdown_s["optimizer_s"] == 0
    # Everything else as without offload: the step grows by the CPU step less the GPU Adam step.
    delta = result.metrics["iteration_time_s"] - plain.metrics["iteration_time_s"]
    assert delta == pytest.approx(expected - plain.breakdown_s["optimizer_s"])


def test_activation_offload_exposes_per_layer_what_pcie_cannot_hide_and_c2c_hides_more():
    slow = simulate_training(candidate("activations", micro_batch=4, global_batch=32))
    fast = simulate_training(candidate("activations", gpu="GB200", micro_batch=4, global_batch=32))
    assert slow.breakdown_s["offload_s"] >= 0 and fast.breakdown_s["offload_s"] >= 0
    c = candidate("activations", micro_batch=4, global_batch=32)
    nbytes = layer_activation_bytes(c.model, c.plan)
    # Bound: never more than copying every offloaded layer both ways with nothing hidden.
    ceiling = c.plan.microbatches * 2 * (c.model.layers - 1) * nbytes / (c.system.host.link_gbytes_per_s * 1e9)
    assert slow.breakdown_s["offload_s"] <= ceiling + 1e-12


def test_host_memory_overflow_is_infeasible_with_a_reason_naming_the_host_tier():
    # GB200's Grace share is 240 GiB: a third of a 70B model's Adam state (12 B per parameter) is
    # more, while its weights and gradients (6 B) fit the 186 GiB of HBM.
    g = get_gpu("GB200")
    plan = ParallelPlan(
        tp=1,
        pp=3,
        dp=1,
        micro_batch=1,
        global_batch=3,
        seq_len=1024,
        zero_stage=0,
        recompute="full",
        offload="optimizer",
    )
    result = simulate_training(
        TrainingCandidate(get_model("llama3-70b"), TrainingSystem(g, 3, 4.0, host=host_tier_for(g.name)), plan)
    )
    assert result.memory.total_bytes <= g.hbm_bytes
    assert not result.feasible
    assert result.infeasible_reason.startswith("offloads 269.9 GiB per GPU to host memory; its share is 240.0 GiB")


def test_weight_copies_over_a_slow_link_are_exposed_up_to_their_closed_form():
    # A host link of 0.5 GB/s: each layer's bf16 shard copy outlasts the layer, so the exposed time
    # lies between all copies less all compute and all copies.
    g = get_gpu("H100-SXM")
    slow = host_tier_for(g.name).model_copy(update={"link_gbytes_per_s": 0.5})
    plan = ParallelPlan(
        tp=8, pp=1, dp=1, micro_batch=1, global_batch=2, seq_len=4096, zero_stage=3, offload="optimizer+weights"
    )
    c = TrainingCandidate(get_model("llama3-8b"), TrainingSystem(g, 8, 4.0, host=slow), plan)
    result = simulate_training(c)
    shard = optimizer_local_params(plan, *stage_params(c.model, plan, 0)) * 2 / c.model.layers
    copies = plan.microbatches * 2 * c.model.layers * shard / 0.5e9
    params = optimizer_local_params(plan, *stage_params(c.model, plan, 0))
    step = cpu_optimizer_step_s(params, 4, 0.5, slow.memory_gbytes_per_s_per_gpu, True, True)
    compute = result.metrics["iteration_time_s"] - result.breakdown_s["offload_s"]
    assert copies - compute <= result.breakdown_s["offload_s"] - step <= copies
    assert sum(result.breakdown_s.values()) == pytest.approx(result.metrics["iteration_time_s"], rel=1e-9)


@pytest.mark.parametrize("share", [0.25, 0.5, 1.0])
def test_a_partial_optimizer_offload_splits_the_step_between_gpu_and_cpu(share):
    c = candidate("optimizer", optimizer_offload_fraction=share)
    plain = simulate_training(candidate("none"))
    result = simulate_training(c)
    host = c.system.host
    params = optimizer_local_params(c.plan, *stage_params(c.model, c.plan, 0))
    cpu = cpu_optimizer_step_s(
        share * params, c.plan.gradient_bytes, host.link_gbytes_per_s, host.memory_gbytes_per_s_per_gpu, True
    )
    assert result.breakdown_s["offload_s"] == pytest.approx(cpu)
    assert result.breakdown_s["optimizer_s"] == pytest.approx((1 - share) * plain.breakdown_s["optimizer_s"])
    assert result.memory.host_optimizer_bytes == pytest.approx(share * plain.memory.optimizer_bytes)
    assert result.memory.optimizer_bytes == pytest.approx((1 - share) * plain.memory.optimizer_bytes)
    assert sum(result.breakdown_s.values()) == pytest.approx(result.metrics["iteration_time_s"], rel=1e-9)


@pytest.mark.parametrize("share", [0.0, 1.5, True])
def test_an_offload_fraction_outside_0_1_is_one_line(share):
    from simulators._errors import PlanError

    with pytest.raises(PlanError, match=r"optimizer_offload_fraction=.*; allowed: a number in \(0, 1\]"):
        ParallelPlan(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1, seq_len=8, optimizer_offload_fraction=share)


def test_nvme_optimizer_offload_adds_the_drives_read_and_write_as_a_fourth_stage():
    params, link, host, nvme = 1e9, 63.0, 76.8, 7.875
    d2h, cpu, h2d = params * 4 / 63e9, params * ADAM_BYTES_PER_PARAM / 76.8e9, params * 2 / 63e9
    drives = params * 24 / 7.875e9  # the 12 bytes of Adam state read and written back
    assert cpu_optimizer_step_s(params, 4, link, host, True, False, nvme) == pytest.approx(max(d2h, cpu, drives, h2d))
    assert cpu_optimizer_step_s(params, 4, link, host, False, False, nvme) == pytest.approx(d2h + cpu + drives + h2d)


def test_nvme_offload_puts_the_optimizer_state_on_the_drives_and_prices_their_share():
    c = candidate("optimizer-nvme")
    result = simulate_training(c)
    dram = simulate_training(candidate("optimizer"))
    host = c.system.host
    params = optimizer_local_params(c.plan, *stage_params(c.model, c.plan, 0))
    assert result.memory.host_nvme_optimizer_bytes == pytest.approx(dram.memory.host_optimizer_bytes)
    assert result.memory.host_bytes == 0 and result.nvme_bytes == host.nvme_bytes_per_gpu
    expected = cpu_optimizer_step_s(
        params, 4, host.link_gbytes_per_s, host.memory_gbytes_per_s_per_gpu, True, False, host.nvme_gbytes_per_s_per_gpu
    )
    assert result.breakdown_s["offload_s"] == pytest.approx(expected)
    assert result.feasible


def test_nvme_offload_on_a_host_without_drives_is_one_line():
    from simulators._errors import PlanError

    with pytest.raises(PlanError, match=r"needs an NVMe tier; host tier GB200-superchip of GB200 has none.*allowed"):
        candidate("optimizer-nvme", gpu="GB200")
