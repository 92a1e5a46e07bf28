"""Accelerators: the GPU catalogue, its datasheet figures, and kernel times on each GPU."""

from simulators.hardware._compute import attention_time_s, elementwise_time_s, gemm_bytes, gemm_time_s
from simulators.hardware._gpu import (
    PRECISIONS,
    GpuSpec,
    get_gpu,
    gpu_catalog,
    host_launch_s,
    sustained_compute_fraction,
)
from simulators.hardware._grouped_gemm import GROUPED_KERNELS, TE_COMPUTE_STREAMS, grouped_gemm_time_s
from simulators.hardware._memory_kernels import LOW_PRECISION_BYTES, MemoryKernel, layer_memory_kernels
from simulators.hardware._memory_tiers import (
    HostTier,
    gpus_with_host_tier,
    host_tier_for,
    host_tier_named,
    host_tiers,
    transfer_s,
)
from simulators.hardware.calibration import CalibrationTable, calibration_table, load_calibration, parse_calibration

__all__ = [
    "GROUPED_KERNELS",
    "TE_COMPUTE_STREAMS",
    "grouped_gemm_time_s",
    "LOW_PRECISION_BYTES",
    "PRECISIONS",
    "CalibrationTable",
    "GpuSpec",
    "HostTier",
    "MemoryKernel",
    "attention_time_s",
    "calibration_table",
    "elementwise_time_s",
    "gemm_bytes",
    "gemm_time_s",
    "get_gpu",
    "gpu_catalog",
    "gpus_with_host_tier",
    "host_launch_s",
    "host_tier_for",
    "host_tier_named",
    "host_tiers",
    "layer_memory_kernels",
    "load_calibration",
    "parse_calibration",
    "sustained_compute_fraction",
    "transfer_s",
]
