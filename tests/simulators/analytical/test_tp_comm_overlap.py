"""Tensor-parallel collectives against closed forms: the backward reduce-scatter (all-reduce
without sequence parallelism) of a column-parallel linear hides under its weight gradient, as
Megatron-Core's and Transformer Engine's linear layers launch it, unless a zero-bubble schedule
defers that gradient; Transformer Engine's overlap (ParallelPlan.tp_comm_overlap) also splits a
GEMM into tp row chunks with a ring hop beside each; MoE blocks keep theirs exposed."""

import dataclasses

import pytest

from simulators import PlanError
from simulators.analytical import simulate_training
from simulators.analytical._layer_costs import _ring_overlap_s
from simulators.hardware import gemm_time_s, get_gpu
from simulators.models import ModelSpec, get_model
from simulators.network import Network, collective_time_s
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem, layer_forward_gemms
from simulators.workload._messages import tp_activation_bytes

GPU = get_gpu("H100-SXM")
DENSE = ModelSpec(
    name="dense", layers=2, hidden=4096, ffn_hidden=16384, heads=32, kv_heads=32, vocab=512, gated_mlp=False
)


def tp_comm_s(model, network, overlap, tp=4, seq_len=2048, **settings):
    shape = {"pp": 1, "global_batch": 1, **settings}
    plan = ParallelPlan(tp=tp, dp=1, micro_batch=1, seq_len=seq_len, tp_comm_overlap=overlap, **shape)
    system = TrainingSystem(GPU, tp * plan.pp, network=network, compute_fraction=1.0)
    return simulate_training(TrainingCandidate(model, system, plan)).breakdown_s["tp_comm_s"]


def test_hops_shorter_than_their_chunks_cost_only_the_chunking():
    # 4 chunks of 1 ms (a 3.6 ms GEMM unsplit), 3 hops of 0.5 ms: 4 ms - 3.6 ms.
    assert _ring_overlap_s(3 * 0.5e-3, 1e-3, 4, 3.6e-3) == pytest.approx(0.4e-3)


def test_hops_longer_than_their_chunks_expose_their_excess():
    # 3 hops of 2 ms beside chunks of 1 ms: 3 x 2 + 1 - 4 (the unsplit GEMM, no chunking cost).
    assert _ring_overlap_s(3 * 2e-3, 1e-3, 4, 4e-3) == pytest.approx(3e-3)


