"""Time of one rank's routed-expert GEMMs: `groups` products of the same (m x k) @ (k x n) shape.

Why: a rank holding many local experts gives each few tokens (m = tokens * top_k / experts per
rank), and how the framework issues those small GEMMs decides what they cost. pricing them as one
batched GEMM (every expert's tiles spread over the SMs together) is right only for a grouped
kernel; Transformer Engine's GroupedLinear, which Megatron-Core's --moe-grouped-gemm runs, issues
one cuBLAS GEMM per expert instead, round-robin over its compute streams
(transformer_engine/common/gemm/cublaslt_gemm.cu, multi_stream_cublas_gemm: GEMM i on stream
i % num_streams; transformer_engine/common/util/multi_stream.cpp: 4 compute streams). So at most
four experts' GEMMs share the GPU at a time: an expert whose tiles fill under a quarter of the
SMs leaves the rest idle, and each group of four pays its own wave tail and pipeline fill.

- "multi_stream": ceil(groups / 4) rounds, each priced as a batched GEMM of up to 4 (the 4
  streams' kernels sharing the SMs), one after another (the streams run in lockstep here; uneven
  kernels let them interleave, which this does not credit).
- "fused": one kernel over every group (a CUTLASS or CuTe-DSL grouped GEMM: TE's
  NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM path, Megatron-Bridge 26.06's fused grouped MLP):
  `gemm_time_s` with batch = groups, all tiles in one wave schedule.
"""

from __future__ import annotations

from simulators._errors import SpecError
from simulators.hardware._compute import Precision, gemm_time_s
from simulators.hardware._gpu import GpuSpec
from simulators.hardware.calibration import CalibrationTable

TE_COMPUTE_STREAMS = 4  # transformer_engine/common/util/multi_stream.cpp: get_num_compute_streams()
GROUPED_KERNELS = ("multi_stream", "fused")


def grouped_gemm_time_s(
    gpu: GpuSpec,
    m: int,
    n: int,
    k: int,
    groups: int,
    precision: Precision,
    kernel: str,
    *,
    calibration: CalibrationTable | None = None,
) -> float:
    """Seconds for `groups` (m x k) @ (k x n) products issued as `kernel` (GROUPED_KERNELS)."""
    if kernel not in GROUPED_KERNELS:
        raise SpecError(f"grouped_gemm_time_s.kernel: {kernel!r} is not allowed; allowed: {', '.join(GROUPED_KERNELS)}")
    if not isinstance(groups, int) or groups < 1:
        raise SpecError(f"grouped_gemm_time_s.groups: {groups!r} is not allowed; allowed: integers >= 1")
    if kernel == "fused":
        return gemm_time_s(gpu, m, n, k, groups, precision, calibration=calibration)
    rounds, rest = divmod(groups, TE_COMPUTE_STREAMS)
    seconds = 0.0
    if rounds:
        seconds += rounds * gemm_time_s(gpu, m, n, k, TE_COMPUTE_STREAMS, precision, calibration=calibration)
    if rest:
        seconds += gemm_time_s(gpu, m, n, k, rest, precision, calibration=calibration)
    return seconds
