"""Analytical training model: per-operation costs, an event-simulated pipeline, overlap.

For each candidate the model prices one micro-batch through one model chunk on every pipeline
stage, as three operations the schedule moves around: F (forward), B (input gradient) and W
(weight gradient). Costs come from the GEMM shapes of the workload and the collectives of the
plan; communication runs on its own stream, so it costs time only where nothing hides it:
- tensor-parallel all-reduces (reduce-scatter + all-gather with sequence parallelism) sit
  between GEMMs that need their result: exposed;
- pipeline sends delay the next stage only (the timeline adds them to the dependency);
- every kernel is issued by the framework on the host: a layer's F (or B + W) takes at least
  its kernel count times the host time per launch (`TrainingSystem.kernel_host_s`), which is
  what small models, small micro-batches and many small experts are bound by (breakdown
  `host_overhead_s`), unless the kernels run from CUDA graphs (`ParallelPlan.cuda_graphs`);
- data-parallel gradient reduction overlaps the last micro-batch's backward, bucket by
  bucket; the parameter all-gather of a sharded optimizer overlaps the next step's first
  forward (ZeRO-3 gathers per layer, prefetched under the previous layer's compute);
  a plan whose framework does not overlap them (`overlap_grad_reduce`,
  `overlap_param_gather` False) pays them in full.
The pipeline itself is simulated event by event (`_timeline`), not taken from a formula.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from simulators.analytical._stage_costs import StageCosts, Stages, send_s, stage_costs_batch
from simulators.analytical._timeline import NS_PER_S, SCHEDULES, make_pipeline_batch, simulate_pipelines
from simulators.hardware import GpuSpec
from simulators.workload import (
    GIB,
    MemoryBreakdown,
    ParallelPlan,
    TrainingCandidate,
    model_flops,
    recomputed_flops,
    training_memory_batch,
)


@dataclass(frozen=True)
class TrainingResult:
    """One simulated training step. `breakdown_s` adds up to `metrics["iteration_time_s"]`
    (None when the batch was simulated without it);
    `feasible` is False when memory does not fit (the times are still what it would take)."""

    metrics: Mapping[str, float]
    breakdown_s: Mapping[str, float] | None
    memory: MemoryBreakdown
    gpu: GpuSpec
    # The GPU's share of host memory, where the plan offloads to it (HostTier.memory_bytes_per_gpu).
    host_memory_bytes: float | None = None
    nvme_bytes: float | None = None  # the GPU's share of the host's NVMe drives (HostTier.nvme_bytes_per_gpu)

    @property
    def host_fits(self) -> bool:
        return self.memory.host_bytes == 0 or (
            self.host_memory_bytes is not None and self.memory.host_bytes <= self.host_memory_bytes
        )

    @property
    def nvme_fits(self) -> bool:
        nvme = self.memory.nvme_bytes
        return nvme == 0 or (self.nvme_bytes is not None and nvme <= self.nvme_bytes)

    @property
    def feasible(self) -> bool:
        return self.memory.total_bytes <= self.gpu.hbm_bytes and self.host_fits and self.nvme_fits

    @property
    def infeasible_reason(self) -> str | None:
        """Why the candidate cannot run (formatted on demand: most results are never asked)."""
        if self.feasible:
            return None
        memory, gpu = self.memory, self.gpu
        if memory.total_bytes > gpu.hbm_bytes:
            return f"needs {memory.total_gib:.1f} GiB per GPU; {gpu.name} has {gpu.hbm_gib:g} GiB"
        if not self.nvme_fits:
            nvme_gib = (self.nvme_bytes or 0.0) / GIB
            return f"offloads {memory.nvme_bytes / GIB:.1f} GiB per GPU to NVMe; its share is {nvme_gib:.1f} GiB"
        host_gib = (self.host_memory_bytes or 0.0) / GIB
        return f"offloads {memory.host_bytes / GIB:.1f} GiB per GPU to host memory; its share is {host_gib:.1f} GiB"


def memory_only(candidates: Sequence[TrainingCandidate]) -> list[TrainingResult]:
    """Each candidate's memory and whether it fits, without simulating its step (no metrics):
    what the exact mode asks before simulating only the plans that fit."""
    memories = training_memory_batch([(c.model, c.plan, c.system.memory_reserve_gib) for c in candidates])
    return [TrainingResult({}, None, memory, c.system.gpu, *_host_shares(c)) for c, memory in zip(candidates, memories)]


def simulate_training(candidate: TrainingCandidate) -> TrainingResult:
    """Time, throughput, utilisation and memory of one training step of `candidate`."""
    return simulate_training_batch([candidate])[0]


def simulate_training_batch(candidates: Sequence[TrainingCandidate], breakdown: bool = True) -> list[TrainingResult]:
    """Many candidates at once: their pipelines run in one compiled call.

    The breakdown needs each pipeline simulated a second time without transfers (to tell the
    bubble from the transfers on the critical path); a search that only ranks metrics passes
    breakdown=False and gets `breakdown_s=None` at half the cost."""
    stages = stage_costs_batch(candidates)
    plans = [c.plan for c in candidates]
    times = np.concatenate([per.times for per in stages])
    common = dict(
        pp=[p.pp for p in plans],
        chunks=[p.vpp for p in plans],
        microbatches=[p.microbatches for p in plans],
        schedule=[SCHEDULES[p.pipeline_schedule] for p in plans],
        forward_s=times[:, 0],
        backward_s=times[:, 1],
        weight_s=times[:, 2],
    )
    sends = [send_s(c) for c in candidates]
    with_sends, stage_end = simulate_pipelines(make_pipeline_batch(send_s=sends, **common))
    without_sends = [None] * len(candidates)
    if breakdown:
        without_sends, _ = simulate_pipelines(make_pipeline_batch(send_s=[0.0] * len(candidates), **common))
    host_adam = np.concatenate([per.optimizer_host_s for per in stages])
    step = _step_times(stages, plans, times, stage_end, host_adam)
    iteration_s = step.pipeline_s + step.gather_exposed_s + step.optimizer_s
    memories = training_memory_batch([(c.model, c.plan, c.system.memory_reserve_gib) for c in candidates])
    metrics = _metrics(candidates, iteration_s, memories)
    breakdowns = [
        _breakdown(c, stages[i].costs[step.slowest[i]], with_sends[i], without_sends[i], step, i) if breakdown else None
        for i, c in enumerate(candidates)
    ]
    return [
        TrainingResult(m, b, memory, c.system.gpu, *_host_shares(c))
        for c, m, b, memory in zip(candidates, metrics, breakdowns, memories)
    ]


def _host_shares(candidate: TrainingCandidate) -> tuple[float | None, float | None]:
    """The GPU's share of host memory and of the host's NVMe drives, where the plan offloads."""
    host = candidate.system.host
    if host is None or candidate.plan.offload == "none":
        return None, None
    return host.memory_bytes_per_gpu, host.nvme_bytes_per_gpu


def _metrics(
    candidates: Sequence[TrainingCandidate], iteration_s: np.ndarray, memories: list[MemoryBreakdown]
) -> list[dict[str, float]]:
    """The metrics of every candidate, computed as arrays."""
    plans = [c.plan for c in candidates]
    gpus = np.array([c.system.num_gpus for c in candidates], dtype=np.float64)
    tokens = np.array([p.tokens_per_step for p in plans], dtype=np.float64)
    useful = np.array([model_flops(c.model, p.global_batch, p.seq_len) for c, p in zip(candidates, plans)], float)
    # Full recomputation reruns the forward of the layers (not of the logit layer), selective the
    # GEMMs of its modules.
    logits = np.array([2 * p.tokens_per_step * c.model.hidden * c.model.vocab for c, p in zip(candidates, plans)])
    selective = np.array(
        [
            recomputed_flops(c.model, p.global_batch, p.seq_len, p.recompute_modules)
            if p.recompute == "selective"
            else 0
            for c, p in zip(candidates, plans)
        ],
        dtype=np.float64,
    )
    recompute = np.where([p.recompute == "full" for p in plans], useful / 3 - logits, selective)
    peak = np.array([c.system.gpu.peak_tflops(p.precision) * 1e12 for c, p in zip(candidates, plans)])
    gpu_seconds = iteration_s * gpus
    tokens_per_s = tokens / iteration_s
    columns = {
        "iteration_time_s": iteration_s,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_gpu": tokens_per_s / gpus,
        "mfu": useful / (gpu_seconds * peak),
        "hfu": (useful + recompute) / (gpu_seconds * peak),
        "memory_gib_per_gpu": np.array([m.total_gib for m in memories]),
    }
    names = list(columns)
    return [dict(zip(names, row)) for row in zip(*(column.tolist() for column in columns.values()))]


class _StepTimes(NamedTuple):
    """Per candidate: the busiest stage (index within the candidate), and seconds for the
    pipeline with its exposed gradient reduction, the exposed parameter gather, the optimizer."""

    slowest: np.ndarray
    pipeline_s: np.ndarray
    gather_exposed_s: np.ndarray
    optimizer_s: np.ndarray
    optimizer_host_s: np.ndarray  # the part of optimizer_s on the host CPU


def _step_times(
    stages: list[Stages],
    plans: list[ParallelPlan],
    times: np.ndarray,
    stage_end: np.ndarray,
    host_adam: np.ndarray,
) -> _StepTimes:
    """What the step adds around the pipelines, over all candidates' stages at once; `times`
    holds each stage's `StageCosts.TIMES` in a row."""
    counts = np.array([len(per.costs) for per in stages])
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    owner = np.repeat(np.arange(len(stages)), counts)
    vpp = np.repeat([p.vpp for p in plans], counts)
    fwd, bwd, wgt, sync, gather, adam = times.T
    overlap_reduce = np.repeat([p.overlap_grad_reduce for p in plans], counts)
    overlap_gather = np.repeat([p.overlap_param_gather for p in plans], counts)
    spacing = np.repeat([min(p.pp, p.microbatches) for p in plans], counts)
    finish = stage_end + np.where(overlap_reduce, _chunked_reduce_exposed(sync, bwd + wgt, vpp, spacing), sync)
    busy = fwd + bwd + wgt
    busiest = busy == np.repeat(np.maximum.reduceat(busy, starts), counts)
    _, first = np.unique(owner[busiest], return_index=True)
    slowest = np.flatnonzero(busiest)[first]
    # The sharded optimizer's parameter all-gather overlaps the next step's first forwards.
    gather_exposed = np.where(
        overlap_gather[slowest],
        _chunked_gather_exposed(gather[slowest], fwd[slowest], vpp[slowest], spacing[slowest]),
        gather[slowest],
    )
    # The step waits for the slowest stage's optimizer; its host part is that stage's.
    slowest_adam = adam == np.repeat(np.maximum.reduceat(adam, starts), counts)
    _, first_adam = np.unique(owner[slowest_adam], return_index=True)
    return _StepTimes(
        slowest - starts,
        np.maximum.reduceat(finish, starts),
        gather_exposed,
        np.maximum.reduceat(adam, starts),
        host_adam[np.flatnonzero(slowest_adam)[first_adam]],
    )


