"""Offload against Calculon on the same plan: what moves to the host tier and what it costs.

Why: offload lets a plan that does not fit in HBM run, at a price; if dse moved the wrong bytes
or priced the link wrongly, searches where HBM is short would pick the wrong plans. Calculon
(github.com/calculon-ai/calculon) models a second memory tier; its outputs for one plan with and
without offload are stored in benchmarks/data/calculon_offload.json (commit, inputs and command
there). The same plan goes through dse: a GPT-style 13B model (Calculon's model fields; a
vocabulary of 8 tokens because Calculon has no embedding), tp 8 with sequence parallelism, one
stage, micro-batch 1, 8 micro-batches, no recomputation, fp16 with dropout and unfused attention
(Calculon's GPT), no optimizer sharding, on H100-SXM with the DGX-H100 host tier.

Compared: the optimizer bytes and activation bytes moved to the host, and the exposed time of
activation offload. Calculon keeps two blocks in HBM and charges each block's copy plus its HBM
traffic against the block's time; dse keeps two layers and charges the copy alone against the
layer's time (simulators/analytical/_offload.py). Optimizer offload is printed, not scored:
Calculon streams the optimizer state of each block over the tier link during the backward and
steps on the GPU, dse follows ZeRO-Offload/Megatron and steps on the CPU, so the times measure
different mechanisms. The last line is
`offload: n plans vs Calculon, memory error x%, time error y%`.

    python benchmarks/offload.py
"""

from __future__ import annotations

import json
from pathlib import Path

from simulators.analytical import simulate_training
from simulators.hardware import get_gpu, host_tier_for
from simulators.models import ModelSpec
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem

REFERENCE = Path(__file__).resolve().parent / "data" / "calculon_offload.json"


def dse_candidate(reference: dict, offload: str) -> TrainingCandidate:
    m, exe = reference["inputs"]["model"], reference["inputs"]["execution"]
    model = ModelSpec(
        name="gpt-13b-calculon",
        layers=m["num_blocks"],
        hidden=m["hidden"],
        ffn_hidden=m["feedforward"],
        heads=m["attn_heads"],
        kv_heads=m["attn_heads"],
        head_dim=m["attn_size"],
        vocab=8,
        gated_mlp=False,
    )
    plan = ParallelPlan(
        tp=exe["tensor_par"],
        pp=exe["pipeline_par"],
        dp=exe["data_par"],
        micro_batch=exe["microbatch_size"],
        global_batch=exe["batch_size"],
        seq_len=m["seq_size"],
        recompute="none",
        sequence_parallel=exe["tensor_par_comm_type"] == "rs_ag",
        zero_stage=0,
        precision="fp16",
        flash_attention=False,
        dropout=True,
        offload=offload,
    )
    gpu = get_gpu("H100-SXM")
    return TrainingCandidate(model, TrainingSystem(gpu, exe["num_procs"], 0.0, host=host_tier_for(gpu.name)), plan)


def error(dse: float, reference: float) -> float:
    return abs(dse - reference) / reference


def main() -> None:
    reference = json.loads(REFERENCE.read_text())
    out = reference["outputs"]
    print(f"Calculon {reference['calculon_commit'][:7]} vs dse, per GPU (GB = 1e9 B)")
    print(f"{'quantity':44s} {'Calculon':>10s} {'dse':>10s} {'error':>7s}")
    rows = []

    def row(name: str, calculon: float, dse: float, scored: str | None) -> None:
        e = error(dse, calculon) if calculon else float("nan")
        print(f"{name:44s} {calculon:10.4g} {dse:10.4g} {e:7.1%}")
        if scored:
            rows.append((scored, e))

    both = simulate_training(dse_candidate(reference, "optimizer+activations"))
    none = simulate_training(dse_candidate(reference, "none"))
    act = simulate_training(dse_candidate(reference, "activations"))
    opt = simulate_training(dse_candidate(reference, "optimizer"))
    c_none, c_act, c_opt = out["none"], out["activations"], out["optimizer"]
    gb = 1e9
    moved_optimizer = opt.memory.host_optimizer_bytes
    row("optimizer bytes moved to host (GB)", c_opt["optimizer_space"] / gb, moved_optimizer / gb, "memory")
    moved = c_act["act_space"] - c_act["act_space_with_offload"]
    row("activation bytes moved to host (GB)", moved / 1e9, act.memory.host_activations_bytes / 1e9, "memory")
    row("activations kept in HBM (GB)", c_act["act_space_with_offload"] / gb, act.memory.activations_bytes / gb, None)
    row("activations without offload (GB)", c_none["act_space"] / 1e9, none.memory.activations_bytes / 1e9, None)
    exposed = c_act["fw_offload_exposed_time"] + c_act["bw_offload_exposed_time"]
    row("activation offload exposed (s per step)", exposed, act.breakdown_s["offload_s"], "time")
    row("step without offload (s)", c_none["total_time"], none.metrics["iteration_time_s"], None)
    row("step with activation offload (s)", c_act["total_time"], act.metrics["iteration_time_s"], None)
    unscored = "optimizer offload cost (s per step, unscored)"
    row(unscored, c_opt["bw_offload_exposed_time"], opt.breakdown_s["offload_s"], None)
    row("step with both (s)", out["optimizer+activations"]["total_time"], both.metrics["iteration_time_s"], None)
    memory = [e for kind, e in rows if kind == "memory"]
    time = [e for kind, e in rows if kind == "time"]
    print(
        f"offload: 1 plans vs Calculon, memory error {100 * sum(memory) / len(memory):.1f}%, "
        f"time error {100 * sum(time) / len(time):.1f}%"
    )


if __name__ == "__main__":
    main()
