"""Compile the fidelity levels' kernels before a search needs them: one small training candidate
through each named level fills numba's on-disk cache with the kernels and the argument types a
study uses. A fresh install compiles the flow and packet engines for ~12 s on one core
(benchmarks/compile_time.py); a search started on a cold cache runs this in another process
(dse.search.warmup), so the compiling overlaps its analytical search instead of following it.

    python -m simulators.fidelity._warmup LEVEL ...
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from simulators._kernels import in_disk_cache
from simulators.fidelity._level import LEVELS, SimulatedLevel
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.network import Fabric
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem

# Two-GPU servers on a leaf-spine: 16 GPUs in two pipeline stages, data-parallel rings across servers.
FABRIC = Fabric(family="leaf-spine", nic_gbps=400, gpus_per_server=2, nics_per_server=2, switch_radix=8)
_CAP_BYTES = 1 << 20  # messages capped at 1 MiB: the kernels compile the same, the runs take milliseconds


def small_candidate() -> TrainingCandidate:
    """llama3-8b on 16 H100s of FABRIC, tp 1, pp 2, dp 8: every kind of kernel argument a study passes."""
    gpu = get_gpu("H100-SXM")
    plan = ParallelPlan(tp=1, pp=2, dp=8, micro_batch=1, global_batch=32, seq_len=2048)
    return TrainingCandidate(get_model("llama3-8b"), TrainingSystem(gpu, 16, network=FABRIC.network(gpu, 16)), plan)


def warm_up(levels: Sequence[str]) -> None:
    """Run the small candidate through each of `levels` (names of LEVELS)."""
    candidate = small_candidate()
    for name in levels:
        LEVELS.lookup(name, "level").congestion_factors(candidate, FABRIC, _CAP_BYTES)


def compiled(levels: Sequence[str]) -> bool:
    """Whether numba's disk cache holds every kernel of `levels` for its source as it is now
    (simulators._kernels.in_disk_cache: a surprise there reads as not compiled, which costs only
    a warm-up that finds them compiled)."""
    return all(
        in_disk_cache(kernel)
        for name in levels
        for level in [LEVELS.lookup(name, "level")]
        for kernel in (level.kernels() if isinstance(level, SimulatedLevel) else ())
    )


if __name__ == "__main__":
    warm_up(sys.argv[1:])
