"""The host-launch floor, the exposed data-parallel reduction and cross-node tensor
parallelism of the training model, against counts and collective times computed here."""

import dataclasses

import pytest

from simulators.analytical import simulate_training
from simulators.hardware import get_gpu, layer_memory_kernels
from simulators.models import ModelSpec, get_model
from simulators.network import Network, collective_time_s
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem, layer_forward_gemms

TINY = ModelSpec(name="tiny", layers=4, hidden=256, ffn_hidden=1024, heads=4, kv_heads=4, vocab=512, gated_mlp=False)


def run(model=TINY, gpu="A100-80GB", num_gpus=1, host_launch_s=0.0, network=None, **plan):
    base = dict(tp=1, pp=1, dp=num_gpus, micro_batch=1, global_batch=num_gpus, seq_len=256)
    system = TrainingSystem(get_gpu(gpu), num_gpus, host_launch_s=host_launch_s, network=network)
    return simulate_training(TrainingCandidate(model, system, ParallelPlan(**{**base, **plan})))


def kernels_per_layer() -> int:
    """Kernels one layer of TINY launches per micro-batch (forward + backward), counted here:
    each GEMM once forward and twice backward, FlashAttention 1 + 3, every memory-bound kernel."""
    gemms = len([g for g in layer_forward_gemms(TINY, 1, 256, 1) if not g.causal])
    memory = len(layer_memory_kernels(256, 256, 1024, 4, 4, 64, 512, gated=False))
    return 3 * gemms + 1 + 3 + memory


def test_a_step_of_tiny_kernels_costs_at_least_their_count_times_the_host_time():
    host_s = 50e-6
    result = run(host_launch_s=host_s, global_batch=4)  # 4 micro-batches
    floor = 4 * TINY.layers * kernels_per_layer() * host_s
    assert result.metrics["iteration_time_s"] >= floor
    assert result.breakdown_s["host_overhead_s"] > 0.5 * floor


def test_host_bound_steps_grow_linearly_with_the_host_time():
    """Where every phase waits for the host, each added microsecond per launch adds the same."""
    t = [run(host_launch_s=h * 1e-6, global_batch=4).metrics["iteration_time_s"] for h in (40, 80, 120)]
    assert t[2] - t[1] == pytest.approx(t[1] - t[0], rel=1e-3)
    assert t[1] - t[0] >= 4 * TINY.layers * kernels_per_layer() * 40e-6 * (1 - 1e-3)


def test_the_host_time_never_speeds_a_step_up_and_leaves_large_kernels_alone():
    times = [run(host_launch_s=h, global_batch=4).metrics["iteration_time_s"] for h in (0.0, 5e-6, 20e-6, 60e-6)]
    assert times == sorted(times)
    big = dict(model=get_model("llama3-70b"), gpu="H100-SXM", num_gpus=8, tp=8, dp=1, global_batch=1, seq_len=8192)
    assert run(host_launch_s=10e-6, **big).metrics["iteration_time_s"] == pytest.approx(
        run(host_launch_s=0.0, **big).metrics["iteration_time_s"]
    )


def test_a_reduction_the_framework_does_not_overlap_adds_exactly_its_all_reduce_time():
    model = get_model("llama3-8b")
    plan = dict(model=model, gpu="H100-SXM", num_gpus=2, dp=2, global_batch=16, seq_len=4096, zero_stage=0)
    overlapped = run(overlap_grad_reduce=True, **plan)
    serial = run(overlap_grad_reduce=False, **plan)
    network = Network.from_gpu(get_gpu("H100-SXM"))
    all_reduce_s = float(collective_time_s("all_reduce", model.total_params * 4, 2, 1, network))
    # Overlapped, the reduction hides under the last micro-batch's backward (8 micro-batches of
    # an 8B model: ~1 s of backward against ~0.1 s of all-reduce).
    assert serial.metrics["iteration_time_s"] - overlapped.metrics["iteration_time_s"] == pytest.approx(
        all_reduce_s, rel=0.02
    )


def test_a_tensor_parallel_group_spanning_two_nodes_runs_at_nic_bandwidth():
    gpu = get_gpu("H100-SXM")
    network = Network.from_gpu(gpu)
    nbytes = 64 * 2**20
    inside = float(collective_time_s("all_reduce", nbytes, 8, 1, network))
    across = float(collective_time_s("all_reduce", nbytes, 16, 1, network))
    # Two nodes of 8: each GPU's share of the buffer (1/8) crosses the NIC at least once.
    assert across >= nbytes / 8 / (network.nic_gbytes_per_s * 1e9)
    assert across > inside
    model = get_model("gpt3-175b")  # 96 heads, multi-head attention: tp 16 divides them
    step = dict(model=model, gpu="H100-SXM", num_gpus=16, dp=1, global_batch=4, seq_len=2048, sequence_parallel=True)
    slow_nic = dataclasses.replace(network, nic_gbytes_per_s=network.nic_gbytes_per_s / 4)
    tp16 = run(tp=16, **step).breakdown_s["tp_comm_s"]
    assert run(tp=16, network=slow_nic, **step).breakdown_s["tp_comm_s"] > 2 * tp16


def test_cuda_graphs_take_the_host_off_the_critical_path():
    bound = run(host_launch_s=50e-6, global_batch=4)
    graphed = run(host_launch_s=50e-6, global_batch=4, cuda_graphs=True)
    assert bound.breakdown_s["host_overhead_s"] > 0 and graphed.breakdown_s["host_overhead_s"] == 0.0
    assert graphed.metrics["iteration_time_s"] == pytest.approx(run(global_batch=4).metrics["iteration_time_s"])


def test_routed_experts_launch_one_gemm_per_local_expert():
    """Transformer Engine's grouped GEMM issues a cuBLAS GEMM per local expert: a layer of 16
    experts spread over 2 ranks (8 each) launches 7 more GEMMs per expert projection than over 16
    ranks (1 each), forward once and backward twice: 2 projections x 7 x 3 = 42 launches."""
    moe = ModelSpec(
        name="tiny-moe",
        layers=2,
        hidden=256,
        ffn_hidden=1024,
        heads=4,
        kv_heads=4,
        vocab=512,
        moe_experts=16,
        moe_top_k=2,
        moe_ffn_hidden=256,
    )
    host_s = 500e-6  # so long that every phase waits for the host: time = launches x host_s
    kw = dict(model=moe, num_gpus=16, dp=16, global_batch=16, host_launch_s=host_s)
    few, many = (run(ep=ep, **kw).breakdown_s["host_overhead_s"] for ep in (16, 2))
    layers = moe.layers
    assert many - few == pytest.approx(layers * 2 * 7 * 3 * host_s, rel=0.02)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_the_breakdowns_host_part_is_what_the_host_adds_to_the_step(recompute):
    """One stage, no data parallelism: the host's waits are the only difference between a step
    with host time and without, so the breakdown's host part must be that difference, also when
    full recomputation launches the forward's kernels again (once, within the backward)."""
    slow = run(host_launch_s=50e-6, global_batch=4, recompute=recompute)
    fast = run(host_launch_s=0.0, global_batch=4, recompute=recompute)
    added_s = slow.metrics["iteration_time_s"] - fast.metrics["iteration_time_s"]
    assert added_s > 0
    assert slow.breakdown_s["host_overhead_s"] == pytest.approx(added_s, rel=1e-6)  # the pipeline runs in integer ns
    assert all(value >= 0.0 for value in slow.breakdown_s.values()), slow.breakdown_s
