"""Decode's weight-streaming GEMMs against measured kernels: Vidur's public profile of Llama-2-70B's
linear layers (microsoft/vidur, data/profiling/compute/{a100,h100}/meta-llama/Llama-2-70b-hf/mlp.csv,
last changed in e26eb8f, 2024-05-14; fp16, median ms of the QKV, output, gate+up and down
projections at 1-32 tokens). At these sizes a GEMM reads its weights once, so the times say what
bandwidth decode's weight reads reach: 2.81-2.98 TB/s on H100 SXM (0.84-0.89 of 3.35), 1.51-1.62
TB/s on A100-80GB (0.74-0.79 of 2.039) at tp 1-2, about the STREAM-copy fractions (hbm_efficiency,
0.87 and 0.79) the model reads them at."""

import pytest

from simulators.hardware import gemm_time_s, get_gpu

H, HEADS, KV_HEADS, FFN = 8192, 64, 8, 28672  # Llama-2-70B
# (gpu, tp, tokens) -> the four projections' median times, ms, as the profile lists them
MEASURED_MS = {
    ("H100-SXM", 1, 1): (0.063, 0.048, 0.311, 0.171),
    ("H100-SXM", 1, 8): (0.059, 0.049, 0.305, 0.162),
    ("H100-SXM", 1, 32): (0.065, 0.053, 0.3135, 0.164),
    ("H100-SXM", 2, 1): (0.032, 0.025, 0.156, 0.081),
    ("H100-SXM", 2, 8): (0.033, 0.025, 0.156, 0.082),
    ("H100-SXM", 2, 32): (0.033, 0.029, 0.158, 0.087),
    ("A100-80GB", 1, 1): (0.11, 0.092, 0.58, 0.29),
    ("A100-80GB", 1, 8): (0.115, 0.0935, 0.5975, 0.29),
    ("A100-80GB", 1, 32): (0.115, 0.095, 0.6125, 0.2975),
    ("A100-80GB", 2, 1): (0.058, 0.045, 0.283, 0.143),
    ("A100-80GB", 2, 8): (0.0595, 0.046, 0.289, 0.147),
    ("A100-80GB", 2, 32): (0.061, 0.047, 0.316, 0.147),
}


@pytest.mark.parametrize(("gpu_name", "tp", "tokens"), list(MEASURED_MS))
def test_decode_weight_reads_take_the_profiled_time(gpu_name, tp, tokens):
    """The layer's four GEMMs within 6% of the profiled kernels (Vidur times each with CUDA
    events around the PyTorch op, so a few microseconds of its overhead are in the measurement)."""
    gpu, d = get_gpu(gpu_name), H // HEADS
    shapes = ((H, (HEADS + 2 * KV_HEADS) * d // tp), (H // tp, H), (H, 2 * FFN // tp), (FFN // tp, H))  # (k, n)
    modelled_s = sum(gemm_time_s(gpu, tokens, n, k, 1, "fp16") for k, n in shapes)
    measured_s = sum(MEASURED_MS[gpu_name, tp, tokens]) * 1e-3
    assert modelled_s == pytest.approx(measured_s, rel=0.06)