def _chunked_reduce_exposed(sync_s: np.ndarray, chunk_bwd_s: np.ndarray, vpp: np.ndarray, spacing: np.ndarray):
    """Gradient reduction left after a stage's last backward, per chunk as Megatron runs it.

    With overlap_grad_reduce, Megatron-Core buckets the gradients per model chunk and starts
    a chunk's reduce-scatter bucket by bucket during that chunk's last backward (its
    DistributedDataParallel hooks, one per chunk). In the interleaved schedule's cool-down the
    chunks finish in reverse order, `spacing` (pp) backwards of `chunk_bwd_s` apart, chunk 0
    last; the reductions of sync_s / vpp each queue on one stream. Chunk c (counting from the
    last) starts at stage_end - c * spacing * b - b and the queue ends at the latest of
    start_c + (c + 1) * s; that is linear in c, so one of its ends is the maximum. Without
    interleaving (vpp 1) this is max(0, sync - b): the reduction under the last backward."""
    share = sync_s / vpp
    last = share - chunk_bwd_s
    first = vpp * share - (vpp - 1) * spacing * chunk_bwd_s - chunk_bwd_s
    return np.maximum(0.0, np.maximum(last, first))


def _chunked_gather_exposed(gather_s: np.ndarray, chunk_fwd_s: np.ndarray, vpp: np.ndarray, spacing: np.ndarray):
    """Parameter all-gather left on the critical path of the step's first forwards, per chunk as
    Megatron runs it with overlap_param_gather.

    Without interleaving the gather runs bucket by bucket ahead of the forward that needs it
    (each bucket's pre-hook dispatches the next): what the first forward does not hide is
    exposed, max(0, gather - f). With interleaving, Megatron-Core's schedule dispatches chunks 0
    and 1 at the step's start and chunk c + 1 when the first micro-batch of chunk c starts
    (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving:
    param_sync_func); the gathers of gather_s / vpp queue on one stream, and chunk c's first
    forward runs after c * spacing (pp) forwards. The stage waits for the latest of the chunks'
    ends less the time it needs them (by the end of that forward), which shifts every later need
    alike. Chunk c's end is the latest over j <= c of dispatch_j + (c - j + 1) * share, so each
    lateness is linear in c for a given j and the latest is at an end: chunk 0 (share - f), the
    last chunk queued behind chunk 0 (v share - ((v - 1) pp + 1) f) or behind chunk 2's dispatch
    ((v - 2) share - ((v - 2) pp + 1) f, for v >= 3)."""
    share, f = gather_s / vpp, chunk_fwd_s
    from_start = vpp * share - ((vpp - 1) * spacing + 1) * f
    from_third = np.where(vpp >= 3, (vpp - 2) * share - ((vpp - 2) * spacing + 1) * f, -np.inf)
    return np.maximum(0.0, np.maximum(share - f, np.maximum(from_start, from_third)))


