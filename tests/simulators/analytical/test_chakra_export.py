"""Chakra traces of whole candidates, written, read back, and checked against facts that do not
come from the exporter: the rank count, the model's FLOPs, send/receive conservation, the SimAI
export's collectives, and dependencies that only look back."""

from collections import Counter

import pytest

from simulators.analytical import chakra_traces_of, rank_coordinates, simai_workload_of
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.workload import (
    ParallelPlan,
    TrainingCandidate,
    TrainingSystem,
    layer_forward_gemms,
    model_flops,
    read_chakra_trace,
    write_chakra_trace,
)
from simulators.workload._chakra import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE

LLAMA = get_model("llama3-8b")


def candidate(gpus=16, model=LLAMA, **plan):
    plan = ParallelPlan(**{"micro_batch": 1, "global_batch": 16, "seq_len": 4096, **plan})
    return TrainingCandidate(model, TrainingSystem(get_gpu("H100-SXM"), gpus), plan)


def exported(c, tmp_path):
    for rank, nodes in chakra_traces_of(c):
        write_chakra_trace(tmp_path / f"dse.{rank}.et", nodes)
    traces = {}
    for path in tmp_path.glob("dse.*.et"):
        version, nodes = read_chakra_trace(path)
        assert version == "1.0.0"
        traces[int(path.name.split(".")[1])] = nodes
    return traces


def executed_model_flops(c):
    """FLOPs of the step with causal attention's half left out: model_flops counts the score and
    value GEMMs whole, a causal kernel runs half of them, forward and (twice) backward."""
    causal = sum(
        count
        * sum(
            g.flops
            for g in layer_forward_gemms(c.model, c.plan.global_batch, c.plan.seq_len, 1, layer_index=i)
            if g.causal
        )
        for i, count in c.model.layer_runs
    )
    return model_flops(c.model, c.plan.global_batch, c.plan.seq_len) - 3 * causal / 2


PLANS = {
    "1f1b": dict(tp=2, pp=2, dp=4),
    "interleaved": dict(tp=2, pp=2, dp=4, vpp=2),
    "gpipe, cp": dict(tp=2, pp=2, dp=2, cp=2, schedule="gpipe"),
    "zero-3": dict(tp=4, pp=1, dp=4, zero_stage=3),
}


@pytest.mark.parametrize("name", PLANS)
def test_a_candidate_exports_one_consistent_trace_per_rank(tmp_path, name):
    c = candidate(**PLANS[name])
    traces = exported(c, tmp_path)
    assert sorted(traces) == list(range(c.system.num_gpus))

    # Every rank's work adds up to the model's: all ranks' FLOPs together are the step's.
    flops = {r: sum(n.attr("num_ops") for n in nodes if n.type == COMP_NODE) for r, nodes in traces.items()}
    assert sum(flops.values()) == pytest.approx(executed_model_flops(c), rel=1e-9)
    stage_ranks = c.plan.tp * c.plan.cp * c.plan.dp
    for r, nodes in traces.items():  # ranks of one stage do the same work, all of it timed
        assert flops[r] == flops[r - r % stage_ranks]
        assert all(n.duration_ns > 0 for n in nodes if n.type == COMP_NODE)

    # Dependencies look back only: each file is a DAG in issue order, ids 0..n-1.
    for nodes in traces.values():
        assert [n.id for n in nodes] == list(range(len(nodes)))
        assert all(d < n.id for n in nodes for d in n.data_deps)

    # Point-to-point conservation: every send has its receive, same peers, tag and size.
    sends = Counter(
        (r, n.attr("comm_dst"), n.attr("comm_tag"), n.attr("comm_size"))
        for r, nodes in traces.items()
        for n in nodes
        if n.type == COMM_SEND_NODE
    )
    recvs = Counter(
        (n.attr("comm_src"), r, n.attr("comm_tag"), n.attr("comm_size"))
        for r, nodes in traces.items()
        for n in nodes
        if n.type == COMM_RECV_NODE
    )
    assert sends == recvs and all(count == 1 for count in sends.values())
    for r, nodes in traces.items():
        assert all(n.attr("comm_src") == r for n in nodes if n.type == COMM_SEND_NODE)
    # Each micro-batch crosses each of the pp*vpp - 1 boundaries forward and back, on every
    # tp/cp/dp slot.
    boundaries = (c.plan.pp * c.plan.vpp - 1) * 2 * c.plan.microbatches * stage_ranks
    pipeline = [
        (src, dst) for src, dst, *_ in sends if rank_coordinates(c, src)["pp"] != rank_coordinates(c, dst)["pp"]
    ]
    assert len(pipeline) == boundaries
    assert all(abs(src - dst) % stage_ranks == 0 for src, dst in pipeline)  # the same tp/cp/dp slot
    # Ring attention: cp - 1 steps forward and 2 (cp - 1) back per layer and micro-batch.
    ring = sum(sends.values()) - boundaries
    assert ring == stage_ranks * c.model.layers * c.plan.microbatches * 3 * (c.plan.cp - 1)


def test_collectives_are_the_simai_exports_and_groups_name_their_members(tmp_path):
    """Without sequence parallelism the tensor-parallel traffic is the all-reduces the SimAI
    export writes; the step's data-parallel collectives are its first rows."""
    c = candidate(tp=2, pp=2, dp=4, sequence_parallel=False)
    traces = exported(c, tmp_path)
    for stage in range(2):
        rank = stage * 8 + 3  # tp 1 of dp slot 1
        simai = simai_workload_of(c, stage)
        rows = Counter(
            (comm.name, size)
            for layer in simai.layers
            for comm, size in ((layer.fwd_comm, layer.fwd_comm_bytes), (layer.ig_comm, layer.ig_comm_bytes))
            if comm.name != "NONE"
        )
        ours = Counter(
            n.attr("comm_size")
            for n in traces[rank]
            if n.type == COMM_COLL_NODE and n.attr("pg_name") == f"tp:{rank - 1}"
        )
        assert ours == Counter({size: count for (_, size), count in rows.items()})
        step = [(layer.wg_comm.name, layer.wg_comm_bytes) for layer in simai.layers if layer.name.startswith("dp_")]
        dp = [
            ({0: "ALLREDUCE", 2: "ALLGATHER", 7: "REDUCESCATTER"}[n.attr("comm_type")], n.attr("comm_size"))
            for n in traces[rank]
            if n.name.startswith("step.") and n.type == COMM_COLL_NODE
        ]
        assert dp == step and dp
        # a dp group of ranks tp apart starting at the rank's tp slot of its stage
        assert {n.attr("pg_name") for n in traces[rank] if n.name.startswith("step.") and n.type == COMM_COLL_NODE} == {
            f"dp:{stage * 8 + 1}"
        }
