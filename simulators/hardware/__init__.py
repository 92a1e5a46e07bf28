"""Accelerators: the GPU catalogue and its datasheet figures."""

from simulators.hardware._gpu import PRECISIONS, GpuSpec, get_gpu, gpu_catalog

__all__ = ["PRECISIONS", "GpuSpec", "get_gpu", "gpu_catalog"]