# Breakdown parts are differences of sums of many event times; their round-off is a few ulps of
# the step time per event. Within this fraction of the step (1 us a second) a negative difference is that round-off
# and reads 0 (`-6.1e-10 s` of bubble is no time); beyond it the two sums disagree for real. The
# timeline runs in whole nanoseconds (_timeline.py rounds each operation), so a makespan set
# against a sum of unrounded times may also differ by half a nanosecond per operation.
ROUND_OFF_FRACTION = 1e-6
ROUNDED_OPERATION_S = 0.5 / NS_PER_S


def difference_s(name: str, minuend_s: float, subtrahend_s: float, scale_s: float, operations: int = 0) -> float:
    """`minuend_s - subtrahend_s`, a part of the breakdown that cannot be negative: round-off
    within ROUND_OFF_FRACTION of `scale_s` (the step), or within half a nanosecond for each of
    the `operations` the timeline rounded, clamps to 0; more is a bug, raised."""
    value_s = minuend_s - subtrahend_s
    if value_s >= 0:
        return value_s
    allowed_s = ROUND_OFF_FRACTION * max(abs(scale_s), abs(minuend_s), abs(subtrahend_s))
    if -value_s <= max(allowed_s, operations * ROUNDED_OPERATION_S):
        return 0.0
    raise ArithmeticError(
        f"breakdown {name}: {minuend_s!r} - {subtrahend_s!r} = {value_s:g} s is negative beyond round-off "
        f"(allowed: >= -{ROUND_OFF_FRACTION:g} of the step, {scale_s:g} s)"
    )