def test_a_comm_bound_dense_layer_exposes_what_its_gemms_do_not_hide():
    """On a slow NVLink every hop outlasts its chunk: per block, each ring costs its whole
    collective plus one chunk minus the unsplit GEMM, and the backward reduce-scatter its
    excess over the column-parallel weight gradient (all computed here from the GEMM shapes)."""
    tp, seq = 4, 2048
    network = dataclasses.replace(Network.from_gpu(GPU), scaleup_gbytes_per_s=2.0)
    nbytes = tp_activation_bytes(DENSE, ParallelPlan(tp=tp, pp=1, dp=1, micro_batch=1, global_batch=1, seq_len=seq))
    gather = float(collective_time_s("all_gather", nbytes, tp, 1, network))
    scatter = float(collective_time_s("reduce_scatter", nbytes, tp, 1, network))
    gemms = {g.name: g for g in layer_forward_gemms(DENSE, 1, seq, tp)}

    def t(m, n, k):
        return gemm_time_s(GPU, m, n, k, 1, "bf16")

    expected = plain = 0.0
    for column, row in (("qkv_proj", "attn_out_proj"), ("mlp_in_proj", "mlp_out_proj")):
        c, r = gemms[column], gemms[row]
        beside_wgrad = max(0.0, scatter - t(c.k, c.n, c.m))  # the input gradient's, beside the weight gradient
        expected += gather + t(c.m // tp, c.n, c.k) - t(c.m, c.n, c.k)  # forward all-gather ring
        expected += scatter + t(r.m // tp, r.n, r.k) - t(r.m, r.n, r.k)  # forward reduce-scatter ring
        expected += gather + t(r.m // tp, r.k, r.n) - t(r.m, r.k, r.n)  # gradient all-gather ring
        expected += beside_wgrad
        plain += gather + scatter + gather + beside_wgrad
    # the breakdown is rounded to add up
    assert tp_comm_s(DENSE, network, True) == pytest.approx(DENSE.layers * expected, rel=1e-6)
    assert tp_comm_s(DENSE, network, False) == pytest.approx(DENSE.layers * plain, rel=1e-6)


@pytest.mark.parametrize("sequence_parallel", [True, False])
def test_the_input_gradients_collective_hides_under_the_weight_gradient_unless_zero_bubble_defers_it(
    sequence_parallel,
):
    """On NVLink the column-parallel weight gradients of a wide model (q/k/v: 8192 x 6144 x 2048,
    MLP in: 8192 x 8192 x 2048 per rank) outlast the reduce-scatter (all-reduce) of their input
    gradients, so the backward exposes only the gradient's all-gather (nothing without sequence
    parallelism); a zero-bubble schedule runs the weight gradient later and exposes them all."""
    tp, seq = 4, 2048
    wide = ModelSpec(
        name="wide", layers=2, hidden=8192, ffn_hidden=32768, heads=64, kv_heads=64, vocab=512, gated_mlp=False
    )
    network = Network.from_gpu(GPU)
    nbytes = tp_activation_bytes(wide, ParallelPlan(tp=tp, pp=1, dp=1, micro_batch=1, global_batch=1, seq_len=seq))
    gemms = {g.name: g for g in layer_forward_gemms(wide, 1, seq, tp)}
    ops = ("all_gather", "reduce_scatter") if sequence_parallel else ("all_reduce",)
    each = {op: float(collective_time_s(op, nbytes, tp, 1, network)) for op in ops}
    hidden = each["reduce_scatter" if sequence_parallel else "all_reduce"]
    for column in ("qkv_proj", "mlp_in_proj"):
        c = gemms[column]
        assert hidden < gemm_time_s(GPU, c.k, c.n, c.m, 1, "bf16")  # the premise: the GEMM is longer
    whole = wide.layers * 2 * 2 * sum(each.values())  # two blocks, forward and backward
    settings = {"sequence_parallel": sequence_parallel}
    assert tp_comm_s(wide, network, False, **settings) == pytest.approx(whole - wide.layers * 2 * hidden, rel=1e-6)
    # A one-stage pipeline has no bubble to fill: zero bubble runs as 1F1B there (as the study's
    # canonical plans have it); over two stages (a layer each, two micro-batches) it defers.
    assert tp_comm_s(wide, network, False, **settings, schedule="zb-h1") == pytest.approx(
        whole - wide.layers * 2 * hidden, rel=1e-6
    )
    deferred = tp_comm_s(wide, network, False, **settings, schedule="zb-h1", pp=2, global_batch=2)
    assert deferred == pytest.approx(2 * whole / wide.layers, rel=1e-6)


def test_overlap_hides_most_of_a_large_models_tensor_parallel_traffic_on_nvlink():
    model = get_model("llama3-70b")
    network = Network.from_gpu(GPU)
    exposed, overlapped = tp_comm_s(model, network, False, tp=8, seq_len=8192), tp_comm_s(model, network, True, 8, 8192)
    assert 0.0 <= overlapped < 0.5 * exposed


def test_moe_blocks_keep_their_collectives_exposed():
    """Userbuffers overlap dense Linear layers only: in Mixtral the attention block's traffic
    shrinks and the expert block's stays whole, so the saving is at most the attention's."""
    model = get_model("mixtral-8x7b")
    network = Network.from_gpu(GPU)
    exposed, overlapped = tp_comm_s(model, network, False), tp_comm_s(model, network, True)
    assert overlapped < exposed
    assert exposed - overlapped <= exposed / 2 + 1e-12  # half the collectives are the MoE block's


def test_megatron_refuses_overlap_without_sequence_parallelism():
    with pytest.raises(PlanError, match="tp_comm_overlap needs sequence_parallel"):
        ParallelPlan(
            tp=2, pp=1, dp=1, micro_batch=1, global_batch=1, seq_len=512, sequence_parallel=False, tp_comm_overlap=True
        )
    # Nothing to overlap at tp 1: accepted as a no-op.
    ParallelPlan(
        tp=1, pp=1, dp=1, micro_batch=1, global_batch=1, seq_len=512, sequence_parallel=False, tp_comm_overlap=True
    )