def _breakdown(
    candidate: TrainingCandidate,
    slowest: StageCosts,
    makespan_s: float,
    makespan_no_send_s: float,
    step: _StepTimes,
    i: int,
) -> dict[str, float]:
    """Where the step's time goes, told from the busiest stage: its work, and the rest of the
    makespan idle (bubble) or waiting for sends; adds up to the iteration time."""
    plan = candidate.plan
    work = plan.microbatches * plan.vpp
    busy_s = work * (slowest.forward_s + slowest.backward_s + slowest.weight_s)
    comm = {k: work * v for k, v in slowest.comm_s.items()}
    scale_s = float(step.pipeline_s[i])
    dp_exposed_s = difference_s("dp_exposed_s", float(step.pipeline_s[i]), makespan_s, scale_s)
    parts = {
        "gemm_s": work * slowest.gemm_s,
        "attention_and_memory_bound_s": difference_s(
            "attention_and_memory_bound_s", busy_s, work * slowest.gemm_s + sum(comm.values()), scale_s
        ),
        "host_overhead_s": comm["host"],
        "tp_comm_s": comm["tp"],
        "cp_comm_s": comm["cp"],
        "ep_comm_s": comm["ep"],
        "pipeline_bubble_s": difference_s("pipeline_bubble_s", float(makespan_no_send_s), busy_s, scale_s, 3 * work),
        "pp_comm_s": difference_s("pp_comm_s", makespan_s, float(makespan_no_send_s), scale_s),
        "dp_comm_s": comm["dp"] + dp_exposed_s + float(step.gather_exposed_s[i]),
        # An offloaded optimizer's step on the host CPU is counted as offload, its GPU part (a
        # partial offload's) as optimizer.
        "optimizer_s": float(step.optimizer_s[i] - step.optimizer_host_s[i]),
        "offload_s": comm["offload"] + float(step.optimizer_host_s[i]),
    }
    # A part clamped from round-off to 0 leaves the parts that much off the step: the largest
    # part takes the residual back (at most ROUND_OFF_FRACTION of the step), so they add up.
    step_s = scale_s + float(step.gather_exposed_s[i]) + float(step.optimizer_s[i])
    residual_s = step_s - sum(parts.values())
    if abs(residual_s) <= ROUND_OFF_FRACTION * step_s:
        largest = max(parts, key=parts.get)
        parts[largest] += residual_s
    return parts
